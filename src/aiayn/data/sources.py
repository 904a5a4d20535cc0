"""What `aiayn prepare` reads (its corpus: a built-in corpus's name, or a user's `SplitFiles`) and the
`Filters` it applies to the train pairs.

    prepare(out, "bible-es-en")
    files = SplitFiles(PairFiles("c.es", "c.en"), test=PairFiles(tsv="test.tsv"))  # valid: split off
    prepare(out, files, filters=Filters(max_len=100, train_limit=10_000), seed=1)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from aiayn.errors import AiaynError

DEFAULT_CORPUS = "bible-es-en"
SYNTHETIC_TREES = "synthetic-trees"  # built in too, but parse trees: prepared by aiayn.parse (section 6.3)


@dataclass(frozen=True)
class PairFiles:
    """One split of a user's parallel text: `src` and `tgt` files aligned line by line, or one `tsv`."""

    src: Path | None = None
    tgt: Path | None = None
    tsv: Path | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                object.__setattr__(self, f.name, Path(value))

    @property
    def given(self) -> bool:
        return any(getattr(self, f.name) is not None for f in fields(self))

    def files(self, option: str) -> dict[str, Path] | None:
        """{"src", "tgt"} or {"tsv"} (None if nothing is given); `option` prefixes the options named in
        the error for any other combination ("", "valid-", "test-")."""
        if not self.given:
            return None
        if self.tsv is not None and self.src is None and self.tgt is None:
            return {"tsv": self.tsv}
        if self.tsv is None and self.src is not None and self.tgt is not None:
            return {"src": self.src, "tgt": self.tgt}
        raise AiaynError(f"give both --{option}src and --{option}tgt, or --{option}tsv alone")


@dataclass(frozen=True)
class SplitFiles:
    """A user's corpus: the `train` files, and `valid` and `test` ones (each split off train, with
    prepare's seed, when not given)."""

    train: PairFiles = PairFiles()
    valid: PairFiles = PairFiles()
    test: PairFiles = PairFiles()

    @property
    def given(self) -> bool:
        return self.train.given or self.valid.given or self.test.given

    def inputs(self) -> dict[str, dict[str, Path] | None]:
        """The files of each split, checked: {split: {"src", "tgt"} or {"tsv"}, or None for valid/test}."""
        train = self.train.files("")
        if train is None:
            raise AiaynError("give a corpus: --corpus NAME, --src FILE --tgt FILE, or --tsv FILE")
        return {"train": train, "valid": self.valid.files("valid-"), "test": self.test.files("test-")}


def choose_corpus(corpus: str | None, files: SplitFiles) -> str | SplitFiles:
    """prepare's corpus from `--corpus` and the user's files: one of them, or DEFAULT_CORPUS if neither."""
    if corpus is not None and files.given:
        raise AiaynError("give exactly one corpus: --corpus NAME, or your own files (--src/--tgt or --tsv)")
    return files if files.given else corpus or DEFAULT_CORPUS


@dataclass(frozen=True)
class Filters:
    """Which train pairs prepare keeps: at most `max_len` tokens a side, a length ratio of at most
    `max_ratio`, and with `train_limit`, a seeded sample of that many (drawn before the length filters).
    Valid and test pairs are never dropped by these; those over max_len stay out of the dev-loss shards."""

    max_len: int = 250
    max_ratio: float = 9.0
    train_limit: int | None = None

    def describe(self) -> dict[str, Any]:
        """meta.json's "filters" entry."""
        return {
            "max_len": self.max_len,
            "max_ratio": self.max_ratio,
            "length_filters_apply_to": ["train"],
            "train_limit": self.train_limit,
        }
