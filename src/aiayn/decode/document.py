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

Splitting needs the source language; languages without a prefix list use English's. The splitter's
rules decide each sentence end from the end of one word and the start of the next, but its regular
expressions take time quadratic in a word's length (10,000 characters of "a.a.a..." took 8 s) and
its loop in a paragraph's: it is given WINDOW words at a time (with CONTEXT words either side),
and a word over 2 x WORD_ENDS + 1 characters as its first and last WORD_ENDS characters (longer
than any non-breaking prefix), so its work is linear in the text; sentences keep the words as
they were.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sentence_splitter import SentenceSplitter, SentenceSplitterWarning

_BLANK = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)*")  # one or more blank lines
WORD_ENDS = 32  # characters of an over-long word the splitter sees at each end
WINDOW, CONTEXT = 256, 8  # words the splitter is given at a time, and seen around them
_CUT = "#"  # in none of the splitter's character classes: keeps a long word's two ends apart
# check(sentences ended so far, characters of the one still open): may raise to stop the split early
Check = Callable[[int, int], None]


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


def _seen(word: str) -> str:
    """The word as the splitter sees it: itself, or its two ends when it is over-long."""
    if len(word) <= 2 * WORD_ENDS + 1:
        return word
    return word[:WORD_ENDS] + _CUT + word[-WORD_ENDS:]


def _ends(words: list[str], language: str) -> list[int]:
    """The indices of the words that begin a sentence (after the first), as the splitter puts them."""
    found = _splitter(language).split(" ".join(map(_seen, words)))
    counts = [n for n in (len(s.split()) for s in found) if n]
    if sum(counts) != len(words):  # the splitter dropped or joined words: a change of its rules
        raise AssertionError(f"the sentence splitter returned {sum(counts)} of {len(words)} words")
    return list(itertools.accumulate(counts))[:-1]


def split_sentences(
    text: str, language: str = "en", check: Check | None = None, before: int = 0
) -> list[str]:
    """One paragraph (line breaks are spaces) -> its sentences, without empty ones.

    The splitter puts sentence ends only between words, deciding each from the words around it, so
    a long paragraph is split WINDOW words at a time, each window seen with CONTEXT words on either
    side (its work grows with the square of what it is given); sentences are the words as they were.
    `check` hears after each window but the last how many sentences have ended (`before` this
    paragraph's included) and how long the open one is.
    """
    words, starts = text.split(), []
    for first in range(0, len(words), WINDOW):
        low = max(first - CONTEXT, 0)
        seen = _ends(words[low : first + WINDOW + CONTEXT], language or "en")
        starts += [low + i for i in seen if first <= low + i < first + WINDOW]
        if check is not None and first + WINDOW < len(words):
            open_words = words[(starts[-1] if starts else 0) : first + WINDOW]
            check(before + len(starts), sum(map(len, open_words)) + len(open_words) - 1)
    bounds = [0, *starts, len(words)]
    return [" ".join(words[a:b]) for a, b in itertools.pairwise(bounds) if b > a]


def paragraph_count(text: str, most: int | None = None) -> int:
    """How many paragraphs of `text` (split at blank lines) have a word: the least number of
    sentences split_document finds, counted in one pass without splitting sentences; with `most`,
    counting stops past it (a document of 33,000 one-word paragraphs is refused in microseconds)."""
    count, start = 0, 0
    for gap in itertools.chain(_BLANK.finditer(text), [None]):
        end = gap.start() if gap else len(text)
        count += not text[start:end].isspace() and end > start
        if most is not None and count > most:
            break
        start = gap.end() if gap else end
    return count


@dataclass
class Bounds:
    """What a document's sentences must at least hold, found without splitting (`bounds`)."""

    longest_word: int  # characters of the longest word: a sentence holds whole words
    solid: int  # characters besides white space, all sentences together
    unbroken: int  # characters besides white space where no sentence can end: one sentence holds them


@functools.cache
def _tables() -> tuple[np.ndarray, np.ndarray]:
    """(starter, space): (65536,) bool over the BMP. A starter is a character a sentence can open with
    for the splitter (its rules end a sentence only before a word opening with an upper-case or other
    letter, a digit, an opening quote or bracket, each as Unicode says), a line break (a paragraph may
    end there), and any unassigned character (the splitter's Unicode may be newer than Python's)."""
    chars = [chr(c) for c in range(0x10000)]
    starter = np.array([unicodedata.category(c) in ("Lu", "Lo", "Pi", "Cn") for c in chars])
    starter[[ord(c) for c in "0123456789'\"([\u00bf\u00a1\n"]] = True
    return starter, np.array([c.isspace() for c in chars])


def _longest(bounds: np.ndarray, counted: np.ndarray) -> int:
    """The most `counted` characters between two `bounds` ones (both (n,) bool; none is both)."""
    total = np.cumsum(counted, dtype=np.int64)  # (n,) counted up to each position
    if total.size == 0:
        return 0
    marks = total[bounds]  # (b,) counted before each bound
    if marks.size == 0:
        return int(total[-1])
    return int(max(marks[0], np.diff(marks).max(initial=0), total[-1] - marks[-1]))


def bounds(text: str) -> Bounds:
    """The document's Bounds in a few linear passes over its characters (numpy), however hard it is
    to split: the server refuses what no split brings within its limits before splitting."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)  # (n,) code points
    starter_table, space_table = _tables()
    bmp = np.minimum(codes, 0xFFFF)  # (n,) beyond the BMP as U+FFFF: unassigned, a possible start
    starter, space = starter_table.take(bmp), space_table.take(bmp)
    solid = ~space
    return Bounds(_longest(space, solid), int(solid.sum()), _longest(starter, solid & ~starter))


def split_document(text: str, language: str = "en", check: Check | None = None) -> Document:
    """A document -> its sentences, how many each paragraph has, and what separates paragraphs.
    `check`: as split_sentences's, over the whole document."""
    stripped = text.strip("\n")
    head, tail = text[: len(text) - len(text.lstrip("\n"))], text[len(text.rstrip("\n")) :]
    paragraphs = _BLANK.split(stripped) if stripped else []
    separators = [m.group(0) for m in _BLANK.finditer(stripped)] if stripped else []
    sentences, shape = [], []
    for paragraph in paragraphs:
        found = split_sentences(paragraph, language, check, len(sentences))
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
