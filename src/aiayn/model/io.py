"""The model directory: what `translate`, `evaluate`, `serve` and `Translator.load` take.

    config.json        {"format_version", "aiayn_version" (the release that wrote it), "model": ModelConfig,
                        "src_lang", "tgt_lang", "tokenizer"}; a multilingual model's "target_languages"
                        and "target_tag" (aiayn.decode.languages)
    model.safetensors  the weights (no pickle: loading a model someone else made runs no code)
    spm.model          the SentencePiece model (or the files named in config.json's "tokenizer")

Tied parameters are stored once (safetensors' save_model de-duplicates shared tensors). Each file
is written to a temporary name, fsynced and renamed, config.json last. A directory someone else
made is checked before anything is allocated: its config against the weights' header (`check_fits`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_model, save_model
from torch import nn

from aiayn import __version__
from aiayn.config import FORMAT_VERSION, ConfigError, ModelConfig
from aiayn.errors import AiaynError
from aiayn.model.transformer import Transformer
from aiayn.safe_io import atomic_copy, atomic_path, atomic_write_text, read_json_object, vacant

CONFIG_FILE, WEIGHTS_FILE, SPM_FILE = "config.json", "model.safetensors", "spm.model"
_LAYER = re.compile(r"^(encoder|decoder)\.layers\.(\d+)\.")


def write_config(out_dir: Path, config: ModelConfig, **info: Any) -> None:
    """Write config.json: the model config plus languages, tokenizer settings and the like, and the
    aiayn release that wrote it (`aiayn_version`)."""
    data = {"format_version": FORMAT_VERSION, "aiayn_version": __version__, "model": config.to_dict(), **info}
    data.setdefault("tokenizer", {"type": "sentencepiece", "model": SPM_FILE})
    write_config_json(out_dir, data)


def write_config_json(out_dir: Path, data: dict[str, Any]) -> None:
    """Write OUT/config.json through a temporary file, fsync and a rename (a crash leaves the old one)."""
    atomic_write_text(out_dir / CONFIG_FILE, json.dumps(data, indent=2) + "\n")


def read_config_json(model_dir: str | Path) -> tuple[Path, dict[str, Any]]:
    """-> (path of config.json, its dict), with one-line errors for a missing, broken or newer file."""
    path = Path(model_dir) / CONFIG_FILE
    if not path.is_file():
        raise AiaynError(f"{model_dir}: not a model directory (no {CONFIG_FILE})")
    data = read_json_object(path)
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise AiaynError(f"{path}: format_version {version!r} is not supported (expected {FORMAT_VERSION})")
    return path, data


def read_config(model_dir: str | Path) -> tuple[ModelConfig, dict[str, Any]]:
    """config.json -> (ModelConfig, the whole dict); clear errors for a missing or foreign file.

    The config is checked against model.safetensors' header (`check_fits`) before anyone builds it.
    """
    path, data = read_config_json(model_dir)
    if "model" not in data and "vision" in data:  # aiayn.vision.io's directories
        raise AiaynError(f"{path}: a vision model (image classification); `aiayn vision-attention` takes it")
    if "model" not in data:
        raise AiaynError(f'{path}: no "model" settings')
    try:
        config = ModelConfig.from_dict(data["model"])
    except (ConfigError, TypeError) as err:
        raise AiaynError(f"{path}: invalid model config: {err}") from None
    weights = Path(model_dir) / WEIGHTS_FILE
    if not weights.is_file():
        raise AiaynError(f"{model_dir}: no {WEIGHTS_FILE}")
    check_fits(config, weight_shapes(weights), str(weights))
    return config, data


def weight_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape, from a safetensors file's header only (no tensor is read)."""
    try:
        with safe_open(str(path), framework="pt") as f:
            return {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}  # noqa: SIM118
    except (SafetensorError, OSError) as err:
        raise AiaynError(f"{path}: not a safetensors file: {str(err).strip().splitlines()[0]}") from None


def _field(config: ModelConfig, expected: tuple[int, ...], actual: tuple[int, ...]) -> str:
    """The config field whose value is the first dimension where `expected` and `actual` differ."""
    values = {k: v for k, v in config.to_dict().items() if type(v) is int}
    for want, have in zip(expected, actual, strict=False):
        names = [k for k, v in values.items() if v == want != have]
        if names:
            return f"{names[0]}={want}"
    return "shapes"


def check_fits(config: ModelConfig, shapes: dict[str, tuple[int, ...]], where: str) -> None:
    """A one-line AiaynError naming the config field unless `config` builds exactly the tensors `shapes`.

    Checked before the model is built for real, so that a config.json saying vocab_size: 10**12 or
    n_layers: 100000 is refused instead of allocating: the layer counts first (from the names), then
    every tensor of a model built on the meta device (shapes only, no memory). Tied matrices are one
    tensor under several names, stored once.
    """
    decoder_field = "n_layers" if config.n_decoder_layers is None else "n_decoder_layers"
    for stack, field in (("encoder", "n_layers"), ("decoder", decoder_field)):
        n = getattr(config, field)
        found = len({m[2] for name in shapes if (m := _LAYER.match(name)) and m[1] == stack})
        if found != n:
            mismatch = f"({field}={n}): they hold {found} {stack} layers"
            raise AiaynError(f"{where}: weights do not match config.json {mismatch}")
    with torch.device("meta"):
        state = Transformer(config).state_dict(keep_vars=True)
    tensors: dict[int, list[str]] = {}
    for name, tensor in state.items():
        tensors.setdefault(id(tensor), []).append(name)
    for names in tensors.values():
        stored = [name for name in names if name in shapes] or [names[0]]
        expected, actual = tuple(state[stored[0]].shape), shapes.get(stored[0])
        if actual is None:
            raise AiaynError(f"{where}: weights do not match config.json: no tensor {stored[0]}")
        if actual != expected:
            raise AiaynError(
                f"{where}: weights do not match config.json ({_field(config, expected, actual)}): "
                f"{stored[0]} is {actual} there, {expected} by the config"
            )
    extra = sorted(set(shapes) - set(state))
    if extra:
        raise AiaynError(f"{where}: weights do not match config.json: this config has no {extra[0]}")


def check_model_out(out: str | Path, what: str = "output directory") -> None:
    """A one-line AiaynError unless `out` may receive a model directory: absent, empty or an aiayn
    model directory (its config.json has a format_version), whose files are then replaced. Anything
    else (a Marian export, a data directory, a file) would be mixed with or lost to the new files."""
    out = Path(out)
    if vacant(out):
        return
    try:
        ours = "format_version" in read_json_object(out / CONFIG_FILE)
    except AiaynError:
        ours = False
    if not ours:
        raise AiaynError(f"{out} exists and is not an aiayn model directory; choose another {what}")


def save_model_dir(
    model: Transformer, out_dir: str | Path, spm_path: str | Path | None = None, **info: Any
) -> Path:
    """Write a model directory (model.safetensors, spm.model, then config.json) and return its path."""
    out = save_weights(model, out_dir)
    if spm_path is not None and Path(spm_path).resolve() != (out / SPM_FILE).resolve():
        atomic_copy(spm_path, out / SPM_FILE)
    write_config(out, model.config, **info)  # last: config.json describes weights already in place
    return out


def save_weights(model: nn.Module, out_dir: str | Path) -> Path:
    """Write OUT/model.safetensors (safetensors: loading it never runs code) -> OUT, made if needed.

    Through a temporary file, fsync and a rename: a crash leaves the old weights or the new ones.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / WEIGHTS_FILE) as tmp:
        save_model(model, str(tmp))
    return out


FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")  # safetensors' names


def _check_float(weights: Path) -> None:
    """Every tensor of `weights` holds floating-point numbers: integers would load, cast, as nonsense."""
    try:
        with safe_open(str(weights), "pt") as f:
            dtypes = {name: f.get_slice(name).get_dtype() for name in f.keys()}  # noqa: SIM118
    except (SafetensorError, OSError) as err:
        raise AiaynError(
            f"{weights}: cannot be read as safetensors: {str(err).strip().splitlines()[0]}"
        ) from None
    bad = next(((name, dtype) for name, dtype in dtypes.items() if dtype not in FLOAT_DTYPES), None)
    if bad is not None:
        raise AiaynError(f"{weights}: {bad[0]} holds {bad[1]} numbers, not floating point ones")


def load_weights(
    model: nn.Module, model_dir: str | Path, device: str | torch.device | None = None
) -> nn.Module:
    """Fill `model` from MODEL_DIR/model.safetensors -> the model in eval mode on `device`.

    A file whose tensors do not fit the model is a one-line error naming the file.
    """
    weights = Path(model_dir) / WEIGHTS_FILE
    if not weights.is_file():
        raise AiaynError(f"{model_dir}: no {WEIGHTS_FILE}")
    _check_float(weights)
    try:
        load_model(model, str(weights), device=str(device or "cpu"))
    except (RuntimeError, OSError, SafetensorError) as err:
        first = str(err).strip().splitlines()[0]
        raise AiaynError(f"{weights}: weights do not match config.json: {first}") from None
    return model.to(device or "cpu").eval()


def load_model_dir(
    model_dir: str | Path, device: str | torch.device | None = None
) -> tuple[Transformer, dict[str, Any]]:
    """Read a model directory -> (Transformer in eval mode on `device`, config.json as a dict)."""
    config, data = read_config(model_dir)
    return load_weights(Transformer(config), model_dir, device), data
