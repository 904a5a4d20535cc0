"""Building and loading the native decoding step's library (`native_step.cpp`; `native_step` uses it;
the batch plan's shuffle, `native_shuffle.h`, is in it too: `aiayn.data.shuffle`).

It is built on first use with the system's C++ compiler against the installed PyTorch (about 20 s,
once; warnings on, `-Wall -Wextra`, PyTorch's own headers excepted; `-fopenmp`, so that ATen's
`parallel_for` in its search kernels runs on PyTorch's threads: the library binds to the libgomp
PyTorch has loaded; a compiler without OpenMP, such as clang without libomp, fails the build and
decoding stays in Python) and cached under $XDG_CACHE_HOME/aiayn/native/<key>/ (~/.cache by default),
keyed by the source (native_step.cpp and the headers it includes), the compiler, the command,
PyTorch and the platform;
`torch.ops.load_library` loads it: no Python extension module, no build step at install.
`AIAYN_NATIVE=0` switches it off.

The cache is checked before anything in it is loaded: beside the library its build records the
library's SHA-256 (written to a temporary file and renamed, so never half-written), and a library
whose bytes do not hash to it (planted, truncated, replaced, or without a hash) is built again, not
loaded. Each build compiles in a work directory of its own (`.build-<pid>-*`, renamed into place
when done), its compiler in a process group of its own; a build removes the work directories of
builds that are over (their process gone, as after `kill -9`, or older than BUILD_SECONDS) and
kills their compilers if still running. Without a compiler, or where the build or loading fails, `load()` is
False and `native_status()` (shown by `aiayn doctor`) says why: decoding steps run in Python.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

SOURCE = Path(__file__).with_name("native_step.cpp")
HEADERS = [
    Path(__file__).with_name(h)
    for h in (
        "native_attention.h",
        "native_beam.h",
        "native_rules.h",
        "native_layers.h",
        "native_panels.h",
        "native_scores.h",
        "native_shuffle.h",
        "native_vector.h",
    )
]  # it includes
LIBRARY = "aiayn_native_step.so"
ENV = "AIAYN_NATIVE"  # 0: decode in Python
BUILD_SECONDS = 600  # a compiler that takes longer is given up on (decoding stays in Python)
WORK_PREFIX = ".build-"  # + the building process's id + "-": a build's work directory
COMPILER_FILE = "compiler"  # in a work directory: the compiler's process id and start time
_lock = threading.Lock()
_state: dict[str, object] = {}  # "loaded": bool, "reason": str, "path": str


def _compiler() -> list[str] | None:
    """The C++ compiler's command (CXX may hold a launcher too: "ccache g++"), or None."""
    if os.environ.get("CXX", "").strip():
        return shlex.split(os.environ["CXX"])
    found = shutil.which("c++") or shutil.which("g++")
    return [found] if found else None


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "aiayn" / "native"


def _command(compiler: list[str], source: Path, out: Path) -> list[str]:
    root = Path(torch.__file__).parent
    include, lib = root / "include", root / "lib"
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return [
        *compiler, "-O2", "-std=c++17", "-fopenmp", "-shared", "-fPIC", "-Wall", "-Wextra",
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-isystem", str(include),
        "-isystem", str(include / "torch" / "csrc" / "api" / "include"), str(source), "-o", str(out),
        f"-L{lib}", "-lc10", "-ltorch_cpu", "-ltorch", f"-Wl,-rpath,{lib}",
    ]  # fmt: skip


def _library_path(compiler: list[str]) -> Path:
    """Where the library built from this source by `compiler` for this PyTorch is cached: keyed by
    the source, the compiler's version, the whole command (flags, PyTorch's headers and ABI) and the
    platform."""
    version = subprocess.run([*compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    parts = [torch.__version__, version, " ".join(_command(compiler, SOURCE, Path("out"))), sys.platform]
    parts.append(platform.machine())
    code = b"".join(path.read_bytes() for path in [SOURCE, *HEADERS])
    key = hashlib.sha256(code + "\0".join(parts).encode()).hexdigest()[:16]
    return _cache_dir() / key / LIBRARY


def _first_error(stderr: str) -> str:
    """The compiler's first error line (its last lines are usually "compilation terminated.")."""
    lines = stderr.strip().splitlines() or ["no output"]
    return next((line for line in lines if "error" in line), lines[-1]).strip()


def _digest_path(library: Path) -> Path:
    return library.with_name(library.name + ".sha256")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verified(library: Path) -> bool:
    """Whether `library` has the bytes its build recorded beside it."""
    try:
        return _digest_path(library).read_text().strip() == _sha256(library)
    except OSError:
        return False


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: running
        return True
    return True


def _started(pid: int) -> str | None:
    """When process `pid` started (Linux: /proc/<pid>/stat's field 22, in clock ticks since boot),
    or None: with its id it names one process, not a later one that reuses the id."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return None


def _stop_compiler(work: Path) -> None:
    """Kill the compiler (its whole process group) that the build in `work` started, if it is the
    process recorded there and still running: the orphan of a build killed with kill -9."""
    try:
        pid, started = (work / COMPILER_FILE).read_text().split()
        if _started(int(pid)) == started:
            os.killpg(int(pid), signal.SIGKILL)
    except (OSError, ValueError):  # none recorded, or it is over
        pass


def clean_leftovers(directory: Path) -> None:
    """Remove the work directories in `directory` of builds that are over, and stop their compilers:
    their process is gone (killed, say) or they are older than BUILD_SECONDS, which no build outlives."""
    now = time.time()
    for work in directory.glob(WORK_PREFIX + "*"):
        pid = work.name[len(WORK_PREFIX) :].partition("-")[0]
        try:
            over = not pid.isdigit() or not _running(int(pid)) or now - work.stat().st_mtime > BUILD_SECONDS
        except OSError:  # removed meanwhile
            continue
        if over:
            _stop_compiler(work)
            shutil.rmtree(work, ignore_errors=True)


def _compile(command: list[str], work: Path) -> subprocess.CompletedProcess:
    """Run the compiler in a process group of its own, recorded in `work` (for `clean_leftovers`);
    the group is killed if this process gives up on it (timeout, Ctrl-C)."""
    compiler = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        (work / COMPILER_FILE).write_text(f"{compiler.pid} {_started(compiler.pid)}")
        stdout, stderr = compiler.communicate(timeout=BUILD_SECONDS)
    finally:
        if compiler.poll() is None:
            os.killpg(compiler.pid, signal.SIGKILL)
            compiler.wait()
    return subprocess.CompletedProcess(command, compiler.returncode, stdout, stderr)


def build() -> Path:
    """Compile native_step.cpp (once; cached) and return the library's path. Raises RuntimeError."""
    compiler = _compiler()
    if compiler is None:
        raise RuntimeError("no C++ compiler (c++ or g++; or set CXX)")
    path = _library_path(compiler)
    if verified(path):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(path.parent)
    with tempfile.TemporaryDirectory(prefix=f"{WORK_PREFIX}{os.getpid()}-", dir=path.parent) as tmp:
        out, digest = Path(tmp) / path.name, Path(tmp) / "sha256"
        done = _compile(_command(compiler, SOURCE, out), Path(tmp))
        if done.returncode != 0:
            raise RuntimeError(f"{compiler[0]} failed to build {SOURCE.name}: {_first_error(done.stderr)}")
        digest.write_text(_sha256(out))
        # Each rename is atomic; between the two another process finds a hash its library does not
        # have, and builds again rather than load it.
        os.replace(digest, _digest_path(path))
        os.replace(out, path)
    return path


def load() -> bool:
    """Build (if needed) and load the native step once per process; whether it is available."""
    with _lock:
        if "loaded" not in _state:
            _state.update(loaded=False, reason="", path="")
            if os.environ.get(ENV, "").strip() == "0":
                _state["reason"] = f"{ENV}=0 in the environment: decoding steps run in Python"
                return False
            try:
                path = build()
                torch.ops.load_library(str(path))
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                _state["reason"] = f"not available ({e}): decoding steps run in Python"
            else:
                _state.update(loaded=True, path=str(path), reason="built and loaded: one native call a step")
        return bool(_state["loaded"])


def reason() -> str:
    """Why the native step is (or is not) available: what `load()` found."""
    load()
    return str(_state["reason"])


def native_status() -> dict:
    """Whether the native decoding step is available here, and why (for `aiayn doctor`)."""
    load()
    return {"available": bool(_state["loaded"]), "reason": _state["reason"], "library": _state["path"]}
