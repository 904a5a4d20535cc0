"""Mixed precision: bf16 autocast on GPUs that support it, fp16 with a gradient scaler where they
do not (or when asked), fp32 on the CPU. The loss is always computed in fp32.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from aiayn.errors import AiaynError

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class Precision:
    name: str  # fp32 | bf16 | fp16
    device: torch.device
    scaler: torch.amp.GradScaler | None

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.name == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=_DTYPES[self.name])


def resolve(name: str, device: torch.device) -> Precision:
    """`auto` -> bf16 on GPUs that have it, fp16 on older GPUs, fp32 on the CPU."""
    if name == "auto" and device.type != "cuda":
        name = "fp32"
    elif name == "auto":
        name = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if name == "fp16" and device.type != "cuda":
        raise AiaynError(f"precision=fp16 needs a GPU (device is {device}); use fp32 or bf16")
    scaler = torch.amp.GradScaler(device.type) if name == "fp16" else None
    return Precision(name=name, device=device, scaler=scaler)
