"""Encoding a staged split (section 5.1: sentences as byte-pair pieces) into the data directory's
memory-mapped token shards and raw text, CHUNK pairs at a time so that memory does not grow with the
corpus. Train pairs over `max_len` pieces or a length ratio over `max_ratio` are dropped and counted;
valid and test pairs over `max_len` stay in the raw text (BLEU scores the whole split) but not in
the shards that dev-loss batches are made of."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from aiayn.config import UNK_ID
from aiayn.data.datadir import DataDir
from aiayn.data.dataset import ShardWriter, TokenDataset
from aiayn.data.mixing import CORPUS_FILE
from aiayn.data.provenance import Sources
from aiayn.data.sources import Filters
from aiayn.data.stage import open_text, read_lines
from aiayn.data.tokenizer import Tokenizer

CHUNK = 20_000  # pairs encoded at a time


def _chunks(stage_dir: Path, split: str) -> Iterator[tuple[list[str], list[str], list[str]]]:
    """(sources, targets, origins) of CHUNK staged pairs at a time; no origins for train."""
    sources, targets = read_lines(stage_dir / f"{split}.src"), read_lines(stage_dir / f"{split}.tgt")
    where = stage_dir / f"{split}.where"
    origins = read_lines(where) if where.is_file() else iter(())
    while chunk_src := list(islice(sources, CHUNK)):
        yield chunk_src, list(islice(targets, CHUNK)), list(islice(origins, CHUNK))


def _length_rule(src_len: int, tgt_len: int, filters: Filters) -> str | None:
    """The length filter that drops a train pair ("too_long", "ratio"), or None if it is kept."""
    if max(src_len, tgt_len) > filters.max_len:
        return "too_long"
    if max(src_len, tgt_len) > filters.max_ratio * max(1, min(src_len, tgt_len)):
        return "ratio"
    return None


def _held_out_fits(lengths, max_len: int, origins: list[str], long: dict[str, Any]) -> list[int]:
    """Indices of the valid/test pairs within max_len; the others are counted in `long`, first named."""
    keep = []
    for i, (s, t) in enumerate(lengths):
        if max(s, t) <= max_len:
            keep.append(i)
        else:
            long["pairs"] += 1
            long["first"] = long["first"] or origins[i]
    return keep


def encode_split(
    tokenizer: Tokenizer,
    work: Path,
    split: str,
    counts: dict[str, int],
    filters: Filters,
    progress: bool,
    provenance: Sources | None = None,
):
    """Encode one staged split into shards and raw text (train_limit is applied before, when staging).

    Train pairs outside the limits are dropped (and counted in `provenance` by source, which then keeps
    the sources of the pairs kept); valid/test pairs over max_len are kept in the raw text and left
    out of the shards. Returns the split's token counts (EOS included) and unk counts, per side, and
    {"pairs", "first"} of the valid/test pairs left out.
    """
    writer = ShardWriter(work, split, tokenizer.vocab_size)
    unk = {"src": 0, "tgt": 0}
    long: dict[str, Any] = {"pairs": 0, "first": None}
    total = counts["read"] - sum(v for k, v in counts.items() if k != "read")
    with ExitStack() as stack:
        raw = [stack.enter_context(open_text(DataDir(work).raw(split, side), "w")) for side in ("src", "tgt")]
        bar = stack.enter_context(
            tqdm(total=total, desc=f"encode {split}", unit=" pairs", disable=not progress)
        )
        done = 0
        for sources, targets, origins in _chunks(work / "stage", split):
            src_ids, tgt_ids = tokenizer.encode(sources), tokenizer.encode(targets)
            lengths = zip(map(len, src_ids), map(len, tgt_ids), strict=True)
            if split == "train":
                dropped = [_length_rule(s, t, filters) for s, t in lengths]
                keep = text = [i for i, rule in enumerate(dropped) if rule is None]
                for rule in filter(None, dropped):
                    counts[rule] += 1
                if provenance is not None:
                    provenance.note_lengths(done, dropped)
                done += len(dropped)
            else:
                keep, text = _held_out_fits(lengths, filters.max_len, origins, long), range(len(sources))
            writer.add([src_ids[i] for i in keep], [tgt_ids[i] for i in keep])
            for side, ids in (("src", src_ids), ("tgt", tgt_ids)):
                unk[side] += sum(ids[i].count(UNK_ID) for i in keep)
            for f, lines in zip(raw, (sources, targets), strict=True):
                f.writelines(lines[i] + "\n" for i in text)
            bar.update(len(sources))
    counts["kept"] = writer.close()
    if provenance is not None:
        np.save(work / CORPUS_FILE, provenance.corpus)
    dataset = TokenDataset(work, split)
    return {"src": int(dataset.src_lengths.sum()), "tgt": int(dataset.tgt_lengths.sum())}, unk, long


def note_long(long: dict[str, dict[str, Any]], max_len: int) -> None:
    """Say how many valid/test pairs the shards leave out for being over max_len, and the first."""
    for split in ("valid", "test"):
        if long[split]["pairs"]:
            print(
                f"note: {long[split]['pairs']} {split} pair(s) have more than max_len={max_len} pieces "
                f"(first: {long[split]['first']}); BLEU scores them (raw/{split}.*), the dev loss leaves "
                "them out (meta.json: long_held_out)",
                file=sys.stderr,
            )
