"""Segments with markup through a Translator: each segment's words split into sentences
(aiayn.decode.document, as `translate_document` splits a paragraph), all sentences of a file
translated in one `translate_batch` call with word alignments (aiayn.decode.align), and each
segment's markup carried onto its translation (aiayn.formats.inline)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from aiayn.config import DecodeConfig
from aiayn.decode.document import split_sentences
from aiayn.formats.inline import Span, carry, source_layout

if TYPE_CHECKING:
    from aiayn.decode.translator import Translator


class Aligned(Protocol):
    """A sentence's best translation: its text and (source word, target word) pairs."""

    text: str
    alignment: list[tuple[int, int]] | None


@dataclass
class SegmentPlan:
    """Segment trees cut into the sentences the model reads: `owners[i]` the segment of sentence i."""

    roots: Sequence[Span]
    layouts: list[Any]
    sentences: list[str]
    owners: list[int]


def plan_segments(roots: Sequence[Span], language: str) -> SegmentPlan:
    """Each segment's words split into sentences of `language` (the model's source language)."""
    layouts = [source_layout(root) for root in roots]
    sentences, owners = [], []
    for k, layout in enumerate(layouts):
        found = split_sentences(" ".join(layout.words), language) if layout.words else []
        sentences += found
        owners += [k] * len(found)
    return SegmentPlan(roots, layouts, sentences, owners)


def carry_segments(plan: SegmentPlan, best: Sequence[Aligned]) -> list[Span]:
    """The target tree of each segment, from the best aligned translation of each of its sentences
    (`best[i]` of `plan.sentences[i]`). A segment without words comes back as it was."""
    roots = plan.roots
    words: list[list[str]] = [[] for _ in roots]
    pairs: list[list[tuple[int, int]]] = [[] for _ in roots]
    before = [0] * len(roots)  # source words of the segment's earlier sentences
    for sentence, k, found in zip(plan.sentences, plan.owners, best, strict=True):
        target, n_source = found.text.split(), len(sentence.split())
        kept = [(i, j) for i, j in found.alignment or [] if i < n_source and j < len(target)]
        pairs[k] += [(i + before[k], j + len(words[k])) for i, j in kept]
        words[k] += target
        before[k] += n_source
    parts = zip(roots, plan.layouts, words, pairs, strict=True)
    return [carry(root, layout, w, p) for root, layout, w, p in parts]


def translate_segments(
    translator: Translator, roots: Sequence[Span], options: DecodeConfig | None = None, **controls: Any
) -> list[Span]:
    """The target tree of each segment tree; `options` and `controls` are `translate_batch`'s (its
    best translation is used, aligned), all sentences in one call."""
    plan = plan_segments(roots, translator.info.get("src_lang") or "en")
    controls = {**controls, "align": True}
    found = translator.translate_batch(plan.sentences, options, **controls) if plan.sentences else []
    return carry_segments(plan, [hyps[0] for hyps in found])
