"""Fixtures for the data tests: the built-in corpora (loaded once per session) and small corpora."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from aiayn.data.builtin import load_builtin
from aiayn.data.builtin.libreoffice import HELP_ROOT
from aiayn.data.builtin.sword import SWORD_ROOT

WORDS = tuple(
    [
        "the",
        "a",
        "of",
        "to",
        "and",
        "in",
        "that",
        "is",
        "for",
        "it",
        "with",
        "as",
        "was",
        "on",
        "be",
        "at",
        "by",
        "this",
        "had",
        "not",
        "are",
        "but",
        "from",
        "or",
        "have",
        "an",
        "they",
        "which",
        "one",
        "you",
        "were",
        "all",
        "we",
        "when",
        "there",
        "can",
        "been",
        "has",
        "more",
        "if",
        "will",
        "would",
        "about",
        "so",
        "what",
        "their",
        "said",
        "each",
        "she",
        "do",
        "how",
        "up",
        "out",
        "them",
        "then",
        "many",
        "some",
        "time",
        "these",
        "two",
        "may",
        "into",
        "could",
        "people",
        "other",
        "than",
        "first",
        "water",
        "long",
        "day",
        "did",
        "get",
        "come",
        "made",
        "over",
        "sound",
        "most",
        "number",
        "now",
        "find",
        "know",
        "place",
        "year",
        "back",
        "give",
        "good",
    ]
)


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))


@pytest.fixture
def write_corpus(tmp_path):
    """write_corpus(n, seed=0, names=("corpus.es", "corpus.en")) -> (src, tgt): n synthetic pairs."""

    def write(
        n: int, seed: int = 0, names: tuple[str, str] = ("corpus.es", "corpus.en")
    ) -> tuple[Path, Path]:
        rng = random.Random(seed)
        pairs = [(_sentence(rng), _sentence(rng)) for _ in range(n)]
        src, tgt = tmp_path / names[0], tmp_path / names[1]
        src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
        tgt.write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
        return src, tgt

    return write


@pytest.fixture(scope="session")
def bible():
    if not SWORD_ROOT.is_dir():
        pytest.skip(f"{SWORD_ROOT} missing: run `make deb`")
    return load_builtin("bible-es-en")


@pytest.fixture(scope="session")
def libreoffice():
    if not (HELP_ROOT / "de").is_dir():
        pytest.skip(f"{HELP_ROOT}/de missing: run `make deb`")
    return load_builtin("libreoffice-en-de")


@pytest.fixture(scope="session")
def bible_data_dir(tmp_path_factory):
    """`prepare --corpus bible-es-en` once per session."""
    if not SWORD_ROOT.is_dir():
        pytest.skip(f"{SWORD_ROOT} missing: run `make deb`")
    from aiayn.data.prepare import prepare

    return prepare(tmp_path_factory.mktemp("bible") / "data", "bible-es-en", progress=False)
