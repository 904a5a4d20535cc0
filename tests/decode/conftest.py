"""Fixtures for the Translator and CLI tests: a data directory of the toy word-for-word task of
tests/toy_translation.py (the toy model itself is the session fixture `toy_model_dir`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from toy_translation import toy_pairs


@pytest.fixture(scope="session")
def toy_data_dir(tmp_path_factory) -> Path:
    """A data directory with only what evaluation reads: raw/test.src and raw/test.tgt."""
    data = tmp_path_factory.mktemp("decode-data")
    (data / "raw").mkdir()
    pairs = toy_pairs(40, seed=7)
    (data / "raw" / "test.src").write_text("".join(s + "\n" for s, _ in pairs))
    (data / "raw" / "test.tgt").write_text("".join(t + "\n" for _, t in pairs))
    return data
