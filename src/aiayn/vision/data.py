"""Fashion-MNIST from the Debian package `dataset-fashion-mnist`, read with numpy (no torchvision),
and the light augmentation of the recipe (random crop with zero padding, horizontal flip).

The package installs the four gzip'd IDX files of Xiao et al. (2017) under
/usr/share/datasets/fashion-mnist: 60,000 training and 10,000 test images of 28 x 28 grey pixels
(uint8), labels 0-9. A validation split is held out of the training images (seeded), so the test
images are only read once, at the end.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from aiayn.errors import AiaynError

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_PACKAGE = "dataset-fashion-mnist"
CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)  # fmt: skip
_IDX_MAGIC = {1: 2049, 3: 2051}  # IDX header: 0x0000 0x08 (uint8) then the number of dimensions


def read_idx(path: str | Path, ndim: int) -> np.ndarray:
    """A gzip'd IDX file of uint8 values -> array of `ndim` dimensions (images: (n, rows, cols))."""
    path = Path(path)
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as err:
        raise AiaynError(f"{path}: cannot read gzip'd IDX file: {err}") from None
    header = 4 * (1 + ndim)
    if len(data) < header or int.from_bytes(data[:4], "big") != _IDX_MAGIC[ndim]:
        raise AiaynError(f"{path}: not an IDX file of {ndim}-D uint8 data (bad magic number)")
    shape = tuple(int.from_bytes(data[4 * (i + 1) : 4 * (i + 2)], "big") for i in range(ndim))
    if len(data) - header != int(np.prod(shape)):
        raise AiaynError(f"{path}: {len(data) - header} bytes of data, the header says shape {shape}")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def load_fashion_mnist(split: str, root: str | Path = FASHION_MNIST_DIR) -> tuple[np.ndarray, np.ndarray]:
    """split "train" | "test" -> (images (n, 28, 28) uint8, labels (n,) int64)."""
    prefix = {"train": "train", "test": "t10k"}.get(split)
    if prefix is None:
        raise AiaynError(f"Fashion-MNIST has no split {split!r}; use 'train' or 'test'")
    root = Path(root)
    images_path, labels_path = (
        root / f"{prefix}-images-idx3-ubyte.gz",
        root / f"{prefix}-labels-idx1-ubyte.gz",
    )
    for path in (images_path, labels_path):
        if not path.is_file():
            raise AiaynError(
                f"{path} not found: install the Debian package {FASHION_MNIST_PACKAGE} "
                f"(apt-get install {FASHION_MNIST_PACKAGE}, or `make deb`)"
            )
    images, labels = read_idx(images_path, 3), read_idx(labels_path, 1)
    if len(images) != len(labels):
        raise AiaynError(f"{root}: {len(images)} {split} images but {len(labels)} labels")
    return images, labels.astype(np.int64)


@dataclass
class ImageSplits:
    """Images (n, H, W) or (n, C, H, W) uint8 and labels (n,) int64 of train / valid / test."""

    train: tuple[np.ndarray, np.ndarray]
    valid: tuple[np.ndarray, np.ndarray]
    test: tuple[np.ndarray, np.ndarray]
    classes: tuple[str, ...]


def fashion_mnist_splits(
    valid_size: int = 2000, limit: int | None = None, seed: int = 1, root: str | Path = FASHION_MNIST_DIR
) -> ImageSplits:
    """Train minus a seeded `valid_size` hold-out, valid, and test; `limit` caps every split (smoke runs)."""
    if limit is not None and limit < 1:
        raise AiaynError(f"limit must be at least 1 image per split, got {limit}")
    images, labels = load_fashion_mnist("train", root)
    if not 0 <= valid_size < len(images):
        raise AiaynError(f"valid_size must be in [0, {len(images)}), got {valid_size}")
    order = np.random.default_rng(seed).permutation(len(images))
    held, kept = order[:valid_size], np.sort(order[valid_size:])
    test = load_fashion_mnist("test", root)
    splits = [(images[kept], labels[kept]), (images[held], labels[held]), test]
    if limit is not None:
        splits = [(x[:limit], y[:limit]) for x, y in splits]
    return ImageSplits(*splits, classes=CLASSES)


class ShuffledBatches:
    """Batches of `batch_size` indices out of `n` examples in a new seeded order each epoch (the last
    one smaller): a function of (seed, epoch), which `aiayn.data.batching.BatchStream` resumes from."""

    def __init__(self, n: int, batch_size: int, seed: int):
        self.n, self.batch_size, self.seed = n, batch_size, seed

    def batches(self, epoch: int, start: int = 0) -> list[np.ndarray]:
        """The epoch's batches from batch `start` on (one process: nothing is dealt out)."""
        order = np.random.default_rng([self.seed, epoch]).permutation(self.n)  # (n,)
        size = self.batch_size
        return [order[i : i + size] for i in range(start * size, self.n, size)]


def to_tensor(images: np.ndarray) -> Tensor:
    """uint8 (n, H, W) or (n, C, H, W) -> float (n, C, H, W) in [0, 1]."""
    x = torch.tensor(images, dtype=torch.float32).div_(255.0)  # a copy: IDX arrays are read-only
    return x.unsqueeze(1) if x.dim() == 3 else x


def augment(
    images: Tensor, pad: int = 2, flip: bool = True, generator: torch.Generator | None = None
) -> Tensor:
    """Random crop after zero-padding by `pad` (each image shifted by up to `pad` pixels each way)
    and, if `flip`, a horizontal flip with probability 1/2. images (batch, C, H, W) -> same shape."""
    b, _, h, w = images.shape
    padded = torch.nn.functional.pad(images, (pad, pad, pad, pad))  # (batch, C, H + 2 pad, W + 2 pad)
    dy, dx = torch.randint(0, 2 * pad + 1, (2, b, 1), generator=generator)  # (batch, 1) offsets each
    rows = (dy + torch.arange(h))[:, None, :, None]  # (batch, 1, H, 1)
    cols = (dx + torch.arange(w))[:, None, None, :]  # (batch, 1, 1, W)
    if flip:
        mirror = torch.rand(b, generator=generator) < 0.5
        cols = torch.where(mirror[:, None, None, None], cols.flip(-1), cols)
    batch = torch.arange(b)[:, None, None, None]
    channel = torch.arange(images.size(1))[None, :, None, None]
    return padded[batch, channel, rows, cols]
