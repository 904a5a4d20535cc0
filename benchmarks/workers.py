"""What the benchmarks that time each system in its own process share (decode.py, train_speed.py)."""

from __future__ import annotations

import contextlib


def stop_workers(workers: dict) -> None:
    """Ask every live worker ({name: (process, connection)}) to stop; end those that do not."""
    for proc, conn in workers.values():
        if proc.is_alive():
            with contextlib.suppress(OSError):  # a worker that died closed its end
                conn.send(("stop",))
            proc.join(timeout=30)
        if proc.is_alive():
            proc.terminate()
