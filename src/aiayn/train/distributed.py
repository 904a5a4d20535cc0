"""One process or many: the device, the rank and the collectives the training loop needs.

Under `torchrun` (RANK / WORLD_SIZE / LOCAL_RANK in the environment) the process group is set
up with nccl on GPUs and gloo on CPUs; alone, the same calls reduce to no-ops. Only rank 0
writes files. A collective that waits longer than the timeout (`--dist-timeout`, 10 minutes by
default; the backends' own is 30) fails, and `peer_lost` turns that failure, or a peer's death,
into one line naming this rank.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from aiayn.errors import AiaynError


@dataclass(frozen=True)
class DistEnv:
    rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def pick_device(local_rank: int = 0) -> torch.device:
    """The rank's own GPU (`own_gpu`) when there is a GPU, else the CPU."""
    return own_gpu(local_rank) if torch.cuda.is_available() else torch.device("cpu")


def own_gpu(local_rank: int) -> torch.device:
    """cuda:<local_rank>, the GPU of this machine's rank `local_rank` (one GPU per rank: nccl refuses
    two ranks on one GPU), for `--device cuda` and for no `--device` on a machine with GPUs."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if local_rank >= count:
        have = f"this machine has {count}" if count else "no CUDA GPU here"
        raise AiaynError(f"device cuda: local rank {local_rank} needs GPU {local_rank}, but {have}")
    return torch.device("cuda", local_rank)


DEFAULT_TIMEOUT_MINUTES = 10.0  # above a dev BLEU on rank 0 while the others wait at a barrier
_LOST = ("timed out", "timeout", "connection closed", "connection reset", "broken pipe", "by peer")


def setup(device: str | None = None, timeout_minutes: float = DEFAULT_TIMEOUT_MINUTES) -> DistEnv:
    """Read torchrun's environment, start the process group if there is more than one rank."""
    if not timeout_minutes > 0:
        raise AiaynError(f"--dist-timeout must be a positive number of minutes, got {timeout_minutes}")
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device(device) if device else pick_device(local_rank)
    if dev.type == "cuda" and dev.index is None:
        dev = own_gpu(local_rank)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world_size > 1 and not dist.is_initialized():
        backend = "nccl" if dev.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, timeout=timedelta(minutes=timeout_minutes))
    return DistEnv(rank=rank, world_size=world_size, device=dev)


def peer_lost(err: BaseException, env: DistEnv, timeout_minutes: float) -> AiaynError | None:
    """The one-line error for a collective that failed because a peer died or hung, else None."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    network = isinstance(err, getattr(dist, "DistNetworkError", ()))
    lost = network or any(word in first.lower() for word in _LOST)
    if not (env.distributed and isinstance(err, RuntimeError) and lost):
        return None
    return AiaynError(
        f"rank {env.rank} of {env.world_size}: another rank died or did not answer within "
        f"{timeout_minutes:g} minutes ({first[:200]}); start every rank again to resume from the last "
        "checkpoint"
    )


def teardown(env: DistEnv) -> None:
    if env.distributed and dist.is_initialized():
        dist.destroy_process_group()


def all_reduce(tensor: torch.Tensor, env: DistEnv, op: str = "sum") -> torch.Tensor:
    """Sum (or max) a tensor over ranks in place; the identity for one process."""
    if env.distributed:
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM)
    return tensor


def all_ranks(flag: bool, env: DistEnv) -> bool:
    """Whether `flag` holds on every rank (every rank gets the same answer)."""
    failed = torch.tensor([0.0 if flag else 1.0], device=env.device)
    return all_reduce(failed, env).item() == 0.0


def barrier(env: DistEnv) -> None:
    if env.distributed:
        dist.barrier()
