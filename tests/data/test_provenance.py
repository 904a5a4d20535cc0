"""Which source each train pair came from (aiayn.data.provenance): removals counted by rule and
source, the length filters applied chunk by chunk, and meta.json's per-source report."""

from __future__ import annotations

import numpy as np
import pytest

from aiayn.data.provenance import Sources


def test_each_step_is_counted_by_source_and_the_report_shares_the_stream():
    sources = Sources(["bible", "web"], [1.0, 3.0], [4, 6])  # pairs 0-3 bible, 4-9 web
    sources.remove("duplicate", np.array([1, 0, 0, 0, 1, 1, 0, 0, 0, 0], dtype=bool))
    assert sources.corpus.tolist() == [0, 0, 0, 1, 1, 1, 1]
    sources.note_lengths(0, [None, "too long", None])  # the length filters in two chunks
    assert len(sources.corpus) == 7  # applied only with the last chunk
    sources.note_lengths(3, ["ratio", None, "too long", None])
    assert sources.corpus.tolist() == [0, 0, 1, 1]
    sources.count("sampled out", np.array([False, False, True, False]))  # counted, not removed
    report = sources.describe()
    assert report == [
        {"name": "bible", "weight": 1.0, "staged": 4, "kept": 2, "share": pytest.approx(2 / 8),
         "removed": {"duplicate": 1, "too long": 1}},
        {"name": "web", "weight": 3.0, "staged": 6, "kept": 2, "share": pytest.approx(6 / 8),
         "removed": {"duplicate": 2, "ratio": 1, "too long": 1, "sampled out": 1}},
    ]  # fmt: skip


def test_a_source_with_nothing_left_has_no_share():
    sources = Sources(["only"], [2.0], [2])
    sources.remove("empty", np.array([True, True]))
    assert sources.describe() == [
        {"name": "only", "weight": 2.0, "staged": 2, "removed": {"empty": 2}, "kept": 0, "share": 0.0}
    ]
