"""A data recipe: several corpora, each with a weight, and the cleaning rules, for `aiayn prepare
--recipe FILE.yaml` (the shape of fairseq's `--upsample-primary`, eole's per-corpus `weight` and
OpusTrainer's mixing):

    src_lang: es
    tgt_lang: en
    sources:
      - corpus: bible-es-en  # a built-in corpus (its train split), or a user's files:
        weight: 1
      - name: crawl
        src: crawl.es        # src + tgt, or tsv; relative to the recipe's folder
        tgt: crawl.en
        weight: 0.5          # each epoch draws half of its pairs (a new half each epoch)
    valid: {src: dev.es, tgt: dev.en}  # optional: else the first source's (a built-in's own
    test: {tsv: test.tsv}              #   valid/test, or split off its files with the seed)
    clean: true     # or a list of rules: duplicates, near_duplicates, copies, language, or
                    # {rules: [...], score: {forward: DIR, reverse: DIR, drop: 0.1}} (the score rule)

Many target languages in one model (`tags: true`): each source's target language (a built-in
corpus's own, or the entry's `tgt_lang`) is written before each of its sources as `>>de<<`, the
form OPUS-MT's multilingual models read; every source then gives valid and test pairs too (its
built-in held-out splits, or drawn from its files), tagged alike, so that each language is scored.

Weights say how often an epoch takes each corpus's pairs (`aiayn.data.mixing`): 2 takes every pair
twice, 0.5 a seeded half; the share of corpus i in the training stream is w_i n_i / sum_j w_j n_j,
with n the pairs that survive prepare. Every error names the recipe file and the entry.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from aiayn.data.builtin import get_corpus
from aiayn.data.cleaning import Cleaning
from aiayn.data.sources import PairFiles
from aiayn.errors import AiaynError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SOURCE_KEYS = {"name", "corpus", "src", "tgt", "tsv", "weight", "tgt_lang"}
_KEYS = {"src_lang", "tgt_lang", "sources", "valid", "test", "clean", "tags"}
_LANGUAGE = re.compile(r"[a-z]{2,3}([_-][A-Za-z]{2,4})?")


@dataclass(frozen=True)
class Source:
    """One corpus of a recipe: a built-in corpus's name or a user's files, and its weight."""

    name: str
    weight: float = 1.0
    corpus: str | None = None
    files: PairFiles = PairFiles()
    tgt_lang: str | None = None  # its target language, when it differs from the recipe's

    def describe(self) -> dict[str, Any]:
        """meta.json's entry for this source (files as absolute paths)."""
        where = (
            {"corpus": self.corpus} if self.corpus else {k: str(v.resolve()) for k, v in _given(self.files)}
        )
        return {"name": self.name, "weight": self.weight, **where, "tgt_lang": self.tgt_lang}


@dataclass(frozen=True)
class Recipe:
    """Several weighted sources, optional valid/test files, the cleaning rules, and the languages."""

    sources: tuple[Source, ...]
    valid: PairFiles = PairFiles()
    test: PairFiles = PairFiles()
    clean: Cleaning | None = None
    src_lang: str | None = None
    tgt_lang: str | None = None
    path: Path | None = None
    tags: bool = False

    def target_language(self, source: Source) -> str | None:
        """The target language of `source`: its own, its built-in corpus's, or the recipe's."""
        if source.tgt_lang:
            return source.tgt_lang
        return get_corpus(source.corpus).tgt_lang if source.corpus else self.tgt_lang

    def tag(self, source: Source) -> str:
        """What starts each of `source`'s sentences: `>>LANG<< ` with tags, else nothing."""
        return f">>{self.target_language(source)}<< " if self.tags else ""

    def target_languages(self) -> list[str]:
        """The target languages of the sources, in order, each once."""
        return list(dict.fromkeys(filter(None, map(self.target_language, self.sources))))

    @property
    def weighted(self) -> bool:
        """Whether any weight differs from 1 (else training reads every pair once an epoch, as without)."""
        return any(s.weight != 1.0 for s in self.sources)

    def describe(self) -> dict[str, Any]:
        """meta.json's "recipe" entry."""
        held = {
            split: {k: str(v.resolve()) for k, v in _given(getattr(self, split))}
            for split in ("valid", "test")
        }
        return {
            "file": str(self.path.resolve()) if self.path else None,
            "sources": [s.describe() for s in self.sources],
            **{split: files or None for split, files in held.items()},
            "clean": self.clean.describe() if self.clean else None,
            "tags": self.tags,
        }


def _given(files: PairFiles) -> list[tuple[str, Path]]:
    return [(k, v) for k, v in (("src", files.src), ("tgt", files.tgt), ("tsv", files.tsv)) if v is not None]


def _fail(path: Path, where: str, message: str) -> AiaynError:
    return AiaynError(f"{path}: {where}: {message}")


def _weight(path: Path, where: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise _fail(path, f"{where}.weight", f"must be a positive number, got {value!r}")
    return float(value)


def _files(path: Path, where: str, entry: dict[str, Any]) -> PairFiles:
    """src/tgt/tsv of an entry, relative to the recipe's folder; one of the two shapes."""
    given = {k: entry[k] for k in ("src", "tgt", "tsv") if k in entry}
    for key, value in given.items():
        if not isinstance(value, str) or not value:
            raise _fail(path, f"{where}.{key}", f"must be a file name, got {value!r}")
    if set(given) not in ({"src", "tgt"}, {"tsv"}):
        raise _fail(path, where, "give src and tgt files, or one tsv file")
    return PairFiles(**{k: path.parent / v for k, v in given.items()})


def _source(path: Path, index: int, entry: Any) -> Source:
    where = f"sources[{index}]"
    if not isinstance(entry, dict):
        raise _fail(path, where, "must be a mapping (corpus: NAME, or src/tgt/tsv files, and a weight)")
    unknown = set(entry) - _SOURCE_KEYS
    if unknown:
        raise _fail(
            path, where, f"unknown key {sorted(unknown)[0]!r} (known: {', '.join(sorted(_SOURCE_KEYS))})"
        )
    weight = _weight(path, where, entry.get("weight", 1))
    corpus = entry.get("corpus")
    if corpus is not None:
        if set(entry) & {"src", "tgt", "tsv"}:
            raise _fail(path, where, "give a built-in corpus or files, not both")
        try:
            get_corpus(corpus)
        except AiaynError as err:
            raise _fail(path, f"{where}.corpus", str(err)) from None
        files = PairFiles()
    else:
        files = _files(path, where, entry)
    name = entry.get("name", corpus or Path((files.src or files.tsv).name).stem)
    if not isinstance(name, str) or not _NAME.match(name):
        raise _fail(path, f"{where}.name", f"must be letters, digits, '.', '_' or '-', got {name!r}")
    tgt_lang = _language(path, f"{where}.tgt_lang", entry.get("tgt_lang"))
    return Source(name=name, weight=weight, corpus=corpus, files=files, tgt_lang=tgt_lang)


def _language(path: Path, key: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _LANGUAGE.fullmatch(value):
        raise _fail(path, key, f"must be a language code such as 'en' or 'pt-BR', got {value!r}")
    return value


def load_recipe(path: str | Path) -> Recipe:
    """Read and check a recipe file: every error is one line naming the file and the entry."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise AiaynError(f"{path}: cannot read the recipe: {err.strerror or err}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise AiaynError(f"{path}: not a YAML recipe: {' '.join(str(err).split())}") from None
    if not isinstance(data, dict):
        raise AiaynError(f"{path}: a recipe is a mapping with a 'sources' list")
    unknown = set(data) - _KEYS
    if unknown:
        raise _fail(path, repr(sorted(unknown)[0]), f"unknown key (known: {', '.join(sorted(_KEYS))})")
    sources = data.get("sources")
    if not isinstance(sources, list) or not sources:
        raise _fail(path, "sources", "must be a non-empty list of corpora")
    parsed = tuple(_source(path, i, entry) for i, entry in enumerate(sources))
    names = [s.name for s in parsed]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        raise _fail(path, "sources", f"two sources are named {duplicate!r}; give each a distinct name")
    if len(parsed) > 255:
        raise _fail(path, "sources", f"at most 255 sources, got {len(parsed)}")
    held = {}
    for split in ("valid", "test"):
        entry = data.get(split)
        if entry is not None and not isinstance(entry, dict):
            raise _fail(path, split, "must be a mapping of src/tgt or tsv files")
        held[split] = _files(path, split, entry) if entry else PairFiles()
    try:
        clean = Cleaning.parse(data.get("clean"), path.parent)
    except AiaynError as err:
        raise _fail(path, "clean", str(err)) from None
    tags = data.get("tags", False)
    if not isinstance(tags, bool):
        raise _fail(path, "tags", f"must be true or false, got {tags!r}")
    recipe = Recipe(
        sources=parsed,
        tags=tags,
        clean=clean,
        src_lang=_language(path, "src_lang", data.get("src_lang")),
        tgt_lang=_language(path, "tgt_lang", data.get("tgt_lang")),
        path=path,
        **held,
    )
    if tags:
        unknown = next((s.name for s in recipe.sources if not recipe.target_language(s)), None)
        if unknown is not None:
            raise _fail(path, "tags", f"source {unknown!r} has no target language: give it a tgt_lang")
        if recipe.valid.given or recipe.test.given:
            raise _fail(path, "tags", "each source gives its own valid and test pairs: leave valid/test out")
    return recipe
