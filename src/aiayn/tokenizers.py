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
        path = resolve_inside(model_dir, settings.get("model", "spm.model"), where)
        tokenizer = Tokenizer.load(path)
        _check_fits(path, {"": tokenizer.vocab_size, "source ": tokenizer.vocab_size}, info)
        return tokenizer
    if kind == "marian":
        from aiayn.interop.marian_tokenizer import MarianVocabTokenizer

        tokenizer = MarianVocabTokenizer.from_settings(Path(model_dir), settings)
        top = {
            "source ": max(tokenizer.source_vocab.values()) + 1,
            "target ": max(tokenizer.target_vocab.values()) + 1,
        }
        _check_fits(Path(model_dir) / settings["vocab"], top, info)
        return tokenizer
    raise AiaynError(f"{Path(model_dir) / 'config.json'}: unknown tokenizer type {kind!r}")


def _check_fits(path: Path, sizes: dict[str, int], info: dict[str, Any]) -> None:
    """The tokenizer's ids against the model's vocabularies (config.json's "model"): another model's
    tokenizer would load, then fail mid-translation (an IndexError, or SentencePiece's OUT_OF_RANGE).
    `sizes`: {side: ids the tokenizer uses}, "" for one vocabulary, which must be the model's target
    vocabulary exactly (aiayn's own SentencePiece model is it); each side's ids must lie within the
    model's vocabulary of that side."""
    model = info.get("model") if isinstance(info.get("model"), dict) else {}
    target = model.get("vocab_size")
    wanted = {"": target, "target ": target, "source ": model.get("src_vocab_size") or target}
    for side, have in sizes.items():
        want = wanted[side]
        if isinstance(want, int) and (have != want if side == "" else have > want):
            raise AiaynError(
                f"{path}: the tokenizer's {side}vocabulary has {have} ids but config.json's model "
                f"has {want}; they come from different models"
            )
