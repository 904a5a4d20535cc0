"""Which source each train pair came from, through `aiayn prepare`'s steps, and what each step took
from each source: the per-corpus report of a recipe (meta.json's "sources") and train.corpus.npy.

Sources are staged one after the other, so the staged pairs' sources are runs of the sizes staged;
every later step (cleaning, --train-limit's sample, the length filters) keeps pairs in their order,
so applying each step's keep-mask to the array follows them to the shards.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class Sources:
    """The source of every train pair still in the running, and the count each rule removed."""

    def __init__(self, names: Sequence[str], weights: Sequence[float], sizes: Sequence[int]) -> None:
        self.names, self.weights, self.staged = list(names), list(weights), [int(n) for n in sizes]
        self.corpus = np.repeat(np.arange(len(names), dtype=np.uint8), self.staged)  # (pairs,)
        self.removed: dict[str, dict[str, int]] = {name: {} for name in self.names}
        self._length_keep: list[np.ndarray] = []

    def count(self, rule: str, removed: np.ndarray) -> None:
        """Count the pairs where `removed` (pairs,) is True under `rule`, by source."""
        for c, n in enumerate(np.bincount(self.corpus[removed], minlength=len(self.names)).tolist()):
            if n:
                self.removed[self.names[c]][rule] = self.removed[self.names[c]].get(rule, 0) + n

    def remove(self, rule: str, removed: np.ndarray) -> None:
        """Pairs where `removed` (pairs,) is True leave under `rule`."""
        self.count(rule, removed)
        self.corpus = self.corpus[~removed]

    def note_lengths(self, start: int, dropped: Sequence[str | None]) -> None:
        """The length filters' verdicts on pairs start, start + 1, ... (None: kept), chunk by chunk;
        the last chunk's call applies them all."""
        keep = np.array([rule is None for rule in dropped], dtype=bool)
        ids = self.corpus[start : start + len(dropped)]
        for rule in {r for r in dropped if r is not None}:
            for c, n in enumerate(np.bincount(ids[[r == rule for r in dropped]], minlength=len(self.names))):
                if n:
                    self.removed[self.names[c]][rule] = self.removed[self.names[c]].get(rule, 0) + int(n)
        self._length_keep.append(keep)
        if start + len(dropped) == len(self.corpus):
            self.corpus = self.corpus[np.concatenate(self._length_keep)]
            self._length_keep = []

    def describe(self) -> list[dict]:
        """meta.json's "sources": per source its weight, pairs staged, removed by rule, kept, and its
        share of the training stream (w n / sum w n)."""
        kept = np.bincount(self.corpus, minlength=len(self.names)).tolist()
        total = sum(w * n for w, n in zip(self.weights, kept, strict=True)) or 1.0
        return [
            {
                "name": name,
                "weight": weight,
                "staged": staged,
                "removed": self.removed[name],
                "kept": n,
                "share": round(weight * n / total, 6),
            }
            for name, weight, staged, n in zip(self.names, self.weights, self.staged, kept, strict=True)
        ]
