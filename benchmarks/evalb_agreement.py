"""Does aiayn's parseval score as EVALB does? (section 6.3)

Draws --sentences gold trees from the synthetic grammar (aiayn.parse.grammar) dressed with what
WSJ trees hold (traces, function tags, TOP roots, constituents of punctuation only) and a random
hypothesis tree over the same leaves for most of them (a few with a changed word or a mistagged
final "." to make EVALB's error sentences), scores the pair of files with EVALB (Sekine and
Collins; build it from evalb.c with `gcc -o evalb evalb.c`) and its COLLINS.prm, and with
`aiayn.parse.parseval`, and compares matched / gold / test brackets, error and skipped sentences
and F1. Prints both and exits 1 if they differ.

    python benchmarks/evalb_agreement.py --evalb ./evalb --prm COLLINS.prm [--sentences 600] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from aiayn.parse.grammar import synthetic_treebank
from aiayn.parse.parseval import parseval
from aiayn.parse.trees import Tree, read_tree_lines

LABELS = ["S", "NP", "VP", "PP", "ADVP", "PRT", "SBAR", "ADJP", "NP-SBJ", "PP-LOC=2", "TOP"]


def random_tree(rng: random.Random, leaves: list[Tree], root: bool = True) -> Tree:
    """A random bracketing of `leaves` with random labels (TOP inside too), unary chains sometimes."""
    if len(leaves) == 1:
        return leaves[0] if rng.random() < 0.6 else Tree(rng.choice(LABELS), [leaves[0]])
    cuts = sorted(rng.sample(range(1, len(leaves)), k=rng.randint(1, min(3, len(leaves) - 1))))
    parts = [leaves[a:b] for a, b in zip([0, *cuts], [*cuts, len(leaves)], strict=True)]
    label = rng.choice(LABELS[:-1] if root else LABELS)
    node = Tree(label, [random_tree(rng, part, False) for part in parts])
    return Tree(node.label, [node]) if rng.random() < 0.1 else node


def dressed(rng: random.Random, tree: Tree) -> Tree:
    """A gold tree as WSJ has them: traces, function tags, constituents of punctuation, TOP."""

    def visit(node: Tree) -> Tree:
        if node.is_preterminal:
            return node
        kids = [visit(child) for child in node.children]
        if rng.random() < 0.15:
            kids.insert(rng.randint(0, len(kids)), Tree("NP-SBJ", [Tree("-NONE-", word="*T*-1")]))
        if rng.random() < 0.05:
            kids.insert(rng.randint(0, len(kids)), Tree("PRN", [Tree(",", word=","), Tree(":", word="--")]))
        tag = rng.choice(["-SBJ", "-LOC-1", "=3", ""]) if node.label != "S" else ""
        return Tree(node.label + tag, kids)

    out = visit(tree)
    return Tree("TOP", [out]) if rng.random() < 0.5 else out


def pairs(sentences: int, seed: int) -> tuple[list[Tree], list[Tree]]:
    rng = random.Random(seed)
    golds, tests = [], []
    for tree in synthetic_treebank(seed + 7, {"train": sentences, "valid": 0, "test": 0})["train"]:
        leaves = [Tree(leaf.label, word=leaf.word) for leaf in tree.preterminals()]
        draw = rng.random()
        if draw < 0.03:
            leaves[0] = Tree(leaves[0].label, word="WRONG")  # an error sentence: words differ
        elif draw < 0.06:
            leaves[-1] = Tree("XX", word=leaves[-1].word)  # "." kept by its tag: lengths differ
        golds.append(dressed(rng, tree))
        tests.append(random_tree(rng, leaves) if rng.random() < 0.7 else tree)
    return golds, tests


def evalb_totals(evalb: str, prm: str, gold: Path, test: Path) -> dict[str, float]:
    """EVALB's summary: matched, gold and test brackets, error and skipped sentences, F1."""
    out = subprocess.run(
        [evalb, "-p", prm, "-e", "1000000", str(gold), str(test)], capture_output=True, text=True, check=True
    ).stdout
    total = out.split("=" * 76)[2].split("=== Summary")[0].split()
    number = lambda pattern: re.search(pattern + r"\s+=\s+([\d.]+)", out).group(1)  # noqa: E731
    return {
        "matched": int(total[2]),
        "gold_brackets": int(total[3]),
        "test_brackets": int(total[4]),
        "error_sentences": int(number("Number of Error sentence")),
        "skipped_sentences": int(number("Number of Skip  sentence")),
        "f1": float(number("Bracketing FMeasure")),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evalb", required=True, help="the evalb program")
    parser.add_argument("--prm", required=True, help="COLLINS.prm")
    parser.add_argument("--sentences", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    golds, tests = pairs(args.sentences, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        files = {name: Path(tmp) / f"{name}.txt" for name in ("gold", "test")}
        for name, trees in (("gold", golds), ("test", tests)):
            files[name].write_text("".join(f"{t}\n" for t in trees))
        theirs = evalb_totals(args.evalb, args.prm, files["gold"], files["test"])
        ours = parseval(read_tree_lines(files["gold"]), read_tree_lines(files["test"]))
    ours = {key: round(ours[key], 2) if key == "f1" else ours[key] for key in theirs}
    print(f"EVALB: {theirs}\naiayn: {ours}")
    same = ours == theirs
    print(f"{'agree' if same else 'DIFFER'} on {len(golds)} sentences")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
