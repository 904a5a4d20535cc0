"""Embeddings, the pre-softmax linear transformation (section 3.4) and positional encodings (3.5).

Token embeddings are multiplied by sqrt(d_model) (3.4). Sinusoidal encodings follow 3.5 exactly:
PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)); the
"concat" layout puts all sines first and all cosines after (tensor2tensor, Marian). They are
computed in float64 for any length (the table grows on demand; no length limit). Learned
positions are Table 3 row (E).

A decoder that starts from <pad> starts from a zero vector, as in tensor2tensor (the paper's code
shifts the embedded targets right with zeros) and Marian: `hold_row_at_zero` keeps that row zero.
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def sinusoidal_encoding(positions: Tensor, d_model: int, layout: str = "interleaved") -> Tensor:
    """positions (n,) -> (n, d_model) float64 encodings of 3.5."""
    i = torch.arange(0, d_model, 2, dtype=torch.float64, device=positions.device)  # 2i
    angles = positions.to(torch.float64)[:, None] / torch.pow(10000.0, i / d_model)  # (n, d_model/2)
    if layout == "concat":
        return torch.cat([angles.sin(), angles.cos()], dim=-1)
    pe = torch.empty(positions.numel(), d_model, dtype=torch.float64, device=positions.device)
    pe[:, 0::2] = angles.sin()
    pe[:, 1::2] = angles.cos()
    return pe


class SinusoidalPositions(nn.Module):
    """3.5: fixed encodings, cached as a table that doubles whenever a longer input arrives."""

    def __init__(self, d_model: int, layout: str = "interleaved", initial: int = 512):
        super().__init__()
        self.d_model, self.layout = d_model, layout
        self.register_buffer("table", self._build(initial, torch.device("cpu")), persistent=False)

    def _build(self, length: int, device: torch.device) -> Tensor:
        positions = torch.arange(length, device=device)
        return sinusoidal_encoding(positions, self.d_model, self.layout).float()

    def forward(self, length: int, offset: int = 0) -> Tensor:
        """Encodings of positions offset .. offset+length-1: (length, d_model)."""
        end = offset + length
        if end > self.table.size(0):
            self.table = self._build(max(end, 2 * self.table.size(0)), self.table.device)
        return self.table[offset:end]


class LearnedPositions(nn.Module):
    """Table 3 row (E): one learned vector per position, up to `max_positions`."""

    def __init__(self, max_positions: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(max_positions, d_model)
        _init_normal(self.embedding.weight, d_model**-0.5)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        end = offset + length
        if end > self.embedding.num_embeddings:
            limit = self.embedding.num_embeddings
            raise ValueError(f"position {end - 1} is beyond max_positions={limit} of learned positions")
        return self.embedding.weight[offset:end]


def _init_normal(weight: Tensor, std: float) -> None:
    """N(0, std^2) in place; a meta tensor (shapes only: `aiayn.model.io.check_fits`) is left as it
    is, since PyTorch draws on the meta device through its compiler's references, whose first use
    imports torch._dynamo (~2 s of every model load)."""
    if not weight.is_meta:
        nn.init.normal_(weight, std=std)


class TokenEmbedding(nn.Module):
    """3.4: a learned embedding multiplied by sqrt(d_model); initialised N(0, d_model^-0.5)."""

    def __init__(self, vocab_size: int, d_model: int, scale: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        _init_normal(self.weight, d_model**-0.5)
        self.scale = math.sqrt(d_model) if scale else 1.0

    def forward(self, tokens: Tensor) -> Tensor:
        """tokens (batch, len) -> (batch, len, d_model)."""
        return nn.functional.embedding(tokens, self.weight) * self.scale


class OutputLayer(nn.Module):
    """3.4's pre-softmax linear transformation: h (..., d_model) -> logits h W^T + b (..., vocab).

    W and b are the Transformer's parameters `output_weight` (with tied embeddings, the embedding
    matrix) and `output_bias`, passed in: model files name them so. It is a module so that a faster
    product can take its place from outside the model.
    """

    def forward(self, h: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        return F.linear(h, weight, bias)


def _drop_row_grad(grad: Tensor, row: int) -> Tensor:
    return grad.index_fill(0, torch.tensor([row], device=grad.device), 0.0)


def hold_row_at_zero(weight: nn.Parameter, row: int) -> None:
    """Set weight[row] to zero and keep it there in training: its gradient is always dropped.

    Like nn.Embedding's padding_idx, but the row also stays zero when the matrix is tied to the
    output layer (3.4), whose softmax would otherwise train it. An optimiser never moves a row
    whose gradient is zero (Adam's moments stay 0; weight decay scales 0).
    """
    with torch.no_grad():
        weight[row] = 0.0
    weight.register_hook(partial(_drop_row_grad, row=row))
