"""Staging for `aiayn prepare`: the text of every split written to stage/{split}.src|tgt, with counts.

Empty pairs are dropped and counted as they are staged; a user's valid/test splits are drawn from
train with a seed when not given (pairs that share a side with train removed); `sample_train` keeps a
seeded sample of the staged train pairs (`--train-limit`). For valid and test, stage/{split}.where
says where each staged pair came from ("corpus.es:123"), so that prepare can name a line it reports.
A recipe's sources (`aiayn.data.recipe`) are staged one after the other into the same train text,
the first one's held-out pairs kept for valid and test; `stage_recipe` returns how many train pairs
each source staged, which is all that says where a staged pair came from (they are in runs).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from tqdm import tqdm

from aiayn.data.builtin import get_corpus
from aiayn.data.corpus import ParallelText, held_out_indices


class Stage:
    """Writes one split's non-empty pairs to stage/{split}.src|tgt (and .where) and counts what it drops."""

    def __init__(self, stage_dir: Path, split: str, counts: dict[str, int]) -> None:
        self.paths = stage_dir / f"{split}.src", stage_dir / f"{split}.tgt"
        where = [stage_dir / f"{split}.where"] if split != "train" else []
        self._files = [open_text(p, "w") for p in [*self.paths, *where]]
        self.counts = counts
        self.staged = 0  # pairs written
        self.prefix = ""  # what starts each staged source sentence (a target-language tag)

    def add(self, source: str, target: str, where: str = "") -> None:
        """Stage one pair; `where` names its origin (file:line), kept for valid and test."""
        self.counts["read"] += 1
        if not source or not target:
            self.counts["empty"] += 1
            return
        for f, text in zip(self._files, (self.prefix + source, target, where), strict=False):
            f.write(text + "\n")
        self.staged += 1

    def flush(self) -> None:
        for f in self._files:
            f.flush()

    def close(self) -> None:
        for f in self._files:
            f.close()


def open_text(path: Path, mode: str = "r") -> TextIO:
    """Text files of the data directory: UTF-8, lines split on "\\n" only."""
    return open(path, mode, encoding="utf-8", newline="\n")


def read_lines(path: Path) -> Iterator[str]:
    with open_text(path) as f:
        for line in f:
            yield line.rstrip("\n")


def stage_builtin(name: str, stages: dict[str, Stage], splits=("train", "valid", "test")) -> None:
    for split, pairs in get_corpus(name).load().items():
        if split not in splits:
            continue
        for number, (source, target) in enumerate(pairs, start=1):
            where = f"{name} {split} pair {number}"
            stages[split].add(" ".join(source.split()), " ".join(target.split()), where)


Held = dict[str, list[tuple[str, str, str]]]  # valid/test pairs drawn from train files: (src, tgt, where)


def stage_user(
    inputs: dict[str, dict[str, Any]], stages: dict[str, Stage], seed: int, skip: bool, progress: bool
):
    """Stage a user's files; a split without files of its own is drawn from train with `seed`."""
    held = _stage_user_train(inputs, stages, seed, skip, progress)
    stage_held(held, stages)


def _stage_user_train(inputs, stages: dict[str, Stage], seed: int, skip: bool, progress: bool) -> Held:
    """Stage the valid/test files given and the train file's pairs; -> the pairs held out of train for
    the splits without files (`stage_held` stages them once every train pair is staged)."""
    for split in ("valid", "test"):
        if inputs[split]:
            _copy(ParallelText.open(**inputs[split], skip_bad_lines=skip), stages[split], progress)
    train = ParallelText.open(**inputs["train"], skip_bad_lines=skip)
    valid_idx, test_idx = held_out_indices(train.n_lines, seed)
    held = {int(i) + 1: split for split, idx in (("valid", valid_idx), ("test", test_idx)) for i in idx}
    held = {line: split for line, split in held.items() if not inputs[split]}
    held_pairs: Held = {"valid": [], "test": []}
    for line_no, source, target in tqdm(train, total=train.n_lines, desc="read train", disable=not progress):
        if line_no in held:
            held_pairs[held[line_no]].append((source, target, f"{train.paths[0]}:{line_no}"))
        else:
            stages["train"].add(source, target)
    stages["train"].counts["bad_lines"] += train.bad_lines
    return held_pairs


def stage_held(held_pairs: Held, stages: dict[str, Stage]) -> None:
    """Stage the held-out pairs that share no side with any staged train pair."""
    stages["train"].flush()
    candidates = list(chain.from_iterable(held_pairs.values()))
    in_train = [{p[i] for p in candidates}.intersection(read_lines(stages["train"].paths[i])) for i in (0, 1)]
    for split, pairs in held_pairs.items():
        for source, target, where in pairs:
            if source in in_train[0] or target in in_train[1]:
                stages[split].counts["read"] += 1
                stages[split].counts["overlap_with_train"] += 1
            else:
                stages[split].add(source, target, where)


def stage_recipe(recipe, stages: dict[str, Stage], seed: int, skip: bool, progress: bool) -> list[int]:
    """Stage a recipe's sources in order -> train pairs staged by each. Valid and test: the recipe's
    files, else the first source's (a built-in corpus's own, or drawn from its train file); with
    tags, every source's, each sentence of a source after its tag."""
    given = {split: getattr(recipe, split).files(f"{split}-") for split in ("valid", "test")}
    sizes, held = [], {"valid": [], "test": []}
    for i, source in enumerate(recipe.sources):
        before = stages["train"].staged
        for stage in stages.values():
            stage.prefix = recipe.tag(source)
        gives_held_out = i == 0 or recipe.tags
        if gives_held_out and source.corpus:
            for split, files in given.items():
                if files:
                    _copy(ParallelText.open(**files, skip_bad_lines=skip), stages[split], progress)
            stage_builtin(source.corpus, stages, ["train"] + [s for s, f in given.items() if not f])
        elif gives_held_out:
            inputs = {"train": source.files.files(""), **given}
            for split, pairs in _stage_user_train(inputs, stages, seed, skip, progress).items():
                held[split] += [(stages[split].prefix + s if s else s, t, where) for s, t, where in pairs]
        elif source.corpus:
            stage_builtin(source.corpus, stages, ("train",))
        else:
            _copy(ParallelText.open(**source.files.files(""), skip_bad_lines=skip), stages["train"], progress)
        sizes.append(stages["train"].staged - before)
    for stage in stages.values():
        stage.prefix = ""  # the held-out pairs drawn from files carry their tags already
    stage_held(held, stages)
    return sizes


def _copy(text: ParallelText, stage: Stage, progress: bool) -> None:
    for line_no, source, target in tqdm(
        text, total=text.n_lines, desc=f"read {text.paths[0]}", disable=not progress
    ):
        stage.add(source, target, f"{text.paths[0]}:{line_no}")
    stage.counts["bad_lines"] += text.bad_lines


def sample_train(stage_dir: Path, counts: dict[str, int], limit: int, seed: int) -> np.ndarray | None:
    """`--train-limit`: keep a seeded uniform sample of `limit` staged train pairs, in their order;
    -> which staged pairs were kept (None: all of them)."""
    n = sum(1 for _ in read_lines(stage_dir / "train.src"))
    if n <= limit:
        return None
    keep = np.zeros(n, dtype=bool)
    keep[np.random.default_rng(seed).choice(n, size=limit, replace=False)] = True
    keep_staged(stage_dir, "train", keep)
    counts["train_limit"] = n - limit
    return keep


def keep_staged(stage_dir: Path, split: str, keep: np.ndarray) -> None:
    """Rewrite stage/{split}.src|tgt with only the pairs where `keep` (n,) is True, in their order."""
    for path in (stage_dir / f"{split}.src", stage_dir / f"{split}.tgt"):
        kept = path.with_name(path.name + ".kept")
        with open_text(kept, "w") as f:
            f.writelines(line + "\n" for line, k in zip(read_lines(path), keep.tolist(), strict=True) if k)
        kept.replace(path)


def staged_pairs(stage_dir: Path, split: str) -> Iterator[tuple[str, str]]:
    """(source, target) of every staged pair of `split`, in order."""
    return zip(read_lines(stage_dir / f"{split}.src"), read_lines(stage_dir / f"{split}.tgt"), strict=True)
