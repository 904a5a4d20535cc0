"""Staging for `aiayn prepare` (aiayn.data.stage): non-empty pairs written and counted, where each
valid or test pair came from, and `--train-limit`'s seeded sample kept in order."""

from __future__ import annotations

from collections import Counter

import numpy as np

from aiayn.data.stage import Stage, read_lines, sample_train, staged_pairs


def stage_pairs(stage_dir, split: str, pairs, counts) -> Stage:
    stage = Stage(stage_dir, split, counts)
    stage.prefix = ">>en<< " if split == "valid" else ""
    for i, (source, target) in enumerate(pairs, start=1):
        stage.add(source, target, f"corpus.es:{i}")
    stage.close()
    return stage


def test_empty_pairs_are_counted_and_dropped_and_held_out_pairs_say_where_they_came_from(tmp_path):
    counts = Counter()
    pairs = [("uno", "one"), ("", "two"), ("tres\r", "three"), ("cuatro", "")]
    assert stage_pairs(tmp_path, "valid", pairs, counts).staged == 2
    assert counts == {"read": 4, "empty": 2}
    assert list(staged_pairs(tmp_path, "valid")) == [(">>en<< uno", "one"), (">>en<< tres\r", "three")]
    assert list(read_lines(tmp_path / "valid.where")) == ["corpus.es:1", "corpus.es:3"]
    stage_pairs(tmp_path, "train", pairs, Counter())
    assert not (tmp_path / "train.where").exists()  # train pairs are found by their line


def test_the_train_limit_keeps_a_seeded_sample_in_order(tmp_path):
    pairs = [(f"s{i}", f"t{i}") for i in range(20)]
    stage_pairs(tmp_path, "train", pairs, Counter())
    counts = Counter()
    assert sample_train(tmp_path, counts, 20, seed=1) is None and not counts  # all of them: nothing to do
    keep = sample_train(tmp_path, counts, 6, seed=1)
    expected = np.zeros(20, dtype=bool)
    expected[np.random.default_rng(1).choice(20, size=6, replace=False)] = True
    assert np.array_equal(keep, expected) and counts == {"train_limit": 14}
    assert list(staged_pairs(tmp_path, "train")) == [p for p, k in zip(pairs, expected, strict=True) if k]
