"""`aiayn prepare` for constituency parsing (section 6.3): trees in, a data directory out.

The data directory is the one of aiayn.data.prepare (spm.model, token shards, raw text, meta.json),
so `aiayn train` needs nothing new: each pair is (the sentence's words, its linearised tree). The
SentencePiece model is trained on the train sentences with every tree token ("(L", ")L", "XX") as a
user-defined piece; targets are encoded token by token (a label unseen in train becomes <unk>, and
is counted). Besides raw/{split}.src (words) and raw/{split}.tgt (linearised trees), raw/{split}.tree
holds the normalised gold trees, one per line, that `aiayn evaluate` scores against. Train trees over
`max_len` tokens are dropped; valid and test ones are scored but left out of the dev-loss shards
(meta.json: long_held_out). meta.json says "task": "parse" and lists the labels under "parse".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aiayn.config import UNK_ID
from aiayn.data.datadir import RAW_DIR, SPLITS, DataDir
from aiayn.data.dataset import ShardWriter, token_dtype
from aiayn.data.outdir import building
from aiayn.data.prepare import FORMAT_VERSION
from aiayn.data.stage import open_text
from aiayn.data.tokenizer import Tokenizer
from aiayn.data.vocabulary import tokenizer_meta
from aiayn.errors import AiaynError
from aiayn.parse.treebank import gather
from aiayn.parse.trees import TERMINAL, Tree, constituent_labels, linearise

PARSE_VOCAB_SIZE = 16000  # section 6.3: a 16K vocabulary for WSJ only
LINEARISATION = "Vinyals et al. 2015: (L ... )L per constituent, XX per word"
DROP_REASONS = {
    "empty": "no words left once traces (-NONE-) are removed",
    "train_limit": "not in the seeded sample of --train-limit train trees (train only)",
    "too_long": "the words or the linearised tree have more than max_len tokens (train only)",
}


def tree_tokens(labels: Sequence[str]) -> list[str]:
    """The target vocabulary: "(L" and ")L" for each label, and the terminal XX."""
    return [f"{side}{label}" for label in labels for side in "()"] + [TERMINAL]


def prepare_trees(
    out_dir: str | Path,
    *,
    treebank: str | Path | None = None,
    train: str | Path | None = None,
    valid: str | Path | None = None,
    test: str | Path | None = None,
    synthetic: dict[str, int] | None = None,
    src_lang: str | None = None,
    vocab_size: int | None = None,
    max_len: int = 250,
    train_limit: int | None = None,
    seed: int = 1,
    force: bool = False,
    progress: bool = True,
) -> Path:
    """Prepare parse data from a WSJ `treebank` directory, tree files (`train`, and `valid` and `test`
    or a seeded split of train) or the `synthetic` treebank (a dict of split sizes, {} for the
    defaults); returns the data directory. `vocab_size` defaults to 16000 (the paper's WSJ setting).
    """
    out = Path(out_dir)
    if (vocab_size is not None and vocab_size < 16) or max_len < 1:
        raise AiaynError("--vocab-size must be at least 16 and --max-len at least 1")
    if train_limit is not None and train_limit < 1:
        raise AiaynError(f"--train-limit must be at least 1, got {train_limit}")
    counts = {split: dict.fromkeys(("read", *DROP_REASONS), 0) for split in SPLITS}
    sources = dict(treebank=treebank, train=train, valid=valid, test=test, synthetic=synthetic)
    with building(out, force) as work:
        if work is None:
            return out
        splits, header = gather(counts, seed=seed, **sources)
        if not splits["train"]:
            raise AiaynError("no training trees: every train tree was empty")
        if train_limit is not None:
            splits["train"] = _sample(splits["train"], train_limit, seed, counts["train"])
        lang = src_lang or ("src" if header["corpus"] == "user" else "en")
        meta = {"format_version": FORMAT_VERSION, "task": "parse", **header, "src_lang": lang}
        meta.update({"tgt_lang": "tree", "seed": seed})
        meta.update(_build(work, splits, counts, vocab_size or PARSE_VOCAB_SIZE, max_len, seed, progress))
        meta["filters"]["train_limit"] = train_limit
        DataDir(work).write_meta(meta)
    return out


def _sample(trees: list[Tree], limit: int, seed: int, counts: dict[str, int]) -> list[Tree]:
    """A seeded uniform sample of `limit` trees, in their order."""
    if len(trees) <= limit:
        return trees
    keep = np.sort(np.random.default_rng(seed).choice(len(trees), size=limit, replace=False))
    counts["train_limit"] = len(trees) - limit
    return [trees[i] for i in keep]


def _build(work: Path, splits, counts, vocab_size: int, max_len: int, seed: int, progress: bool) -> dict:
    """Train the vocabulary, write every split; returns the meta.json entries about the result."""
    labels = sorted(set().union(*(constituent_labels(t) for t in splits["train"])))
    symbols = tree_tokens(labels)
    sentences = (" ".join(t.words()) for t in splits["train"])
    if progress:
        print(f"training a {vocab_size}-piece BPE vocabulary on the train sentences", flush=True)
    spm = DataDir(work).spm_path
    tokenizer = Tokenizer.train(sentences, spm, vocab_size, seed=seed, user_symbols=symbols)
    ids = {piece: i for i, piece in enumerate(tokenizer.pieces(list(range(tokenizer.vocab_size))))}
    (work / RAW_DIR).mkdir()
    tokens, unk, long = {}, {}, {}
    for split in SPLITS:
        tokens[split], unk[split], long[split] = _write_split(
            work, split, splits[split], tokenizer, ids, max_len, counts[split]
        )
        if long[split]["pairs"]:  # a note, shown with --no-progress too
            print(
                f"note: {long[split]['pairs']} {split} tree(s) have more than max_len={max_len} tokens "
                f"(first: {long[split]['first']}); parseval scores them, the dev loss leaves them out "
                "(meta.json: long_held_out)",
                flush=True,
            )
    kept = {split: counts[split].pop("kept") for split in SPLITS}
    if kept["train"] == 0:
        raise AiaynError(f"no train trees left after the max_len={max_len} filter")
    return {
        "vocab_size": tokenizer.vocab_size,
        "requested_vocab_size": vocab_size,
        "tokenizer": {**tokenizer_meta("train sentences, with the tree tokens as user-defined pieces")},
        "token_dtype": token_dtype(tokenizer.vocab_size).name,
        "pairs": kept,
        "tokens": tokens,
        "unk": unk,
        "filters": {"max_len": max_len, "length_filters_apply_to": ["train"]},
        "lines_read": {split: counts[split]["read"] for split in SPLITS},
        "long_held_out": {split: long[split] for split in ("valid", "test")},
        "dropped": {split: {k: counts[split][k] for k in DROP_REASONS} for split in SPLITS},
        "drop_reasons": DROP_REASONS,
        "parse": {"labels": labels, "terminal": TERMINAL, "linearisation": LINEARISATION},
    }


def _write_split(
    work: Path, split: str, trees: list[Tree], tokenizer: Tokenizer, ids: dict[str, int], max_len, counts
) -> tuple[dict[str, int], dict[str, int], dict[str, Any]]:
    """Shards and raw/{split}.src|tgt|tree of one split.

    A tree whose words or linearisation have more than max_len tokens is dropped from train; in valid
    and test it stays in the raw files (parseval scores the whole split) but not in the shards that
    dev-loss batches are made of (as aiayn.data.prepare does with text). Returns the shards' token and
    <unk> counts per side and {"pairs", "first"} of the valid/test trees left out of the shards.
    """
    targets = [linearise(tree) for tree in trees]
    src_ids = tokenizer.encode([" ".join(tree.words()) for tree in trees])
    tgt_ids = [[ids.get(token, UNK_ID) for token in target] for target in targets]
    fits = [max(len(s), len(t)) <= max_len for s, t in zip(src_ids, tgt_ids, strict=True)]
    kept = [i for i in range(len(trees)) if fits[i] or split != "train"]
    short = [i for i in kept if fits[i]]
    counts["too_long"], counts["kept"] = len(trees) - len(kept), len(kept)
    writer = ShardWriter(work, split, tokenizer.vocab_size)
    writer.add([src_ids[i] for i in short], [tgt_ids[i] for i in short])
    writer.close()
    for suffix, lines in (
        ("src", (" ".join(trees[i].words()) for i in kept)),
        ("tgt", (" ".join(targets[i]) for i in kept)),
        ("tree", (str(trees[i]) for i in kept)),
    ):
        with open_text(DataDir(work).raw(split, suffix), "w") as f:
            f.writelines(line + "\n" for line in lines)
    sides = {"src": [src_ids[i] for i in short], "tgt": [tgt_ids[i] for i in short]}
    tokens = {side: sum(len(s) + 1 for s in seqs) for side, seqs in sides.items()}  # + EOS each
    unk = {side: sum(s.count(UNK_ID) for s in seqs) for side, seqs in sides.items()}
    long = [n for n, i in enumerate(kept, start=1) if not fits[i]]
    first = f"raw/{split}.tree:{long[0]}" if long else None
    return tokens, unk, {"pairs": len(long), "first": first}
