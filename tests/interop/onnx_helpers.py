"""What the ONNX tests share: the toy task's held-out sources, and texts through the export's
tokenizer.json (fixtures `toy_onnx_dir` and `toy_onnx` in tests/interop/conftest.py)."""

from __future__ import annotations

import json

import torch

from toy_translation import toy_pairs

TRAINING = {src for src, _ in toy_pairs(4096)}  # what build_toy_model_dir trains on
HELD_OUT = [src for src, _ in toy_pairs(80, seed=11) if src not in TRAINING][:40]


def export_ids(onnx_dir, texts) -> torch.Tensor:
    """The texts through tokenizer.json, right-padded with the export's <pad>."""
    import tokenizers

    tokenizer = tokenizers.Tokenizer.from_file(str(onnx_dir / "tokenizer.json"))
    rows = [e.ids for e in tokenizer.encode_batch(texts)]
    pad = json.loads((onnx_dir / "config.json").read_text())["pad_token_id"]
    src = torch.full((len(rows), max(map(len, rows))), pad)
    for i, row in enumerate(rows):
        src[i, : len(row)] = torch.tensor(row)
    return src
