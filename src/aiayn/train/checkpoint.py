"""Checkpoints (section 5.2: written at 10-minute intervals) and checkpoint averaging (6.1).

A run directory holds `checkpoints/step_NNNNNN/` with

    model.safetensors   the weights (tied matrices stored once)
    trainer_state.pt    optimizer, step, data position, RNG states, best dev loss ...: plain
                        tensors, numbers, strings, lists and dicts only, so that
                        `torch.load(path, weights_only=True)` reads it without running code

A checkpoint is written into `checkpoints/.tmp-step_NNNNNN/`, each file fsync'ed, then renamed
into place and the parent directory fsync'ed: a crash at any moment leaves either the whole
checkpoint or none, and `list_checkpoints` never returns a partial one. The last K are kept.
"""

from __future__ import annotations

import os
import pickle
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_model, save_model
from torch import nn

from aiayn.config import RunConfig
from aiayn.errors import AiaynError
from aiayn.model.io import check_fits, check_model_out, save_model_dir, weight_shapes
from aiayn.model.transformer import Transformer
from aiayn.safe_io import building_directory, fsync_dir, fsync_file, read_json_object

CHECKPOINTS, WEIGHTS, STATE = "checkpoints", "model.safetensors", "trainer_state.pt"
RUN_INFO, RUN_CONFIG, RUN_SPM = "run.json", "config.yaml", "spm.model"
_NAME = re.compile(r"^step_(\d+)$")
_TMP_PREFIX = ".tmp-"


def checkpoint_name(step: int) -> str:
    return f"step_{step:06d}"


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first (temporary directories are never listed)."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        match = _NAME.match(path.name)
        if match and (path / WEIGHTS).is_file() and (path / STATE).is_file():
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


def remove_partial(run_dir: str | Path) -> list[Path]:
    """Delete temporary directories that an interrupted save left behind; return them."""
    root = Path(run_dir) / CHECKPOINTS
    stale = sorted(root.glob(_TMP_PREFIX + "*")) if root.is_dir() else []
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return stale


def _publish(tmp: Path, final: Path) -> None:
    """The commit point: rename the finished temporary directory into place, fsync the parent."""
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    fsync_dir(final.parent)


def save_checkpoint(run_dir: str | Path, step: int, model: nn.Module, state: dict, keep_last: int) -> Path:
    """Write checkpoint `step` atomically, delete all but the newest `keep_last`; return its path."""
    root = Path(run_dir) / CHECKPOINTS
    root.mkdir(parents=True, exist_ok=True)
    final = root / checkpoint_name(step)
    tmp = root / (_TMP_PREFIX + final.name)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_model(model, str(tmp / WEIGHTS))
    fsync_file(tmp / WEIGHTS)
    with open(tmp / STATE, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(tmp)
    _publish(tmp, final)
    for old in list_checkpoints(run_dir)[: -max(keep_last, 1)]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(path: str | Path, model: nn.Module, device: str | torch.device = "cpu") -> dict:
    """Load a checkpoint's weights into `model` and return its trainer state (weights_only).

    The state stays on the CPU: generator states must be CPU tensors, and the optimizer's
    `load_state_dict` moves its moments to the parameters' device itself.
    """
    path, reading = Path(path), WEIGHTS
    try:
        load_model(model, str(path / WEIGHTS), device=str(device))
        reading = STATE
        return torch.load(path / STATE, map_location="cpu", weights_only=True)
    except (RuntimeError, OSError, EOFError, SafetensorError, pickle.UnpicklingError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise AiaynError(
            f"{path / reading}: cannot load checkpoint ({first}); if damaged, remove {path} to use the one "
            "before it"
        ) from None


def rng_state() -> dict[str, Any]:
    """Python, numpy and torch (CPU, CUDA) generator states as weights_only-loadable values."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": [version, list(internal), gauss],
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def set_rng_state(state: dict[str, Any]) -> None:
    """Inverse of `rng_state`."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.cpu().numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def average_weights(paths: list[Path], model: Transformer) -> Transformer:
    """Set `model`'s parameters to the mean of the checkpoints' (accumulated in float64)."""
    if not paths:
        raise AiaynError("no checkpoints to average")
    tensors = dict(model.named_parameters()) | dict(model.named_buffers())
    sums = {name: torch.zeros_like(t, dtype=torch.float64) for name, t in tensors.items()}
    for path in paths:
        try:
            load_model(model, str(Path(path) / WEIGHTS))
        except (RuntimeError, OSError, SafetensorError) as err:
            first = str(err).strip().splitlines()[0]
            raise AiaynError(f"{Path(path) / WEIGHTS}: cannot average this checkpoint: {first}") from None
        for name, t in tensors.items():
            sums[name] += t.detach().double()
    with torch.no_grad():
        for name, t in tensors.items():
            t.copy_(sums[name] / len(paths))
    return model


def average_run(
    run_dir: str | Path, last: int | None = None, out_dir: str | Path | None = None, info: dict | None = None
) -> Path:
    """`aiayn average`: the mean of a run's newest `last` checkpoints (default: the run's
    `average_last`, 5 in the paper's base recipe) as a model directory (default RUN_DIR/model);
    `info` adds entries to its config.json."""
    run = Path(run_dir)
    if not (run / RUN_CONFIG).is_file():
        raise AiaynError(f"{run}: not a run directory (no {RUN_CONFIG})")
    check_model_out(out_dir or run / "model", "--out")
    config = RunConfig.from_yaml(run / RUN_CONFIG)
    last = config.train.average_last if last is None else last
    if last < 1:
        raise AiaynError(f"--last must be at least 1, got {last}")
    paths = list_checkpoints(run)[-last:]
    if not paths:
        raise AiaynError(f"{run}: no checkpoints in {run / CHECKPOINTS}")
    newest = paths[-1] / WEIGHTS  # config.yaml against it before anything is allocated
    check_fits(config.model, weight_shapes(newest), f"{run / RUN_CONFIG} and {newest}")
    langs = _run_facts(run)
    model = average_weights(paths, Transformer(config.model))
    spm = run / RUN_SPM if (run / RUN_SPM).is_file() else None
    out = Path(out_dir or run / "model")
    with building_directory(out) as work:  # swapped whole: a killed run leaves the old model or the new
        save_model_dir(model, work, spm_path=spm, averaged=[p.name for p in paths], **langs, **(info or {}))
        for entry in out.iterdir() if out.is_dir() else ():  # what else was there (evaluate's eval/)
            if not (work / entry.name).exists():
                (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, work / entry.name)
    return out


def _run_facts(run: Path) -> dict[str, Any]:
    """run.json's languages (a multilingual model's target languages and their tag too), task and
    parse settings for the model's config.json, each checked as a config value is: a wrong type is a
    one-line error here, not a TypeError in a later command."""
    info = read_json_object(run / RUN_INFO) if (run / RUN_INFO).is_file() else {}
    kinds = {
        "src_lang": str,
        "tgt_lang": str,
        "target_languages": list,
        "target_tag": str,
        "task": str,
        "parse": dict,
        "longest_source": int,
    }
    for key, kind in kinds.items():
        if info.get(key) is not None and not isinstance(info[key], kind):
            raise AiaynError(f"{run / RUN_INFO}: {key} must be a {kind.__name__}, got {info[key]!r}")
    languages = info.get("target_languages") or []
    if not all(isinstance(lang, str) and lang for lang in languages):
        raise AiaynError(f"{run / RUN_INFO}: target_languages must be language codes, got {languages!r}")
    return {key: info[key] for key in kinds if info.get(key)}
