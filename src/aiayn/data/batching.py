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

At WMT scale (36M pairs, 8 ranks) a rank's plan takes about 2 s an epoch and 240 MB: the permutation
is numpy's, drawn in one native pass (`aiayn.data.shuffle`) with each pair's sort key moved along;
the key is the pair's rank among the corpus's distinct (width, source length) keys, 16 bits where
there are at most 65,536 of them, whose stable sort numpy does by radix; a window sorted by width
is packed run by run of equal width (`pack_runs`), not pair by pair.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from aiayn.config import BOS_ID, PAD_ID
from aiayn.data.plan_cache import PlanCache, digest
from aiayn.data.shuffle import CHUNK, shuffle_keyed
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


def key_ranks(widths: np.ndarray, sources: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's rank (n,) among the distinct (width, source length) keys in their order, uint16
    (uint32 past 65,536 keys), and each rank's width (r,): sorting by rank sorts by width, then source
    length, and numpy's stable sort of 16-bit integers is a radix sort (linear, a few ms a window)."""
    span = int(sources.max(initial=0)) + 1
    size = (int(widths.max(initial=0)) + 1) * span
    chunks = range(0, len(widths), CHUNK)

    def codes(begin: int) -> np.ndarray:  # (CHUNK,) the keys of pairs begin, begin + 1, ... as numbers
        return widths[begin : begin + CHUNK] * span + sources[begin : begin + CHUNK]

    if size > 1 << 24:  # widths over 4,095 tokens: a sort of every key
        keys, ranks = np.unique(widths * span + sources, return_inverse=True)  # (r,), (n,)
        return ranks.astype(np.uint16 if len(keys) <= 1 << 16 else np.uint32), keys // span
    seen = np.zeros(size, dtype=bool)  # a table of every possible key, marked where present
    for begin in chunks:
        seen[codes(begin)] = True
    keys = np.flatnonzero(seen)  # (r,) ascending
    rank_of = np.zeros(size, dtype=np.int64)
    rank_of[keys] = np.arange(len(keys))
    ranks = np.empty(len(widths), dtype=np.uint16 if len(keys) <= 1 << 16 else np.uint32)  # (n,)
    for begin in chunks:
        ranks[begin : begin + CHUNK] = rank_of[codes(begin)]
    return ranks, keys // span


def pack_runs(widths: list[int], counts: list[int], max_tokens: int) -> list[tuple[int, int, int]]:
    """Where the batches of greedy packing begin in a window sorted by width, given as runs: counts[r]
    pairs of width widths[r] (ascending). A batch from i takes j while (j - i + 1) * width(j) <=
    max_tokens; inside a run of width w that is max_tokens // w pairs, so the beginnings come as
    progressions (first, number, step), one or two a run."""
    ends = list(itertools.accumulate(counts))
    caps = [max_tokens // w for w in widths]  # >= 1: no pair is wider than max_tokens
    found, i, r = [], 0, 0
    while i < ends[-1]:
        while ends[r] <= i:
            r += 1
        whole = (ends[r] - i - 1) // caps[r]  # batches inside run r with more of it after them
        if whole:
            found.append((i, whole, caps[r]))
            i += whole * caps[r]
        found.append((i, 1, 1))
        i = _batch_end(i, r, ends, caps)
    return found


def _batch_end(i: int, r: int, ends: list[int], caps: list[int]) -> int:
    """Where the batch from i that takes the rest of run r ends: at the first j of a later run that it
    cannot take (j >= i + that run's cap), else at the window's end."""
    for q in range(r + 1, len(ends)):
        if i + caps[q] < ends[q]:
            return max(ends[q - 1], i + caps[q])
    return ends[-1]


def progressions(found: list[tuple[int, int, int]]) -> np.ndarray:
    """(k,) int64: first, first + step, ... (number terms) of each (first, number, step) in turn."""
    firsts, numbers, steps = np.asarray(found, dtype=np.int64).reshape(-1, 3).T  # (p,) each
    which = np.repeat(np.arange(len(numbers)), numbers)  # (k,) each term's progression
    nth = np.arange(len(which)) - np.repeat(np.cumsum(numbers) - numbers, numbers)  # (k,)
    return firsts[which] + nth * steps[which]


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
        src_lengths = np.asarray(src_lengths, dtype=np.int64)  # (n,)
        widths = np.maximum(src_lengths, np.asarray(tgt_lengths, dtype=np.int64))  # (n,)
        if len(widths) and widths.min() < 1:
            raise ValueError("every sentence needs a length of at least 1 (its EOS)")
        self.max_tokens, self.seed, self.rank, self.world_size, self.window = (
            max_tokens,
            seed,
            rank,
            world_size,
            window,
        )
        self.mix = mix  # None, or an object whose indices(epoch) are the epoch's pairs
        self.n_oversized = int((widths > max_tokens).sum())
        # (n,) the sort key: each pair's rank among the distinct (width, source length) keys
        self._ranks, rank_widths = key_ranks(widths, src_lengths)
        self._fitting = int(np.searchsorted(rank_widths, max_tokens, side="right"))  # ranks that fit
        self._widths, self._width_starts = np.unique(rank_widths[: self._fitting], return_index=True)  # (w,)
        self._cache: tuple[tuple[int, int], BatchPlan] | None = None
        self.plans = None  # `cache`: the epochs' plans kept in that directory (aiayn.data.plan_cache)
        if cache is not None:
            shift = 16 if len(widths) == 0 or widths.max() < 1 << 16 else 32
            dtype = np.uint32 if shift == 16 else np.uint64
            keys = (widths.astype(dtype) << dtype(shift)) | src_lengths.astype(dtype)  # (n,) what it is of
            self.plans = PlanCache(cache, digest(keys, shift, seed, max_tokens, window))

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
        """`_plan`'s arrays, computed: the permutation of every pair (or of `pool`), each window's stable
        sort by key rank, and its packing run by run."""
        rng = np.random.default_rng([self.seed, epoch])
        order = np.arange(len(self._ranks), dtype=np.int32) if pool is None else pool.astype(np.int32)
        ranks = shuffle_keyed(rng, order, self._ranks)  # (n,) ties broken at random: rng.permutation's
        fits = ranks < self._fitting
        if not fits.all():  # copies only when some pair is too wide
            order, ranks = order[fits], ranks[fits]
        del fits
        starts = [np.zeros(0, dtype=np.int64)]
        for begin in range(0, len(order), self.window):  # a window at a time: sorts that fit in cache
            chunk, keys = order[begin : begin + self.window], ranks[begin : begin + self.window]
            chunk[:] = chunk[np.argsort(keys, kind="stable")]  # by width, then source length; ties kept
            per_key = np.bincount(keys, minlength=self._fitting)  # (r,) pairs of each key
            per_width = np.add.reduceat(per_key, self._width_starts)  # (w,) pairs of each width
            runs = np.flatnonzero(per_width)
            found = pack_runs(self._widths[runs].tolist(), per_width[runs].tolist(), self.max_tokens)
            starts.append(begin + progressions(found))
        starts = np.concatenate([*starts, [len(order)]])
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
