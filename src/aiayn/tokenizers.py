"""Which tokenizer a model directory names, and what every tokenizer offers the translator.

A model directory's config.json says how its text becomes ids (`"tokenizer"`): aiayn's own
SentencePiece model (`aiayn.data.tokenizer`, one vocabulary for both sides, section 5.1) or an
imported OPUS-MT model's SentencePiece models with Marian's vocabulary
(`aiayn.interop.marian_tokenizer`). `load_tokenizer` is the one place that reads that entry, so
decoding (`aiayn.decode`) and interop (`aiayn.interop`) depend on this module, not on each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from aiayn.errors import AiaynError
from aiayn.safe_io import resolve_inside


class TextTokenizer(Protocol):
    """Text to ids and back; the source side and the target side may differ (Marian's)."""

    @property
    def vocab_size(self) -> int: ...

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Source-side ids of each text (no BOS or EOS)."""
        ...

    def encode_target(self, texts: list[str]) -> list[list[int]]:
        """Target-side ids of each text (prefixes, constraints)."""
        ...

    def decode(self, ids: list[list[int]]) -> list[str]:
        """The text of each target id sequence, special ids skipped."""
        ...

    def pieces(self, ids: list[int]) -> list[str]:
        """Source-side subword strings (attention axes, alignments)."""
        ...

    def target_pieces(self, ids: list[int]) -> list[str]:
        """Target-side subword strings."""
        ...


def load_tokenizer(model_dir: str | Path, info: dict[str, Any]) -> TextTokenizer:
    """The tokenizer that config.json's "tokenizer" entry (`info`) names; its files must lie in
    `model_dir` (a one-line error otherwise)."""
    settings = info.get("tokenizer") or {"type": "sentencepiece", "model": "spm.model"}
    if not isinstance(settings, dict):
        raise AiaynError(f"{Path(model_dir) / 'config.json'}: tokenizer must be an object, got {settings!r}")
    kind = settings.get("type")
    if kind == "sentencepiece":
        from aiayn.data.tokenizer import Tokenizer

        where = f"{Path(model_dir) / 'config.json'}: tokenizer.model"
        return Tokenizer.load(resolve_inside(model_dir, settings.get("model", "spm.model"), where))
    if kind == "marian":
        from aiayn.interop.marian_tokenizer import MarianVocabTokenizer

        return MarianVocabTokenizer.from_settings(Path(model_dir), settings)
    raise AiaynError(f"{Path(model_dir) / 'config.json'}: unknown tokenizer type {kind!r}")
