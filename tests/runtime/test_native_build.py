"""Building, caching and loading the native step's library (aiayn.runtime.native_build): built once
and found again, warnings-clean, and nothing in the cache loaded unless its build recorded it.

The cache tests build with a stand-in compiler that copies the library this test run built (so they
take no compile): the cache key includes the compiler, so they get a cache directory of their own.
"""

import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from aiayn.runtime import native_build
from aiayn.runtime.native_build import native_status

COMPILER = native_build._compiler()  # the real one (the cache tests set CXX to a stand-in)
pytestmark = pytest.mark.skipif(
    COMPILER is None or os.environ.get(native_build.ENV, "").strip() == "0",
    reason="no C++ compiler, or AIAYN_NATIVE=0",
)


@pytest.fixture
def copying_compiler(tmp_path, monkeypatch):
    """CXX: a compiler that "builds" by copying this test run's library to its -o; a cache of its own."""
    genuine = native_build.build()
    script = tmp_path / "cxx"
    script.write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        [ "$1" = --version ] && {{ echo "copying compiler 1"; exit 0; }}
        while [ "$#" -gt 0 ]; do [ "$1" = -o ] && cp {genuine} "$2"; shift; done
        """)
    )
    script.chmod(0o755)
    monkeypatch.setenv("CXX", str(script))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return genuine


def test_the_native_step_builds_and_loads_here():
    assert native_status()["available"], native_status()["reason"]


def test_a_failed_build_names_the_first_error():
    stderr = "x.cpp: In function 'f':\nx.cpp:3:1: error: 'y' was not declared\ncompilation terminated.\n"
    assert native_build._first_error(stderr) == "x.cpp:3:1: error: 'y' was not declared"


def test_the_library_is_cached_by_source_and_compiler_with_its_hash():
    path = native_build._library_path(COMPILER)
    assert path.exists() and native_build.build() == path  # built once, then found
    assert native_status()["library"] == str(path) and native_build.verified(path)
    assert (path.parent / (path.name + ".sha256")).read_text() == native_build._sha256(path)


def test_the_cache_key_holds_the_header_too(monkeypatch, tmp_path):
    # native_step.cpp includes native_layers.h: a changed header is a new library, not the old one
    assert native_build.HEADERS and all(p.is_file() for p in native_build.HEADERS)  # beside the source
    header = tmp_path / "native_layers.h"
    header.write_text("// one\n")
    monkeypatch.setattr(native_build, "HEADERS", [header])
    before = native_build._library_path(COMPILER)
    header.write_text("// two\n")
    assert native_build._library_path(COMPILER) != before


@pytest.mark.slow
def test_the_source_compiles_without_warnings():
    command = native_build._command(COMPILER, native_build.SOURCE, native_build.SOURCE)
    command = command[: command.index("-o")] + ["-fsyntax-only", "-Werror"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=native_build.BUILD_SECONDS)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr[-2000:]


@pytest.mark.parametrize("kind", ["planted", "planted with a made-up hash", "truncated"])
def test_a_library_in_the_cache_that_its_build_did_not_record_is_built_again(kind, copying_compiler):
    path = native_build._library_path(native_build._compiler())
    path.parent.mkdir(parents=True)
    genuine = copying_compiler.read_bytes()
    path.write_bytes(genuine[: len(genuine) // 2] if kind == "truncated" else b"\x7fELF planted")
    digest = path.with_name(path.name + ".sha256")
    if kind != "planted":  # a hash that is not its own: the whole library's, or any other
        digest.write_text(native_build._sha256(copying_compiler) if kind == "truncated" else "0" * 64)
    assert not native_build.verified(path)
    assert native_build.build() == path
    assert path.read_bytes() == genuine and native_build.verified(path)


def test_a_planted_library_is_never_loaded(copying_compiler, tmp_path):
    """End to end, in a process of its own: a library that announces itself when loaded, put where
    the cache keeps the real one, is not loaded; the real one is built and loaded instead."""
    planted = tmp_path / "planted.so"
    source = tmp_path / "planted.cpp"
    source.write_text(
        '#include <cstdio>\n__attribute__((constructor)) static void f() { std::puts("PLANTED"); }\n'
    )
    subprocess.run([*COMPILER, "-shared", "-fPIC", str(source), "-o", str(planted)], check=True)
    code = (
        "import shutil, sys; from aiayn.runtime import native_build as b;"
        "p = b._library_path(b._compiler()); p.parent.mkdir(parents=True); shutil.copy(sys.argv[1], p);"
        "print(b.load(), b.native_status()['library'] == str(p), b.verified(p), flush=True)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(planted)], capture_output=True, text=True, env=os.environ
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]  # no "PLANTED": it never ran


def test_a_killed_builds_work_directories_are_removed_by_the_next_build(copying_compiler):
    directory = native_build._library_path(native_build._compiler()).parent
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = directory / f"{native_build.WORK_PREFIX}{int(gone.stdout)}-x1"  # its process is over
    running = directory / f"{native_build.WORK_PREFIX}{os.getpid()}-x2"  # a build under way: kept
    stuck = directory / f"{native_build.WORK_PREFIX}{os.getpid()}-x3"  # running longer than any build
    for work in (dead, running, stuck):
        (work / "half").mkdir(parents=True)
    old = time.time() - native_build.BUILD_SECONDS - 60
    os.utime(stuck, (old, old))
    native_build.build()
    assert not dead.exists() and running.exists() and not stuck.exists()
    assert not [
        p for p in directory.iterdir() if p.name.startswith(native_build.WORK_PREFIX) and p != running
    ]
    shutil.rmtree(running)


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="process start times from /proc")
def test_the_compiler_of_a_killed_build_is_stopped_by_the_next_build(copying_compiler):
    """The build's process died (kill -9) and left its compiler running: the next build kills that
    compiler, and only that one (a process that merely reuses the id is left alone)."""
    directory = native_build._library_path(native_build._compiler()).parent
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    orphan = subprocess.Popen(["sleep", "300"], start_new_session=True)
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    for name, process, started in [("x1", orphan, native_build._started(orphan.pid)), ("x2", other, "1")]:
        work = directory / f"{native_build.WORK_PREFIX}{int(gone.stdout)}-{name}"
        work.mkdir(parents=True)
        (work / native_build.COMPILER_FILE).write_text(f"{process.pid} {started}")
    try:
        native_build.build()
        assert orphan.wait(timeout=10) == -9
        assert other.poll() is None  # its start time is not the one recorded
    finally:
        for process in (orphan, other):
            process.kill()
            process.wait()
