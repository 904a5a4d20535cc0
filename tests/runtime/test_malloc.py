"""The `aiayn` command runs under tcmalloc where it is installed (aiayn.runtime.malloc), once, and gives the
programs it starts the user's own LD_PRELOAD back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from aiayn.runtime import malloc

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


@pytest.mark.parametrize("user", ["", "/opt/libasan.so"])
@pytest.mark.parametrize("quiet", [None, "123"])
def test_the_rerun_environment_and_its_restoration(user, quiet):
    environ = {"PATH": "/bin"} | ({"LD_PRELOAD": user} if user else {})
    environ |= {malloc.QUIET: quiet} if quiet else {}
    given = dict(environ)
    env = malloc.rerun_environment("/lib/libtcmalloc_minimal.so.4", environ)
    assert env["LD_PRELOAD"] == f"{user} /lib/libtcmalloc_minimal.so.4".strip()  # the user's first
    assert env[malloc.TRIED] == "1" and env[malloc.BEFORE] == user and env["PATH"] == "/bin"
    assert env[malloc.QUIET] == (quiet or str(1 << 40))  # the user's own setting kept
    assert environ == given  # the caller's: untouched
    malloc.restore_environment(env)
    assert env == given  # the programs it starts see the user's environment


def test_the_rerun_is_the_same_command_line(monkeypatch):
    """The interpreter, its flags, the script or -m, and the arguments, as `sys.orig_argv` has them."""
    calls = []
    monkeypatch.setattr(malloc.sys, "platform", "linux")
    monkeypatch.setattr(malloc, "library", lambda: "/lib/libtcmalloc_minimal.so.4")
    monkeypatch.setattr(malloc.sys, "orig_argv", ["py", "-u", "-m", "aiayn", "train", "--out", "x y"])
    monkeypatch.setattr(malloc.os, "execve", lambda *a: calls.append(a))
    for name in ("LD_PRELOAD", "AIAYN_MALLOC", malloc.TRIED):
        monkeypatch.delenv(name, raising=False)
    malloc.run_under_tcmalloc()
    ((executable, argv, env),) = calls
    assert executable == sys.executable
    assert argv == [sys.executable, "-u", "-m", "aiayn", "train", "--out", "x y"]
    assert env["LD_PRELOAD"] == "/lib/libtcmalloc_minimal.so.4" and env[malloc.TRIED] == "1"


def test_the_rerun_restores_the_environment_and_never_runs_again(monkeypatch):
    monkeypatch.setattr(malloc.os, "execve", lambda *a: pytest.fail("ran the command a third time"))
    monkeypatch.setenv(malloc.TRIED, "1")
    monkeypatch.setenv(malloc.BEFORE, "/opt/libasan.so")
    monkeypatch.setenv("LD_PRELOAD", "/opt/libasan.so /lib/libtcmalloc_minimal.so.4")
    malloc.run_under_tcmalloc()
    assert os.environ["LD_PRELOAD"] == "/opt/libasan.so"
    assert malloc.TRIED not in os.environ and malloc.BEFORE not in os.environ


def test_a_command_that_cannot_run_again_carries_on(monkeypatch):
    def fail(*args):
        raise OSError("no such interpreter")

    monkeypatch.setattr(malloc.sys, "platform", "linux")
    monkeypatch.setattr(malloc, "library", lambda: "/lib/libtcmalloc_minimal.so.4")
    monkeypatch.setattr(malloc.os, "execve", fail)
    monkeypatch.setattr(malloc.sys, "stdout", None)  # closed stdout: nothing to flush
    for name in ("LD_PRELOAD", "AIAYN_MALLOC", malloc.TRIED):
        monkeypatch.delenv(name, raising=False)
    assert malloc.run_under_tcmalloc() is None


def _allocator_of_the_command(**env: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "aiayn", "doctor", "--json", "--no-measure"],
        env={k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "AIAYN_MALLOC")} | env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,  # a command that kept running itself again would hang here
    ).stdout
    return json.loads(out)["allocator"]["name"]


@linux_only
@pytest.mark.skipif(malloc.library() is None, reason="tcmalloc is not installed (libtcmalloc-minimal4)")
def test_the_command_runs_under_tcmalloc_unless_told_not_to():
    assert _allocator_of_the_command() == "tcmalloc"
    assert _allocator_of_the_command(AIAYN_MALLOC="system") != "tcmalloc"


def test_library_calls_of_main_never_rerun(monkeypatch):
    """`main` (tests, embedding programs), with or without argv, keeps the process as it is."""
    from aiayn.cli import main

    monkeypatch.setattr(os, "execve", lambda *a: pytest.fail("re-ran the process"))
    monkeypatch.setattr(sys, "argv", ["aiayn", "doctor", "--no-measure"])
    assert main(["doctor", "--no-measure"]) == 0
    assert main() == 0
