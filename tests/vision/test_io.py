"""Vision model directories (aiayn.vision.io): saved and loaded back to the same logits, text models
refused."""

from __future__ import annotations

import pytest
import torch

from aiayn.errors import AiaynError
from aiayn.vision.io import load_vision_model, save_vision_model
from aiayn.vision.model import VisionConfig, VisionTransformer


def test_model_directory_round_trip(tmp_path):
    config = VisionConfig(patch_size=7, d_model=32, d_ff=64, n_heads=4, n_layers=2, stem_channels=0)
    model = VisionTransformer(config)
    torch.nn.init.normal_(model.head.weight)
    save_vision_model(model, tmp_path / "m", [str(i) for i in range(10)], test_accuracy=0.5)
    loaded, info = load_vision_model(tmp_path / "m")
    images = torch.rand(2, 1, 28, 28)
    torch.testing.assert_close(loaded(images), model.eval()(images), atol=0, rtol=0)
    assert info["classes"][3] == "3" and info["test_accuracy"] == 0.5
    assert loaded.config == model.config


def test_a_text_model_directory_is_refused(tmp_path):
    (tmp_path / "config.json").write_text('{"format_version": 1, "model": {}}')
    with pytest.raises(AiaynError, match="not an image model"):
        load_vision_model(tmp_path)
    with pytest.raises(AiaynError, match="not a model directory"):
        load_vision_model(tmp_path / "nowhere")
