"""tokenizer.json for an export: the SentencePiece model in the `tokenizers` JSON format.

transformers.js (and the Python `tokenizers` library) read a tokenizer from tokenizer.json, not
from SentencePiece's .spm files, so `export-onnx` writes one from source.spm and vocab.json (the
export's ids, OPUS-MT's layout). SentencePiece's steps map one to one: its normalizer (the
precompiled NFKC map, runs of spaces as one, no leading or trailing space), "▁" before every word
(Metaspace), then the model: a unigram model keeps each piece's log-probability as its score; a
BPE model becomes merge rules, the pair (a, b) ranked by the score of the piece a + b, which is
the order SentencePiece merges in. An EOS is appended, as aiayn and MarianTokenizer do.

Pieces of vocab.json that source.spm lacks (a Marian model's target-only pieces) get a score below
every source piece, so that source text is split into source pieces as MarianTokenizer splits it.
"""

from __future__ import annotations

import base64
from typing import Any

from sentencepiece import sentencepiece_model_pb2 as spm_pb2

SPACE = "\u2581"  # SentencePiece's word boundary
_UNIGRAM, _BPE = 1, 2  # TrainerSpec.model_type


def _special(piece: str, index: int) -> dict[str, Any]:
    return {"id": index, "content": piece, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}  # fmt: skip


def _bpe_merges(scores: dict[str, float], vocab: dict[str, int]) -> list[list[str]]:
    """Every split (a, b) of a piece into two pieces, ordered as SentencePiece merges: by the score of
    a + b (highest first), then by the ids of a and b."""
    ranked = []
    for piece, score in scores.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in vocab and right in vocab:
                ranked.append((-score, vocab[left], vocab[right], left, right))
    return [[left, right] for *_, left, right in sorted(ranked)]


def _normalizer(proto: spm_pb2.ModelProto) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    charsmap = proto.normalizer_spec.precompiled_charsmap
    if charsmap:
        steps.append({"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()})
    if proto.normalizer_spec.remove_extra_whitespaces:
        steps.append({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})
        steps.append({"type": "Strip", "strip_left": True, "strip_right": True})
    return {"type": "Sequence", "normalizers": steps}


def tokenizer_json(spm_bytes: bytes, vocab: dict[str, int], special: dict[str, str]) -> dict[str, Any]:
    """The tokenizer.json of a SentencePiece model (source.spm's bytes) with the ids of `vocab`.

    `special`: the pieces named "eos", "unk" and "pad" (each in `vocab`).
    """
    proto = spm_pb2.ModelProto()
    proto.ParseFromString(spm_bytes)
    normal = (spm_pb2.ModelProto.SentencePiece.NORMAL, spm_pb2.ModelProto.SentencePiece.USER_DEFINED)
    scores = {p.piece: p.score for p in proto.pieces if p.type in normal and p.piece in vocab}
    floor = min(scores.values(), default=0.0) - 10.0  # below every source piece
    eos, unk = special["eos"], special["unk"]
    if proto.trainer_spec.model_type == _BPE:
        model = {"type": "BPE", "dropout": None, "unk_token": unk, "continuing_subword_prefix": None,
                 "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": False,
                 "ignore_merges": False, "vocab": vocab, "merges": _bpe_merges(scores, vocab)}  # fmt: skip
    elif proto.trainer_spec.model_type == _UNIGRAM:
        ranked = [
            [p, scores.get(p, 0.0 if p in special.values() else floor)] for p in sorted(vocab, key=vocab.get)
        ]
        model = {"type": "Unigram", "unk_id": vocab[unk], "byte_fallback": False, "vocab": ranked}
    else:
        raise ValueError(f"SentencePiece model type {proto.trainer_spec.model_type} (only unigram and BPE)")
    metaspace = {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": "always", "split": True}
    specials = sorted({vocab[p]: p for p in special.values()}.items())
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [_special(piece, index) for index, piece in specials],
        "normalizer": _normalizer(proto),
        "pre_tokenizer": metaspace,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": eos, "type_id": 0}}],
            "pair": [
                {"Sequence": {"id": "A", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 0}},
                {"SpecialToken": {"id": eos, "type_id": 0}},
            ],  # fmt: skip
            "special_tokens": {eos: {"id": eos, "ids": [vocab[eos]], "tokens": [eos]}},
        },
        "decoder": metaspace,
        "model": model,
    }
