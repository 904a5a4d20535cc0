"""Every peer comparison (training and decoding speed, padding, serving, int8 quality, students) in one
run, then one table of aiayn vs peer with ratios per instruction set.

`make bench` runs this after installing the `bench` extra (transformers, ctranslate2). Each pass
prints `aiayn doctor`'s report of the machine first (measured under that pass's variables). Each
job is a script in benchmarks/ run in its own process; a script that is not there is skipped.
Scripts that take `--json PATH` write {"rows": [...]} there, one row per measure:

    {"measure": str, "aiayn": float, "peer": str, "peer_value": float, "ratio": float,
     "target": float, "higher_is_better": bool}

(`ratio` compares aiayn with the peer as "higher is better" says; the row meets its target when
ratio >= target, or ratio <= target for measures where lower is better). Those rows make the final
tables; every script's own output is shown as it runs.

Instruction sets (the targets hold on AVX2 CPUs too): on a CPU with AVX-512 a second
pass runs the jobs with targets on every CPU (training, decoding, int8 quality) again with the AVX2
kernels of every library selected (`AVX2_ENV`: oneDNN, MKL, ATen, FBGEMM's int8 kernels and the
peer CTranslate2's), so one run gives one table per instruction set. Those kernels keep the faster
CPU's caches, memory and clock: a stand-in for an AVX2 machine, not one (BENCHMARKS.md).

    python benchmarks/run_all.py [--quick] [--only train_speed,padding] [--isa auto|native|avx2|both]
        [--json results.json]

Each pass prints its `aiayn doctor` report before its jobs; the tables, one per pass, come at the end.
`--json` writes {"passes": [{"isa", "label", "machine", "doctor", "rows", "failed"}, ...]}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (script, arguments, arguments under --quick, whether it runs in every instruction-set pass)
JOBS: list[tuple[str, list[str], list[str], bool]] = [
    ("train_speed.py", ["--preset", "tiny"], ["--rounds", "2", "--chunk", "2"], True),
    ("train_speed.py", ["--preset", "base"], ["--rounds", "2", "--chunk", "1"], True),
    ("padding.py", [], [], False),
    ("decode.py", [], ["--repeats", "1"], True),
    ("decode.py", ["--base"], ["--repeats", "1"], True),
    ("serve_load.py", [], ["--seconds", "5"], False),
    ("int8_bleu.py", [], ["--limit", "200"], True),  # the quickstart's run (make demo), if there is one
    ("students.py", [], ["--limit", "200", "--rounds", "1"], True),  # its student (aiayn distill), if any
]
# The AVX2 kernels of each library on a CPU that has more (each reads its variable when it loads).
AVX2_ENV = {
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "ATEN_CPU_CAPABILITY": "avx2",
    "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2",  # int8: the int16-pair kernels, and so aiayn's no-VNNI path
    "CT2_FORCE_CPU_ISA": "AVX2",
}
# Each pass's changes to the environment (None: unset) and its name. The AVX2 pass measures the int8
# path an AVX2 machine takes, whatever AIAYN_INT8_PATH says here.
PASSES: dict[str, tuple[dict[str, str | None], str]] = {
    "native": ({}, "this CPU's own kernels"),
    "avx2": ({**AVX2_ENV, "AIAYN_INT8_PATH": None}, "AVX2 kernels selected"),
}
CHOSEN = "the kernels this environment selects"  # the native pass's name when AVX2_ENV's variables are set
DOCTOR = "import json; from aiayn.apps.doctor import report; print(json.dumps(report(measure=True)))"


def environment(changes: Mapping[str, str | None]) -> dict[str, str]:
    """This process's environment with `changes` made (a value of None removes the variable)."""
    env = {**os.environ, **{k: v for k, v in changes.items() if v is not None}}
    return {k: v for k, v in env.items() if changes.get(k, "") is not None}


def kernels_chosen(env: Mapping[str, str]) -> bool:
    """Whether the environment already selects kernels with one of AVX2_ENV's variables."""
    return any(name in env for name in AVX2_ENV)


def isa_passes(choice: str, flags: dict[str, bool], env: Mapping[str, str]) -> list[str]:
    """The passes to run: `auto` is the native one, and the AVX2 one where the CPU has AVX-512 and
    the environment has not chosen kernels already."""
    if choice == "auto":
        return ["native", "avx2"] if flags.get("avx512f") and not kernels_chosen(env) else ["native"]
    return ["native", "avx2"] if choice == "both" else [choice]


def machine(env: Mapping[str, str | None]) -> tuple[str, dict]:
    """`aiayn doctor`'s report measured under `env` (in a fresh process: the kernels read their
    variables when they load), printed whole, and one line naming the machine: CPU model, cores,
    instruction-set flags, measured fp32 matmul speed, torch, the load average."""
    from aiayn.apps.doctor import format_report

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())  # before the doctor's own matmul timing
    command = [sys.executable, "-c", DOCTOR]
    run = subprocess.run(command, env=environment(env), stdout=subprocess.PIPE, text=True, check=True)
    rep = json.loads(run.stdout)
    print(format_report(rep), flush=True)
    cpu, flags, mm = rep["cpu"], rep["cpu"]["flags"], rep["matmul"]
    isa = (
        " ".join(name for name in ("avx2", "avx512f", "avx512_vnni", "amx", "neon") if flags.get(name)) or "-"
    )
    speed = f"fp32 matmul mkl {mm['mkl']} / onednn {mm['onednn'] or '-'} GFLOP/s"
    line = f"{cpu['model']}, {cpu['cores']} cores, {isa}, {speed}, torch {rep['versions']['torch']}"
    return f"{line}, load average {load}", rep


def run_job(
    script: str, args: list[str], timeout: float, env: Mapping[str, str | None]
) -> tuple[int, list[dict]]:
    """Run one script with `env`'s changes to the environment, echoing its output; return its exit
    status and its rows (if it wrote any)."""
    path = HERE / script
    supports_json = "--json" in path.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        command = [sys.executable, str(path), *args, *(["--json", str(out)] if supports_json else [])]
        print(f"\n=== {script} {' '.join(args)}", flush=True)
        start = time.perf_counter()
        try:
            status = subprocess.run(command, timeout=timeout, check=False, env=environment(env)).returncode
        except subprocess.TimeoutExpired:
            print(f"{script}: stopped after {timeout:.0f} s", flush=True)
            return 124, []
        print(f"=== {script}: exit {status}, {time.perf_counter() - start:.0f} s", flush=True)
        rows = json.loads(out.read_text()).get("rows", []) if out.is_file() else []
    return status, [r for r in rows if isinstance(r, dict) and "ratio" in r]


def meets(row: dict) -> bool:
    if row.get("higher_is_better", True):
        return row["ratio"] >= row["target"]
    return row["ratio"] <= row["target"]


def table(rows: list[dict]) -> str:
    lines = [
        f"{'measure':<42}{'aiayn':>10}  {'peer':<22}{'peer value':>11}{'ratio':>8}{'target':>8}  ok",
        "-" * 108,
    ]
    for r in rows:
        target = ("\u2265" if r.get("higher_is_better", True) else "\u2264") + f"{r['target']:.2f}"
        lines.append(
            f"{r['measure']:<42}{r['aiayn']:>10.1f}  {r['peer']:<22}{r['peer_value']:>11.1f}"
            f"{r['ratio']:>8.2f}{target:>8}  {'yes' if meets(r) else 'NO'}"
        )
    return "\n".join(lines)


def run_pass(isa: str, args: argparse.Namespace, only: set[str] | None) -> dict:
    """One instruction-set pass: the doctor, then its jobs; returns its machine line, report and rows."""
    env, label = PASSES[isa]
    label = CHOSEN if isa == "native" and kernels_chosen(os.environ) else label
    header, doctor = machine(env)
    print(f"aiayn benchmarks, {label}, on {header}", flush=True)
    rows, failed = [], []
    for script, job_args, quick_args, every_isa in JOBS:
        if not (HERE / script).is_file() or (only and Path(script).stem not in only):
            continue
        if isa != "native" and not every_isa:
            continue
        status, job_rows = run_job(script, job_args + (quick_args if args.quick else []), args.timeout, env)
        rows += job_rows
        if status:
            failed.append(f"{script} {' '.join(job_args)}".strip())
    return {"isa": isa, "label": label, "machine": header, "doctor": doctor, "rows": rows, "failed": failed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer timing rounds (a smoke run)")
    parser.add_argument("--only", help="comma-separated script names (without .py) to run")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per job")
    parser.add_argument(
        "--isa", choices=["auto", "native", "avx2", "both"], default="auto",
        help="instruction-set passes: auto = native, plus AVX2 kernels selected where the CPU has AVX-512",
    )  # fmt: skip
    parser.add_argument("--json", help="write every pass's rows, machine line and doctor report here")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    from aiayn.apps.doctor import cpu

    passes = [run_pass(isa, args, only) for isa in isa_passes(args.isa, cpu()["flags"], os.environ)]
    for done in passes:
        print(f"\naiayn vs peers, {done['label']} ({done['machine']})\n{table(done['rows'])}")
        if done["failed"]:
            print(f"failed: {'; '.join(done['failed'])}")
    if args.json:
        Path(args.json).write_text(json.dumps({"passes": passes}, indent=1))
    return 1 if any(done["failed"] for done in passes) else 0


if __name__ == "__main__":
    sys.exit(main())
