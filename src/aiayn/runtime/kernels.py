"""Which matrix-product backend training uses on the CPU, chosen by timing real updates.

`aiayn.runtime.linear` computes the model's products (3.2.2, Eq. 2, 3.4) with oneDNN or with
PyTorch's default `F.linear` (MKL). Which is faster depends on the CPU and on the whole update, not
on the vendor or the instruction set: on an AMD EPYC with AVX-512 oneDNN trained 1.5-3x faster, on
a first-generation Zen (AVX2) MKL trained 10-20% faster though oneDNN won most products timed alone.
So a fresh float32 CPU run alternates the two over its first `len(ORDER)` updates (the first
update of each untimed: it builds kernels; then A-B-B-A, so that a machine settling down favours
neither), compares seconds per target token, keeps the faster, and stores the choice in the
checkpoint: a run resumed after the probe computes exactly what an uninterrupted one would (one
resumed during the probe measures again). The probing updates are ordinary updates: both backends
compute the same products, up to float32 rounding. Under DDP the ranks add their timings and so
agree. `cpu_matmul=onednn|mkl` in the config, or `AIAYN_ONEDNN=0|1` in the environment, skips it.
"""

from __future__ import annotations

import time
from typing import Protocol

import torch
import torch.distributed as dist

from aiayn.runtime.linear import linear_backend

ORDER = ("onednn", "mkl", "mkl", "onednn", "onednn", "mkl")  # the backend of each probing update
UNTIMED = 2  # the first update of each backend builds its kernels


class Ranks(Protocol):
    """What the choice needs of a run's processes (aiayn.train.distributed.DistEnv has it)."""

    device: torch.device

    @property
    def distributed(self) -> bool: ...


class KernelChoice:
    """The backend of one training run: measured, fixed by the config, or restored from a checkpoint.

    `start()` applies it to the process-wide `linear_backend` and `restore_process_default()` gives
    the process its routing back; `decision` is what a checkpoint stores (None: nothing decided).
    """

    def __init__(self, setting: str, eligible: bool, restored: str | None, env: Ranks):
        """`setting`: TrainConfig.cpu_matmul (auto | onednn | mkl); `restored`: a checkpoint's choice;
        `eligible`: a float32 CPU run without torch.compile (the only one `linear` routes)."""
        self.env, self.previous = env, (linear_backend.enabled, linear_backend.reason)
        self.index, self.began = 0, 0.0
        self.per_token = {"onednn": 0.0, "mkl": 0.0}  # summed seconds per target token
        free = eligible and linear_backend.enabled and not linear_backend.forced
        self.decision = (setting if setting != "auto" else restored) if free else None
        self.source = "cpu_matmul in the run's config" if setting != "auto" else "measured when the run began"
        self.probing = free and self.decision is None

    def start(self) -> None:
        if self.decision is not None:
            linear_backend.choose(self.decision, f"{self.decision}: {self.source}")

    def before_update(self) -> None:
        if self.probing:
            linear_backend.choose(ORDER[self.index], "measuring")
            self.began = time.perf_counter()

    def after_update(self, applied: bool, tokens: int) -> str | None:
        """After each update (`tokens`: its target tokens); a line to print once the probe decides."""
        if not self.probing or not applied:  # a skipped update is timed again with the same backend
            return None
        if self.index >= UNTIMED:
            self.per_token[ORDER[self.index]] += (time.perf_counter() - self.began) / max(tokens, 1)
        self.index += 1
        return self._decide() if self.index == len(ORDER) else None

    def _decide(self) -> str:
        self.probing = False
        totals = torch.tensor([self.per_token["onednn"], self.per_token["mkl"]], dtype=torch.float64)
        totals = totals.to(self.env.device)
        if self.env.distributed:
            dist.all_reduce(totals)  # summed over ranks, so that every rank decides the same
        onednn, mkl = totals.tolist()
        self.decision, other = ("onednn", "mkl") if onednn < mkl else ("mkl", "onednn")
        ratio = max(onednn, mkl) / max(min(onednn, mkl), 1e-12)
        why = f"{self.decision}: {ratio:.2f}x faster than {other} on updates {UNTIMED + 1}-{len(ORDER)}"
        linear_backend.choose(self.decision, why)
        return f"matrix products: {why} (kept for this run)"

    def restore_process_default(self) -> None:
        """Give the process back the routing it had (decoding after training chooses for itself)."""
        linear_backend.enabled, linear_backend.reason = self.previous
