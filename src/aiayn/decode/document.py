"""Documents and long inputs: split into sentences, translate them batched, join them again.

The model was trained on sentences (verses) and its inputs are capped (`source_limit`), so a text
longer than one sentence is translated sentence by sentence and nothing is dropped:

- `split_document` cuts a document into paragraphs at blank lines (kept as they were: their
  number and any indentation-free spacing between paragraphs), joins the hard-wrapped lines of a
  paragraph, and splits each paragraph into sentences with `sentence-splitter`, the Python port of
  Moses' `split-sentences.perl` with its per-language lists of non-breaking prefixes ("Sr.",
  "e.g."), the splitter the MT field has used for WMT data;
- `join_document` puts the translated sentences back: a space between the sentences of a
  paragraph, the original blank lines between paragraphs.

Splitting needs the source language; languages without a prefix list use English's.
"""

from __future__ import annotations

import functools
import re
import warnings
from dataclasses import dataclass

from sentence_splitter import SentenceSplitter, SentenceSplitterWarning

_BLANK = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)*")  # one or more blank lines


@dataclass
class Document:
    """sentences: all sentences in order; shape[p] = how many belong to paragraph p;
    separators[p] = the text between paragraph p and p + 1; head, tail: leading/trailing space."""

    sentences: list[str]
    shape: list[int]
    separators: list[str]
    head: str = ""
    tail: str = ""


@functools.cache
def _splitter(language: str) -> SentenceSplitter:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SentenceSplitterWarning)  # no prefix list: English rules
        try:
            return SentenceSplitter(language=language)
        except Exception:  # noqa: BLE001 - an unknown code: the language-neutral rules
            return SentenceSplitter(language="en")


def split_sentences(text: str, language: str = "en") -> list[str]:
    """One paragraph (line breaks are spaces) -> its sentences, without empty ones."""
    flat = " ".join(text.split())
    return [s for s in _splitter(language or "en").split(flat) if s.strip()] if flat else []


def split_document(text: str, language: str = "en") -> Document:
    """A document -> its sentences, how many each paragraph has, and what separates paragraphs."""
    stripped = text.strip("\n")
    head, tail = text[: text.index(stripped)] if stripped else text, text[len(text.rstrip("\n")) :]
    paragraphs = _BLANK.split(stripped) if stripped else []
    separators = [m.group(0) for m in _BLANK.finditer(stripped)] if stripped else []
    sentences, shape = [], []
    for paragraph in paragraphs:
        found = split_sentences(paragraph, language)
        sentences += found
        shape.append(len(found))
    return Document(sentences, shape, separators, head, tail if stripped else "")


def join_document(doc: Document, translations: list[str]) -> str:
    """The translated document: doc's layout around `translations` (one per sentence)."""
    if len(translations) != len(doc.sentences):
        raise ValueError(f"{len(translations)} translations for {len(doc.sentences)} sentences")
    out, start = [], 0
    for p, count in enumerate(doc.shape):
        out.append(" ".join(t for t in translations[start : start + count] if t))
        start += count
        if p < len(doc.separators):
            out.append(doc.separators[p])
    return doc.head + "".join(out) + doc.tail
