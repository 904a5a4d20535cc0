"""`aiayn doctor`: the environment report (versions, CPU, threads, kernels, GPUs, optional modules)."""

from __future__ import annotations

import argparse
import json


def add_doctor(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="report the environment (versions, CPU flags, threads, matmul speed, kernels, GPUs, extras)",
        description="One screen for bug reports and benchmark figures; --json for scripts.",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON (for scripts)")
    p.add_argument("--no-measure", action="store_true", help="skip the float32 matmul timing (~1-2 s)")
    p.set_defaults(handler=_run_doctor)


def _run_doctor(args: argparse.Namespace) -> None:
    from aiayn.apps.doctor import format_report, report

    rep = report(measure=not args.no_measure)
    print(json.dumps(rep, indent=2) if args.json else format_report(rep))
