"""Fixtures for the Marian interop tests (helpers in marian_helpers.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from marian_helpers import SOURCE_WORDS, TARGET_WORDS, marian_vocab, synthetic_text, train_spm


@pytest.fixture(scope="session")
def tokenizer_files(tmp_path_factory) -> dict[str, Path]:
    """Two directories of Marian tokenizer files: "shared" (one vocab.json) and "separate"."""
    root = tmp_path_factory.mktemp("marian_tok")
    src = train_spm(synthetic_text(SOURCE_WORDS, 400, 1), root / "source", 40)
    tgt = train_spm(synthetic_text(TARGET_WORDS, 400, 2), root / "target", 36)
    dirs = {"shared": root / "shared", "separate": root / "separate"}
    for d in dirs.values():
        d.mkdir()
        shutil.copyfile(src, d / "source.spm")
        shutil.copyfile(tgt, d / "target.spm")
    (dirs["shared"] / "vocab.json").write_text(json.dumps(marian_vocab([src, tgt])))
    # separate vocabularies share one pad id in Marian's config: put <pad> at 2 in both
    (dirs["separate"] / "vocab.json").write_text(json.dumps(marian_vocab([src], pad_at=2)))
    (dirs["separate"] / "target_vocab.json").write_text(json.dumps(marian_vocab([tgt], pad_at=2)))
    (dirs["separate"] / "tokenizer_config.json").write_text(json.dumps({"separate_vocabs": True}))
    return dirs
