"""`aiayn translate`'s long jobs: a progress bar, and `-i F -o OUT` in parts that resume
(aiayn.apps.translate_job), every option recorded so that parts are reused only by the same job."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from aiayn.config import DecodeConfig

# what the parts of a job need not record: where the text comes from and goes, how progress is shown
NOT_RECORDED = {"handler", "subcommands", "command", "input", "output", "progress", "model_dirs", "draft"}


def add_progress_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        help="lines done and time left on stderr (default: with -i F while stderr is a terminal)",
    )


def show_progress(args: argparse.Namespace) -> bool:
    """--progress / --no-progress, or by default: a file translated while stderr is a terminal (and
    standard output is not that terminal too, where the bar would cut through the translations)."""
    if args.progress is not None:
        return args.progress
    return bool(args.input) and sys.stderr.isatty() and not (args.output is None and sys.stdout.isatty())


def progress_bar(progress: bool):
    """A bar of lines on stderr for a stream (a count and a rate: its end is not known)."""
    from tqdm import tqdm

    return tqdm(unit="line", file=sys.stderr, disable=not progress)


def resumable(args: argparse.Namespace) -> bool:
    """Whether a translation into a regular file (the caller checks -o) is a job in parts that
    resumes: a file read line by line (not stdin, not --document, not a --format other than text)."""
    return bool(args.input) and not args.document and getattr(args, "format", "text") == "text"


def open_job(args: argparse.Namespace):
    """`translate -i F -o OUT` as a job in parts (aiayn.apps.translate_job.TranslationJob): the models,
    the input and every option recorded (the prefix and constraints files by their digest), so that
    only the same job reuses the parts; checked before any model loads."""
    from aiayn.apps.translate_job import TranslationJob, file_record, model_record

    recorded = {k: v for k, v in sorted(vars(args).items()) if k not in NOT_RECORDED}
    for key in ("prefix_file", "constraints_file"):
        if recorded.get(key):
            recorded[key] = file_record(recorded[key])
    made_from = {
        "models": {str(i): model_record(d) for i, d in enumerate(args.model_dirs)},
        "draft": model_record(args.draft) if args.draft else None,
        "options": json.loads(json.dumps(recorded, default=str)),
    }
    return TranslationJob.open(Path(args.input), Path(args.output), made_from)


def render(translator, options: DecodeConfig, name: str, controls: dict):
    """What a job translates each part with: the stream's lines (aiayn.decode.stream.translate_lines)."""
    from aiayn.decode.stream import translate_lines

    def part(lines: list[str], first: int, progress) -> str:
        return translate_lines(translator, lines, first, options, sys.stderr, name, progress, **controls)

    return part
