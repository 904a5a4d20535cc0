"""The image-model directory: what `aiayn vision-attention` and `load_vision_model` take.

config.json        {"format_version", "task": "image-classification", "vision": VisionConfig,
                    "classes": [...], plus test accuracy and the like}
model.safetensors  the weights (no pickle)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_model

from aiayn.config import FORMAT_VERSION, ConfigError
from aiayn.errors import AiaynError
from aiayn.model.io import load_weights
from aiayn.vision.model import VisionConfig, VisionTransformer

CONFIG_FILE, WEIGHTS_FILE, TASK = "config.json", "model.safetensors", "image-classification"


def save_vision_model(model: VisionTransformer, out_dir: str | Path, classes: list[str], **info: Any) -> Path:
    """Write config.json and model.safetensors (each via a temporary file and a rename)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_model(model, str(out / (WEIGHTS_FILE + ".tmp")))
    os.replace(out / (WEIGHTS_FILE + ".tmp"), out / WEIGHTS_FILE)
    data = {
        "format_version": FORMAT_VERSION,
        "task": TASK,
        "vision": model.config.to_dict(),
        "classes": list(classes),
        **info,
    }
    (out / (CONFIG_FILE + ".tmp")).write_text(json.dumps(data, indent=2) + "\n")
    os.replace(out / (CONFIG_FILE + ".tmp"), out / CONFIG_FILE)
    return out


def read_vision_config(model_dir: str | Path) -> tuple[VisionConfig, dict[str, Any]]:
    """config.json -> (VisionConfig, the whole dict), with clear errors for other directories."""
    path = Path(model_dir) / CONFIG_FILE
    if not path.is_file():
        raise AiaynError(f"{model_dir}: not a model directory (no {CONFIG_FILE})")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise AiaynError(f"{path}:{err.lineno}: invalid JSON: {err.msg}") from None
    if data.get("format_version") != FORMAT_VERSION:
        raise AiaynError(f"{path}: format_version {data.get('format_version')!r} is not {FORMAT_VERSION}")
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
