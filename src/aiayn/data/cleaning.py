"""Cleaning the training pairs in `aiayn prepare` (`--clean`, or a recipe's `clean:`), the rules that
web-crawled corpora need (OpusCleaner's and Mozilla's translations pipeline's filters):

    duplicates       the same pair again (after whitespace is collapsed): the first one kept
    near_duplicates  the same pair again once case, punctuation and spaces are ignored
    copies           the target is the source (case and spaces ignored): nothing to learn
                     but copying
    language         the source is not in src_lang, or the target not in tgt_lang, by
                     py3langid's identifier (its model ships inside the wheel); lines with
                     fewer than `min_chars` letters are not judged (too short to tell)
    score            (when given its models) the `drop` share of the pairs kept so far that a
                     forward and a reverse model find least likely to be translations: dual
                     conditional cross-entropy (`aiayn.data.scoring`), which catches misaligned pairs

Rules run in that order and a pair is counted under the first that removes it. Only the train split
is cleaned (BLEU scores valid and test whole); the length and ratio limits stay prepare's `Filters`.
Nothing is dropped silently: DATA/cleaning/reasons.npy gives every staged train pair's fate (0 kept,
else the rule's number in RULES, from 1), and DATA/cleaning/RULE.tsv holds the first `sample` pairs
each rule removed (source name, pair number within that source, source text, target text). The
decisions need 17 bytes a pair (two 8-byte hashes and a flag), read in one pass over the staged text;
the score rule a second pass and 4 bytes a pair (DATA/cleaning/scores.npy).
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

DEFAULT_RULES = ("duplicates", "near_duplicates", "copies", "language")  # `--clean`, `clean: true`
RULES = (*DEFAULT_RULES, "score")
RULE_REASONS = {
    "duplicates": "the same pair occurs earlier in the train text (whitespace collapsed)",
    "near_duplicates": "the same pair occurs earlier once case, punctuation and spaces are ignored",
    "copies": "the target is the source (case and spaces ignored)",
    "language": "the source or the target is not in its language (py3langid)",
    "score": "among the worst-scored by dual conditional cross-entropy (a forward and a reverse model)",
}
CLEANING_DIR = "cleaning"
TAG = re.compile(r"^>>[A-Za-z0-9_-]+<< ")  # a target-language tag (aiayn.data.recipe)
REASONS_FILE = "reasons.npy"
SCORES_FILE = "scores.npy"  # the score rule's score of every staged train pair (NaN: not scored)
DEFAULT_DROP = 0.1


@dataclass(frozen=True)
class Score:
    """The score rule's models (model directories) and the share of the scored pairs it removes."""

    forward: Path
    reverse: Path
    drop: float = DEFAULT_DROP

    def __post_init__(self) -> None:
        object.__setattr__(self, "forward", Path(self.forward))
        object.__setattr__(self, "reverse", Path(self.reverse))
        drop = self.drop
        if isinstance(drop, bool) or not isinstance(drop, int | float) or not 0 < drop < 1:
            raise AiaynError(
                f"the score rule's drop must be a share between 0 and 1 (exclusive), got {drop!r}"
            )

    @classmethod
    def parse(cls, value: Any, folder: Path) -> Score:
        """A recipe's `clean: {score: {forward: DIR, reverse: DIR, drop: 0.1}}`, paths relative to
        the recipe's `folder`."""
        if not isinstance(value, dict) or set(value) - {"forward", "reverse", "drop"}:
            raise AiaynError(f"score must be a mapping of forward, reverse and drop, got {value!r}")
        dirs = {}
        for key in ("forward", "reverse"):
            if not isinstance(value.get(key), str) or not value[key]:
                raise AiaynError(f"score.{key} must be a model directory, got {value.get(key)!r}")
            dirs[key] = folder / value[key]
        return cls(**dirs, drop=value.get("drop", DEFAULT_DROP))

    def describe(self) -> dict[str, Any]:
        """meta.json's clean.score (the model directories as absolute paths)."""
        dirs = {"forward": str(self.forward.resolve()), "reverse": str(self.reverse.resolve())}
        return {**dirs, "drop": self.drop}


@dataclass(frozen=True)
class Cleaning:
    """Which rules run, the shortest line (in letters) that language identification judges, how
    many removed pairs of each rule are written as a sample, and the score rule's models and share
    (given a `score`, the rule runs whether `rules` names it or not)."""

    rules: tuple[str, ...] = DEFAULT_RULES
    min_chars: int = 20
    sample: int = 100
    score: Score | None = None

    def __post_init__(self) -> None:
        unknown = [r for r in self.rules if r not in RULES]
        if unknown:
            raise AiaynError(f"unknown cleaning rule {unknown[0]!r} (rules: {', '.join(RULES)})")
        if self.score is not None and "score" not in self.rules:
            object.__setattr__(self, "rules", (*self.rules, "score"))
        if not self.rules:
            raise AiaynError("give at least one cleaning rule, or no cleaning")
        if "score" in self.rules and self.score is None:
            raise AiaynError(
                "the score rule needs a forward and a reverse model (--score-models FORWARD REVERSE, "
                "or clean: {score: {forward: DIR, reverse: DIR}})"
            )
        for name in ("min_chars", "sample"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise AiaynError(f"{name} must be a whole number, 0 or more, got {value!r}")

    @classmethod
    def parse(cls, value: Any, folder: Path = Path()) -> Cleaning | None:
        """A recipe's `clean:` value: absent/false (none), true (the default rules), a list of rules,
        or a mapping {rules: [...], min_chars: N, sample: N, score: {forward, reverse, drop}} (the
        score rule's model directories relative to the recipe's `folder`)."""
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, list) and all(isinstance(r, str) for r in value):
            return cls(rules=tuple(value))
        if isinstance(value, dict) and set(value) <= {"rules", "min_chars", "sample", "score"}:
            rules = value.get("rules", list(DEFAULT_RULES))
            if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
                raise AiaynError(f"rules must be a list of rule names, got {rules!r}")
            score = Score.parse(value["score"], folder) if "score" in value else None
            sizes = value.get("min_chars", cls.min_chars), value.get("sample", cls.sample)
            return cls(tuple(rules), *sizes, score)
        raise AiaynError(
            f"must be true, a list of rules ({', '.join(RULES)}) or a mapping of rules, min_chars, sample, "
            f"score; got {value!r}"
        )

    def describe(self) -> dict[str, Any]:
        score = {"score": self.score.describe()} if self.score else {}
        return {"rules": list(self.rules), "min_chars": self.min_chars, "sample": self.sample, **score}


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
    """(n,) uint8: 0 for a kept pair, else 1 + the index in RULES of the first rule that removes it,
    of every rule but score (`remove_worst` applies it to what they keep). `corpus` (n,): each pair's
    source, for a check with a target language per source."""
    exact, near, flags = _keys(pairs, n, cleaning.rules, check, progress, corpus)
    fired = {
        "duplicates": _repeats(exact),
        "near_duplicates": _repeats(near),
        "copies": (flags & 1).astype(bool),
        "language": (flags & 2).astype(bool),
    }
    reasons = np.zeros(n, dtype=np.uint8)
    for rule in reversed(DEFAULT_RULES):  # the first rule in RULES order wins
        if rule in cleaning.rules:
            reasons[fired[rule]] = RULES.index(rule) + 1
    return reasons


def remove_worst(reasons: np.ndarray, scores: np.ndarray, drop: float) -> None:
    """The score rule, last: the `drop` share of the scored pairs (those kept by the other rules,
    the others NaN in `scores` (n,)) with the highest scores get its reason in `reasons` (n,)."""
    reasons[worst(scores, drop)] = RULES.index("score") + 1


def worst(scores: np.ndarray, drop: float) -> np.ndarray:
    """(n,) bool: the round(drop * m) highest of the m scored (non-NaN) pairs; among equal scores the
    earlier pair goes first."""
    scored = np.flatnonzero(~np.isnan(scores))
    k = round(drop * len(scored))
    removed = np.zeros(len(scores), dtype=bool)
    removed[scored[np.argsort(-scores[scored], kind="stable")[:k]]] = True
    return removed


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
