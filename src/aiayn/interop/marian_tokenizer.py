"""The tokenizer of an OPUS-MT / Hugging Face Marian model, with Marian's own token ids.

A Marian directory holds two SentencePiece models (source.spm, target.spm) whose piece ids are
*not* the model's ids: the ids come from vocab.json (piece -> id; one table shared by source and
target, or a second target_vocab.json when the vocabularies are separate). Encoding is what
`transformers.MarianTokenizer` does: an optional leading language code such as ">>fr<<" is kept
as one token, the rest is cut into pieces by the source model, and each piece is looked up in the
vocabulary (unknown pieces -> <unk>). As with aiayn's own `Tokenizer`, the caller appends EOS.
"""

from __future__ import annotations

import json
from pathlib import Path

import sentencepiece as spm

from aiayn.errors import AiaynError
from aiayn.safe_io import resolve_inside

SPIECE_UNDERLINE = "\u2581"


def read_vocab(path: str | Path) -> dict[str, int]:
    """vocab.json -> {piece: id}, with a clear error for a missing or malformed file."""
    path = Path(path)
    if not path.is_file():
        raise AiaynError(f"{path}: vocabulary file not found")
    try:
        vocab = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise AiaynError(f"{path}: not a JSON vocabulary: {err}") from None
    if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
        raise AiaynError(f"{path}: expected a JSON object mapping pieces to integer ids")
    return vocab


def _load_spm(path: Path) -> spm.SentencePieceProcessor:
    if not path.is_file():
        raise AiaynError(f"{path}: SentencePiece model not found")
    try:
        return spm.SentencePieceProcessor(model_file=str(path))
    except (OSError, RuntimeError) as err:
        raise AiaynError(f"{path}: not a SentencePiece model: {err}") from None


def split_language_code(text: str) -> tuple[list[str], str]:
    """'>>fr<< Bonjour' -> (['>>fr<<'], ' Bonjour'): multi-target OPUS-MT models take a code first."""
    end = text.find("<<") if text.startswith(">>") else -1
    if end == -1:
        return [], text
    return [text[: end + 2]], text[end + 2 :]


class MarianVocabTokenizer:
    """Source/target SentencePiece models plus Marian's vocabulary: the ids an OPUS-MT model expects.

    Same interface as `aiayn.data.tokenizer.Tokenizer`: `encode` (source side, no EOS), `decode`
    (target side, special ids dropped), `pieces`, `vocab_size`; plus `encode_target` and
    `target_pieces` for the target side.
    """

    def __init__(
        self,
        source_spm: str | Path,
        target_spm: str | Path,
        vocab: str | Path,
        target_vocab: str | Path | None = None,
        unk_piece: str = "<unk>",
        special_pieces: tuple[str, ...] = ("</s>", "<pad>", "<unk>"),
    ):
        self.path = Path(source_spm)
        self.source_spm, self.target_spm = _load_spm(Path(source_spm)), _load_spm(Path(target_spm))
        self.source_vocab = read_vocab(vocab)
        self.target_vocab = read_vocab(target_vocab) if target_vocab is not None else self.source_vocab
        for name, table in (("source", self.source_vocab), ("target", self.target_vocab)):
            if unk_piece not in table:
                raise AiaynError(f"{name} vocabulary has no {unk_piece!r} entry")
        self.unk_piece = unk_piece
        self.source_unk_id, self.unk_id = self.source_vocab[unk_piece], self.target_vocab[unk_piece]
        self._source_pieces = {i: p for p, i in self.source_vocab.items()}
        self._target_pieces = {i: p for p, i in self.target_vocab.items()}
        self.special_ids = {self.target_vocab[p] for p in special_pieces if p in self.target_vocab}

    @property
    def vocab_size(self) -> int:
        """Size of the target vocabulary (the model's output layer)."""
        return len(self.target_vocab)

    @property
    def src_vocab_size(self) -> int:
        return len(self.source_vocab)

    @staticmethod
    def _encode_one(text: str, sp: spm.SentencePieceProcessor, vocab: dict[str, int], unk: int) -> list[int]:
        code, rest = split_language_code(text)
        return [vocab.get(piece, unk) for piece in code + sp.encode(rest, out_type=str)]

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Source sentences -> Marian ids (no EOS), as MarianTokenizer gives for the encoder."""
        return [self._encode_one(t, self.source_spm, self.source_vocab, self.source_unk_id) for t in texts]

    def encode_target(self, texts: list[str]) -> list[list[int]]:
        """Target sentences -> Marian ids (no EOS), as MarianTokenizer(text_target=...) gives."""
        return [self._encode_one(t, self.target_spm, self.target_vocab, self.unk_id) for t in texts]

    def pieces(self, ids: list[int]) -> list[str]:
        """Source ids -> their pieces (for attention plots)."""
        return [self._source_pieces.get(int(i), self.unk_piece) for i in ids]

    def target_pieces(self, ids: list[int]) -> list[str]:
        return [self._target_pieces.get(int(i), self.unk_piece) for i in ids]

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Target ids -> text, dropping </s>, <pad> and <unk> (MarianTokenizer with skip_special_tokens)."""
        out = []
        for row in ids:
            kept = [
                self._target_pieces.get(int(i), self.unk_piece) for i in row if int(i) not in self.special_ids
            ]
            text = self.target_spm.decode_pieces(kept) if kept else ""
            out.append(text.replace(SPIECE_UNDERLINE, " ").strip())
        return out

    @classmethod
    def from_settings(cls, model_dir: str | Path, settings: dict) -> MarianVocabTokenizer:
        """From config.json's {"type": "marian", "source", "target", "vocab", "target_vocab"} entry.

        Each entry must be a plain file name inside `model_dir` (safe_io.resolve_inside).
        """
        root = Path(model_dir)
        missing = [k for k in ("source", "target", "vocab") if not settings.get(k)]
        if missing:
            raise AiaynError(f"{root}: tokenizer settings lack {', '.join(missing)}")
        paths = {
            key: resolve_inside(root, settings[key], f"{root / 'config.json'}: tokenizer.{key}")
            for key in ("source", "target", "vocab", "target_vocab")
            if settings.get(key)
        }
        return cls(paths["source"], paths["target"], paths["vocab"], paths.get("target_vocab"))
