"""Images as sequences: non-overlapping patches and their 2-D positions.

A Vision Transformer (Dosovitskiy et al., 2021, "An Image is Worth 16x16 Words") reads an image
as a sequence of flattened P x P patches in raster order, so the encoder of section 3.1 sees a
sentence of grid_h * grid_w "words". The 2-D sinusoidal encoding gives half of the d_model
channels to the patch's row and half to its column, each exactly the encoding of section 3.5.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.errors import AiaynError
from aiayn.model.embedding import sinusoidal_encoding


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """images (batch, channels, height, width) -> patches (batch, n_patches, patch_size^2 * channels).

    Patches run in raster order (row by row); each is flattened as (row, column, channel).
    """
    b, c, h, w = images.shape
    p = patch_size
    if h % p or w % p:
        raise AiaynError(f"a {h}x{w} image does not split into {p}x{p} patches")
    x = images.reshape(b, c, h // p, p, w // p, p)  # (batch, c, grid_h, p, grid_w, p)
    x = x.permute(0, 2, 4, 3, 5, 1)  # (batch, grid_h, grid_w, p, p, c)
    return x.reshape(b, (h // p) * (w // p), p * p * c)


def unpatchify(patches: Tensor, patch_size: int, grid_h: int, channels: int = 1) -> Tensor:
    """The inverse of `patchify`: (batch, n_patches, p^2 * channels) -> (batch, channels, H, W)."""
    b, n, _ = patches.shape
    p, grid_w = patch_size, n // grid_h
    x = patches.reshape(b, grid_h, grid_w, p, p, channels)
    x = x.permute(0, 5, 1, 3, 2, 4)  # (batch, c, grid_h, p, grid_w, p)
    return x.reshape(b, channels, grid_h * p, grid_w * p)


def sinusoidal_2d(grid_h: int, grid_w: int, d_model: int) -> Tensor:
    """(grid_h * grid_w, d_model) float64: [encoding of the row | encoding of the column], each
    the section-3.5 encoding (sin on even, cos on odd channels) with d_model / 2 channels."""
    if d_model % 4:
        raise AiaynError(f"2-D sinusoidal positions need d_model divisible by 4, got {d_model}")
    rows = torch.arange(grid_h).repeat_interleave(grid_w)  # (n,) 0 0 0 1 1 1 ...
    cols = torch.arange(grid_w).repeat(grid_h)  # (n,) 0 1 2 0 1 2 ...
    half = d_model // 2
    return torch.cat([sinusoidal_encoding(rows, half), sinusoidal_encoding(cols, half)], dim=-1)
