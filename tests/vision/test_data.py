"""Fashion-MNIST loading (IDX files from the Debian package) and the augmentation."""

import gzip

import numpy as np
import pytest
import torch

from aiayn.errors import AiaynError
from aiayn.vision.data import (
    FASHION_MNIST_DIR,
    augment,
    fashion_mnist_splits,
    load_fashion_mnist,
    read_idx,
    to_tensor,
)

HAVE_FASHION_MNIST = (FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz").is_file()
needs_fashion_mnist = pytest.mark.skipif(
    not HAVE_FASHION_MNIST, reason="Debian package dataset-fashion-mnist is not installed"
)


def write_idx(path, array: np.ndarray, magic: int | None = None) -> None:
    header = (magic or (2051 if array.ndim == 3 else 2049)).to_bytes(4, "big")
    header += b"".join(n.to_bytes(4, "big") for n in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def test_read_idx_round_trip(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (5, 3, 4), dtype=np.uint8)
    write_idx(tmp_path / "x.gz", images)
    assert np.array_equal(read_idx(tmp_path / "x.gz", 3), images)


def test_read_idx_refuses_bad_files(tmp_path):
    labels = np.arange(6, dtype=np.uint8)
    write_idx(tmp_path / "magic.gz", labels, magic=2051)
    with pytest.raises(AiaynError, match="bad magic number"):
        read_idx(tmp_path / "magic.gz", 1)
    with gzip.open(tmp_path / "short.gz", "wb") as f:
        f.write((2049).to_bytes(4, "big") + (9).to_bytes(4, "big") + bytes(6))
    with pytest.raises(AiaynError, match="6 bytes of data, the header says shape"):
        read_idx(tmp_path / "short.gz", 1)
    (tmp_path / "plain.gz").write_bytes(b"not gzip")
    with pytest.raises(AiaynError, match="cannot read"):
        read_idx(tmp_path / "plain.gz", 1)


def test_a_missing_dataset_names_the_debian_package(tmp_path):
    with pytest.raises(AiaynError, match="install the Debian package dataset-fashion-mnist"):
        load_fashion_mnist("train", tmp_path)
    with pytest.raises(AiaynError, match="no split 'dev'"):
        load_fashion_mnist("dev", tmp_path)


def test_splits_from_small_idx_files(tmp_path):
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 50), ("t10k", 20)):
        write_idx(tmp_path / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28)))
        write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte.gz", np.arange(n) % 10)
    splits = fashion_mnist_splits(valid_size=10, seed=3, root=tmp_path)
    (train_x, train_y), (valid_x, valid_y), (test_x, _) = splits.train, splits.valid, splits.test
    assert (len(train_x), len(valid_x), len(test_x)) == (40, 10, 20)
    all_x, all_y = load_fashion_mnist("train", tmp_path)
    held_out_and_kept = sorted(x.tobytes() for x in np.concatenate([train_x, valid_x]))
    assert held_out_and_kept == sorted(x.tobytes() for x in all_x)  # a partition of the images
    assert np.array_equal(np.sort(np.concatenate([train_y, valid_y])), np.sort(all_y))
    limited = fashion_mnist_splits(valid_size=10, limit=7, seed=3, root=tmp_path)
    assert [len(x) for x, _ in (limited.train, limited.valid, limited.test)] == [7, 7, 7]
    with pytest.raises(AiaynError, match="valid_size"):
        fashion_mnist_splits(valid_size=50, root=tmp_path)


@needs_fashion_mnist
def test_the_debian_package_holds_60k_train_and_10k_test_images():
    for split, n in (("train", 60000), ("test", 10000)):
        images, labels = load_fashion_mnist(split)
        assert images.shape == (n, 28, 28) and images.dtype == np.uint8
        assert labels.shape == (n,) and labels.dtype == np.int64
        assert np.array_equal(np.bincount(labels), np.full(10, n // 10))  # balanced classes 0-9
        assert images.max() == 255 and images.min() == 0


def test_to_tensor_scales_to_unit_range_and_adds_a_channel():
    x = to_tensor(np.array([[[0, 255], [51, 102]]], dtype=np.uint8))
    assert x.shape == (1, 1, 2, 2)
    torch.testing.assert_close(x, torch.tensor([[[[0.0, 1.0], [0.2, 0.4]]]]))


def shifted(image: torch.Tensor, dy: int, dx: int) -> torch.Tensor:
    """image (H, W) moved by (dy, dx) with zeros coming in: out[i, j] = image[i + dy, j + dx]."""
    h, w = image.shape
    out = torch.zeros_like(image)
    for i in range(h):
        for j in range(w):
            if 0 <= i + dy < h and 0 <= j + dx < w:
                out[i, j] = image[i + dy, j + dx]
    return out


def test_random_crop_shifts_each_image_by_at_most_the_padding():
    images = torch.rand(16, 1, 6, 6) + 0.1  # no zeros, so every shift is recognisable
    out = augment(images, pad=2, flip=False, generator=torch.Generator().manual_seed(0))
    assert out.shape == images.shape
    shifts = set()
    for image, crop in zip(images[:, 0], out[:, 0], strict=True):
        found = [
            (dy, dx)
            for dy in range(-2, 3)
            for dx in range(-2, 3)
            if torch.equal(crop, shifted(image, dy, dx))
        ]
        assert len(found) == 1
        shifts.add(found[0])
    assert len(shifts) > 3


def test_flip_mirrors_about_half_of_the_images():
    images = torch.rand(64, 2, 5, 5)
    out = augment(images, pad=0, flip=True, generator=torch.Generator().manual_seed(0))
    same = [torch.equal(o, x) for o, x in zip(out, images, strict=True)]
    mirrored = [torch.equal(o, x.flip(-1)) for o, x in zip(out, images, strict=True)]
    assert all(s != m for s, m in zip(same, mirrored, strict=True))
    assert 16 < sum(mirrored) < 48
