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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aiayn.config import DecodeConfig
from aiayn.data.datadir import DataDir
from aiayn.errors import AiaynError
from aiayn.evaluate.split import Split, evaluate_split, write_outputs
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


class ParseTask:
    """Section 6.3's evaluation: the words of raw/{split}.tree parsed with the paper's parsing search,
    scored against those trees (parseval)."""

    verb = "parsing"

    def default_decode(self) -> DecodeConfig:
        return DecodeConfig(**PARSE_DECODE)

    def read(self, data: DataDir, split: str, limit: int | None) -> Split:
        data.parse_meta()  # parse data, or a one-line error
        path = data.raw(split, "tree")
        golds = read_gold(path, limit)
        return Split(golds, golds, path)

    def load(self, model: Parser | str | Path, data: DataDir, device: Any, int8: bool) -> Parser:
        if isinstance(model, Parser):
            return model
        return Parser.load(model, device, int8, data.parse_meta()["parse"]["labels"])

    def decode(
        self, decoder: Parser, split: Split, options: DecodeConfig, progress: Callable[[int], object]
    ) -> list[Tree]:
        """A tree of each gold tree's words, carrying the gold POS tags (the model predicts none)."""
        sentences = [gold.words() for gold in split.inputs]
        tags = [[leaf.label for leaf in gold.preterminals()] for gold in split.inputs]
        return decoder.parse(sentences, options, tags=tags, progress=progress)

    def score(self, hypotheses: Sequence[Tree], references: Sequence[Tree]) -> dict[str, Any]:
        return _scores(references, hypotheses)


PARSING = ParseTask()


def evaluate_parser(
    model: Parser | str | Path,
    data_dir: str | Path,
    split: str = "test",
    decode_config: DecodeConfig | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Parse the words of DATA_DIR/raw/{split}.tree with beam search and score the trees against it.

    `model`: a Parser or a model directory. `decode_config` defaults to the paper's parsing search
    (beam 21, alpha 0.3, |input| + 300). `options`: out_dir, device, limit, progress and int8, as
    aiayn.evaluate.split.evaluate_split takes them (with `out_dir`, the trees go to
    out_dir/{split}.hyp and the scores to out_dir/scores.json).
    """
    return evaluate_split(PARSING, model, data_dir, split, decode_config, **options)


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
    if out_dir is not None:
        write_outputs(trees, scores, out_dir, split)
    return scores
