"""The `aiayn` command runs under tcmalloc where it is installed (aiayn.malloc), once, and gives the
programs it starts the user's own LD_PRELOAD back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from aiayn import malloc

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="LD_PRELOAD is the Linux loader's")


@linux_only
def test_wanted_unless_opted_out_already_tried_or_another_allocator_preloaded():
    assert malloc.wanted({})
    assert malloc.wanted({"LD_PRELOAD": "/opt/libfoo.so"})
    assert not malloc.wanted({"AIAYN_MALLOC": "system"})
    assert not malloc.wanted({"AIAYN_MALLOC": " System "})
    assert not malloc.wanted({malloc.TRIED: "1"})
    assert not malloc.wanted({"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"})
    assert not malloc.wanted({"LD_PRELOAD": "/x/libtcmalloc.so.4 /opt/libfoo.so"})


@pytest.mark.parametrize("user", ["", "/opt/libfoo.so"])
def test_the_rerun_environment_and_its_restoration(user):
    environ = {"PATH": "/bin"} | ({"LD_PRELOAD": user} if user else {})
    env = malloc.rerun_environment("/lib/libtcmalloc_minimal.so.4", environ)
    assert env["LD_PRELOAD"] == f"/lib/libtcmalloc_minimal.so.4 {user}".strip()
    assert env[malloc.TRIED] == "1" and env[malloc.BEFORE] == user and env["PATH"] == "/bin"
    assert environ == {"PATH": "/bin"} | ({"LD_PRELOAD": user} if user else {})  # the caller's: untouched
    malloc.restore_environment(env)
    assert env.get("LD_PRELOAD") == (user or None)
    assert malloc.TRIED not in env and malloc.BEFORE not in env


def _allocator_of_the_command(**env: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "aiayn", "doctor", "--json", "--no-measure"],
        env={k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "AIAYN_MALLOC")} | env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out)["allocator"]["name"]


@linux_only
@pytest.mark.skipif(malloc.library() is None, reason="tcmalloc is not installed (libtcmalloc-minimal4)")
def test_the_command_runs_under_tcmalloc_unless_told_not_to():
    assert _allocator_of_the_command() == "tcmalloc"
    assert _allocator_of_the_command(AIAYN_MALLOC="system") != "tcmalloc"


def test_library_calls_of_main_never_rerun(monkeypatch):
    """`main(argv)` (tests, embedding programs) keeps the process as it is."""
    from aiayn.cli import main

    monkeypatch.setattr(os, "execve", lambda *a: pytest.fail("re-ran the process"))
    assert main(["doctor", "--no-measure"]) == 0
