"""aiayn: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017) as practical software.

`from aiayn import ModelConfig, Transformer, Translator`. The model and translator are imported on
first use, so `import aiayn` (and `aiayn --help`) stays light.
"""

from importlib import import_module
from typing import Any

from aiayn import _renamed
from aiayn.config import DecodeConfig, ModelConfig, TrainConfig

_renamed.install()  # moved modules keep their old names, with a DeprecationWarning

__all__ = ["ModelConfig", "TrainConfig", "DecodeConfig", "Transformer", "Translator"]
__version__ = "1.0.0"  # the release (CHANGELOG.md); pyproject.toml reads it from here

_LAZY = {"Transformer": "aiayn.model.transformer", "Translator": "aiayn.decode.translator"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'aiayn' has no attribute {name!r}")
