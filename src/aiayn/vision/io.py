"""The image-model directory: what `aiayn vision-attention` and `load_vision_model` take.

config.json        {"format_version", "aiayn_version", "task": "image-classification", "vision": VisionConfig,
                    "classes": [...], plus test accuracy and the like}
model.safetensors  the weights (no pickle)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from aiayn import __version__
from aiayn.config import FORMAT_VERSION, ConfigError
from aiayn.errors import AiaynError
from aiayn.model.io import load_weights, read_config_json, save_weights, write_config_json
from aiayn.safe_io import vacant
from aiayn.vision.model import VisionConfig, VisionTransformer

TASK = "image-classification"


def save_vision_model(model: VisionTransformer, out_dir: str | Path, classes: list[str], **info: Any) -> Path:
    """Write config.json and model.safetensors (each via a temporary file and a rename)."""
    out = save_weights(model, out_dir)
    data = {
        "format_version": FORMAT_VERSION,
        "aiayn_version": __version__,
        "task": TASK,
        "vision": model.config.to_dict(),
        "classes": list(classes),
        **info,
    }
    write_config_json(out, data)
    return out


def check_vision_model_out(out: str | Path) -> None:
    """A one-line AiaynError unless `out` may receive an image model: absent, empty, or an image
    model directory (replaced). A text model or anything else there is never overwritten."""
    out = Path(out)
    if vacant(out):
        return
    try:
        ours = read_config_json(out)[1].get("task") == TASK
    except AiaynError:
        ours = False
    if not ours:
        raise AiaynError(f"{out} exists and is not an image model directory; choose another --out")


def read_vision_config(model_dir: str | Path) -> tuple[VisionConfig, dict[str, Any]]:
    """config.json -> (VisionConfig, the whole dict), with clear errors for other directories."""
    path, data = read_config_json(model_dir)
    if data.get("task") != TASK:
        raise AiaynError(
            f"{path}: not an image model (task {data.get('task')!r}); `aiayn vision-train` makes one"
        )
    try:
        return VisionConfig.from_dict(data["vision"]), data
    except (KeyError, ConfigError, TypeError) as err:
        raise AiaynError(f"{path}: invalid vision config: {err}") from None


def load_vision_model(
    model_dir: str | Path, device: str | torch.device | None = None
) -> tuple[VisionTransformer, dict[str, Any]]:
    """-> (VisionTransformer in eval mode, config.json as a dict)."""
    config, data = read_vision_config(model_dir)
    return load_weights(VisionTransformer(config), model_dir, device), data
