"""bible-es-en: Spanish Reina-Valera 1909 -> English King James (or World English Bible), by verse.

Both Bibles come from Debian's SWORD packages and share the KJV verse slots, but the Spanish module
keeps its own verse numbering inside those slots: after an empty Spanish slot the rest of the
chapter is shifted or merged, and a few chapters shift inside. We drop whole chapters that look
misaligned: a chapter with an empty Spanish verse, the chapter after one that
ends empty, a chapter whose verse lengths disagree on average, and a chapter with a run of verses
whose lengths disagree in both directions (one verse too long next to one too short: a shift).
The split is by whole books, so no chapter is split between train and test; dev/test pairs whose
source or target also occurs in train are removed.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterator

from pysword.canons import canons

from aiayn.data.builtin.sword import Ref, clean_osis, read_module
from aiayn.data.corpus import remove_train_overlap

SOURCE = ("spaRV1909eb", "sword-text-sparv")
TARGETS = {"kjv": ("engKJV2006eb", "sword-text-kjv"), "web": ("engWEB2015eb", "sword-text-web")}
DEV_BOOKS = frozenset({"Ruth", "Amos", "Phil", "1Pet", "1John"})
TEST_BOOKS = frozenset({"Esth", "Lam", "Joel", "Gal", "Eph", "Jas", "Titus", "2Pet", "Jude"})

MAX_MEAN_DEVIATION = 0.3  # chapter mean of |log(len_es / len_en) - median|
SHIFT_DEVIATION = 0.4  # a verse this far off the median log length ratio ...
SHIFT_RUN = 3  # ... in a run this long, with deviations of both signs, marks a shifted chapter

_WORD = re.compile(r"[^\W\d_]+")  # letters only

Chapter = list[tuple[Ref, str, str]]  # (ref, source, target) for every verse slot


def _chapters(source: dict[Ref, str], target: dict[Ref, str]) -> Iterator[Chapter]:
    """Every chapter of the KJV versification, as its verse slots with cleaned text on both sides."""
    for testament in ("ot", "nt"):
        for _, book, _, chapter_lengths in canons["kjv"][testament]:
            for chapter, n_verses in enumerate(chapter_lengths, start=1):
                refs = [(book, chapter, verse) for verse in range(1, n_verses + 1)]
                yield [(r, clean_osis(source.get(r, "")), clean_osis(target.get(r, ""))) for r in refs]


def _capital_runs(text: str) -> Iterator[list[re.Match]]:
    """Runs of consecutive all-capital words, separated by whitespace only."""
    run: list[re.Match] = []
    for word in _WORD.finditer(text):
        capital = word.group().isupper()
        if capital and run and not text[run[-1].end() : word.start()].strip():
            run.append(word)
            continue
        if run:
            yield run
        run = [word] if capital else []
    if run:
        yield run


def lower_drop_cap(text: str) -> str:
    """Lower-case the chapter's first word(s) printed in capitals: "EN el principio" -> "En el principio".

    The run is the first run of all-capital words with a word of two or more letters: "Y ACONTECIÓ"
    -> "Y aconteció". A run followed by "." is a heading ("ALEPH." in Psalm 119) and is kept.
    """
    for run in _capital_runs(text):
        start, stop = run[0].start(), run[-1].end()
        if any(len(w.group()) > 1 for w in run) and text[stop : stop + 1] != ".":
            return text[: start + 1] + text[start + 1 : stop].lower() + text[stop:]
    return text


def _deviations(chapter: Chapter, median: float) -> list[float]:
    return [math.log(len(s) / len(t)) - median for _, s, t in chapter if s and t]


def _has_shift(deviations: list[float]) -> bool:
    """A run of SHIFT_RUN+ verses far off the median ratio, some too long and some too short."""
    run: list[float] = []
    for d in [*deviations, 0.0]:
        if abs(d) > SHIFT_DEVIATION:
            run.append(d)
            continue
        if len(run) >= SHIFT_RUN and min(run) < 0 < max(run):
            return True
        run = []
    return False


def aligned_chapters(chapters: list[Chapter]) -> tuple[list[Chapter], dict[str, int]]:
    """The chapters that pass the alignment checks, and how many chapters each check dropped."""
    median = statistics.median(d for ch in chapters for d in _deviations(ch, 0.0))
    kept, dropped = [], {"empty_source_verse": 0, "after_empty_end": 0, "length_ratio": 0, "shifted": 0}
    previous_ends_empty = False
    for chapter in chapters:
        first_of_book = chapter[0][0][1] == 1
        deviations = _deviations(chapter, median)
        if any(not s for _, s, _ in chapter):
            reason = "empty_source_verse"
        elif previous_ends_empty and not first_of_book:
            reason = "after_empty_end"
        elif sum(map(abs, deviations)) / max(1, len(deviations)) > MAX_MEAN_DEVIATION:
            reason = "length_ratio"
        elif _has_shift(deviations):
            reason = "shifted"
        else:
            reason = None
        previous_ends_empty = not chapter[-1][1]
        if reason:
            dropped[reason] += 1
        else:
            kept.append(chapter)
    return kept, dropped


def _split_by_book(chapters: list[Chapter]) -> dict[str, list[tuple[str, str]]]:
    splits: dict[str, list[tuple[str, str]]] = {"train": [], "valid": [], "test": []}
    for chapter in chapters:
        book = chapter[0][0][0]
        split = "valid" if book in DEV_BOOKS else "test" if book in TEST_BOOKS else "train"
        for i, (_, source, target) in enumerate(chapter):
            if source and target:  # WEB leaves a few verses out (e.g. Acts 8:37)
                splits[split].append((lower_drop_cap(source) if i == 0 else source, target))
    return remove_train_overlap(splits)


def load_bible(target: str = "kjv") -> dict[str, list[tuple[str, str]]]:
    """Verse pairs (Spanish, English) split into train / valid / test by whole books."""
    source_verses = read_module(*SOURCE)
    target_verses = read_module(*TARGETS[target])
    chapters, _ = aligned_chapters(list(_chapters(source_verses, target_verses)))
    return _split_by_book(chapters)
