"""`aiayn doctor`: the environment a bug report or a benchmark figure needs, in one screen.

Versions (aiayn, torch, Python, the OS, numpy); the CPU (model, cores, the instruction-set flags that
decide which kernels run: AVX2, FMA, AVX-512, VNNI, AMX, NEON, and the capability torch dispatches
to); torch's threads and the environment variables that change threads or kernels; the memory
allocator the process runs on (glibc's malloc, or tcmalloc / jemalloc preloaded); measured float32
matrix-product speed through MKL (`F.linear`) and through oneDNN, the two paths of
`aiayn.runtime.linear` (the products of sections 3.2.2, 3.3 and 3.4); which of them the model uses;
the int8 path (`--int8`); whether decoding steps run as one native call; GPUs; and whether each
optional dependency imports.

`report()` returns a JSON-ready dict (aiayn.apps.doctor.table: the human table). Nothing here raises
for a missing or broken optional module, a missing /proc/cpuinfo or an absent GPU: it is reported.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import math
import os
import platform
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from importlib import metadata

import numpy
import torch
import torch.nn.functional as F

import aiayn
from aiayn.runtime.malloc import REPLACEMENTS  # malloc replacements, as their libraries are named

OPTIONAL = (
    "transformers",
    "ctranslate2",
    "sentencepiece",
    "sacrebleu",
    "safetensors",
    "fastapi",
    "uvicorn",
    "matplotlib",
    "tensorboard",
    "pysword",
    "playwright",
    "sklearn",
)
DISTRIBUTIONS = {"sklearn": "scikit-learn"}  # import name -> package name, where they differ
THREAD_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "ONEDNN_MAX_CPU_ISA",
    "MKL_ENABLE_INSTRUCTIONS",
    "ATEN_CPU_CAPABILITY",
    "FBGEMM_ENABLE_INSTRUCTIONS",  # the int8 kernels (and so the int8 path)
    "AIAYN_ONEDNN",
    "AIAYN_INT8_PATH",
)
X86_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx")
MATMUL_SHAPE = (512, 1024, 1024)  # (rows, in, out): a (rows, in) @ (in, out) float32 product
WARMUP, REPEATS, MIN_LOOP_S = 3, 5, 0.1


def versions() -> dict:
    """aiayn, torch, Python, OS and numpy versions."""
    return {
        "aiayn": aiayn.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "os": platform.platform(),
        "numpy": numpy.__version__,
    }


def _read_cpuinfo() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _cpuinfo_field(cpuinfo_text: str, *keys: str) -> str | None:
    """The value of the first line whose key (before ':') is one of `keys`."""
    for line in cpuinfo_text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in keys:
            return value.strip()
    return None


def cpu_flags(cpuinfo_text: str, machine: str) -> dict[str, bool]:
    """The kernel-relevant flags of a /proc/cpuinfo text ("flags" on x86, "Features" on ARM)."""
    flags = set((_cpuinfo_field(cpuinfo_text, "flags", "features") or "").split())
    return {
        "avx2": "avx2" in flags,
        "fma": "fma" in flags,
        "avx512f": "avx512f" in flags,
        "avx512_vnni": "avx512_vnni" in flags,  # what torch counts as VNNI (the int8 path: see "int8")
        "avx_vnni": "avx_vnni" in flags,
        "amx": "amx_tile" in flags,
        "neon": "asimd" in flags or machine.lower() in ("arm64", "aarch64"),
    }


def cpu() -> dict:
    """CPU model, logical and usable cores, machine, flags and torch's dispatch capability."""
    text = _read_cpuinfo()
    machine = platform.machine()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "model": _cpuinfo_field(text, "model name") or platform.processor() or machine or None,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "machine": machine,
        "flags": cpu_flags(text, machine),
        "torch_capability": torch.backends.cpu.get_cpu_capability(),
    }


def threads() -> dict:
    """torch's intra-op and inter-op threads and the thread / instruction-set environment variables."""
    return {
        "intra_op": torch.get_num_threads(),
        "inter_op": torch.get_num_interop_threads(),
        "env": {name: os.environ.get(name) for name in THREAD_ENV},
    }


def allocator(maps_text: str | None = None) -> dict:
    """The malloc this process runs on: a replacement loaded into it (found in /proc/self/maps,
    or `maps_text`) and its library, else the C library's own. {"name": str, "library": str | None}.

    It moves CPU training's speed and memory (BENCHMARKS.md: glibc faults in ~200 MB of fresh pages
    a tiny-model step; tcmalloc reuses them), so a figure should say which one ran."""
    if maps_text is None:
        try:
            with open("/proc/self/maps") as f:
                maps_text = f.read()
        except OSError:
            maps_text = ""
    for line in maps_text.splitlines():
        path = line.split()[-1] if line.split() else ""
        for name in REPLACEMENTS:
            if name in os.path.basename(path):
                return {"name": name, "library": path}
    libc = platform.libc_ver()[0]
    return {"name": libc or "system", "library": None}


def _gflops(product: Callable[[], object], flops: float) -> float:
    """GFLOP/s of `product`: WARMUP calls, then the median of REPEATS loops of >= MIN_LOOP_S each."""
    for _ in range(WARMUP - 1):
        product()
    start = time.perf_counter()
    product()
    calls = max(1, math.ceil(MIN_LOOP_S / max(time.perf_counter() - start, 1e-9)))
    seconds = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(calls):
            product()
        seconds.append((time.perf_counter() - start) / calls)
    return round(flops / statistics.median(seconds) / 1e9, 1)


def matmul_gflops() -> dict:
    """Measured float32 GFLOP/s of one (512 x 1024) @ (1024 x 1024) product: MKL and oneDNN."""
    rows, d_in, d_out = MATMUL_SHAPE
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(rows, d_in, generator=generator)
    w = torch.randn(d_out, d_in, generator=generator)  # (out, in), as nn.Linear keeps it
    flops = 2.0 * rows * d_in * d_out
    with torch.inference_mode():
        result = {"mkl": _gflops(lambda: F.linear(a, w), flops), "onednn": None}
        if torch.backends.mkldnn.is_available():
            with contextlib.suppress(AttributeError, RuntimeError):
                onednn = torch.ops.mkldnn._linear_pointwise
                result["onednn"] = _gflops(lambda: onednn(a, w, None, "none", [], ""), flops)
    return result


def kernels() -> dict:
    """Whether `aiayn.runtime.linear` routes float32 products through oneDNN now, and why."""
    from aiayn.runtime.linear import linear_backend

    return {"enabled": bool(linear_backend.enabled), "reason": linear_backend.reason}


def int8() -> dict:
    """The int8 path (`aiayn.runtime.quantize.int8_path()`) and torch's quantised engine."""
    from aiayn.errors import AiaynError
    from aiayn.runtime import quantize

    try:
        path = quantize.int8_path()
    except AiaynError as err:  # AIAYN_INT8_PATH asks for a path FBGEMM's kernels here cannot run
        path = {"name": "error", "why": str(err)}
    return {**path, "engine": torch.backends.quantized.engine}


def native() -> dict:
    """Whether decoding steps run as one native call (`aiayn.runtime.native_step`; built on first use)."""
    from aiayn.runtime.native_build import native_status

    return native_status()


def gpus() -> list[dict]:
    """One entry per CUDA device: name, memory (GiB), compute capability, bf16 support."""
    if not torch.cuda.is_available():
        return []
    devices = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        devices.append(
            {
                "index": index,
                "name": props.name,
                "memory_gib": round(props.total_memory / 2**30, 1),
                "capability": f"{props.major}.{props.minor}",
                "bf16": props.major >= 8 or torch.version.hip is not None,
            }
        )
    return devices


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def _version(name: str, module: object) -> str | None:
    version = getattr(module, "__version__", None)
    if version is None:
        with contextlib.suppress(Exception):
            version = metadata.version(DISTRIBUTIONS.get(name, name))
    return None if version is None else str(version)


def optional_dependency(name: str) -> dict:
    """{"ok", "version", "error"} of importing `name`; any exception is reported, never raised."""
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")  # import-time notices would clutter the report
            module = importlib.import_module(name)
    except Exception as err:  # a broken install can raise anything at import time
        message = str(err) if isinstance(err, ImportError) else f"{type(err).__name__}: {err}"
        return {"ok": False, "version": None, "error": message}
    return {"ok": True, "version": _version(name, module), "error": None}


def optional_dependencies(names: Sequence[str] | None = None) -> dict[str, dict]:
    """`optional_dependency` of each name (default: OPTIONAL)."""
    return {name: optional_dependency(name) for name in (OPTIONAL if names is None else names)}


def report(measure: bool = True) -> dict:
    """The whole environment report as a JSON-ready dict; `measure=False` skips the matmul timing."""
    return {
        "versions": versions(),
        "cpu": cpu(),
        "threads": threads(),
        "allocator": allocator(),
        "matmul": matmul_gflops() if measure else None,
        "kernels": kernels(),
        "int8": int8(),
        "native": native(),
        "gpus": gpus(),
        "cuda": torch.version.cuda,
        "mps": _mps_available(),
        "optional": optional_dependencies(),
    }
