"""Fixtures for the Translator and CLI tests: a d_model=32 Transformer trained for a few seconds on
the toy word-for-word task of toy_translator.py, and a data directory of that task."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from toy_translator import toy_pairs, train_toy

from aiayn.config import ModelConfig
from aiayn.data.tokenizer import Tokenizer
from aiayn.model.io import save_model_dir
from aiayn.model.transformer import Transformer


@pytest.fixture(scope="session")
def toy_model_dir(tmp_path_factory) -> Path:
    """config.json + model.safetensors + spm.model of the toy translator."""
    out = tmp_path_factory.mktemp("decode") / "model"
    out.mkdir()
    pairs = toy_pairs(512)
    tokenizer = Tokenizer.train([x for pair in pairs for x in pair], out / "spm.model", vocab_size=60)
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size, d_model=32, d_ff=64, n_heads=4, n_layers=2, dropout=0.0
    )
    model = Transformer(config)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # matrices this small gain nothing from threads; a busy machine loses a lot
    try:
        train_toy(model, tokenizer, pairs, steps=250)
    finally:
        torch.set_num_threads(threads)
    return save_model_dir(model, out, src_lang="es", tgt_lang="en")


@pytest.fixture(scope="session")
def toy_data_dir(tmp_path_factory) -> Path:
    """A data directory with only what evaluation reads: raw/test.src and raw/test.tgt."""
    data = tmp_path_factory.mktemp("decode-data")
    (data / "raw").mkdir()
    pairs = toy_pairs(40, seed=7)
    (data / "raw" / "test.src").write_text("".join(s + "\n" for s, _ in pairs))
    (data / "raw" / "test.tgt").write_text("".join(t + "\n" for _, t in pairs))
    return data
