"""Labelled bracketing precision, recall and F1 as EVALB computes them with COLLINS.prm (section 6.3
reports this F1 on WSJ section 23).

For each sentence, each tree is reduced to its brackets (label, start, end) over its words:
- words whose POS tag is in DELETE_LABEL (, : `` '' . and -NONE-) are removed, in each tree by its
  own tags (so a hypothesis must tag punctuation as the gold tree does: `aiayn evaluate` writes
  its trees with the gold tags for that reason);
- POS tags are not brackets; a constituent left without words is removed;
- labels lose their function tags (cut at the first '-' or '=': NP-SBJ-1 -> NP);
- brackets labelled TOP are not counted (DELETE_LABEL TOP), nor (an addition to EVALB, for
  PTB-style input) the root bracket when it is unlabelled or ROOT: "( (S ...) )" scores as "(S ...)";
- ADVP and PRT are the same label (EQ_LABEL ADVP PRT).
Matched brackets are the multiset intersection of the two trees' brackets (EVALB's matching: n
gold and m test copies of one bracket match min(n, m) times). Sentences whose word sequences
differ (after deletion) are errors and an empty hypothesis is skipped, as in EVALB: both are left
out of the totals and counted. Precision = matched / test brackets, recall = matched / gold
brackets, F1 = 2PR / (P + R), over the corpus, in percent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from aiayn.parse.trees import Tree

DELETED_TAGS = frozenset({",", ":", "``", "''", ".", "-NONE-"})  # COLLINS.prm DELETE_LABEL (words)
DELETED_LABELS = frozenset({"TOP"})  # COLLINS.prm DELETE_LABEL (brackets)
UNCOUNTED_ROOTS = frozenset({"", "ROOT"})  # PTB's unlabelled outer bracket, and ROOT
EQUIVALENT = {"PRT": "ADVP"}  # COLLINS.prm EQ_LABEL ADVP PRT

Bracket = tuple[str, int, int]  # (label, first word, one past the last word)


def evalb_label(label: str) -> str:
    """EVALB's modify_label (cut at the first '-' or '='), then the ADVP/PRT equivalence."""
    for i, char in enumerate(label):
        if char in "-=":
            label = label[:i]
            break
    return EQUIVALENT.get(label, label)


def brackets(tree: Tree) -> tuple[list[str], Counter[Bracket]]:
    """The words that EVALB keeps and the multiset of brackets it counts (module docstring)."""
    words: list[str] = []
    found: Counter[Bracket] = Counter()

    def visit(node: Tree, is_root: bool) -> None:
        if node.is_preterminal:
            if node.label not in DELETED_TAGS:
                words.append(node.word)  # type: ignore[arg-type]
            return
        first = len(words)
        for child in node.children:
            visit(child, False)
        label = evalb_label(node.label)
        counted = label not in DELETED_LABELS and not (is_root and label in UNCOUNTED_ROOTS)
        if counted and len(words) > first:  # a constituent without words is removed
            found[(label, first, len(words))] += 1

    visit(tree, True)
    return words, found


@dataclass
class SentenceResult:
    """One sentence: "ok", "error" (word sequences differ) or "skip" (no hypothesis words)."""

    status: str
    matched: int = 0
    gold: int = 0
    test: int = 0
    reason: str = ""


def score_sentence(gold: Tree, test: Tree | None) -> SentenceResult:
    """EVALB's result for one sentence (module docstring)."""
    gold_words, gold_brackets = brackets(gold)
    if test is None:
        return SentenceResult("skip", reason="no hypothesis tree")
    test_words, test_brackets = brackets(test)
    if not test_words:
        return SentenceResult("skip", reason="the hypothesis has no words")
    if len(gold_words) != len(test_words):
        return SentenceResult(
            "error", reason=f"length mismatch ({len(gold_words)} | {len(test_words)} words)"
        )
    for g, t in zip(gold_words, test_words, strict=True):
        if g != t:
            return SentenceResult("error", reason=f"words mismatch ({g} | {t})")
    matched = sum((gold_brackets & test_brackets).values())
    return SentenceResult("ok", matched, sum(gold_brackets.values()), sum(test_brackets.values()))


def corpus_scores(results: Sequence[SentenceResult]) -> dict:
    """Totals and P, R, F1 in percent over the "ok" sentences (EVALB's summary)."""
    ok = [r for r in results if r.status == "ok"]
    matched, gold, test = (sum(getattr(r, k) for r in ok) for k in ("matched", "gold", "test"))
    recall = 100.0 * matched / gold if gold else 0.0
    precision = 100.0 * matched / test if test else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "f1": f1,
        "precision": precision,
        "recall": recall,
        "matched": matched,
        "gold_brackets": gold,
        "test_brackets": test,
        "sentences": len(results),
        "error_sentences": sum(r.status == "error" for r in results),
        "skipped_sentences": sum(r.status == "skip" for r in results),
    }


def parseval(golds: Sequence[Tree], tests: Sequence[Tree | None]) -> dict:
    """Corpus labelled bracketing scores of `tests` against `golds` (aligned lists)."""
    if len(golds) != len(tests):
        raise ValueError(f"{len(golds)} gold trees but {len(tests)} hypothesis trees")
    return corpus_scores([score_sentence(g, t) for g, t in zip(golds, tests, strict=True)])


def format_scores(scores: dict) -> str:
    """The line `aiayn evaluate` prints: parseval F1 = 91.30 (P = 91.50, R = 91.10)."""
    line = f"parseval F1 = {scores['f1']:.2f} (P = {scores['precision']:.2f}, R = {scores['recall']:.2f})"
    left_out = scores["error_sentences"] + scores["skipped_sentences"]
    if left_out:
        line += (
            f"; {left_out} of {scores['sentences']} sentences left out "
            f"({scores['error_sentences']} errors, {scores['skipped_sentences']} skipped)"
        )
    return line
