"""An epoch's permutation for the batch plan (section 5.1), exactly numpy's and without its wait.

`TokenBatchSampler` orders an epoch by `rng.permutation(n)` of `np.random.default_rng([seed, epoch])`
(its ties between equal lengths included), so a plan is a function of (seed, epoch) that resumes
exactly. numpy's Fisher-Yates waits on the memory at every step: at 36M pairs 5 s an epoch, then as
long again to read each pair's sort key in the new order. `shuffle_keyed` gives the same permutation,
the generator left in the same state, with the keys moved along: from 1M pairs on, in one native call
(`native_shuffle.h`, where the reads are fetched ahead; about 1 s at 36M), else, or where the native
library is not available (`aiayn.runtime.native_build`), by numpy's own shuffle.
"""

from __future__ import annotations

import numpy as np
import torch

from aiayn.runtime import native_build

NATIVE_FROM = 1 << 20  # pairs: below this numpy's shuffle takes well under a second
CHUNK = 1 << 20  # entries a gather reads at once (numpy widens the indices to int64 first)
_MASK = (1 << 64) - 1


def take(table: np.ndarray, index: np.ndarray) -> np.ndarray:
    """table[index] (n,), read CHUNK entries at a time: without the (n,) int64 copy of the indices
    that numpy's fancy indexing makes of int32 ones."""
    out = np.empty(len(index), dtype=table.dtype)  # (n,)
    for begin in range(0, len(index), CHUNK):
        np.take(table, index[begin : begin + CHUNK], out=out[begin : begin + CHUNK])
    return out


def shuffle_keyed(rng: np.random.Generator, order: np.ndarray, key_of: np.ndarray) -> np.ndarray:
    """Shuffle `order` (n,) int32 in place exactly as `rng.shuffle(order)` does (the permutation of
    `rng.permutation(n)`), leaving `rng` in the state numpy leaves it in; return key_of[order] (n,)
    in the new order. `key_of` is 16- or 32-bit."""
    if len(order) < NATIVE_FROM or not _native(rng, order, key_of):
        rng.shuffle(order)
        return take(key_of, order)
    keys = take(key_of, order)  # (n,) moved along with order
    state = rng.bit_generator.state
    words = np.array(  # (6,) PCG64's state and increment as high and low halves, the spare half
        [
            state["state"]["state"] >> 64,
            state["state"]["state"] & _MASK,
            state["state"]["inc"] >> 64,
            state["state"]["inc"] & _MASK,
            state["has_uint32"],
            state["uinteger"],
        ],
        dtype=np.uint64,
    ).view(np.int64)
    signed = keys.view(np.int16 if keys.itemsize == 2 else np.int32)  # (n,) the same bytes
    torch.ops.aiayn.pcg64_shuffle(torch.from_numpy(order), torch.from_numpy(signed), torch.from_numpy(words))
    high, low, _, _, has_half, half = words.view(np.uint64).tolist()
    state["state"]["state"], state["has_uint32"], state["uinteger"] = high << 64 | low, has_half, half
    rng.bit_generator.state = state
    return keys


def _native(rng: np.random.Generator, order: np.ndarray, key_of: np.ndarray) -> bool:
    """Whether the native shuffle applies: numpy's PCG64, int32 order, 16- or 32-bit keys, the library."""
    return (
        type(rng.bit_generator) is np.random.PCG64
        and order.dtype == np.int32
        and order.flags.c_contiguous
        and key_of.dtype.itemsize in (2, 4)
        and native_build.load()
    )
