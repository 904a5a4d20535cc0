"""Where `aiayn prepare` finds trees for parsing (section 6.3): the WSJ part of the Penn Treebank in
its LDC layout, a user's tree files, or the synthetic treebank of aiayn.parse.grammar.

WSJ: DIR holds (at any depth) the files wsj_SSNN.mrg, SS being the section; the standard split
(Collins 1997 and the papers since, the Transformer's included) is sections 02-21 for training, 22
for development and 23 for testing. A tree file is .mrg-style brackets or one tree per line; a
directory stands for all its *.mrg files. Every tree is normalised (aiayn.parse.trees.normalise);
a tree left without words is counted and dropped.
"""

from __future__ import annotations

import re
from pathlib import Path

from aiayn.data.sources import SYNTHETIC_TREES as SYNTHETIC
from aiayn.errors import AiaynError
from aiayn.parse.grammar import synthetic_treebank
from aiayn.parse.trees import Tree, normalise, read_trees

WSJ_SECTIONS = {"train": range(2, 22), "valid": range(22, 23), "test": range(23, 24)}
_WSJ_FILE = re.compile(r"wsj_(\d\d)\d\d\.mrg", re.IGNORECASE)

Splits = dict[str, list[Tree]]


def wsj_files(root: str | Path) -> dict[str, list[Path]]:
    """The .mrg files of each split of the standard WSJ split under `root`."""
    root = Path(root)
    if not root.is_dir():
        raise AiaynError(f"--treebank {root}: no such directory")
    sections: dict[int, list[Path]] = {}
    for path in sorted(root.rglob("*")):
        match = _WSJ_FILE.fullmatch(path.name)
        if match and path.is_file():
            sections.setdefault(int(match.group(1)), []).append(path)
    needed = [s for r in WSJ_SECTIONS.values() for s in r]
    missing = [f"{s:02d}" for s in needed if s not in sections]
    if missing:
        found = ", ".join(f"{s:02d}" for s in sorted(sections)) or "none"
        raise AiaynError(
            f"--treebank {root}: no WSJ layout (files wsj_SSNN.mrg of sections 02-23); sections missing: "
            f"{', '.join(missing)} (found: {found}). Give --trees-train/--trees-valid/--trees-test instead"
        )
    return {split: [p for s in r for p in sections[s]] for split, r in WSJ_SECTIONS.items()}


def tree_files(path: str | Path, option: str) -> list[Path]:
    """A tree file, or every *.mrg file under a directory."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix.lower() == ".mrg" and p.is_file())
        if not files:
            raise AiaynError(f"{option} {path}: a directory without .mrg files")
        return files
    if not path.is_file():
        raise AiaynError(f"{option} {path}: no such file")
    return [path]


def load_trees(files: list[Path], counts: dict[str, int]) -> list[Tree]:
    """The normalised trees of `files`; counts["read"] and counts["empty"] (no words) go up."""
    trees = []
    for path in files:
        for _, tree in read_trees(path):
            counts["read"] += 1
            kept = normalise(tree)
            if kept is None:
                counts["empty"] += 1
            else:
                trees.append(kept)
    return trees


def held_out(trees: list[Tree], seed: int) -> tuple[list[Tree], list[Tree], list[Tree]]:
    """(train, valid, test): a seeded split of `trees` as `aiayn prepare` splits parallel text."""
    from aiayn.data.corpus import held_out_indices

    valid_idx, test_idx = held_out_indices(len(trees), seed)
    chosen = {int(i): "valid" for i in valid_idx} | {int(i): "test" for i in test_idx}
    parts: dict[str, list[Tree]] = {"train": [], "valid": [], "test": []}
    for i, tree in enumerate(trees):
        parts[chosen.get(i, "train")].append(tree)
    return parts["train"], parts["valid"], parts["test"]


def gather(
    counts: dict[str, dict[str, int]],
    *,
    treebank: str | Path | None = None,
    train: str | Path | None = None,
    valid: str | Path | None = None,
    test: str | Path | None = None,
    synthetic: dict[str, int] | None = None,
    seed: int = 1,
) -> tuple[Splits, dict]:
    """(trees of each split, meta.json's description of them) from exactly one kind of input.

    `synthetic`: the sizes of the synthetic splits ({} for the defaults).
    """
    given = [treebank is not None, train is not None, synthetic is not None]
    if sum(given) != 1 or (train is None and (valid is not None or test is not None)):
        raise AiaynError(
            "give one source of trees: --treebank DIR, --trees-train F [...], or --corpus synthetic-trees"
        )
    if synthetic is not None:
        splits = synthetic_treebank(seed, synthetic)
        for split, trees in splits.items():
            counts[split]["read"] = len(trees)
        description = "SYNTHETIC: sampled from aiayn's probabilistic grammar of English (aiayn.parse.grammar)"
        return splits, {"corpus": SYNTHETIC, "description": description, "inputs": None}
    if treebank is not None:
        files = wsj_files(treebank)
        splits = {split: load_trees(files[split], counts[split]) for split in files}
        description = "Penn Treebank WSJ: sections 02-21 train, 22 valid, 23 test"
        return splits, {"corpus": "wsj", "description": description, "inputs": {"treebank": str(treebank)}}
    options = {"train": train, "valid": valid, "test": test}
    splits = {
        split: load_trees(tree_files(path, f"--trees-{split}"), counts[split])
        for split, path in options.items()
        if path is not None
    }
    if valid is None or test is None:
        rest, held_valid, held_test = held_out(splits["train"], seed)
        splits["train"] = (
            rest + (held_valid if valid is not None else []) + (held_test if test is not None else [])
        )
        splits.setdefault("valid", held_valid)
        splits.setdefault("test", held_test)
    inputs = {split: str(path) for split, path in options.items() if path is not None}
    return splits, {"corpus": "user", "description": "user tree files", "inputs": inputs}
