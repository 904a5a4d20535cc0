"""The model directory: what `translate`, `evaluate`, `serve` and `Translator.load` take.

    config.json        {"format_version", "model": ModelConfig, "src_lang", "tgt_lang", "tokenizer"}
    model.safetensors  the weights (no pickle: loading a model someone else made runs no code)
    spm.model          the SentencePiece model (or the files named in config.json's "tokenizer")

Tied parameters are stored once (safetensors' save_model de-duplicates shared tensors).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_model, save_model
from torch import nn

from aiayn.config import FORMAT_VERSION, ConfigError, ModelConfig
from aiayn.errors import AiaynError
from aiayn.model.transformer import Transformer

CONFIG_FILE, WEIGHTS_FILE, SPM_FILE = "config.json", "model.safetensors", "spm.model"


def write_config(out_dir: Path, config: ModelConfig, **info: Any) -> None:
    """Write config.json: the model config plus languages, tokenizer settings and the like."""
    data = {"format_version": FORMAT_VERSION, "model": config.to_dict(), **info}
    data.setdefault("tokenizer", {"type": "sentencepiece", "model": SPM_FILE})
    write_config_json(out_dir, data)


def write_config_json(out_dir: Path, data: dict[str, Any]) -> None:
    """Write OUT/config.json through a temporary file and a rename (a crash leaves the old one)."""
    tmp = out_dir / (CONFIG_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, out_dir / CONFIG_FILE)


def read_config_json(model_dir: str | Path) -> tuple[Path, dict[str, Any]]:
    """-> (path of config.json, its dict), with one-line errors for a missing, broken or newer file."""
    path = Path(model_dir) / CONFIG_FILE
    if not path.is_file():
        raise AiaynError(f"{model_dir}: not a model directory (no {CONFIG_FILE})")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise AiaynError(f"{path}:{err.lineno}: invalid JSON: {err.msg}") from None
    version = data.get("format_version") if isinstance(data, dict) else None
    if version != FORMAT_VERSION:
        raise AiaynError(f"{path}: format_version {version!r} is not supported (expected {FORMAT_VERSION})")
    return path, data


def read_config(model_dir: str | Path) -> tuple[ModelConfig, dict[str, Any]]:
    """config.json -> (ModelConfig, the whole dict); clear errors for a missing or foreign file."""
    path, data = read_config_json(model_dir)
    try:
        return ModelConfig.from_dict(data["model"]), data
    except (KeyError, ConfigError, TypeError) as err:
        raise AiaynError(f"{path}: invalid model config: {err}") from None


def save_model_dir(
    model: Transformer, out_dir: str | Path, spm_path: str | Path | None = None, **info: Any
) -> Path:
    """Write a model directory (config.json, model.safetensors, spm.model) and return its path."""
    out = save_weights(model, out_dir)
    if spm_path is not None and Path(spm_path).resolve() != (out / SPM_FILE).resolve():
        shutil.copyfile(spm_path, out / SPM_FILE)
    write_config(out, model.config, **info)
    return out


def save_weights(model: nn.Module, out_dir: str | Path) -> Path:
    """Write OUT/model.safetensors (safetensors: loading it never runs code) -> OUT, made if needed."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / (WEIGHTS_FILE + ".tmp")
    save_model(model, str(tmp))
    os.replace(tmp, out / WEIGHTS_FILE)
    return out


def load_weights(
    model: nn.Module, model_dir: str | Path, device: str | torch.device | None = None
) -> nn.Module:
    """Fill `model` from MODEL_DIR/model.safetensors -> the model in eval mode on `device`.

    A file whose tensors do not fit the model is a one-line error naming the file.
    """
    weights = Path(model_dir) / WEIGHTS_FILE
    if not weights.is_file():
        raise AiaynError(f"{model_dir}: no {WEIGHTS_FILE}")
    try:
        load_model(model, str(weights), device=str(device or "cpu"))
    except (RuntimeError, OSError) as err:
        first = str(err).strip().splitlines()[0]
        raise AiaynError(f"{weights}: weights do not match config.json: {first}") from None
    return model.to(device or "cpu").eval()


def load_model_dir(
    model_dir: str | Path, device: str | torch.device | None = None
) -> tuple[Transformer, dict[str, Any]]:
    """Read a model directory -> (Transformer in eval mode on `device`, config.json as a dict)."""
    config, data = read_config(model_dir)
    return load_weights(Transformer(config), model_dir, device), data
