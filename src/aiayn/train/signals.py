"""SIGINT / SIGTERM during training: finish the update, write a checkpoint, say where, exit."""

from __future__ import annotations

import signal
import threading


class StopSignals:
    """SIGINT / SIGTERM set a flag (the loop saves and exits); a second SIGINT interrupts at once."""

    def __init__(self):
        self.received: str | None = None
        self._old = {}

    def _handle(self, signum, frame):
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = signal.Signals(signum).name

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)
