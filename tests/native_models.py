"""What the tests of the native step share (tests/runtime): the skip where no C++ compiler is
installed or AIAYN_NATIVE=0, the model variants the C++ must follow, and tiny random models and
source batches."""

from __future__ import annotations

import os

import pytest
import torch

from aiayn.config import ModelConfig
from aiayn.model.transformer import Transformer
from aiayn.runtime import native_build

needs_native = pytest.mark.skipif(
    native_build._compiler() is None or os.environ.get(native_build.ENV, "").strip() == "0",
    reason="no C++ compiler, or AIAYN_NATIVE=0",
)

VARIANTS = {
    "paper": dict(),
    "pre-norm, gelu, d_k != d_v": dict(norm_first=True, activation="gelu", d_k=12, d_v=20),
    "post-norm with a final norm": dict(final_norm=True),
    "pre-norm without one": dict(norm_first=True, final_norm=False),
    "swish, own output matrix and bias": dict(
        activation="swish", tie_embeddings="none", final_logits_bias=True
    ),
}


def model_of(**overrides) -> Transformer:
    """A 2-layer Transformer (vocabulary 96, d_model 48) with `overrides`, in eval mode."""
    config = ModelConfig(vocab_size=96, d_model=48, d_ff=80, n_heads=4, n_layers=2, **overrides)
    model = Transformer(config).eval()
    with torch.no_grad():  # biases and norms away from their initial 0 and 1, so they are tested
        for name, p in model.named_parameters():
            if "bias" in name or "norm" in name:
                p.add_(torch.randn_like(p) * 0.3)
    return model


def sources(n: int, pad_id: int) -> torch.Tensor:
    """(n, 9) source ids, the last row padded after 5 (the cross-attention mask)."""
    src = torch.randint(4, 90, (n, 9))
    src[-1, 5:] = pad_id
    return src
