"""Binarized token shards: what the writer streams in, the memory-mapped dataset gives back."""

from __future__ import annotations

import numpy as np
import pytest

from aiayn.config import EOS_ID
from aiayn.data.dataset import ShardWriter, TokenDataset
from aiayn.errors import AiaynError


def _write(directory, chunks, vocab_size=8000):
    writer = ShardWriter(directory, "train", vocab_size)
    for src, tgt in chunks:
        writer.add(src, tgt)
    return writer.close()


def test_round_trip_appends_eos_across_chunks(tmp_path):
    chunks = [([[5, 6, 7], [8]], [[9], [10, 11]]), ([[12, 13]], [[]])]
    assert _write(tmp_path, chunks) == 3
    ds = TokenDataset(tmp_path, "train")
    assert len(ds) == 3
    expected = [([5, 6, 7], [9]), ([8], [10, 11]), ([12, 13], [])]
    for i, (src, tgt) in enumerate(expected):
        got_src, got_tgt = ds[i]
        assert got_src.tolist() == [*src, EOS_ID] and got_tgt.tolist() == [*tgt, EOS_ID]
    assert ds.src_lengths.tolist() == [4, 2, 3] and ds.tgt_lengths.tolist() == [2, 3, 1]
    assert ds[-1][0].tolist() == [12, 13, EOS_ID]
    with pytest.raises(IndexError):
        ds[3]


@pytest.mark.parametrize(("vocab_size", "dtype"), [(8000, np.uint16), (65536, np.uint16), (70000, np.int32)])
def test_dtype_follows_vocabulary_size(tmp_path, vocab_size, dtype):
    big = vocab_size - 1
    _write(tmp_path, [([[big, 1]], [[2]])], vocab_size)
    ds = TokenDataset(tmp_path, "train")
    assert ds[0][0].dtype == dtype and ds[0][0].tolist() == [big, 1, EOS_ID]
    assert (tmp_path / "train.src.bin").stat().st_size == 3 * np.dtype(dtype).itemsize


def test_empty_split(tmp_path):
    assert _write(tmp_path, []) == 0
    ds = TokenDataset(tmp_path, "train")
    assert len(ds) == 0 and ds.src_lengths.shape == (0,)


def test_missing_or_truncated_split(tmp_path):
    with pytest.raises(AiaynError, match="no 'valid' split"):
        TokenDataset(tmp_path, "valid")
    _write(tmp_path, [([[5, 6]], [[7]])])
    with open(tmp_path / "train.src.bin", "r+b") as f:
        f.truncate(2)
    with pytest.raises(AiaynError, match="does not match"):
        TokenDataset(tmp_path, "train")
    (tmp_path / "train.tgt.bin").unlink()
    with pytest.raises(AiaynError, match=rf"^{tmp_path / 'train.tgt.bin'}: missing token file; prepare"):
        TokenDataset(tmp_path, "train")


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"",  # empty
        lambda data: data[: len(data) // 2],  # truncated
        lambda data: b"\x93NUMPY" + bytes(200),  # garbage
        lambda data: np.lib.format.MAGIC_PREFIX + b"\x01\x00" + b"\x76\x00{'descr': '|O'," + bytes(120),
    ],
)
def test_a_damaged_index_is_a_one_line_error(tmp_path, damage):
    """Whatever is wrong with {split}.index.npz: the file, "damaged index", and how to fix it."""
    _write(tmp_path, [([[5, 6]], [[7]])])
    path = tmp_path / "train.index.npz"
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(
        AiaynError, match=rf"^{path}: damaged index \(.*\); prepare the data again with --force$"
    ):
        TokenDataset(tmp_path, "train")


def test_an_index_of_the_wrong_arrays_is_refused(tmp_path):
    _write(tmp_path, [([[5, 6]], [[7]])])
    np.savez(tmp_path / "train.index.npz", src=np.array([3, 5]), tgt=np.array([0, 2]), dtype=np.array("<u2"))
    with pytest.raises(AiaynError, match="offsets do not start at 0"):
        TokenDataset(tmp_path, "train")
    np.savez(tmp_path / "train.index.npz", src=np.array([0, 3]))
    with pytest.raises(AiaynError, match=r"damaged index \(.*tgt"):
        TokenDataset(tmp_path, "train")


def test_an_index_is_read_once_while_it_stays_the_same(tmp_path):
    """A start reads the train index for its checks and for the trainer: one read, shared read-only;
    an index written again is read again."""
    _write(tmp_path, [([[5, 6, 7], [8]], [[9], [10, 11]])])
    first, second = TokenDataset(tmp_path, "train"), TokenDataset(tmp_path, "train")
    assert first._offsets[0] is second._offsets[0] and not first._offsets[0].flags.writeable
    _write(tmp_path, [([[5], [8, 9, 10], [1]], [[9], [10], [2]])])
    assert TokenDataset(tmp_path, "train").src_lengths.tolist() == [2, 4, 2]
