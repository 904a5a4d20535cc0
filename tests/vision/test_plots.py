"""The PNGs of vision models (aiayn.vision.plots): attention over an image file, bad images refused."""

from __future__ import annotations

import numpy as np
import pytest

from aiayn.errors import AiaynError
from aiayn.vision.io import save_vision_model
from aiayn.vision.model import VisionConfig, VisionTransformer
from aiayn.vision.plots import plot_attention


@pytest.mark.parametrize("method", ["rollout", "cls"])
def test_plot_attention_of_an_image_file_writes_a_png(tmp_path, method):
    from PIL import Image

    model = VisionTransformer(VisionConfig(d_model=32, d_ff=64, n_heads=2, n_layers=2))
    classes = [f"class {i}" for i in range(10)]
    save_vision_model(model, tmp_path / "model", classes)
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (40, 30), dtype=np.uint8)).save(
        tmp_path / "in.png"
    )
    out, predicted, p = plot_attention(
        tmp_path / "model", tmp_path / "a.png", image_file=tmp_path / "in.png", method=method
    )
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert predicted in classes and p == pytest.approx(0.1)  # the head starts at zero: uniform


def test_plot_attention_refuses_what_is_not_an_image(tmp_path):
    model = VisionTransformer(VisionConfig(d_model=32, d_ff=64, n_heads=2, n_layers=1))
    save_vision_model(model, tmp_path / "model", [str(i) for i in range(10)])
    (tmp_path / "bad.png").write_text("no pixels here")
    with pytest.raises(AiaynError, match="cannot read the image"):
        plot_attention(tmp_path / "model", tmp_path / "a.png", image_file=tmp_path / "bad.png")
