"""Every peer comparison of issue 9 in one run, then one table of aiayn vs peer with ratios.

`make bench` runs this after installing the `bench` extra (transformers, ctranslate2). It prints
`aiayn doctor`'s report of the machine first. Each job is a script in benchmarks/ run in its own
process; a script that is not there is skipped. Scripts that take `--json PATH` write
{"rows": [...]} there, one row per measure:

    {"measure": str, "aiayn": float, "peer": str, "peer_value": float, "ratio": float,
     "target": float, "higher_is_better": bool}

(`ratio` compares aiayn with the peer as "higher is better" says; the row meets its target when
ratio >= target, or ratio <= target for measures where lower is better). Those rows make the final
table; every script's own output is shown as it runs.

    python benchmarks/run_all.py [--quick] [--only train_speed,padding] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (script, arguments, arguments under --quick)
JOBS: list[tuple[str, list[str], list[str]]] = [
    ("train_speed.py", ["--preset", "tiny"], ["--rounds", "2", "--chunk", "2"]),
    ("train_speed.py", ["--preset", "base"], ["--rounds", "2", "--chunk", "1"]),
    ("padding.py", [], []),
    ("decode.py", [], ["--repeats", "1"]),
    ("decode.py", ["--base"], ["--repeats", "1"]),
    ("serve_load.py", [], ["--seconds", "5"]),
    ("int8_bleu.py", [], ["--limit", "200"]),  # the quickstart's run (make demo), if there is one
]


def machine() -> tuple[str, dict]:
    """`aiayn doctor`'s report (printed whole at the top), and one line naming the machine: CPU
    model, cores, instruction-set flags, measured fp32 matmul speed, torch, the load average."""
    from aiayn.doctor import format_report, report

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())  # before the doctor's own matmul timing
    rep = report(measure=True)
    print(format_report(rep), flush=True)
    cpu, flags, mm = rep["cpu"], rep["cpu"]["flags"], rep["matmul"]
    isa = (
        " ".join(name for name in ("avx2", "avx512f", "avx512_vnni", "amx", "neon") if flags.get(name)) or "-"
    )
    speed = f"fp32 matmul mkl {mm['mkl']} / onednn {mm['onednn'] or '-'} GFLOP/s"
    line = f"{cpu['model']}, {cpu['cores']} cores, {isa}, {speed}, torch {rep['versions']['torch']}"
    return f"{line}, load average {load}", rep


def run_job(script: str, args: list[str], timeout: float) -> tuple[int, list[dict]]:
    """Run one script, echoing its output; return its exit status and its rows (if it wrote any)."""
    path = HERE / script
    supports_json = "--json" in path.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        command = [sys.executable, str(path), *args, *(["--json", str(out)] if supports_json else [])]
        print(f"\n=== {script} {' '.join(args)}", flush=True)
        start = time.perf_counter()
        try:
            status = subprocess.run(command, timeout=timeout, check=False).returncode
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer timing rounds (a smoke run)")
    parser.add_argument("--only", help="comma-separated script names (without .py) to run")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per job")
    parser.add_argument("--json", help="write every row and the machine line here")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    header, doctor = machine()
    print(f"aiayn benchmarks on {header}", flush=True)
    rows, failed = [], []
    for script, job_args, quick_args in JOBS:
        if not (HERE / script).is_file() or (only and Path(script).stem not in only):
            continue
        status, job_rows = run_job(script, job_args + (quick_args if args.quick else []), args.timeout)
        rows += job_rows
        if status:
            failed.append(f"{script} {' '.join(job_args)}".strip())
    print(f"\naiayn vs peers ({header})\n{table(rows)}")
    if failed:
        print(f"failed: {'; '.join(failed)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": header, "doctor": doctor, "rows": rows}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
