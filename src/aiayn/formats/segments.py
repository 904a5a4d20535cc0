"""Segments with markup through a Translator: each segment's words split into sentences
(aiayn.decode.document, as `translate_document` splits a paragraph), all sentences of a file
translated in one `translate_batch` call with word alignments (aiayn.decode.align), and each
segment's markup carried onto its translation (aiayn.formats.inline)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aiayn.config import DecodeConfig
from aiayn.decode.document import split_sentences
from aiayn.formats.inline import Span, carry, source_layout

if TYPE_CHECKING:
    from aiayn.decode.translator import Translator


def translate_segments(
    translator: Translator, roots: Sequence[Span], options: DecodeConfig | None = None, **controls: Any
) -> list[Span]:
    """The target tree of each segment tree; `options` and `controls` are `translate_batch`'s (its
    best translation is used, aligned). A segment without words comes back as it was."""
    layouts = [source_layout(root) for root in roots]
    language = translator.info.get("src_lang") or "en"
    sentences, owners = [], []
    for k, layout in enumerate(layouts):
        found = split_sentences(" ".join(layout.words), language) if layout.words else []
        sentences += found
        owners += [k] * len(found)
    controls = {**controls, "align": True}
    results = translator.translate_batch(sentences, options, **controls) if sentences else []
    words: list[list[str]] = [[] for _ in roots]
    pairs: list[list[tuple[int, int]]] = [[] for _ in roots]
    before = [0] * len(roots)  # source words of the segment's earlier sentences
    for sentence, k, translations in zip(sentences, owners, results, strict=True):
        target, n_source = translations[0].text.split(), len(sentence.split())
        pairs[k] += [
            (i + before[k], j + len(words[k]))
            for i, j in translations[0].alignment or []
            if i < n_source and j < len(target)
        ]
        words[k] += target
        before[k] += n_source
    return [
        carry(root, layout, w, p) for root, layout, w, p in zip(roots, layouts, words, pairs, strict=True)
    ]
