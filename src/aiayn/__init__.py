"""aiayn: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017) as practical software."""

from aiayn.config import DecodeConfig, ModelConfig, TrainConfig

__all__ = ["ModelConfig", "TrainConfig", "DecodeConfig"]
__version__ = "0.1.0"
