"""The batch plan kept in the data directory (aiayn.data.plan_cache): a sampler reading it gives the
batches a sampler that sorts gives, for every rank and epoch, with and without a corpus mix; a plan
of other lengths, of another mix draw or damaged is not read; two epochs are kept; a directory that
cannot be written leaves the batches as they are."""

from __future__ import annotations

import numpy as np
import pytest

from aiayn.data.batching import TokenBatchSampler
from aiayn.data.mixing import CorpusMix

MAX_TOKENS = 300


@pytest.fixture(scope="module")
def lengths():
    rng = np.random.default_rng(1)
    src = rng.integers(1, 60, size=2000)
    return src, np.clip(src + rng.integers(-10, 10, size=2000), 1, None)


def sampler(lengths, cache=None, rank=0, world_size=1, mix=None, seed=4):
    src, tgt = lengths
    return TokenBatchSampler(src, tgt, MAX_TOKENS, seed, rank, world_size, window=500, mix=mix, cache=cache)


def sorting_forbidden(monkeypatch):
    def refuse(self, epoch, pool):
        raise AssertionError(f"epoch {epoch} sorted again")

    monkeypatch.setattr(TokenBatchSampler, "_compute", refuse)


@pytest.mark.parametrize("mixed", [False, True])
def test_a_cached_plan_gives_the_same_batches(lengths, tmp_path, monkeypatch, mixed):
    mix = (
        (lambda: CorpusMix(np.repeat(np.arange(2, dtype=np.uint8), 1000), [2.0, 0.5], seed=3))
        if mixed
        else None
    )
    fresh = {(e, r): sampler(lengths, None, r, 2, mix and mix()).batches(e) for e in (0, 1) for r in (0, 1)}
    for e in (0, 1):
        assert sampler(lengths, tmp_path, 0, 2, mix and mix()).batches(e) == fresh[e, 0]  # computed, kept
    sorting_forbidden(monkeypatch)
    for (e, r), batches in fresh.items():  # read back, by every rank
        assert sampler(lengths, tmp_path, r, 2, mix and mix()).batches(e) == batches


def test_another_corpus_seed_or_draw_is_not_read_and_a_damaged_plan_is_redone(lengths, tmp_path, monkeypatch):
    sampler(lengths, tmp_path).batches(0)
    src, tgt = lengths
    other = TokenBatchSampler(src[::-1].copy(), tgt, MAX_TOKENS, 4, window=500, cache=tmp_path)
    assert other.batches(0) == TokenBatchSampler(src[::-1].copy(), tgt, MAX_TOKENS, 4, window=500).batches(0)
    assert sampler(lengths, tmp_path, seed=5).batches(0) == sampler(lengths, seed=5).batches(0)
    assert len(list(tmp_path.glob("*.npz"))) == 3  # one plan per key
    (path,) = [p for p in tmp_path.glob("*.npz") if p.name.startswith(sampler(lengths, tmp_path).plans.key)]
    path.write_bytes(path.read_bytes()[:100])  # damaged
    assert sampler(lengths, tmp_path).batches(0) == sampler(lengths).batches(0)
    sorting_forbidden(monkeypatch)
    sampler(lengths, tmp_path).batches(0)  # written again whole
    mixed = CorpusMix(np.repeat(np.arange(2, dtype=np.uint8), 1000), [2.0, 0.5], seed=3)
    assert sampler(lengths, tmp_path).plans.load(0, "another draw") is None
    with pytest.raises(AssertionError, match="sorted again"):
        sampler(lengths, tmp_path, mix=mixed).batches(0)


def test_two_epochs_are_kept_and_an_unwritable_directory_caches_nothing(lengths, tmp_path):
    cached = sampler(lengths, tmp_path / "cache")
    for epoch in range(4):
        cached.batches(epoch)
    assert sorted(p.name[-9:] for p in (tmp_path / "cache").iterdir()) == ["00002.npz", "00003.npz"]
    (tmp_path / "file").write_text("")
    assert sampler(lengths, tmp_path / "file" / "cache").batches(1) == sampler(lengths).batches(1)
