"""Shared test settings: deterministic, two threads (the CI machine has two cores), and the toy
translator's model directory (toy_translation.py), trained once per session."""

from pathlib import Path

import pytest
import torch

from toy_translation import build_toy_model_dir

torch.set_num_threads(2)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def toy_model_dir(tmp_path_factory) -> Path:
    """config.json + model.safetensors + spm.model of the toy translator."""
    return build_toy_model_dir(tmp_path_factory.mktemp("toy") / "model")
