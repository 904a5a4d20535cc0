"""An epoch's batch plan kept in the data directory, so that a start or a resume does not sort the
corpus again (section 5.1's length buckets: at 36M pairs, seconds of every start on every rank).

    DATA/plan-cache/KEY-EPOCH.npz   order, starts, shuffle: `TokenBatchSampler._plan(EPOCH)`'s arrays

KEY is a digest of what the plan is a function of: every pair's width and source length, the seed,
max_tokens and the window (and, with a corpus mix, the epoch's drawn pairs, recorded inside the file).
A plan is read only if its file is whole and of this key, else computed and written again (aside and
renamed: ranks that write it at once each leave a whole file). A data directory that cannot be
written is read as before, with nothing cached. Two epochs are kept a key (the one a run is in and
the one before); `prepare --force` removes the directory with the rest, and removing it by hand is
always safe.
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import numpy as np

from aiayn.safe_io import atomic_path

CACHE_DIR = "plan-cache"
VERSION = b"plan-1"  # changes with _plan's algorithm: plans of another one are never read


def digest(*parts: bytes | np.ndarray | int) -> str:
    """A hex digest of arrays (their bytes and dtype) and numbers."""
    h = hashlib.blake2b(VERSION, digest_size=16)
    for part in parts:
        if isinstance(part, np.ndarray):
            h.update(part.dtype.str.encode() + np.ascontiguousarray(part).view(np.uint8).tobytes())
        else:
            h.update(str(part).encode() + b"\0")
    return h.hexdigest()


class PlanCache:
    """The plans of one key in `directory` (made when first written)."""

    def __init__(self, directory: str | Path, key: str) -> None:
        self.directory, self.key = Path(directory), key

    def _path(self, epoch: int) -> Path:
        return self.directory / f"{self.key}-{epoch:05d}.npz"

    def load(self, epoch: int, pool: str = "") -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(order, starts, shuffle) of `epoch`, or None when absent, damaged or of another pool."""
        try:
            with np.load(self._path(epoch), allow_pickle=False) as saved:
                order, starts, shuffle = saved["order"], saved["starts"], saved["shuffle"]
                if str(saved["pool"]) != pool:
                    return None
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return None
        whole = (
            order.ndim == starts.ndim == shuffle.ndim == 1
            and len(starts) == len(shuffle) + 1
            and starts[0] == 0
            and starts[-1] == len(order)
        )
        return (order, starts, shuffle) if whole else None

    def store(self, epoch: int, order: np.ndarray, starts: np.ndarray, shuffle: np.ndarray, pool: str = ""):
        """Write `epoch`'s plan and let go of this key's plans of other epochs than it and the one
        before; a directory that cannot be written is left as it is (the plan is computed again)."""
        try:
            self.directory.mkdir(exist_ok=True)
            with atomic_path(self._path(epoch)) as tmp, open(tmp, "wb") as f:
                np.savez(f, order=order, starts=starts, shuffle=shuffle, pool=np.array(pool))
            for old in self.directory.glob(f"{self.key}-*.npz"):
                if old.name not in (self._path(epoch).name, self._path(epoch - 1).name):
                    old.unlink(missing_ok=True)
        except OSError:
            return
