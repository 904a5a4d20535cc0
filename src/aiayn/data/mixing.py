"""Several corpora in one training stream, in the proportions a data recipe's weights give.

Each epoch takes every pair of a source with weight w floor(w) times, and a seeded sample of
frac(w) n more of its n pairs (a different sample each epoch; a fractional count is rounded up
with the probability of its fraction, so a one-pair source of weight 0.5 is read every other
epoch on average): weight 2 upsamples a small in-domain corpus twice (fairseq's
`--upsample-primary`), 0.5 reads half of a large crawled one per epoch. The share of source i in
the stream is w_i n_i / sum_j w_j n_j. The pairs of an epoch are a function of (seed, epoch)
alone, so a run resumes exactly (`batching.BatchStream`); the token buckets of
`batching.TokenBatchSampler` are then made from them as from a single corpus.

DATA/train.corpus.npy (written by `aiayn prepare --recipe`) gives each train pair's source (uint8,
in the order of meta.json's "sources"); the weights are meta.json's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from aiayn.errors import AiaynError

CORPUS_FILE = "train.corpus.npy"


class CorpusMix:
    """The train pairs (indices, repeats allowed) of each epoch, by source weight."""

    def __init__(self, corpus: np.ndarray, weights: Sequence[float], seed: int = 1) -> None:
        self.corpus = np.asarray(corpus)  # (n,) source of each pair
        self.weights = [float(w) for w in weights]
        if self.corpus.size and int(self.corpus.max()) >= len(self.weights):
            raise AiaynError(
                f"a train pair names source {int(self.corpus.max())}, but there are {len(weights)}"
            )
        self.seed = seed
        self.members = [np.flatnonzero(self.corpus == c) for c in range(len(self.weights))]  # (n_c,) each

    def indices(self, epoch: int) -> np.ndarray:
        """(m,) int64: the epoch's pairs, source by source (the sampler shuffles them)."""
        rng = np.random.default_rng([self.seed, epoch, 1])
        parts = []
        for members, weight in zip(self.members, self.weights, strict=True):
            whole, share = int(weight), (weight - int(weight)) * len(members)
            extra = int(share) + int(rng.random() < share - int(share))  # the remainder, on average
            parts.extend([members] * whole)
            if extra:
                parts.append(np.sort(rng.choice(members, size=extra, replace=False)))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def shares(self) -> list[float]:
        """Each source's expected share of an epoch's pairs."""
        sizes = [w * len(m) for w, m in zip(self.weights, self.members, strict=True)]
        total = sum(sizes) or 1.0
        return [s / total for s in sizes]


def read_mix(data_dir: str | Path, meta: dict, seed: int, n_pairs: int) -> CorpusMix | None:
    """The data directory's CorpusMix, or None when it has one source or every weight is 1 (then
    every pair is read once an epoch, exactly as without a recipe)."""
    sources = meta.get("sources") or []
    weights = [s.get("weight", 1.0) for s in sources]
    if len(sources) < 2 or all(w == 1.0 for w in weights):
        return None
    path = Path(data_dir) / CORPUS_FILE
    try:
        corpus = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise AiaynError(f"{path}: cannot read which source each train pair is from: {err}") from None
    if corpus.shape != (n_pairs,) or corpus.dtype.kind != "u":
        raise AiaynError(
            f"{path}: expected {n_pairs} unsigned source numbers, found shape {corpus.shape} {corpus.dtype}"
        )
    return CorpusMix(corpus, weights, seed)
