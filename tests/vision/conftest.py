"""A synthetic image task that a tiny ViT learns in seconds, and a one-thread fixture: tiny
tensors gain nothing from a second thread, and on a busy machine they lose a lot to it."""

import numpy as np
import pytest
import torch

from aiayn.vision.data import ImageSplits


def quadrant_images(n: int, seed: int, size: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Noise images (n, size, size) uint8 with one bright quadrant; the label is which (0-3)."""
    rng = np.random.default_rng(seed)
    images = (rng.random((n, size, size)) * 100).astype(np.uint8)
    labels = rng.integers(0, 4, n)
    half = size // 2
    for image, label in zip(images, labels, strict=True):
        r, c = divmod(int(label), 2)
        image[r * half : (r + 1) * half, c * half : (c + 1) * half] += 120
    return images, labels.astype(np.int64)


@pytest.fixture
def quadrant_splits() -> ImageSplits:
    splits = quadrant_images(1024, 1), quadrant_images(128, 2), quadrant_images(256, 3)
    return ImageSplits(*splits, classes=("NW", "NE", "SW", "SE"))


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
