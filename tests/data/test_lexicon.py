"""IBM Model 1 (aiayn.data.lexicon) against a plain-Python EM written from Brown et al. (1993), and
the frequency count against collections.Counter."""

from collections import Counter, defaultdict

import numpy as np
import pytest
import torch

from aiayn.data.lexicon import ibm_model1, most_frequent

NULL = 5  # source vocabulary 5: the NULL word is id 5
CORPUS = [  # (source ids, target ids): a hand-made corpus where 0 -> 10, 1 -> 11, 2 -> 12 mostly
    ([0, 1], [10, 11]),
    ([0, 2], [10, 12]),
    ([1, 2, 3], [11, 12, 13]),
    ([0], [10]),
    ([4, 0], [14, 14, 10]),
    ([1, 1], [11]),
]


def reference_model1(pairs, iterations):
    """t[(s, t)] after `iterations` EM iterations from uniform, dicts and loops only."""
    t = defaultdict(lambda: 1.0)
    for _ in range(iterations):
        count, total = defaultdict(float), defaultdict(float)
        for src, tgt in pairs:
            src = [*src, NULL]
            for f in tgt:
                z = sum(t[(e, f)] for e in src)
                for e in src:
                    count[(e, f)] += t[(e, f)] / z
                    total[e] += t[(e, f)] / z
        t = defaultdict(float, {(e, f): c / total[e] for (e, f), c in count.items()})
    return dict(t)


@pytest.mark.parametrize("iterations", [1, 3])
def test_model1_matches_a_plain_em(iterations):
    pairs = [(np.array(s), np.array(t)) for s, t in CORPUS]
    table = ibm_model1(pairs, 5, 15, iterations)
    expected = reference_model1(CORPUS, iterations)
    got = {(int(k) // 15, int(k) % 15): float(p) for k, p in zip(table.keys, table.prob, strict=True)}
    assert got.keys() == expected.keys()  # exactly the co-occurring pairs, NULL included
    for key, p in expected.items():
        assert got[key] == pytest.approx(p, rel=1e-5, abs=1e-7)


def test_first_iteration_is_co_occurrence_over_source_length():
    """From uniform probabilities, c(s, t) is the co-occurrence count shared by the |source| + 1 words."""
    table = ibm_model1([(np.array([0, 1]), np.array([10, 11]))] * 3, 5, 15, 1)
    assert torch.allclose(table.prob, torch.full((len(table.prob),), 0.5))  # each source: 2 targets, equal


def test_top_k_orders_by_probability_and_pads():
    pairs = [(np.array(s), np.array(t)) for s, t in CORPUS]
    table = ibm_model1(pairs, 5, 15, 5)
    ids, probs = table.top(2)
    assert ids.shape == (5, 2)
    assert ids[0, 0] == 10 and ids[1, 0] == 11 and ids[2, 0] == 12 and ids[4, 0] == 14
    assert bool((probs[:, 0] >= probs[:, 1]).all())
    expected = reference_model1(CORPUS, 5)
    for s in range(5):
        row = sorted(((p, f) for (e, f), p in expected.items() if e == s), key=lambda x: (-x[0], x[1]))
        assert ids[s, : len(row)].tolist() == [f for _, f in row[:2]]
        assert ids[s, len(row) :].tolist() == [-1] * max(0, 2 - len(row))
    ids, probs = table.top(10**9)  # no more than the target vocabulary (nothing allocated for the rest)
    assert ids.shape == probs.shape == (5, 15) and ids[0, 0] == 10


def test_most_frequent_counts():
    targets = [np.array(t) for _, t in CORPUS]
    counts = Counter(x for t in targets for x in t.tolist())
    got = most_frequent(targets, 15, 3).tolist()
    assert got == [f for f, _ in sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:3]]
    assert len(most_frequent(targets, 15, 100)) == len(counts)  # only ids that occur
