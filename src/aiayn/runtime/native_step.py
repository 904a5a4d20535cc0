"""The decoder's incremental step (3.1, decoding with cached keys and values) as one native call.

A decoding step on the CPU runs about 30 small operations per decoder layer for a few rows; each
costs 10-20 us of Python besides its kernel, as much again as the matrix products at the tiny
preset's size (BENCHMARKS.md, "Session 15"). `native_step.cpp` calls the same ATen operations from
C++, with the same kernels for the products (MKL through `at::linear`, oneDNN on the weights
`pack_for_inference` packed, with ReLU fused there; FBGEMM's int8 products of `quantize_int8`);
self-attention of the one new position is Eq. 1 written out (`bmm`, softmax, `bmm`) where the
Python step calls PyTorch's fused kernel. Its logits equal the Python step's up to float32
summation order (tests/model/test_native_step.py).

It is built on first use with the system's C++ compiler against the installed PyTorch (about 20 s,
once: the library is cached under ~/.cache/aiayn/native, keyed by the source, the compiler, the
command and PyTorch) and loaded with `torch.ops.load_library`: no Python extension module, no build
step at install. Without a compiler, where the build or loading fails, or where a first one-row step
fails when it is attached, decoding stays in Python and `native_status()` (shown by `aiayn doctor`)
or `attach_native_decoder` says why. `AIAYN_NATIVE=0` switches it off.

`attach_native_decoder(model)` gives a float32 (or int8) CPU Transformer its `native_decoder`;
`Transformer.decode_step` uses it when decoding without gradients, in eval mode. It holds the
model's weights by reference: attach after the weights are final (`Translator.load` does). A layer
or Parameter put in place of one of the model's, or a weight moved or cast, sends decoding back to
Python; a copy or a pickle of the model decodes in Python until attached again.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
from pathlib import Path

import torch
from torch import Tensor, nn

from aiayn.model.embedding import OutputLayer
from aiayn.model.linear import PackedLinear

SOURCE = Path(__file__).with_name("native_step.cpp")
ENV = "AIAYN_NATIVE"  # 0: decode in Python
BUILD_SECONDS = 600  # a compiler that takes longer is given up on (decoding stays in Python)
_ACTIVATION_IDS = {name: i for i, name in enumerate(("relu", "gelu", "swish"))}  # native_step.cpp
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
        *compiler, "-O2", "-std=c++17", "-shared", "-fPIC", "-w", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        f"-I{include}", f"-I{include / 'torch' / 'csrc' / 'api' / 'include'}", str(source), "-o", str(out),
        f"-L{lib}", "-lc10", "-ltorch_cpu", "-ltorch", f"-Wl,-rpath,{lib}",
    ]  # fmt: skip


def _library_path(compiler: list[str]) -> Path:
    """Where the library built from this source by `compiler` for this PyTorch is cached: keyed by
    the source, the compiler's version, the whole command (flags, PyTorch's headers and ABI) and the
    platform."""
    version = subprocess.run([*compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    parts = [torch.__version__, version, " ".join(_command(compiler, SOURCE, Path("out"))), sys.platform]
    parts.append(platform.machine())
    key = hashlib.sha256(SOURCE.read_bytes() + "\0".join(parts).encode()).hexdigest()[:16]
    return _cache_dir() / key / "aiayn_native_step.so"


def _first_error(stderr: str) -> str:
    """The compiler's first error line (its last lines are usually "compilation terminated.")."""
    lines = stderr.strip().splitlines() or ["no output"]
    return next((line for line in lines if "error" in line), lines[-1]).strip()


def build() -> Path:
    """Compile native_step.cpp (once; cached) and return the library's path. Raises RuntimeError."""
    compiler = _compiler()
    if compiler is None:
        raise RuntimeError("no C++ compiler (c++ or g++; or set CXX)")
    path = _library_path(compiler)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        out = Path(tmp) / path.name
        command = _command(compiler, SOURCE, out)
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_SECONDS)
        if done.returncode != 0:
            raise RuntimeError(f"{compiler[0]} failed to build {SOURCE.name}: {_first_error(done.stderr)}")
        os.replace(out, path)  # atomic: another process building at once finds a whole file
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
                try:
                    torch.ops.load_library(str(path))
                except OSError:  # a cached library that no longer loads: built again, once
                    path.unlink(missing_ok=True)
                    torch.ops.load_library(str(build()))
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                _state["reason"] = f"not available ({e}): decoding steps run in Python"
            else:
                _state.update(loaded=True, path=str(path), reason="built and loaded: one native call a step")
        return bool(_state["loaded"])


def native_status() -> dict:
    """Whether the native decoding step is available here, and why (for `aiayn doctor`)."""
    load()
    return {"available": bool(_state["loaded"]), "reason": _state["reason"], "library": _state["path"]}


# The modules each NativeDecoder computes, watched: a layer or Parameter put in place of one of theirs
# (quantising from outside, say) leaves the decoder stale, and decoding goes back to Python.
_watched: weakref.WeakKeyDictionary[nn.Module, NativeDecoder] = weakref.WeakKeyDictionary()


def _on_registration(module: nn.Module, name: str, value) -> None:
    native = _watched.get(module)
    if native is not None:
        native.stale = True


torch.nn.modules.module.register_module_module_registration_hook(_on_registration)
torch.nn.modules.module.register_module_parameter_registration_hook(_on_registration)


class NativeDecoder:
    """A Transformer's decoder as one native object holding (by reference) the model's weights."""

    def __init__(self, decoder: torch.ScriptObject, model: nn.Module) -> None:
        self._decoder = decoder
        self.stale = False  # set when one of the watched modules gets a new layer or Parameter
        # Every float tensor it reads, with where its data was: `.to`, `.half` or `param.data = ...`
        # move it, and then the model decodes in Python again.
        held = [*model.decoder.parameters(), model.output_weight, model.output_bias]
        self._held = [(p, p.data_ptr()) for p in held if p is not None]
        self._layers = len(model.decoder.layers)
        for module in [model, *model.decoder.modules(), model.output_layer]:
            _watched[module] = self

    def valid_for(self, model: nn.Module) -> bool:
        """Whether it still computes `model`'s own layers and weights: none replaced by a new layer
        or Parameter, removed, or moved or cast (`.to`, `.half`, `param.data = ...`)."""
        if self.stale or len(model.decoder.layers) != self._layers:
            return False
        return all(p.data_ptr() == where for p, where in self._held)

    def step(self, x: Tensor, state) -> Tensor:
        """x (rows, d_model), the embedded tokens at `state.step` -> logits (rows, vocab); appends
        this step's keys and values to `state.self_kv` (a `DecoderState`)."""
        caches = state.self_kv
        length = caches[0].length
        logits = self._decoder.step(
            x,
            [c.k for c in caches],
            [c.v for c in caches],
            length,
            [k for k, _ in state.cross_kv],
            [v for _, v in state.cross_kv],
            state.memory_mask,
        )
        for cache in caches:
            cache.length = length + 1
        return logits

    def __deepcopy__(self, memo) -> None:
        return None  # a copy of the model has weights of its own: it decodes in Python

    def __reduce__(self):
        return (type(None), ())


def _add_linear(native: torch.ScriptObject, layer: nn.Module, weight=None, bias=None) -> bool:
    """Give `native` one linear layer; False for a kind it cannot compute."""
    from aiayn.model.quantize import Int8Linear  # quantize imports linear, as this module does

    if isinstance(layer, Int8Linear):
        native.add_int8(layer._packed)
        return True
    if isinstance(layer, PackedLinear):
        uses = [kernel == "packed" for kernel in layer.kernels]
        native.add_float(layer.weight.detach(), _detached(layer.bias), layer.packed, uses)
        return True
    if isinstance(layer, nn.Linear):
        weight, bias = layer.weight, layer.bias
    elif not isinstance(layer, OutputLayer):
        return False
    native.add_float(weight.detach(), _detached(bias), None, [False] * 4)
    return True


def _detached(t: Tensor | None) -> Tensor | None:
    return None if t is None else t.detach()


def _unsupported(model: nn.Module) -> str | None:
    """Why `model`'s decoder cannot run natively, or None."""
    c = model.config
    weight = model.output_weight
    if weight.device.type != "cpu" or weight.dtype != torch.float32:
        return "not a float32 CPU model"
    if c.activation not in _ACTIVATION_IDS:
        return f"activation {c.activation!r}"
    return None


def attach_native_decoder(model: nn.Module) -> str:
    """Set `model.native_decoder` (a Transformer, in place) where the native step can run it, else
    None; returns why not, or "native"."""
    model.native_decoder = None
    why = _unsupported(model) or (None if load() else str(_state["reason"]))
    if why is not None:
        return why
    c = model.config
    native = torch.classes.aiayn.NativeDecoder(
        c.n_heads, c.key_dim, c.value_dim, c.norm_first, _ACTIVATION_IDS[c.activation], c.layer_norm_eps
    )
    for layer in model.decoder.layers:
        a, x = layer.self_attn, layer.cross_attn
        for linear in (a.qkv_proj, a.out_proj, x.q_proj, x.out_proj, layer.ffn.linear1, layer.ffn.linear2):
            if not _add_linear(native, linear):
                return f"a layer of kind {type(linear).__name__}"
        for res in (layer.self_res, layer.cross_res, layer.ffn_res):
            native.add_norm(res.norm.weight.detach(), res.norm.bias.detach())
    if model.decoder.norm is not None:
        native.add_norm(model.decoder.norm.weight.detach(), model.decoder.norm.bias.detach())
    if not _add_linear(native, model.output_layer, model.output_weight, model.output_bias):
        return f"an output layer of kind {type(model.output_layer).__name__}"
    decoder = NativeDecoder(native, model)
    try:  # one step of one row: a kernel this PyTorch cannot run fails here, not while translating
        with torch.inference_mode():
            memory = model.output_weight.new_zeros(1, 1, c.d_model)
            decoder.step(memory[:, 0], model.start_decoding(memory, None, 1))
    except RuntimeError as e:
        return f"its first step failed ({str(e).splitlines()[0]}): decoding steps run in Python"
    model.native_decoder = decoder
    return "native"
