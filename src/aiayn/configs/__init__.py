"""The named configs shipped with aiayn, one YAML file each in this folder (`configs/` in a checkout):
the model presets tiny, base and big with their recipes (`aiayn train --preset NAME` takes the model,
`--config configs/NAME.yaml` the whole file), and `quickstart`, the recipe that `aiayn quickstart`
and the reference row of `aiayn variations` both read.

Each file is a RunConfig (`model:`, `train:`, `decode:`) listing only what differs from aiayn's
defaults (aiayn.config: the paper's base model and recipe); `preset: NAME` starts its model from
that preset's. Read them with `RunConfig.named(name)` and `ModelConfig.preset(name)`.
"""

from __future__ import annotations

from pathlib import Path

PRESETS = ("tiny", "base", "big")  # model presets (their files hold no `preset:`)
QUICKSTART = "quickstart"


def names() -> list[str]:
    """Every named config shipped: the presets and the recipes."""
    return sorted(path.stem for path in Path(__file__).parent.glob("*.yaml"))


def config_path(name: str) -> Path:
    """The file of the named config `name` (which need not exist: RunConfig.named checks)."""
    return Path(__file__).with_name(f"{name}.yaml")
