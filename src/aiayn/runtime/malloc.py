"""The memory allocator of the `aiayn` command on Linux: tcmalloc where it is installed.

glibc's malloc gives every block above its mmap threshold (at most 32 MB) fresh pages from the
kernel and returns them when the block is freed, so a training step that allocates its logits,
activations and gradients anew faults in hundreds of megabytes of zeroed pages every time; and
blocks PyTorch asks for with `posix_memalign` do not fit the holes that freed ones leave, so the
heap grows. Measured on the quickstart (BENCHMARKS.md): 10.6 million page faults in 150 updates,
22 s of kernel time, 1.84 GB peak memory; with tcmalloc 0.45 million, 1 s, 1.43 GB, and 14% more
tokens per second (8% with the AVX2 kernels), the same losses to the last digit.

So the command (the `aiayn` script, `python -m aiayn`, each `torchrun -m aiayn` worker) runs itself
again, once and before importing PyTorch, with tcmalloc preloaded when its library is installed
(Debian: libtcmalloc-minimal4, which `make` installs) and no replacement allocator is preloaded
already: `os.execve` of the interpreter with its original command line (`sys.orig_argv`: the same
script or `-m`, interpreter flags and arguments), so the same process id and descriptors.
`AIAYN_MALLOC=system` keeps the C library's malloc. tcmalloc goes after the user's LD_PRELOAD
entries (a sanitizer or a malloc tracer stays first), and the programs the command starts get the
user's LD_PRELOAD back. Only the command's entry points (`entry`) do this: `aiayn.cli.main(argv)`
and importing aiayn as a library change nothing (there the program chooses: `LD_PRELOAD=...`).
"""

from __future__ import annotations

import ctypes.util
import os
import sys

LIBRARY = "tcmalloc_minimal"  # libtcmalloc_minimal.so.4 (gperftools' malloc without its profiler)
REPLACEMENTS = ("tcmalloc", "jemalloc", "mimalloc")  # already preloaded: the user's choice stands
TRIED = "AIAYN_MALLOC_TRIED"  # in the re-run's environment: it never runs itself again
BEFORE = "AIAYN_LD_PRELOAD_BEFORE"  # the user's LD_PRELOAD, restored for the programs it starts
QUIET = "TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD"  # tcmalloc's notice per block over 1 GB: off ...
QUIETED = "AIAYN_MALLOC_QUIETED"  # ... unless the user set it; this says aiayn did (removed again)


def library() -> str | None:
    """tcmalloc's shared library as the dynamic loader names it, or None where it is not installed."""
    return ctypes.util.find_library(LIBRARY) if sys.platform == "linux" else None


def wanted(environ: dict | os._Environ = os.environ) -> bool:
    """Whether the command should run itself again under tcmalloc (before looking for the library)."""
    if sys.platform != "linux" or TRIED in environ:
        return False
    if environ.get("AIAYN_MALLOC", "").strip().lower() == "system":
        return False
    return not any(name in environ.get("LD_PRELOAD", "") for name in REPLACEMENTS)


def rerun_environment(path: str, environ: dict | os._Environ = os.environ) -> dict:
    """The environment of the re-run: tcmalloc after the user's LD_PRELOAD, which is kept aside."""
    before = environ.get("LD_PRELOAD", "")
    env = dict(environ)
    if QUIET not in env:
        env.update({QUIET: str(1 << 40), QUIETED: "1"})
    env.update({TRIED: "1", BEFORE: before, "LD_PRELOAD": f"{before} {path}".strip()})
    return env


def restore_environment(environ: dict | os._Environ = os.environ) -> None:
    """In the re-run: give the programs it starts the user's environment back (LD_PRELOAD, no
    TRIED mark, so a command among them makes its own choice)."""
    environ.pop(TRIED, None)
    if environ.pop(QUIETED, None) is not None:
        environ.pop(QUIET, None)
    if BEFORE in environ:
        before = environ.pop(BEFORE)
        if before:
            environ["LD_PRELOAD"] = before
        else:
            environ.pop("LD_PRELOAD", None)


def run_under_tcmalloc() -> None:
    """Replace this process with the same command line under tcmalloc when `wanted` and installed;
    return otherwise (having restored the environment, in a re-run), or if the re-run cannot start."""
    if TRIED in os.environ:
        restore_environment()
        return
    path = library() if wanted() else None
    if path is None or not sys.executable:
        return
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    try:
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], rerun_environment(path))
    except OSError:
        return  # the interpreter cannot be run again (embedded, removed): carry on as we are
