"""`aiayn doctor`'s human table: the report of aiayn.apps.doctor.probes in one screen, one idea a
line under a label column, wrapped under ~100 columns."""

from __future__ import annotations

import textwrap

import torch

from aiayn.apps.doctor.probes import MATMUL_SHAPE, X86_FLAGS

LABEL_WIDTH = 11
LINE_WIDTH = 100
ERROR_CHARS = 60


def _short(text: str, limit: int = ERROR_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _flag_words(flags: dict[str, bool], machine: str) -> str:
    """x86 flags on x86 ('-' when absent), NEON on ARM; any other flag only when present."""
    arm = machine.lower() in ("arm64", "aarch64")
    shown = ["neon"] if arm else list(X86_FLAGS)
    words = [name if flags.get(name) else f"-{name}" for name in shown]
    return " ".join(words + [name for name, on in flags.items() if on and name not in shown])


def _wrap(label: str, items: list[str]) -> list[str]:
    """`label` then `items` joined by ', ', continued under the first item when a line gets long."""
    lines, current = [], ""
    for item in items:
        if current and LABEL_WIDTH + len(current) + len(item) + 3 > LINE_WIDTH:  # ', ' and ','
            lines.append(current + ",")
            current = item
        else:
            current = f"{current}, {item}" if current else item
    lines.append(current)
    return [f"{label if i == 0 else '':<{LABEL_WIDTH}}{line}" for i, line in enumerate(lines)]


def _versions_lines(rep: dict) -> list[str]:
    v = rep["versions"]
    names = ("aiayn", "torch", "python", "numpy")
    head = "  ".join(f"{name} {v[name]}" for name in names)
    return [f"{'versions':<{LABEL_WIDTH}}{head}", f"{'os':<{LABEL_WIDTH}}{v['os']}"]


def _cpu_line(rep: dict) -> str:
    c = rep["cpu"]
    cores = f"{c['cores']} cores" + (
        f", {c['usable_cores']} usable" if c["usable_cores"] != c["cores"] else ""
    )
    flags = _flag_words(c["flags"], c["machine"] or "")
    return f"{'cpu':<{LABEL_WIDTH}}{c['model']} ({cores})  {flags}  torch: {c['torch_capability']}"


def _threads_line(rep: dict) -> str:
    t = rep["threads"]
    env = [f"{name}={value}" for name, value in t["env"].items() if value is not None]
    env_text = " ".join(env) if env else "no thread/kernel variables set"
    return f"{'threads':<{LABEL_WIDTH}}torch {t['intra_op']}, interop {t['inter_op']}; {env_text}"


def _allocator_line(rep: dict) -> str:
    a = rep["allocator"]
    where = f" ({a['library']})" if a["library"] else ""
    return f"{'malloc':<{LABEL_WIDTH}}{a['name']}{where}"


def _matmul_line(rep: dict) -> str:
    m = rep["matmul"]
    if m is None:
        return f"{'matmul':<{LABEL_WIDTH}}not measured (--no-measure)"
    rows, d_in, d_out = MATMUL_SHAPE
    onednn = "n/a" if m["onednn"] is None else f"{m['onednn']:.1f} GFLOP/s"
    blas = "mkl" if torch.backends.mkl.is_available() else "blas"
    shape = f"({rows}x{d_in} @ {d_in}x{d_out})"
    return f"{'matmul':<{LABEL_WIDTH}}fp32 {blas} {m['mkl']:.1f} GFLOP/s, onednn {onednn} {shape}"


def _text_lines(label: str, text: str, max_lines: int = 2) -> list[str]:
    """`label` then `text`, wrapped under the first line's text, at most `max_lines` lines."""
    width = LINE_WIDTH - LABEL_WIDTH
    lines = textwrap.wrap(text, width, max_lines=max_lines, placeholder=" ...") or [""]
    return [f"{label if i == 0 else '':<{LABEL_WIDTH}}{line}" for i, line in enumerate(lines)]


def _kernel_lines(rep: dict) -> list[str]:
    k, q = rep["kernels"], rep["int8"]
    linear = "linear: " + ("oneDNN" if k["enabled"] else "F.linear (MKL/BLAS)")
    linear += f" ({k['reason']})" if k["reason"] else ""
    int8_text = q["name"]
    if "activation_bits" in q and "weight_bits" in q:
        int8_text += f": {q['activation_bits']}-bit inputs x {q['weight_bits']}-bit weights"
    int8_text += f", engine {q['engine']}" + (f" ({q['why']})" if q.get("why") else "")
    n = rep["native"]
    step = ("native" if n["available"] else "Python") + f" ({n['reason']})"
    return _text_lines("kernels", linear) + _text_lines("int8", int8_text) + _text_lines("decoding", step)


def _gpu_lines(rep: dict) -> list[str]:
    extra = f"cuda {rep['cuda'] or 'none'}, mps {'yes' if rep['mps'] else 'no'}"
    if not rep["gpus"]:
        return [f"{'gpus':<{LABEL_WIDTH}}none ({extra})"]
    items = [
        f"{g['index']}: {g['name']} {g['memory_gib']} GiB sm {g['capability']}{' bf16' if g['bf16'] else ''}"
        for g in rep["gpus"]
    ]
    return _wrap("gpus", items + [extra])


def _optional_lines(rep: dict) -> list[str]:
    items = []
    for name, dep in rep["optional"].items():
        if dep["ok"]:
            items.append(f"{name} {dep['version'] or '?'} ok")
        else:
            state = "missing" if dep["error"].startswith("No module named") else "broken"
            items.append(f"{name} {state} ({_short(dep['error'])})")
    return _wrap("optional", items)


def format_report(rep: dict) -> str:
    """The report as a compact table: one idea a line, a label column, wrapped under ~100 columns."""
    lines = _versions_lines(rep)
    lines += [_cpu_line(rep), _threads_line(rep), _allocator_line(rep), _matmul_line(rep)]
    lines += _kernel_lines(rep) + _gpu_lines(rep) + _optional_lines(rep)
    return "\n".join(lines)
