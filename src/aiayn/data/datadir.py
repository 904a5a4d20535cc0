"""A prepared data directory, read in one place: `DataDir(path)`.

    meta.json                               every count, the filters, the languages ("task": "parse")
    spm.model, spm.vocab                    the SentencePiece model
    {split}.{src,tgt}.bin, {split}.index.npz    token shards (aiayn.data.dataset)
    raw/{split}.{src,tgt}                   the text of every split (raw/{split}.tree for parse data)

`aiayn prepare` writes it (aiayn.data.prepare, aiayn.parse.prepare); train, evaluate, quickstart,
variations and the parser read it through this class. Paths need nothing on disk; `meta` reads
meta.json once and says in one line when it is missing or malformed.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiayn.errors import AiaynError
from aiayn.safe_io import plain_name

if TYPE_CHECKING:
    from aiayn.data.dataset import TokenDataset
    from aiayn.data.tokenizer import Tokenizer

META_FILE, SPM_FILE, RAW_DIR = "meta.json", "spm.model", "raw"
SPLITS = ("train", "valid", "test")


class DataDir:
    """The files of a data directory at `path`, and its meta.json (`meta`, read on first use)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"DataDir({str(self.path)!r})"

    @property
    def prepared(self) -> bool:
        """Whether meta.json, written last by prepare, is there."""
        return (self.path / META_FILE).is_file()

    @cached_property
    def meta(self) -> dict[str, Any]:
        """meta.json; an AiaynError when it is missing or not a JSON object."""
        path, again = self.path / META_FILE, "prepare the directory again with --force"
        if not path.is_file():
            raise AiaynError(
                f"{self.path}: not a prepared data directory (no meta.json); run `aiayn prepare`"
            )
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise AiaynError(f"{path}: not valid JSON ({err}); {again}") from None
        if not isinstance(meta, dict):
            raise AiaynError(f"{path}: not a JSON object; {again}")
        return meta

    def write_meta(self, meta: dict[str, Any]) -> None:
        """meta.json, the file that marks a data directory as complete (prepare writes it last)."""
        text = json.dumps(meta, indent=2, ensure_ascii=False) + "\n"
        (self.path / META_FILE).write_text(text, encoding="utf-8")
        self.__dict__.pop("meta", None)

    def counts(self) -> tuple[str, int]:
        """What `aiayn prepare` reports: "train 28,876, valid 544, ..." and how many were dropped."""
        meta = self.meta
        kept = ", ".join(f"{split} {n:,}" for split, n in meta["pairs"].items())
        return kept, sum(n for split in meta["dropped"].values() for n in split.values())

    @property
    def is_parse(self) -> bool:
        """Whether the directory holds parse data (meta.json "task": "parse")."""
        return self.meta.get("task") == "parse"

    def parse_meta(self) -> dict[str, Any]:
        """meta.json of parse data; an AiaynError for any other data."""
        if not self.is_parse:
            raise AiaynError(f'{self.path}: not parse data (meta.json has no "task": "parse")')
        return self.meta

    @property
    def spm_path(self) -> Path:
        """The SentencePiece model the data is encoded with."""
        return self.path / SPM_FILE

    def tokenizer(self) -> Tokenizer:
        from aiayn.data.tokenizer import Tokenizer

        return Tokenizer.load(self.spm_path)

    def raw(self, split: str, suffix: str) -> Path:
        """raw/{split}.{suffix}: the text of a split (suffix src, tgt, or tree for parse data); the
        split is a plain name (valid, test), so that no path leads out of the data directory."""
        return self.path / RAW_DIR / f"{plain_name(split, 'split')}.{suffix}"

    def tokens(self, split: str) -> TokenDataset:
        """The memory-mapped token shards of a split."""
        from aiayn.data.dataset import TokenDataset

        return TokenDataset(self.path, split)
