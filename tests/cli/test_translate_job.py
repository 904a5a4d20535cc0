"""`aiayn translate`'s long jobs (aiayn.cli.translate_job): when a progress bar shows, and which
translations are jobs in parts that resume."""

from __future__ import annotations

import argparse
import sys

import pytest

from aiayn.cli.translate_job import resumable, show_progress


def namespace(**given) -> argparse.Namespace:
    return argparse.Namespace(
        **({"progress": None, "input": None, "output": None, "document": False} | given)
    )


@pytest.mark.parametrize(
    "given, stderr_tty, stdout_tty, shown",
    [({"progress": True}, False, False, True), ({"progress": False, "input": "f"}, True, False, False),
     ({"input": "f", "output": "o"}, True, True, True), ({"input": "f"}, True, False, True),
     ({"input": "f"}, True, True, False), ({"input": "f"}, False, False, False), ({}, True, False, False)],
)  # fmt: skip
def test_the_bar_shows_when_asked_or_for_a_file_on_a_terminal(
    monkeypatch, given, stderr_tty, stdout_tty, shown
):
    """By default: -i F while stderr is a terminal, unless the translations go to that terminal too."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: stderr_tty)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: stdout_tty)
    assert show_progress(namespace(**given)) is shown


def test_only_a_text_file_read_line_by_line_is_a_job_in_parts():
    assert resumable(namespace(input="f"))
    assert resumable(namespace(input="f", format="text"))
    assert not resumable(namespace())  # standard input
    assert not resumable(namespace(input="f", document=True))
    assert not resumable(namespace(input="f", format="html"))
