"""Images as sequences (aiayn.vision.patches): patches in raster order, exactly invertible, and the
2-D sinusoidal positions built from section 3.5's encoding."""

import math

import pytest
import torch

from aiayn.errors import AiaynError
from aiayn.vision.patches import patchify, sinusoidal_2d, unpatchify


@pytest.mark.parametrize("patch_size", [1, 4, 7, 14, 28])
def test_patchify_round_trip_is_exact(patch_size):
    images = torch.rand(3, 2, 28, 28)
    patches = patchify(images, patch_size)
    grid = 28 // patch_size
    assert patches.shape == (3, grid * grid, patch_size * patch_size * 2)
    assert torch.equal(unpatchify(patches, patch_size, grid, channels=2), images)


def test_patches_run_in_raster_order_with_pixels_row_by_row():
    images = torch.arange(2 * 3 * 8 * 12, dtype=torch.float32).reshape(2, 3, 8, 12)
    patches = patchify(images, 4)  # a 2 x 3 grid
    for b in range(2):
        for r in range(2):
            for c in range(3):
                block = images[b, :, 4 * r : 4 * r + 4, 4 * c : 4 * c + 4]  # (channels, 4, 4)
                assert torch.equal(patches[b, 3 * r + c], block.permute(1, 2, 0).reshape(-1))


def test_patchify_rejects_an_image_that_does_not_split():
    with pytest.raises(AiaynError, match="does not split into 5x5"):
        patchify(torch.zeros(1, 1, 28, 28), 5)


def test_sinusoidal_2d_is_section_3_5_on_rows_then_columns():
    grid_h, grid_w, d = 3, 5, 16
    pe = sinusoidal_2d(grid_h, grid_w, d).numpy()
    half = d // 2
    for n in range(grid_h * grid_w):
        for half_index, pos in enumerate(divmod(n, grid_w)):  # (row, column)
            for i in range(half // 2):
                angle = pos / 10000 ** (2 * i / half)
                assert pe[n, half_index * half + 2 * i] == pytest.approx(math.sin(angle), abs=1e-12)
                assert pe[n, half_index * half + 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-12)
