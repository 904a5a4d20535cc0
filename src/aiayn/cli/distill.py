"""`aiayn distill`: a small student trained on a teacher's translations (aiayn.apps.distill),
cheaper to decode."""

from __future__ import annotations

import argparse

from aiayn.cli.options import counting_number


def add_distill(sub: argparse._SubParsersAction) -> None:
    from aiayn.apps.defaults import DISTILL_CHUNK as CHUNK
    from aiayn.apps.defaults import STUDENT
    from aiayn.cli.decoding import add_search_options
    from aiayn.cli.options import add_set_option
    from aiayn.configs import PRESETS

    p = sub.add_parser(
        "distill",
        help="translate a data directory with a teacher (or an ensemble) and train a student on it",
        description="Sequence-level knowledge distillation (Kim and Rush, 2016): the teacher(s) translate "
        "DATA_DIR's training sources with beam search (the search flags below; resumable chunk by chunk), "
        "written as OUT/data with the same vocabulary; a student (configs/student.yaml unless --preset or "
        "--config) is trained on them in OUT and its last checkpoints averaged into OUT/model.",
    )
    p.add_argument("teachers", nargs="+", metavar="TEACHER", help="a model directory; several: an ensemble")
    p.add_argument("data_dir", metavar="DATA_DIR", help="a data directory in the teacher's vocabulary")
    p.add_argument("--out", required=True, metavar="OUT", help="OUT/data, the student's run, OUT/model")
    base = p.add_mutually_exclusive_group()
    base.add_argument(
        "--preset", choices=[*PRESETS, STUDENT], help=f"the student's model (default: {STUDENT})"
    )
    base.add_argument("--config", metavar="F.yaml", help="the student's RunConfig YAML")
    add_set_option(p, "any of the student's model or training settings (repeatable)")
    p.add_argument("--steps", type=counting_number, help="the student's updates (default: its recipe's)")
    p.add_argument(
        "--chunk", type=counting_number, default=CHUNK, help=f"sources per resumable chunk (default {CHUNK})"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_search_options(p)
    p.set_defaults(handler=_run_distill)


def _run_distill(args: argparse.Namespace) -> None:
    from aiayn.apps.distill import distill_data, student_config, train_student
    from aiayn.cli.decoding import decode_config

    config = student_config(args.out, args.preset, args.config, args.overrides, args.steps)  # checked first
    data = distill_data(
        args.teachers,
        args.data_dir,
        args.out,
        decode_config(args),
        chunk=args.chunk,
        device=args.device,
        int8=args.int8,
        progress=not args.no_progress,
    )
    print(f"distilled data: {data}")
    print(f"student: {train_student(data, data.parent, config, progress=not args.no_progress)}")
