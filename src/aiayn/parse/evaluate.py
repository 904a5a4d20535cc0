"""Scoring parsers as section 6.3 does: labelled bracketing F1 (aiayn.parse.parseval, EVALB with
COLLINS.prm) of a model on a split of parse data, of two files of trees, and of the right-branching
baseline.

    evaluate_parser("runs/parse/model", "data/trees", split="test")   # parse raw/test.src + score
    evaluate_tree_files("test.hyp", "test.tree")                      # score existing trees
    evaluate_baseline("data/trees", split="test")                     # right-branching trees

The model predicts no POS tags (XX); the trees it writes carry the gold tags, so that EVALB removes
the same punctuation from both trees (tags are not scored). Each returns a dict with "f1",
"precision", "recall" (percent), the bracket and sentence counts, and "parseval_text", the line
`aiayn evaluate` prints.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from aiayn.config import DecodeConfig
from aiayn.data.datadir import DataDir
from aiayn.errors import AiaynError
from aiayn.evaluate import write_scores
from aiayn.parse.parser import PARSE_DECODE, Parser
from aiayn.parse.parseval import format_scores, parseval
from aiayn.parse.trees import Tree, read_tree_lines


def read_gold(path: str | Path, limit: int | None = None) -> list[Tree]:
    """Gold trees, one per line; an empty line is an error (every sentence needs its tree)."""
    trees = read_tree_lines(path)[:limit]
    for number, tree in enumerate(trees, start=1):
        if tree is None:
            raise AiaynError(f"{path}:{number}: empty line where a gold tree should be")
    return trees  # type: ignore[return-value]


def _scores(golds: Sequence[Tree], tests: Sequence[Tree | None], **extra: Any) -> dict[str, Any]:
    scores = {**extra, "metric": "parseval (EVALB, COLLINS.prm)", **parseval(golds, tests)}
    scores["parseval_text"] = format_scores(scores)
    return scores


def _write(trees: Sequence[Tree], scores: dict[str, Any], out_dir: str | Path | None, split: str) -> None:
    if out_dir is None:
        return
    hyp_path = Path(out_dir) / f"{split}.hyp"
    hyp_path.parent.mkdir(parents=True, exist_ok=True)
    hyp_path.write_text("".join(f"{tree}\n" for tree in trees), encoding="utf-8")
    scores["hypotheses"] = str(hyp_path)
    write_scores(scores, out_dir)


def evaluate_parser(
    model: Parser | str | Path,
    data_dir: str | Path,
    split: str = "test",
    decode_config: DecodeConfig | None = None,
    out_dir: str | Path | None = None,
    device: Any = None,
    limit: int | None = None,
    progress: bool = False,
    int8: bool = False,
) -> dict[str, Any]:
    """Parse the words of DATA_DIR/raw/{split}.tree with beam search and score the trees against it.

    `model`: a Parser or a model directory. `decode_config` defaults to the paper's parsing search
    (beam 21, alpha 0.3, |input| + 300). With `out_dir`, the trees go to out_dir/{split}.hyp and the
    scores to out_dir/scores.json. `limit`: the first N sentences only.
    """
    data = DataDir(data_dir)
    meta = data.parse_meta()
    golds = read_gold(data.raw(split, "tree"), limit)
    parser = model if isinstance(model, Parser) else Parser.load(model, device, int8, meta["parse"]["labels"])
    options = decode_config or DecodeConfig(**PARSE_DECODE)
    sentences = [gold.words() for gold in golds]
    tags = [[leaf.label for leaf in gold.preterminals()] for gold in golds]
    with tqdm(total=len(golds), desc=f"parsing {split}", unit="sent", disable=not progress) as bar:
        trees = parser.parse(sentences, options, tags=tags, progress=bar.update)
    scores = _scores(golds, trees, split=split, decode=options.to_dict())
    _write(trees, scores, out_dir, split)
    return scores


def evaluate_tree_files(hyp_path: str | Path, ref_path: str | Path) -> dict[str, Any]:
    """Score a file of hypothesis trees against a file of gold trees, one tree per line each."""
    tests, golds = read_tree_lines(hyp_path), read_gold(ref_path)
    if len(tests) != len(golds):
        raise AiaynError(f"{hyp_path} has {len(tests)} lines but {ref_path} has {len(golds)}")
    return _scores(golds, tests, hypotheses=str(hyp_path), references=str(ref_path))


def right_branching(gold: Tree, root_label: str, label: str) -> Tree:
    """The baseline tree over gold's (tag, word) leaves: (root w1 (label w2 (label ... wn)))."""
    leaves = gold.preterminals()
    node: Tree = leaves[-1]
    for i in reversed(range(len(leaves) - 1)):
        node = Tree(label if i else root_label, [leaves[i], node])
    return node if not node.is_preterminal else Tree(root_label, [node])


def baseline_labels(train: Sequence[Tree]) -> tuple[str, str]:
    """(most frequent root label, most frequent label of the other constituents) in `train`."""
    roots = Counter(tree.label for tree in train)
    inner: Counter[str] = Counter()
    for tree in train:
        stack = list(tree.children)
        while stack:
            node = stack.pop()
            if not node.is_preterminal:
                inner[node.label] += 1
                stack.extend(node.children)
    return roots.most_common(1)[0][0], (inner or roots).most_common(1)[0][0]


def evaluate_baseline(
    data_dir: str | Path, split: str = "test", out_dir: str | Path | None = None, limit: int | None = None
) -> dict[str, Any]:
    """The right-branching baseline on a split of parse data, labelled with train's commonest labels."""
    data = DataDir(data_dir)
    data.parse_meta()
    root_label, label = baseline_labels(read_gold(data.raw("train", "tree")))
    golds = read_gold(data.raw(split, "tree"), limit)
    trees = [right_branching(gold, root_label, label) for gold in golds]
    scores = _scores(
        golds, trees, split=split, baseline=f"right-branching ({root_label} root, {label} inside)"
    )
    _write(trees, scores, out_dir, split)
    return scores
