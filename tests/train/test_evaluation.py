"""The shuffled-source dev probe: every target keeps its own text but gets another source."""

import numpy as np

from aiayn.train.evaluation import ShuffledSources


class Pairs:
    def __init__(self, n):
        self.src = [np.array([i, 3]) for i in range(n)]
        self.tgt = [np.array([100 + i, 7, 3]) for i in range(n)]
        self.src_lengths = np.array([len(s) for s in self.src])
        self.tgt_lengths = np.array([len(t) for t in self.tgt])

    def __len__(self):
        return len(self.src)

    def __getitem__(self, i):
        return self.src[i], self.tgt[i]


def test_shuffled_sources_is_a_derangement_that_keeps_targets():
    data = Pairs(50)
    view = ShuffledSources(data, seed=3)
    sources = [int(view[i][0][0]) for i in range(50)]
    assert sorted(sources) == list(range(50))  # every source used once
    assert all(s != i for i, s in enumerate(sources))  # none with its own target
    assert all(int(view[i][1][0]) == 100 + i for i in range(50))
    assert np.array_equal(view.src_lengths, data.src_lengths[np.array(sources)])
    assert [int(ShuffledSources(data, seed=3)[i][0][0]) for i in range(50)] == sources  # seeded
