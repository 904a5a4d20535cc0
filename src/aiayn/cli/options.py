"""The argparse types and options that several `aiayn` commands share: `--device` checked as it
is parsed, counts of 1 or more, `--set KEY=VALUE` overrides, the flags `--document` excludes, and
`aiayn evaluate MODEL_DIR DATA_DIR`'s call of its evaluator (translations and parse trees alike), and
a renamed flag's old spelling (it still works and says it is deprecated)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiayn.errors import AiaynError


def device_name(text: str) -> str:
    """argparse type of --device: a device torch knows and this machine has (cpu, cuda, cuda:N, mps)."""
    import torch

    try:
        device = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a device (cpu, cuda, cuda:N, mps)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError(f"{text}: no CUDA GPU here (torch.cuda.is_available() is False)")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise argparse.ArgumentTypeError(f"{text}: this machine has {torch.cuda.device_count()} CUDA GPU(s)")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise argparse.ArgumentTypeError(f"{text}: no Apple GPU (MPS) here")
    if device.type not in ("cpu", "cuda", "mps"):
        raise argparse.ArgumentTypeError(f"{text}: aiayn runs on cpu, cuda or mps, not {device.type}")
    return text


def counting_number(text: str) -> int:
    """argparse type of a count (threads, images): an integer of 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def add_device_option(p: argparse.ArgumentParser, default: str | None = None) -> None:
    """`--device`, checked as it is parsed (`device_name`); None: a GPU if there is one."""
    where = f"default {default}" if default else "default: a GPU if there is one"
    p.add_argument("--device", type=device_name, default=default, help=f"cpu, cuda, cuda:1 ... ({where})")


def add_set_option(p: argparse.ArgumentParser, help: str) -> None:
    """`--set KEY=VALUE` (repeatable) into `args.overrides`, for `overrides.apply_overrides`."""
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help)


def check_document_flags(args: argparse.Namespace) -> None:
    """translate --document writes one translated text: the per-line flags have nothing to apply to."""
    if not args.document:
        return
    given = {"--nbest": args.nbest > 1, "--align": args.align, "--prefix-file": args.prefix_file,
             "--constraints-file": args.constraints_file}  # fmt: skip
    used = [flag for flag, on in given.items() if on]
    if used:
        raise AiaynError(f"--document translates one whole text; {', '.join(used)} apply to input lines")


def add_format_option(p: argparse.ArgumentParser) -> None:
    """translate's `--format`: lines of text (default), or a file of a format read whole (aiayn.formats)."""
    from aiayn.formats.files import FORMATS

    p.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text: a translation per line (default); html, po, xliff, srt, vtt: the whole file, its "
        "markup, placeholders, untranslated entries or timings kept (-o is written whole or not at all)",
    )


def check_format_flags(args: argparse.Namespace) -> None:
    """translate --format FORMAT writes one file: the per-line flags have nothing to apply to."""
    if args.format == "text":
        return
    given = {"--document": args.document, "--nbest": args.nbest > 1, "--align": args.align,
             "--prefix-file": args.prefix_file, "--constraints-file": args.constraints_file}  # fmt: skip
    used = [flag for flag, on in given.items() if on]
    if used:
        raise AiaynError(f"--format {args.format} translates one whole file; not with {', '.join(used)}")


def evaluate_on_split(evaluate: Callable[..., dict[str, Any]], args: argparse.Namespace, options) -> dict:
    """`evaluate` (aiayn.evaluate.evaluate_model or aiayn.parse.evaluate.evaluate_parser) of
    MODEL_DIR on DATA_DIR's --split with the search `options`, its files in --out (default
    MODEL_DIR/eval); the scores with "scores": the path of scores.json."""
    out = args.out or str(Path(args.model_dir) / "eval")
    scores = evaluate(
        args.model_dir,
        args.data_dir,
        args.split,
        options,
        out_dir=out,
        device=args.device,
        limit=args.limit,
        progress=not args.no_progress,
        int8=args.int8,
    )
    scores["scores"] = str(Path(out) / "scores.json")
    return scores


class _Renamed(argparse.Action):
    """A flag's old spelling: stores into the new one's dest and prints a one-line deprecation note."""

    def __init__(self, option_strings: list[str], dest: str, new: str, **kwargs) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"{parser.prog}: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_renamed_option(p: argparse.ArgumentParser, old: str, new: str, **kwargs) -> None:
    """`old`, hidden from --help, as a deprecated spelling of the option `new` (same dest, same type)."""
    dest = new.lstrip("-").replace("-", "_")
    p.add_argument(old, dest=dest, action=_Renamed, new=new, help=argparse.SUPPRESS, **kwargs)


PER_LINE = (  # translate's files with a line per input line: (controls key, flag, args name)
    ("prefix", "--prefix-file", "prefix_file"),
    ("constraints", "--constraints-file", "constraints_file"),
)


def check_line_counts(args: argparse.Namespace, controls: dict) -> None:
    """A prefix or constraints file must have a line per input line: for an input file, checked
    before any model work (standard input is checked as it ends)."""
    from aiayn.safe_io import capped_lines

    given = [(flag, getattr(args, name), controls[key]) for key, flag, name in PER_LINE if key in controls]
    if args.input and given:
        with open(args.input, "rb") as f:
            lines = sum(1 for _ in capped_lines(f, args.input))
        for flag, path, values in given:
            if len(values) != lines:
                raise AiaynError(f"{flag} {path} has {len(values)} lines; {args.input} has {lines}")
