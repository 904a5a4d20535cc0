"""Several weighted corpora in one training stream: each epoch's pairs, and the batches made of them."""

from __future__ import annotations

import numpy as np
import pytest

from aiayn.data.batching import BatchStream, TokenBatchSampler
from aiayn.data.mixing import CORPUS_FILE, CorpusMix, read_mix
from aiayn.errors import AiaynError

CORPUS = np.array([0] * 30 + [1] * 10 + [2] * 20, dtype=np.uint8)  # (60,) three sources


def test_whole_weights_repeat_and_fractions_sample_anew_each_epoch():
    mix = CorpusMix(CORPUS, [1.0, 2.0, 0.5], seed=3)
    epochs = [mix.indices(e) for e in range(3)]
    for pairs in epochs:
        counts = np.bincount(pairs, minlength=60)
        assert (counts[:30] == 1).all() and (counts[30:40] == 2).all()
        assert counts[40:].sum() == 10 and counts[40:].max() == 1  # half of the third, no repeats
    halves = [set(p[p >= 40].tolist()) for p in epochs]
    assert halves[0] != halves[1] or halves[1] != halves[2]  # another half in another epoch
    assert np.array_equal(mix.indices(1), CorpusMix(CORPUS, [1.0, 2.0, 0.5], seed=3).indices(1))  # resumable
    assert mix.shares() == pytest.approx([30 / 60, 20 / 60, 10 / 60])


def test_the_sampler_batches_exactly_the_epochs_pairs():
    lengths = np.arange(60) % 7 + 3
    mix = CorpusMix(CORPUS, [1.0, 2.0, 0.5], seed=1)
    sampler = TokenBatchSampler(lengths, lengths, max_tokens=40, seed=1, mix=mix)
    for epoch in range(2):
        taken = np.sort(np.concatenate([np.array(b) for b in sampler.batches(epoch)]))
        assert np.array_equal(taken, np.sort(mix.indices(epoch)))
    stream = BatchStream(sampler, epoch=1, index=2)  # a resume mid-epoch takes what the run would have
    assert stream.next() == sampler.batches(1)[2]
    plain = TokenBatchSampler(lengths, lengths, max_tokens=40, seed=1)
    ones = TokenBatchSampler(lengths, lengths, max_tokens=40, seed=1, mix=CorpusMix(CORPUS, [1, 1, 1]))
    assert sorted(map(sorted, plain.batches(0))) == sorted(map(sorted, ones.batches(0)))


def test_read_mix(tmp_path):
    meta = {"sources": [{"name": "a", "weight": 1.0}, {"name": "b", "weight": 3.0}]}
    with pytest.raises(AiaynError, match="cannot read which source"):
        read_mix(tmp_path, meta, seed=1, n_pairs=60)
    np.save(tmp_path / CORPUS_FILE, CORPUS[:59].clip(0, 1))
    with pytest.raises(AiaynError, match="expected 60 unsigned source numbers"):
        read_mix(tmp_path, meta, seed=1, n_pairs=60)
    np.save(tmp_path / CORPUS_FILE, CORPUS.clip(0, 1))
    assert read_mix(tmp_path, meta, seed=1, n_pairs=60).weights == [1.0, 3.0]
    assert read_mix(tmp_path, {"sources": [{"name": "a", "weight": 1.0}] * 2}, seed=1, n_pairs=60) is None
    assert read_mix(tmp_path, {}, seed=1, n_pairs=60) is None


def test_a_fraction_of_one_pair_is_read_in_about_that_share_of_epochs():
    mix = CorpusMix(np.array([0] * 10 + [1], dtype=np.uint8), [1.0, 0.5], seed=2)
    read = [int((mix.indices(epoch) == 10).sum()) for epoch in range(400)]
    assert set(read) == {0, 1} and 160 < sum(read) < 240


def test_widths_of_zero_are_refused():
    with pytest.raises(ValueError, match="at least 1"):
        TokenBatchSampler(np.array([3, 0]), np.array([2, 0]), max_tokens=10)
