"""SIGINT / SIGTERM during training (aiayn.train.signals): the first sets a flag the loop reads, a
second SIGINT interrupts at once, and the old handlers come back on leaving."""

import os
import signal

import pytest

from aiayn.train.signals import StopSignals


def test_a_signal_is_recorded_by_name_and_the_old_handlers_come_back():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with StopSignals() as signals:
        assert signals.received is None
        os.kill(os.getpid(), signal.SIGTERM)  # delivered before kill returns, to this main thread
        assert signals.received == "SIGTERM"
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_a_second_sigint_interrupts_at_once():
    with StopSignals() as signals:
        os.kill(os.getpid(), signal.SIGINT)
        assert signals.received == "SIGINT"
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)


def test_a_second_sigterm_only_records_again():
    with StopSignals() as signals:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        assert signals.received == "SIGTERM"
