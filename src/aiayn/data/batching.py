"""Token-bucketed batches (section 5.1): "sentence pairs were batched together by approximate sequence
length. Each training batch contained a set of sentence pairs containing approximately 25000 source
tokens and 25000 target tokens."

`TokenBatchSampler` packs sentences into batches of at most `max_tokens` tokens *counting padding*:
a batch's cost is n_sentences * max(longest source, longest target), with lengths that include the
EOS, i.e. the width of `src` and of `tgt_in` / `tgt_out` in the collated `Batch`.

Each epoch, a seeded permutation is cut into windows of `window` sentences; each window is sorted by
width (then by source length, which keeps the narrower side's padding low too) and packed greedily;
the batches of all windows are shuffled together. A pair wider than `max_tokens` on its own is
dropped (counted in `n_oversized`), so no batch ever exceeds `max_tokens`. With several ranks the
shuffled list is dealt out round-robin and the last `len % world_size` batches sit out that epoch
(a different few each epoch): every rank runs the same number of steps, and the ranks' batches are
disjoint. Everything is a function of (seed, epoch), so a position (epoch, index) resumes exactly:
`BatchStream` is the trainers' endless stream of batches from such a position. The shuffled list
does not depend on the number of ranks, so a run resumed on another number deals the rest of the
epoch from the global batch where the others stopped (`start`): the same batches in the same order.
With a `mix` (`aiayn.data.mixing.CorpusMix`: several weighted corpora) the permutation is of the
epoch's pairs that the mix draws, repeats included, instead of every pair once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from aiayn.config import BOS_ID, PAD_ID
from aiayn.data.plan_cache import PlanCache, digest
from aiayn.errors import AiaynError

DEFAULT_WINDOW = 1 << 17  # sentences sorted together: the whole corpus below ~131k pairs


class BatchPlan(Sequence):
    """Batches as two arrays: `indices` (m,) the sentence indices of every batch back to back, and
    `offsets` (k + 1,) where each of the k batches starts and the last ends. plan[i] is batch i as a
    list of ints; a BatchPlan equals a list of lists with the same batches."""

    def __init__(self, indices: np.ndarray, offsets: np.ndarray) -> None:
        self.indices, self.offsets = indices, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(f"batch {i} of {len(self)}")
        i %= len(self)
        return self.indices[self.offsets[i] : self.offsets[i + 1]].tolist()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BatchPlan):
            return np.array_equal(self.offsets, other.offsets) and np.array_equal(self.indices, other.indices)
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # mutable arrays inside

    @classmethod
    def of(cls, order: np.ndarray, starts: np.ndarray, chosen: np.ndarray) -> BatchPlan:
        """The batches `chosen` (k,) of `order`, batch b being order[starts[b] : starts[b + 1]]."""
        lengths = starts[chosen + 1] - starts[chosen]  # (k,)
        offsets = np.zeros(len(chosen) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        shift = np.repeat(starts[chosen] - offsets[:-1], lengths)  # (m,) where each batch's run begins
        return cls(order[np.arange(offsets[-1], dtype=np.int64) + shift], offsets)


def pack_sorted(widths: np.ndarray, max_tokens: int) -> np.ndarray:
    """Where the batches of greedy packing begin in `widths` (n,), sorted ascending: a batch from i
    takes j while (j - i + 1) * widths[j] <= max_tokens, so it ends at the last j with
    g[j] = j + 1 - max_tokens // widths[j] <= i (g rises with j: a binary search per batch)."""
    g = np.arange(1, len(widths) + 1, dtype=np.int64) - max_tokens // widths  # (n,) strictly increasing
    starts, i = [], 0
    while i < len(widths):
        starts.append(i)
        i = int(np.searchsorted(g, i, side="right"))
    return np.asarray(starts, dtype=np.int64)


class TokenBatchSampler:
    """The batches of one rank, for any epoch, as a BatchPlan (arrays, not lists of Python ints)."""

    def __init__(
        self,
        src_lengths: np.ndarray,
        tgt_lengths: np.ndarray,
        max_tokens: int,
        seed: int = 1,
        rank: int = 0,
        world_size: int = 1,
        window: int = DEFAULT_WINDOW,
        mix=None,
        cache: str | Path | None = None,
    ) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, world_size={world_size})")
        if max_tokens <= 0 or window <= 0:
            raise ValueError("max_tokens and window must be positive")
        self.src_lengths = np.asarray(src_lengths, dtype=np.int64)  # (n,)
        self.widths = np.maximum(self.src_lengths, np.asarray(tgt_lengths, dtype=np.int64))  # (n,)
        if len(self.widths) and self.widths.min() < 1:
            raise ValueError("every sentence needs a length of at least 1 (its EOS)")
        self.max_tokens, self.seed, self.rank, self.world_size, self.window = (
            max_tokens,
            seed,
            rank,
            world_size,
            window,
        )
        self.mix = mix  # None, or an object whose indices(epoch) are the epoch's pairs
        self.n_oversized = int((self.widths > max_tokens).sum())
        # (n,) width and source length in one sort key, so that an epoch gathers one array at random
        self._shift = 16 if len(self.widths) == 0 or self.widths.max() < 1 << 16 else 32
        dtype = np.uint32 if self._shift == 16 else np.uint64
        self._keys = (self.widths.astype(dtype) << dtype(self._shift)) | self.src_lengths.astype(dtype)
        self._cache: tuple[tuple[int, int], BatchPlan] | None = None
        self.plans = None  # `cache`: the epochs' plans kept in that directory (aiayn.data.plan_cache)
        if cache is not None:
            self.plans = PlanCache(cache, digest(self._keys, self._shift, seed, max_tokens, window))

    def _plan(self, epoch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(order, starts, shuffle) of an epoch: the sentences sorted window by window, where each
        batch begins in that order (with the end appended), and the batches' shuffled order; read
        from the cache directory when it holds them, else computed (and kept there)."""
        pool = None if self.mix is None else self.mix.indices(epoch)  # (m,) the epoch's pairs, repeated
        if self.plans is None:
            return self._compute(epoch, pool)
        drawn = "" if pool is None else digest(pool)
        plan = self.plans.load(epoch, drawn)
        if plan is None:
            plan = self._compute(epoch, pool)
            self.plans.store(epoch, *plan, pool=drawn)
        return plan

    def _compute(self, epoch: int, pool: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rng = np.random.default_rng([self.seed, epoch])
        if pool is None:
            order = rng.permutation(np.arange(len(self.widths), dtype=np.int32))  # (n,) ties broken at random
        else:
            order = pool[rng.permutation(len(pool))]
        keys = self._keys[order]  # (n,) width, then source length
        fits = (keys >> keys.dtype.type(self._shift)) <= self.max_tokens
        if not fits.all():  # copies only when some pair is too wide
            order, keys = order[fits], keys[fits]
        del fits
        starts = []
        for begin in range(0, len(order), self.window):  # a window at a time: sorts that fit in cache
            chunk, by = (
                order[begin : begin + self.window],
                np.argsort(keys[begin : begin + self.window], kind="stable"),
            )
            chunk[:] = chunk[by]  # by width, then source length; ties in their shuffled order
            widths = (keys[begin : begin + self.window][by] >> keys.dtype.type(self._shift)).astype(np.int64)
            starts.append(begin + pack_sorted(widths, self.max_tokens))
        starts = np.concatenate([*starts, [len(order)]]).astype(np.int64)
        return order, starts, rng.permutation(len(starts) - 1)

    def global_batches(self, epoch: int) -> BatchPlan:
        """All ranks' batches of an epoch, in their shuffled order (before dealing out to ranks)."""
        order, starts, shuffle = self._plan(epoch)
        return BatchPlan.of(order, starts, shuffle)

    def batches(self, epoch: int, start: int = 0) -> BatchPlan:
        """This rank's batches for `epoch`, dealt from the epoch's global batch `start` on (a run
        resumed on another number of ranks goes on where the others stopped): the same count on every
        rank, disjoint across ranks. Only they are kept (the last epoch's are let go first)."""
        if self._cache is not None and self._cache[0] == (epoch, start):
            return self._cache[1]
        self._cache = None
        order, starts, shuffle = self._plan(epoch)
        end = start + (len(shuffle) - start) // self.world_size * self.world_size
        mine = BatchPlan.of(order, starts, shuffle[start + self.rank : end : self.world_size])
        self._cache = ((epoch, start), mine)
        return mine

    def num_batches(self, epoch: int = 0) -> int:
        return len(self.batches(epoch))

    def __len__(self) -> int:
        """Batches per epoch on this rank (epoch 0's count; other epochs differ by at most a few)."""
        return self.num_batches(0)


class BatchStream:
    """An endless stream of one rank's batches with a resumable position (epoch, index, start).

    `sampler.batches(epoch, start)` (a `TokenBatchSampler`'s, or any deterministic function of them)
    is a function of (seed, epoch, start, rank, world_size), so the position alone recovers where a
    run stopped: resuming at (epoch, index, start) yields the batches the uninterrupted run would have
    taken. `start` is the epoch's global batch where the dealing began: 0, but for the epoch in
    which a run resumed on another number of ranks (at global batch start + index x world_size).
    """

    def __init__(self, sampler, epoch: int = 0, index: int = 0, start: int = 0):
        self.sampler = sampler
        self.epoch, self.index, self.start = epoch, index, start
        self._batches = sampler.batches(epoch, start)
        if not self._batches and not start:  # from a start, the epoch's rest may be too short to deal
            raise AiaynError("the training split yields no batches (is it empty, or max_tokens too small?)")

    @property
    def end_of_epoch(self) -> bool:
        """Whether every batch of the current epoch has been taken."""
        return self.index >= len(self._batches)

    @property
    def epochs_done(self) -> int:
        """Whole epochs consumed so far (the current one counts once all its batches are taken)."""
        return self.epoch + self.end_of_epoch

    @property
    def position(self) -> tuple[int, int, int]:
        return self.epoch, self.index, self.start

    def next(self):
        """The next batch's example indices, crossing into the next epoch when one ends."""
        if self.end_of_epoch:
            self.epoch, self.index, self.start = self.epoch + 1, 0, 0
            self._batches = self.sampler.batches(self.epoch)
            if not self._batches:
                raise AiaynError(f"epoch {self.epoch} of the training split yields no batches")
        batch = self._batches[self.index]
        self.index += 1
        return batch


@dataclass
class Batch:
    """Padded tensors of one batch; padding is on the right with PAD_ID.

    src:     (batch, src_len)  source pieces + EOS
    tgt_in:  (batch, tgt_len)  BOS + target pieces (the decoder input, shifted right)
    tgt_out: (batch, tgt_len)  target pieces + EOS (what the decoder predicts)
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    n_src_tokens: int  # non-pad tokens in src
    n_tgt_tokens: int  # non-pad tokens in tgt_out

    def __len__(self) -> int:
        return self.src.shape[0]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        src, tgt_in, tgt_out = (
            t.to(device, non_blocking=non_blocking) for t in (self.src, self.tgt_in, self.tgt_out)
        )
        return Batch(src, tgt_in, tgt_out, self.n_src_tokens, self.n_tgt_tokens)


def _pad(rows: list[np.ndarray], pad_id: int, first: int | None = None) -> np.ndarray:
    """(batch, width) int64 rows padded on the right; `first` replaces the last token by a leading one."""
    width = max(len(r) for r in rows)
    out = np.full((len(rows), width), pad_id, dtype=np.int64)
    for i, row in enumerate(rows):
        if first is None:
            out[i, : len(row)] = row
        else:
            out[i, 0] = first
            out[i, 1 : len(row)] = row[:-1]
    return out


def collate(dataset, indices: list[int], pad_id: int = PAD_ID, bos_id: int = BOS_ID) -> Batch:
    """The `Batch` of the given sentence indices of a `TokenDataset` (or any (src, tgt) sequence)."""
    pairs = [dataset[i] for i in indices]
    src_rows, tgt_rows = [p[0] for p in pairs], [p[1] for p in pairs]
    src = _pad(src_rows, pad_id)  # (batch, src_len)
    tgt_out = _pad(tgt_rows, pad_id)  # (batch, tgt_len)
    tgt_in = _pad(tgt_rows, pad_id, first=bos_id)  # (batch, tgt_len)
    return Batch(
        src=torch.from_numpy(src),
        tgt_in=torch.from_numpy(tgt_in),
        tgt_out=torch.from_numpy(tgt_out),
        n_src_tokens=sum(len(r) for r in src_rows),
        n_tgt_tokens=sum(len(r) for r in tgt_rows),
    )
