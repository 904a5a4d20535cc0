"""`aiayn prepare`: a corpus in, a data directory out (section 5.1's data pipeline).

Steps: stage the text of every split (built-in corpus, or a user's files validated by `corpus`; empty
pairs dropped; valid/test split off with a seed when not given), train the joint BPE vocabulary on
the staged train text, encode every split in chunks into memory-mapped shards (train pairs over
`max_len` tokens or with a length ratio over `max_ratio` dropped), keep the raw text of every split,
and write `meta.json` with every count and the reason for every drop. All of it happens in a hidden
temporary directory that is renamed into place at the end, so a killed run never leaves a directory
that looks complete (the next run removes what it left); a finished directory is left alone unless
`force`.

Data directory: meta.json, spm.model, spm.vocab, {split}.{src,tgt}.bin, {split}.index.npz and
raw/{split}.{src,tgt} for split in train, valid, test.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from itertools import chain, islice
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm

from aiayn.config import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from aiayn.data.builtin import get_corpus
from aiayn.data.corpus import ParallelText, held_out_indices
from aiayn.data.dataset import ShardWriter, TokenDataset, token_dtype
from aiayn.data.tokenizer import CHARACTER_COVERAGE, Tokenizer
from aiayn.errors import AiaynError

FORMAT_VERSION = 1
SPLITS = ("train", "valid", "test")
CHUNK = 20_000  # pairs encoded at a time
DROP_REASONS = {
    "bad_lines": "invalid UTF-8 or a malformed TSV line, skipped because of --skip-bad-lines",
    "empty": "the source or the target is empty",
    "overlap_with_train": "a held-out pair whose source or target sentence also occurs in train",
    "too_long": "the source or the target has more than max_len tokens (train only)",
    "ratio": "the longer side has more than max_ratio times the tokens of the shorter (train only)",
}
_LANGUAGE_SUFFIX = re.compile(r"^[a-z]{2,3}([_-][A-Za-z]{2,4})?$")


def load_meta(data_dir: str | Path) -> dict[str, Any]:
    """The meta.json of a prepared data directory."""
    path = Path(data_dir) / "meta.json"
    if not path.is_file():
        raise AiaynError(f"{data_dir}: not a prepared data directory (no meta.json); run `aiayn prepare`")
    return json.loads(path.read_text(encoding="utf-8"))


def _say(message: str, progress: bool) -> None:
    if progress:
        print(message, file=sys.stderr)


class _Stage:
    """Writes one split's non-empty pairs to stage/{split}.src|tgt and counts what it drops."""

    def __init__(self, stage_dir: Path, split: str, counts: dict[str, int]) -> None:
        self.paths = stage_dir / f"{split}.src", stage_dir / f"{split}.tgt"
        self._files = [_open_text(p, "w") for p in self.paths]
        self.counts = counts

    def add(self, source: str, target: str) -> None:
        self.counts["read"] += 1
        if not source or not target:
            self.counts["empty"] += 1
            return
        self._files[0].write(source + "\n")
        self._files[1].write(target + "\n")

    def close(self) -> None:
        for f in self._files:
            f.close()


def _open_text(path: Path, mode: str = "r") -> TextIO:
    """Text files of the data directory: UTF-8, lines split on "\\n" only."""
    return open(path, mode, encoding="utf-8", newline="\n")


def _read_lines(path: Path) -> Iterator[str]:
    with _open_text(path) as f:
        for line in f:
            yield line.rstrip("\n")


def _stage_builtin(name: str, stages: dict[str, _Stage]) -> None:
    for split, pairs in get_corpus(name).load().items():
        for source, target in pairs:
            stages[split].add(" ".join(source.split()), " ".join(target.split()))


def _stage_user(
    inputs: dict[str, dict[str, Any]], stages: dict[str, _Stage], seed: int, skip: bool, progress: bool
):
    """Stage a user's files; a split without files of its own is drawn from train with `seed`."""
    for split in ("valid", "test"):
        if inputs[split]:
            _copy(ParallelText.open(**inputs[split], skip_bad_lines=skip), stages[split], progress)
    train = ParallelText.open(**inputs["train"], skip_bad_lines=skip)
    valid_idx, test_idx = held_out_indices(train.n_lines, seed)
    held = {int(i) + 1: split for split, idx in (("valid", valid_idx), ("test", test_idx)) for i in idx}
    held = {line: split for line, split in held.items() if not inputs[split]}
    held_pairs: dict[str, list[tuple[str, str]]] = {"valid": [], "test": []}
    for line_no, source, target in tqdm(train, total=train.n_lines, desc="read train", disable=not progress):
        if line_no in held:
            held_pairs[held[line_no]].append((source, target))
        else:
            stages["train"].add(source, target)
    stages["train"].counts["bad_lines"] = train.bad_lines
    stages["train"].close()
    candidates = list(chain.from_iterable(held_pairs.values()))
    in_train = [
        {p[i] for p in candidates}.intersection(_read_lines(stages["train"].paths[i])) for i in (0, 1)
    ]
    for split, pairs in held_pairs.items():
        for source, target in pairs:
            if source in in_train[0] or target in in_train[1]:
                stages[split].counts["read"] += 1
                stages[split].counts["overlap_with_train"] += 1
            else:
                stages[split].add(source, target)


def _copy(text: ParallelText, stage: _Stage, progress: bool) -> None:
    for _, source, target in tqdm(
        text, total=text.n_lines, desc=f"read {text.paths[0]}", disable=not progress
    ):
        stage.add(source, target)
    stage.counts["bad_lines"] = text.bad_lines


def _chunks(stage_dir: Path, split: str) -> Iterator[tuple[list[str], list[str]]]:
    sources, targets = _read_lines(stage_dir / f"{split}.src"), _read_lines(stage_dir / f"{split}.tgt")
    while chunk_src := list(islice(sources, CHUNK)):
        yield chunk_src, list(islice(targets, CHUNK))


def _keep(src_len: int, tgt_len: int, max_len: int, max_ratio: float, counts: dict[str, int]) -> bool:
    if max(src_len, tgt_len) > max_len:
        counts["too_long"] += 1
        return False
    if max(src_len, tgt_len) > max_ratio * max(1, min(src_len, tgt_len)):
        counts["ratio"] += 1
        return False
    return True


def _encode_split(
    tokenizer: Tokenizer, work: Path, split: str, counts: dict[str, int], limits, progress: bool
):
    """Encode one staged split into shards and raw text; `limits` = (max_len, max_ratio) or None.

    Returns the split's token counts (EOS included) per side.
    """
    writer = ShardWriter(work, split, tokenizer.vocab_size)
    total = counts["read"] - sum(v for k, v in counts.items() if k != "read")
    with ExitStack() as stack:
        raw = [
            stack.enter_context(_open_text(work / "raw" / f"{split}.{side}", "w")) for side in ("src", "tgt")
        ]
        bar = stack.enter_context(
            tqdm(total=total, desc=f"encode {split}", unit=" pairs", disable=not progress)
        )
        for sources, targets in _chunks(work / "stage", split):
            src_ids, tgt_ids = tokenizer.encode(sources), tokenizer.encode(targets)
            lengths = zip(map(len, src_ids), map(len, tgt_ids), strict=True)
            keep = [i for i, (s, t) in enumerate(lengths) if limits is None or _keep(s, t, *limits, counts)]
            writer.add([src_ids[i] for i in keep], [tgt_ids[i] for i in keep])
            for f, lines in zip(raw, (sources, targets), strict=True):
                f.writelines(lines[i] + "\n" for i in keep)
            bar.update(len(sources))
    counts["kept"] = writer.close()
    dataset = TokenDataset(work, split)
    return {"src": int(dataset.src_lengths.sum()), "tgt": int(dataset.tgt_lengths.sum())}


def _language(path: str | Path | None, default: str) -> str:
    suffix = Path(path).suffix.lstrip(".") if path else ""
    return suffix if _LANGUAGE_SUFFIX.match(suffix) else default


def _user_inputs(src, tgt, tsv, valid_src, valid_tgt, valid_tsv, test_src, test_tgt, test_tsv):
    def files(s, t, v, what):
        if s is None and t is None and v is None:
            return None
        if v is not None and s is None and t is None:
            return {"tsv": Path(v)}
        if v is None and s is not None and t is not None:
            return {"src": Path(s), "tgt": Path(t)}
        raise AiaynError(f"give both --{what}src and --{what}tgt, or --{what}tsv alone")

    train = files(src, tgt, tsv, "")
    if train is None:
        raise AiaynError("give a corpus: --corpus NAME, --src FILE --tgt FILE, or --tsv FILE")
    return {"train": train, "valid": files(valid_src, valid_tgt, valid_tsv, "valid-"),
            "test": files(test_src, test_tgt, test_tsv, "test-")}  # fmt: skip


def _check_out(out: Path, force: bool) -> bool:
    """True if `out` is already prepared and should be left alone; errors if it is someone else's."""
    if (out / "meta.json").is_file():
        return not force
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise AiaynError(f"{out} exists and is not a data directory (no meta.json); choose another --out")
    return False


def _move_into_place(work: Path, out: Path) -> None:
    """Rename the finished temporary directory to `out`, replacing an old data directory there."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{work.name}")
        out.rename(old)
    work.rename(out)
    if old is not None:
        shutil.rmtree(old)


def prepare(
    out_dir: str | Path,
    *,
    corpus: str | None = None,
    src: str | Path | None = None,
    tgt: str | Path | None = None,
    tsv: str | Path | None = None,
    valid_src: str | Path | None = None,
    valid_tgt: str | Path | None = None,
    valid_tsv: str | Path | None = None,
    test_src: str | Path | None = None,
    test_tgt: str | Path | None = None,
    test_tsv: str | Path | None = None,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    vocab_size: int = 8000,
    max_len: int = 250,
    max_ratio: float = 9.0,
    seed: int = 1,
    force: bool = False,
    skip_bad_lines: bool = False,
    progress: bool = True,
) -> Path:
    """Prepare a data directory from a built-in `corpus` or a user's files; returns its path."""
    out = Path(out_dir)
    user = (src, tgt, tsv, valid_src, valid_tgt, valid_tsv, test_src, test_tgt, test_tsv)
    if (corpus is None) == all(p is None for p in user):
        raise AiaynError("give exactly one corpus: --corpus NAME, or your own files (--src/--tgt or --tsv)")
    if vocab_size < 16 or max_len < 1 or max_ratio < 1:
        raise AiaynError("--vocab-size must be at least 16, --max-len at least 1 and --max-ratio at least 1")
    inputs = None if corpus else _user_inputs(*user)
    if corpus:
        get_corpus(corpus)  # an unknown name fails before anything is written
    if _check_out(out, force):
        _say(f"{out} is already prepared; pass --force to prepare it again", progress)
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    for leftover in out.parent.glob(f".{out.name}.tmp-*"):  # from a run that was killed
        shutil.rmtree(leftover, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    work.chmod(0o755)  # mkdtemp makes it private; the data directory is an ordinary one
    try:
        meta = _describe(corpus, inputs, src_lang, tgt_lang, seed)
        meta.update(
            _build(work, corpus, inputs, vocab_size, (max_len, max_ratio), seed, skip_bad_lines, progress)
        )
        text = json.dumps(meta, indent=2, ensure_ascii=False) + "\n"
        (work / "meta.json").write_text(text, encoding="utf-8")
        _move_into_place(work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def _describe(corpus: str | None, inputs, src_lang: str | None, tgt_lang: str | None, seed: int) -> dict:
    """The meta.json entries that say where the data came from."""
    if corpus:
        builtin = get_corpus(corpus)
        header = {"corpus": corpus, "description": builtin.description, "inputs": None}
        languages = builtin.src_lang, builtin.tgt_lang
    else:
        files = {split: {k: str(v) for k, v in f.items()} for split, f in inputs.items() if f}
        header = {"corpus": "user", "description": "user files", "inputs": files}
        train = inputs["train"]
        languages = _language(train.get("src"), "src"), _language(train.get("tgt"), "tgt")
    return {
        "format_version": FORMAT_VERSION,
        **header,
        "src_lang": src_lang or languages[0],
        "tgt_lang": tgt_lang or languages[1],
        "seed": seed,
    }


def _build(
    work: Path, corpus, inputs, vocab_size: int, limits, seed: int, skip: bool, progress: bool
) -> dict:
    """Stage, train the vocabulary, encode; returns the meta.json entries that describe the result."""
    (work / "stage").mkdir()
    (work / "raw").mkdir()
    counts = {split: {"read": 0, **dict.fromkeys(DROP_REASONS, 0)} for split in SPLITS}
    stages = {split: _Stage(work / "stage", split, counts[split]) for split in SPLITS}
    try:
        if corpus:
            _stage_builtin(corpus, stages)
        else:
            _stage_user(inputs, stages, seed, skip, progress)
    finally:
        for stage in stages.values():
            stage.close()
    if counts["train"]["read"] == sum(v for k, v in counts["train"].items() if k != "read"):
        raise AiaynError("no training pairs left: every train line was empty or bad")
    _say(f"training a {vocab_size}-piece joint BPE vocabulary on the train split", progress)
    train_text = chain(_read_lines(work / "stage" / "train.src"), _read_lines(work / "stage" / "train.tgt"))
    tokenizer = Tokenizer.train(train_text, work / "spm.model", vocab_size, seed=seed)
    if tokenizer.vocab_size < vocab_size:
        _say(f"note: the train text only supports {tokenizer.vocab_size} pieces, not {vocab_size}", progress)
    tokens = {}
    for split in SPLITS:
        split_limits = limits if split == "train" else None
        tokens[split] = _encode_split(tokenizer, work, split, counts[split], split_limits, progress)
    if counts["train"]["kept"] == 0:
        raise AiaynError(f"no train pairs left after the max_len={limits[0]}, max_ratio={limits[1]} filters")
    shutil.rmtree(work / "stage")
    return {
        "vocab_size": tokenizer.vocab_size,
        "requested_vocab_size": vocab_size,
        "tokenizer": {
            "type": "sentencepiece",
            "model_type": "bpe",
            "model": "spm.model",
            "trained_on": "train split, source and target",
            "character_coverage": CHARACTER_COVERAGE,
            **{"pad_id": PAD_ID, "unk_id": UNK_ID, "bos_id": BOS_ID, "eos_id": EOS_ID},
        },
        "token_dtype": token_dtype(tokenizer.vocab_size).name,
        "pairs": {split: counts[split]["kept"] for split in SPLITS},
        "tokens": tokens,
        "filters": {"max_len": limits[0], "max_ratio": limits[1], "length_filters_apply_to": ["train"]},
        "lines_read": {split: counts[split]["read"] for split in SPLITS},
        "dropped": {split: {k: counts[split][k] for k in DROP_REASONS} for split in SPLITS},
        "drop_reasons": DROP_REASONS,
    }
