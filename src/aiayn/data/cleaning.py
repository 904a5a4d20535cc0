"""Cleaning the training pairs in `aiayn prepare` (`--clean`, or a recipe's `clean:`), the rules that
web-crawled corpora need (OpusCleaner's and Mozilla's translations pipeline's filters):

    duplicates       the same pair again (after whitespace is collapsed): the first one kept
    near_duplicates  the same pair again once case, punctuation and spaces are ignored
    copies           the target is the source (case and spaces ignored): nothing to learn
                     but copying
    language         the source is not in src_lang, or the target not in tgt_lang, by
                     py3langid's identifier (its model ships inside the wheel); lines with
                     fewer than `min_chars` letters are not judged (too short to tell)

Rules run in that order and a pair is counted under the first that removes it. Only the train split
is cleaned (BLEU scores valid and test whole); the length and ratio limits stay prepare's `Filters`.
Nothing is dropped silently: DATA/cleaning/reasons.npy gives every staged train pair's fate (0 kept,
else the rule's number in RULES, from 1), and DATA/cleaning/RULE.tsv holds the first `sample` pairs
each rule removed (source name, pair number within that source, source text, target text). The
decisions need 17 bytes a pair (two 8-byte hashes and a flag), read in one pass over the staged text.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from aiayn.errors import AiaynError

RULES = ("duplicates", "near_duplicates", "copies", "language")
RULE_REASONS = {
    "duplicates": "the same pair occurs earlier in the train text (whitespace collapsed)",
    "near_duplicates": "the same pair occurs earlier once case, punctuation and spaces are ignored",
    "copies": "the target is the source (case and spaces ignored)",
    "language": "the source or the target is not in its language (py3langid)",
}
CLEANING_DIR = "cleaning"
TAG = re.compile(r"^>>[A-Za-z0-9_-]+<< ")  # a target-language tag (aiayn.data.recipe)
REASONS_FILE = "reasons.npy"


@dataclass(frozen=True)
class Cleaning:
    """Which rules run, the shortest line (in letters) that language identification judges, and how
    many removed pairs of each rule are written as a sample."""

    rules: tuple[str, ...] = RULES
    min_chars: int = 20
    sample: int = 100

    def __post_init__(self) -> None:
        unknown = [r for r in self.rules if r not in RULES]
        if unknown:
            raise AiaynError(f"unknown cleaning rule {unknown[0]!r} (rules: {', '.join(RULES)})")
        if not self.rules:
            raise AiaynError("give at least one cleaning rule, or no cleaning")
        for name in ("min_chars", "sample"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise AiaynError(f"{name} must be a whole number, 0 or more, got {value!r}")

    @classmethod
    def parse(cls, value: Any) -> Cleaning | None:
        """A recipe's `clean:` value: absent/false (none), true (every rule), a list of rules, or a
        mapping {rules: [...], min_chars: N, sample: N}."""
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, list) and all(isinstance(r, str) for r in value):
            return cls(rules=tuple(value))
        if isinstance(value, dict) and set(value) <= {"rules", "min_chars", "sample"}:
            rules = value.get("rules", list(RULES))
            if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
                raise AiaynError(f"rules must be a list of rule names, got {rules!r}")
            return cls(tuple(rules), value.get("min_chars", cls.min_chars), value.get("sample", cls.sample))
        raise AiaynError(
            f"must be true, a list of rules ({', '.join(RULES)}) or a mapping of rules, min_chars, sample; "
            f"got {value!r}"
        )

    def describe(self) -> dict[str, Any]:
        return {"rules": list(self.rules), "min_chars": self.min_chars, "sample": self.sample}


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def letters(text: str) -> str:
    """The letters and digits of `text`, case-folded and NFKC-normalised: what near duplicates compare."""
    return "".join(c for c in unicodedata.normalize("NFKC", text).casefold() if c.isalnum())


def _folded(text: str) -> str:
    return " ".join(text.casefold().split())


class LanguageCheck:
    """Whether a line is in the expected language, by py3langid (imported only when asked for)."""

    def __init__(self, src_lang: str, tgt_lang: str | Sequence[str], min_chars: int) -> None:
        """`tgt_lang`: one language, or one per source of a recipe (`wrong`'s `source_index`)."""
        try:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier
        except ImportError:
            raise AiaynError(
                "the language rule needs the py3langid package (pip install py3langid)"
            ) from None
        self.identifier = LanguageIdentifier.from_model_file(MODEL_FILE)
        known = set(self.identifier.nb_classes)
        targets = [tgt_lang] if isinstance(tgt_lang, str) else list(tgt_lang)
        self.src = self._code(src_lang, known, "src_lang")
        self.tgt = [self._code(t, known, "tgt_lang") for t in targets]
        self.min_chars = min_chars

    @staticmethod
    def _code(code: str, known: set[str], key: str) -> str:
        base = code.split("-")[0].split("_")[0].lower()
        if base not in known:
            raise AiaynError(
                f"the language rule cannot identify {key}={code!r}: not a language py3langid knows "
                "(set src_lang/tgt_lang to ISO 639-1 codes such as 'en', or leave the rule out)"
            )
        return base

    @property
    def expected(self) -> list[str]:
        """[source language, target language(s)...] as the identifier names them."""
        return [self.src, *self.tgt]

    def wrong(self, source: str, target: str, source_index: int = 0) -> bool:
        """True if either side, long enough to judge, is identified as another language (a leading
        target-language tag, `>>de<< `, is not part of the source's text)."""
        source = TAG.sub("", source, count=1)
        target_language = self.tgt[source_index if len(self.tgt) > 1 else 0]
        for text, expected in ((source, self.src), (target, target_language)):
            if (
                sum(c.isalpha() for c in text) >= self.min_chars
                and self.identifier.classify(text)[0] != expected
            ):
                return True
        return False


def _keys(pairs: Iterator[tuple[str, str]], n: int, rules, check: LanguageCheck | None, progress, corpus):
    """(exact hashes, near hashes, flags) of every pair: flags bit 0 a copy, bit 1 the wrong language."""
    exact, near = np.zeros(n, dtype=np.uint64), np.zeros(n, dtype=np.uint64)
    flags = np.zeros(n, dtype=np.uint8)
    for i, (source, target) in enumerate(
        tqdm(pairs, total=n, desc="clean", unit=" pairs", disable=not progress)
    ):
        exact[i] = _hash(source + "\t" + target)
        source = TAG.sub("", source, count=1)  # a copy or near duplicate whatever its target tag
        if "near_duplicates" in rules:
            a, b = letters(source), letters(target)
            near[i] = _hash((a or _folded(source)) + "\t" + (b or _folded(target)))
        if "copies" in rules and _folded(source) == _folded(target):
            flags[i] |= 1
        if check is not None and check.wrong(source, target, 0 if corpus is None else int(corpus[i])):
            flags[i] |= 2
    return exact, near, flags


def _repeats(keys: np.ndarray) -> np.ndarray:
    """(n,) bool: True where the key occurred at a lower index."""
    first = np.zeros(len(keys), dtype=bool)
    first[np.unique(keys, return_index=True)[1]] = True
    return ~first


def decide(
    pairs: Iterator[tuple[str, str]], n: int, cleaning: Cleaning, check, progress=False, corpus=None
) -> np.ndarray:
    """(n,) uint8: 0 for a kept pair, else 1 + the index in RULES of the first rule that removes it.
    `corpus` (n,): each pair's source, for a check with a target language per source."""
    exact, near, flags = _keys(pairs, n, cleaning.rules, check, progress, corpus)
    fired = {
        "duplicates": _repeats(exact),
        "near_duplicates": _repeats(near),
        "copies": (flags & 1).astype(bool),
        "language": (flags & 2).astype(bool),
    }
    reasons = np.zeros(n, dtype=np.uint8)
    for rule in reversed(RULES):  # the first rule in RULES order wins
        if rule in cleaning.rules:
            reasons[fired[rule]] = RULES.index(rule) + 1
    return reasons


def write_samples(
    out: Path,
    reasons: np.ndarray,
    pairs: Iterator[tuple[str, str]],
    names: list[str],
    corpus: np.ndarray,
    sample: int,
) -> None:
    """OUT/RULE.tsv: the first `sample` pairs each rule removed, with their source and number in it."""
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / REASONS_FILE, reasons)
    files = {r: open(out / f"{RULES[r - 1]}.tsv", "w", encoding="utf-8") for r in set(reasons.tolist()) - {0}}  # noqa: SIM115
    written = dict.fromkeys(files, 0)
    starts = np.concatenate([[0], np.cumsum(np.bincount(corpus, minlength=len(names)))])
    try:
        for i, (source, target) in enumerate(pairs):
            r = int(reasons[i])
            if r and written[r] < sample:
                c = int(corpus[i])
                files[r].write(f"{names[c]}\t{i - starts[c] + 1}\t{source}\t{target}\n")
                written[r] += 1
            if all(w >= sample for w in written.values()):
                break
    finally:
        for f in files.values():
            f.close()


def per_source(reasons: np.ndarray, corpus: np.ndarray, names: list[str]) -> dict[str, dict[str, int]]:
    """{source name: {rule: pairs removed}} for the rules that ran."""
    counts = {}
    for c, name in enumerate(names):
        mine = reasons[corpus == c]
        counts[name] = {rule: int((mine == i + 1).sum()) for i, rule in enumerate(RULES)}
    return counts
