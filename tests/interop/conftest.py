"""Fixtures for the Marian interop tests (helpers in marian_helpers.py) and the ONNX ones (onnx_helpers.py;
the export itself is tests/conftest.py's `onnx_dir`)."""

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


@pytest.fixture(scope="session")
def onnx_toy(toy_model_dir):
    """The toy translator, and its ids into the export's order and back."""
    import torch

    from aiayn.decode.translator import Translator
    from aiayn.interop.opus_layout import OpusLayout

    translator = Translator.load(toy_model_dir, device="cpu")
    layout = OpusLayout.of(translator.config)
    return translator, layout.target, torch.argsort(layout.target)  # export id -> aiayn id, and back
