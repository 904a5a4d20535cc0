"""The batch plan's shuffle (aiayn.data.shuffle): numpy's permutation and generator state, exactly."""

from __future__ import annotations

import os

import numpy as np
import pytest

from aiayn.data import shuffle
from aiayn.data.batching import TokenBatchSampler
from aiayn.runtime import native_build

needs_native = pytest.mark.skipif(
    native_build._compiler() is None or os.environ.get(native_build.ENV, "").strip() == "0",
    reason="no C++ compiler, or AIAYN_NATIVE=0",
)


def shuffled(seed, n, key_of, spare_half=False):
    """(order, keys, rng) after shuffle_keyed of arange(n) with a fresh generator of `seed`; with
    `spare_half`, one 32-bit draw first, so that PCG64 holds the other half of its output."""
    rng = np.random.default_rng(seed)
    if spare_half:
        rng.random(dtype=np.float32)
    order = np.arange(n, dtype=np.int32)
    return order, shuffle.shuffle_keyed(rng, order, key_of), rng


@needs_native
@pytest.mark.parametrize("n", [0, 1, 2, 3, 1000, 65_537, 300_001])
@pytest.mark.parametrize("key_dtype", [np.uint16, np.uint32])
@pytest.mark.parametrize("spare_half", [False, True])
def test_the_native_shuffle_is_numpys_permutation_and_leaves_its_state(monkeypatch, n, key_dtype, spare_half):
    monkeypatch.setattr(shuffle, "NATIVE_FROM", 0)
    key_of = np.random.default_rng(n).integers(0, np.iinfo(key_dtype).max, n, endpoint=True).astype(key_dtype)
    order, keys, rng = shuffled([5, n], n, key_of, spare_half)
    expected = np.random.default_rng([5, n])
    if spare_half:
        expected.random(dtype=np.float32)
    assert np.array_equal(order, expected.permutation(n)) and order.dtype == np.int32
    assert np.array_equal(keys, key_of[order]) and keys.dtype == key_dtype
    assert rng.bit_generator.state == expected.bit_generator.state
    assert np.array_equal(rng.integers(0, 1 << 40, 50), expected.integers(0, 1 << 40, 50))


def test_without_the_library_numpy_shuffles_the_same(monkeypatch):
    key_of = np.arange(5000, dtype=np.uint16)[::-1].copy()
    monkeypatch.setattr(shuffle, "_native", lambda *_: False)
    monkeypatch.setattr(shuffle, "NATIVE_FROM", 0)
    order, keys, rng = shuffled(3, 5000, key_of)
    expected = np.random.default_rng(3)
    assert np.array_equal(order, expected.permutation(5000)) and np.array_equal(keys, key_of[order])
    assert rng.bit_generator.state == expected.bit_generator.state


def test_take_reads_in_chunks_what_fancy_indexing_reads(monkeypatch):
    monkeypatch.setattr(shuffle, "CHUNK", 7)
    table, index = np.arange(100, dtype=np.uint32) * 3, np.random.default_rng(1).integers(0, 100, 250)
    assert np.array_equal(shuffle.take(table, index.astype(np.int32)), table[index])


@needs_native
def test_a_plan_shuffled_natively_is_the_plan_numpy_shuffles(monkeypatch):
    rng = np.random.default_rng(4)
    src, tgt = rng.integers(1, 80, 20_000), rng.integers(1, 80, 20_000)

    def plan():
        return TokenBatchSampler(src, tgt, 400, seed=2, rank=1, world_size=3, window=4096).batches(1)

    by_numpy = plan()
    monkeypatch.setattr(shuffle, "NATIVE_FROM", 0)
    assert native_build.load(), native_build.reason()
    assert plan() == by_numpy
