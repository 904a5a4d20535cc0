"""Token-bucketed batches (section 5.1): the invariants a trainer relies on."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from aiayn.config import BOS_ID, EOS_ID, PAD_ID
from aiayn.data.batching import (
    Batch,
    BatchPlan,
    BatchStream,
    TokenBatchSampler,
    collate,
    pack_runs,
    progressions,
)
from aiayn.data.mixing import CorpusMix
from aiayn.errors import AiaynError

MAX_TOKENS = 300


@pytest.fixture(scope="module")
def lengths():
    rng = np.random.default_rng(0)
    src = rng.integers(1, 60, size=3000)
    tgt = np.clip(src + rng.integers(-10, 10, size=3000), 1, None)
    return src, tgt


def _cost(batch, src, tgt):
    return len(batch) * max(src[batch].max(), tgt[batch].max())


@pytest.mark.parametrize("window", [100, 1 << 17])
def test_no_batch_over_max_tokens_and_each_example_once(lengths, window):
    src, tgt = lengths
    sampler = TokenBatchSampler(src, tgt, MAX_TOKENS, seed=3, window=window)
    for epoch in range(3):
        batches = sampler.batches(epoch)
        assert all(0 < _cost(b, src, tgt) <= MAX_TOKENS for b in batches)
        assert sorted(itertools.chain.from_iterable(batches)) == list(range(len(src)))
    assert len(sampler) == len(sampler.batches(0))


def test_batches_are_full_and_length_sorted(lengths):
    src, tgt = lengths
    batches = TokenBatchSampler(src, tgt, MAX_TOKENS).batches(0)
    widths = np.maximum(src, tgt)
    cells = sum(_cost(b, src, tgt) for b in batches)
    assert widths.sum() / cells > 0.9  # little padding: similar lengths share a batch
    assert np.mean([_cost(b, src, tgt) for b in batches]) > 0.8 * MAX_TOKENS


def test_same_seed_same_order_other_epoch_or_seed_other_order(lengths):
    src, tgt = lengths
    a, b = TokenBatchSampler(src, tgt, MAX_TOKENS, seed=1), TokenBatchSampler(src, tgt, MAX_TOKENS, seed=1)
    assert a.batches(0) == b.batches(0) and a.batches(5) == b.batches(5)
    assert a.batches(0) != a.batches(1)
    assert a.batches(0) != TokenBatchSampler(src, tgt, MAX_TOKENS, seed=2).batches(0)


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_rank_shards_are_disjoint_equal_and_complete(lengths, world_size):
    src, tgt = lengths
    samplers = [
        TokenBatchSampler(src, tgt, MAX_TOKENS, seed=1, rank=r, world_size=world_size)
        for r in range(world_size)
    ]
    for epoch in range(2):
        shards = [s.batches(epoch) for s in samplers]
        assert len({len(shard) for shard in shards}) == 1
        seen = [i for shard in shards for batch in shard for i in batch]
        assert len(seen) == len(set(seen))
        everything = samplers[0].global_batches(epoch)
        left_out = everything[len(shards[0]) * world_size :]
        assert len(left_out) < world_size
        assert sorted(seen + [i for b in left_out for i in b]) == list(range(len(src)))


def test_oversized_sentences_are_dropped_and_counted():
    src, tgt = np.array([5, 50, 6, 7]), np.array([5, 6, 80, 7])
    sampler = TokenBatchSampler(src, tgt, max_tokens=40)
    assert sampler.n_oversized == 2
    assert sorted(i for b in sampler.batches(0) for i in b) == [0, 3]


def taken(stream: BatchStream, n: int) -> list[tuple[int, int, list[int]]]:
    """(epoch, index, batch) of the next n batches."""
    out = []
    for _ in range(n):
        batch = stream.next()
        out.append((stream.epoch, stream.index - 1, batch))
    return out


def test_batch_stream_resumes_exactly_from_a_position(lengths):
    src, tgt = lengths
    sampler = TokenBatchSampler(src, tgt, MAX_TOKENS, seed=7)
    per_epoch = len(sampler.batches(0))
    full = taken(BatchStream(sampler), 2 * len(sampler) + 5)
    assert full[0][:2] == (0, 0) and full[per_epoch][:2] == (1, 0)
    assert [b for _, _, b in full[:per_epoch]] == sampler.batches(0)
    for k in (0, 17, per_epoch + 3):
        epoch, index, _ = full[k]
        resumed = BatchStream(TokenBatchSampler(src, tgt, MAX_TOKENS, seed=7), epoch, index)
        assert taken(resumed, 10) == full[k : k + 10]
    end = BatchStream(sampler, 0, per_epoch)  # a position saved at the end of an epoch
    assert end.end_of_epoch and end.epochs_done == 1 and taken(end, 1) == [full[per_epoch]]


@pytest.mark.parametrize(("before", "after", "updates"), [(2, 3, 3), (3, 2, 2), (4, 1, 1), (1, 2, 5)])
def test_ranks_resumed_on_another_number_go_on_with_the_global_order(lengths, before, after, updates):
    """`before` ranks take `updates` batches each; `after` ranks resumed at that global batch deal the
    rest of the epoch from it: together, the epoch's global list in order (only a short tail, less than
    `after` batches, sits out), each batch once."""
    src, tgt = lengths
    everything = TokenBatchSampler(src, tgt, MAX_TOKENS, seed=3).global_batches(1)

    def ranks(n: int, start: int = 0) -> list[list[list[int]]]:
        return [TokenBatchSampler(src, tgt, MAX_TOKENS, 3, r, n).batches(1, start) for r in range(n)]

    first = [batch for k in range(updates) for rank in ranks(before) for batch in [rank[k]]]
    start = updates * before
    then = ranks(after, start)
    rest = [rank[k] for k in range(len(then[0])) for rank in then]
    assert first + rest == everything[: len(first) + len(rest)]
    assert len(everything) - after < len(first) + len(rest) <= len(everything)
    stream = BatchStream(TokenBatchSampler(src, tgt, MAX_TOKENS, 3, 1 % after, after), 1, 0, start)
    assert [stream.next() for _ in range(len(then[0]))] == then[1 % after] and stream.position[2] == start
    assert stream.next() == TokenBatchSampler(src, tgt, MAX_TOKENS, 3, 1 % after, after).batches(2)[0]
    assert stream.position == (2, 1, 0)  # the next epoch is dealt from its start
    last = BatchStream(TokenBatchSampler(src, tgt, MAX_TOKENS, 3, 0, 2), 1, 0, len(everything) - 1)
    assert last.end_of_epoch and last.next() == TokenBatchSampler(src, tgt, MAX_TOKENS, 3, 0, 2).batches(2)[0]


def test_batch_stream_refuses_an_epoch_without_batches():
    sampler = TokenBatchSampler(np.array([50]), np.array([50]), max_tokens=10)
    with pytest.raises(AiaynError, match="yields no batches"):
        BatchStream(sampler)


def test_collate_shifts_and_pads_on_the_right():
    dataset = [
        (np.array([5, 6, EOS_ID], dtype=np.uint16), np.array([7, 8, 9, EOS_ID], dtype=np.uint16)),
        (np.array([10, EOS_ID], dtype=np.uint16), np.array([11, EOS_ID], dtype=np.uint16)),
    ]
    batch = collate(dataset, [0, 1])
    assert isinstance(batch, Batch) and len(batch) == 2
    assert batch.src.dtype == torch.long and batch.src.tolist() == [[5, 6, EOS_ID], [10, EOS_ID, PAD_ID]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 7, 8, 9], [BOS_ID, 11, PAD_ID, PAD_ID]]
    assert batch.tgt_out.tolist() == [[7, 8, 9, EOS_ID], [11, EOS_ID, PAD_ID, PAD_ID]]
    assert (batch.n_src_tokens, batch.n_tgt_tokens) == (5, 6)
    moved = batch.to("cpu")
    assert torch.equal(moved.tgt_in, batch.tgt_in) and moved.n_tgt_tokens == 6


def test_sampler_rejects_bad_arguments(lengths):
    with pytest.raises(ValueError, match="rank"):
        TokenBatchSampler(*lengths, MAX_TOKENS, rank=2, world_size=2)


def reference_batches(src, tgt, max_tokens, seed, epoch, window, pool=None):
    """The batch plan as lists of Python ints, element by element: the form the array plan replaced
    (an independent restatement: the same seed must give the same batches)."""
    src, widths = np.asarray(src), np.maximum(src, tgt)
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(widths)) if pool is None else pool[rng.permutation(len(pool))]
    order = order[widths[order] <= max_tokens]
    batches = []
    for start in range(0, len(order), window):
        chunk = order[start : start + window]
        chunk = chunk[np.lexsort((src[chunk], widths[chunk]))]
        current, width = [], 0
        for index, w in zip(chunk.tolist(), widths[chunk].tolist(), strict=True):
            if current and (len(current) + 1) * max(width, w) > max_tokens:
                batches.append(current)
                current, width = [], 0
            current.append(index)
            width = max(width, w)
        if current:
            batches.append(current)
    return [batches[i] for i in rng.permutation(len(batches))]


@pytest.mark.parametrize(("window", "max_tokens"), [(1 << 17, 200), (97, 200), (1000, 37), (5, 4000)])
def test_the_array_plan_is_the_element_by_element_plan(window, max_tokens):
    rng = np.random.default_rng(3)
    src, tgt = rng.integers(1, 60, 3000), rng.integers(1, 60, 3000)
    src[::50] = 100  # some too wide for max_tokens=37
    for epoch in (0, 4):
        expected = reference_batches(src, tgt, max_tokens, 9, epoch, window)
        plan = TokenBatchSampler(src, tgt, max_tokens, seed=9, window=window).global_batches(epoch)
        assert plan == expected and len(plan) == len(expected)
        for world in (1, 3):
            for rank in range(world):
                mine = TokenBatchSampler(src, tgt, max_tokens, 9, rank, world, window).batches(epoch)
                per_rank = len(expected) // world
                assert mine == expected[rank : per_rank * world : world]
    mix = CorpusMix(np.repeat(np.arange(3, dtype=np.uint8), 1000), [2.0, 0.5, 1.0], seed=9)
    sampler = TokenBatchSampler(src, tgt, max_tokens, seed=9, window=window, mix=mix)
    assert sampler.batches(1) == reference_batches(src, tgt, max_tokens, 9, 1, window, mix.indices(1))


def test_a_plan_is_a_sequence_of_batches():
    plan = BatchPlan(np.array([4, 2, 7, 1, 0]), np.array([0, 2, 2, 5]))
    assert len(plan) == 3 and plan[0] == [4, 2] and plan[1] == [] and plan[-1] == [7, 1, 0]
    assert plan[1:] == [[], [7, 1, 0]] and list(plan) == [[4, 2], [], [7, 1, 0]]
    with pytest.raises(IndexError):
        plan[3]


def test_packing_run_by_run_is_greedy_packing_pair_by_pair():
    rng = np.random.default_rng(5)
    for max_tokens in (1, 7, 50, 1000):
        widths = sorted(set(rng.integers(1, max_tokens + 1, 12).tolist()))
        counts = rng.integers(1, 40, len(widths)).tolist()
        greedy, width, size = [], 0, 0  # each pair in turn: a new batch when it would not fit
        for i, w in enumerate(np.repeat(widths, counts).tolist()):
            if not size or (size + 1) * max(width, w) > max_tokens:
                greedy.append(i)
                width, size = 0, 0
            width, size = max(width, w), size + 1
        assert progressions(pack_runs(widths, counts, max_tokens)).tolist() == greedy


@pytest.mark.parametrize(
    ("longest", "n", "rank_dtype"), [(6000, 3000, np.uint16), (3000, 150_000, np.uint32)]
)
def test_wide_pairs_and_many_distinct_lengths_give_the_element_by_element_plan(longest, n, rank_dtype):
    # widths past 4,095 rank their keys by a sort, not a table; past 65,536 distinct keys ranks are 32-bit
    rng = np.random.default_rng(6)
    src, tgt = rng.integers(1, longest, n), rng.integers(1, longest, n)
    sampler = TokenBatchSampler(src, tgt, 3000, seed=4, window=1 << 15)
    assert sampler._ranks.dtype == rank_dtype
    assert sampler.global_batches(2) == reference_batches(src, tgt, 3000, 4, 2, 1 << 15)
