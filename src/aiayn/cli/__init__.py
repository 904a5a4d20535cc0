"""The `aiayn` command line. Each subcommand is an `add_<name>` function that declares its arguments
and a handler that calls typed library functions; no Namespace travels further. The smaller
commands are here (`_add_train`, `_add_evaluate`, ...), each larger one in its own module
(`translate.add_translate`, `prepare.add_prepare`, `serve`, ...).

Errors that a user can fix (`AiaynError`) print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from collections.abc import Callable

from aiayn import __version__
from aiayn.apps.quickstart import QUICKSTART_CORPUS, QUICKSTART_OUT, QUICKSTART_STEPS
from aiayn.cli import constituency, translate
from aiayn.cli import prepare as prepare_cli
from aiayn.cli.decoding import add_search_options, decode_config
from aiayn.cli.options import add_device_option, add_set_option, counting_number
from aiayn.configs import PRESETS
from aiayn.errors import AiaynError
from aiayn.runtime.malloc import run_under_tcmalloc

Handler = Callable[[argparse.Namespace], int | None]


# Each entry adds one subcommand (its arguments, and `handler` via set_defaults).
COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = []


def _add_quickstart(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "quickstart",
        help="the main job: prepare bible-es-en, train, average, score, show samples and attention",
        description="Train a Spanish->English translator on the Bible in one command (re-runs resume).",
    )
    p.add_argument("--steps", type=int, help=f"updates (default {QUICKSTART_STEPS}, or none with --minutes)")
    p.add_argument("--minutes", type=float, help="wall-clock budget (with --steps: what ends first)")
    p.add_argument("--out", default=QUICKSTART_OUT, help=f"run directory (default {QUICKSTART_OUT})")
    p.add_argument(
        "--corpus", default=QUICKSTART_CORPUS, help=f"built-in corpus (default {QUICKSTART_CORPUS})"
    )
    p.add_argument(
        "--test-limit", type=counting_number, metavar="N", help="score only the first N test sentences"
    )
    p.add_argument(
        "--seed", type=int, help="another seed trains another model (ensembles; default: the recipe's)"
    )
    p.set_defaults(handler=_run_quickstart)


def _run_quickstart(args: argparse.Namespace) -> None:
    from aiayn.apps.quickstart import quickstart

    if args.minutes is not None and not (math.isfinite(args.minutes) and args.minutes > 0):
        raise AiaynError(f"--minutes must be a finite number > 0, got {args.minutes}")
    if args.steps is not None and args.steps <= 0:
        raise AiaynError(f"--steps must be positive, got {args.steps}")
    steps = QUICKSTART_STEPS if args.steps is None and args.minutes is None else args.steps
    quickstart(args.out, steps, args.minutes, args.corpus, args.test_limit, args.seed)


COMMANDS.append(_add_quickstart)
COMMANDS.append(prepare_cli.add_prepare)


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a model on a prepared data directory (resumes if RUN_DIR has checkpoints)",
        description="Train (section 5). Under `torchrun --nproc_per_node=N -m aiayn train ...` it runs DDP.",
    )
    p.add_argument("data_dir", metavar="DATA_DIR", help="a directory written by `aiayn prepare`")
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="run directory (checkpoints, metrics)")
    base = p.add_mutually_exclusive_group()
    base.add_argument("--preset", choices=PRESETS, help="model preset (default: base)")
    base.add_argument("--config", metavar="F.yaml", help="a RunConfig YAML, e.g. configs/tiny.yaml")
    add_set_option(p, "any model or training setting, e.g. --set warmup_steps=300 (repeatable)")
    p.add_argument("--max-steps", type=int, help="stop after this many updates")
    p.add_argument("--minutes", type=float, help="wall-clock budget of this invocation")
    p.add_argument("--seed", type=int, help="random seed (weights, dropout, batch order)")
    p.add_argument("--init-from", metavar="MODEL_DIR", help="start from this model directory's weights")
    p.add_argument(
        "--dist-timeout",
        type=float,
        default=10.0,
        metavar="MINUTES",
        help="under torchrun: minutes a rank waits for the others before it stops with one line (default 10)",
    )
    add_device_option(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=_run_train)


def _run_train(args: argparse.Namespace) -> int:
    import signal

    from aiayn.train.run import build_run_config
    from aiayn.train.trainer import train

    config = build_run_config(
        args.out,
        preset=args.preset,
        config_file=args.config,
        init_from=args.init_from,
        overrides=args.overrides,
        max_steps=args.max_steps,
        minutes=args.minutes,
        seed=args.seed,
    )
    result = train(
        args.data_dir,
        args.out,
        config,
        init_from=args.init_from,
        progress=not args.no_progress,
        device=args.device,
        dist_timeout=args.dist_timeout,
    )
    if result.stop_reason.startswith("signal:"):
        name = result.stop_reason.split(":", 1)[1]
        return 128 + (signal.Signals[name].value if name in signal.Signals.__members__ else 15)
    if os.environ.get("RANK", "0") == "0":  # under torchrun, the other ranks say nothing
        print(f"stopped at step {result.step} ({result.stop_reason}); last checkpoint: {result.checkpoint}")
    return 0


COMMANDS.append(_add_train)


def _add_average(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("average", help="average a run's last checkpoints into a model directory (6.1)")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument(
        "--last", type=int, help="how many of the newest checkpoints (default: the run's average_last)"
    )
    p.add_argument("--out", metavar="MODEL_DIR", help="default: RUN_DIR/model")
    p.set_defaults(handler=_run_average)


def _run_average(args: argparse.Namespace) -> None:
    from aiayn.train.checkpoint import average_run

    out = average_run(args.run_dir, args.last, args.out)
    averaged = json.loads((out / "config.json").read_text())["averaged"]
    fewer = (
        f" (the run has only {len(averaged)}, not --last {args.last})"
        if len(averaged) < (args.last or 0)
        else ""
    )
    print(f"wrote {out}: the mean of {len(averaged)} checkpoint(s), {averaged[0]} to {averaged[-1]}{fewer}")


COMMANDS.append(_add_average)


COMMANDS.append(translate.add_translate)


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate",
        help="BLEU and chrF (sacreBLEU) of a model on a data split, or of a hypothesis file",
        description="aiayn evaluate MODEL_DIR DATA_DIR [--split test]   |   aiayn evaluate --hyp F --ref F. "
        "Prints sacreBLEU's score lines with their signatures and writes scores.json. Parse data: labelled "
        "bracketing F1 (EVALB), searched as section 6.3 did (aiayn.parse.parser.PARSE_DECODE) unless "
        "the search flags say otherwise.",
    )
    p.add_argument("model_dir", nargs="?", metavar="MODEL_DIR", help="a model directory")
    p.add_argument("data_dir", nargs="?", metavar="DATA_DIR", help="a directory written by `aiayn prepare`")
    p.add_argument("--split", default="test", help="valid or test (reads DATA_DIR/raw/SPLIT.src/.tgt)")
    p.add_argument("--hyp", metavar="F", help="score this hypothesis file instead (with --ref)")
    p.add_argument("--ref", metavar="F", help="reference file, line-aligned with --hyp")
    p.add_argument("--out", metavar="DIR", help="where SPLIT.hyp and scores.json go (default MODEL_DIR/eval)")
    p.add_argument("--limit", type=int, help="only the first N sentences")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_search_options(p)
    constituency.add_evaluate_options(p)
    p.set_defaults(handler=_run_evaluate)


def _run_evaluate(args: argparse.Namespace) -> None:
    from aiayn.cli.options import evaluate_on_split
    from aiayn.evaluate import evaluate_files, evaluate_model, write_scores

    if constituency.wants_parseval(args):
        return constituency.run_evaluate(args)
    if args.hyp or args.ref:
        if not (args.hyp and args.ref) or args.model_dir or args.data_dir:
            raise AiaynError("give either MODEL_DIR DATA_DIR, or --hyp F --ref F")
        scores = evaluate_files(args.hyp, args.ref)
        if args.out:
            scores["scores"] = str(write_scores(scores, args.out))
    else:
        if not (args.model_dir and args.data_dir):
            raise AiaynError("give MODEL_DIR DATA_DIR (or --hyp F --ref F)")
        scores = evaluate_on_split(evaluate_model, args, decode_config(args))
    print(scores["bleu_text"])
    print(scores["chrf_text"])
    for key in ("hypotheses", "scores"):
        if key in scores:
            print(f"{key}: {scores[key]}")


COMMANDS.append(_add_evaluate)


def _add_plot(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="training curves of a run as PNG files (loss, dev loss, lr)")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--out", metavar="DIR", help="default: RUN_DIR/plots")
    p.set_defaults(handler=_run_plot)


def _run_plot(args: argparse.Namespace) -> None:
    from aiayn.apps.viz import plot_training_curves

    for path in plot_training_curves(args.run_dir, args.out):
        print(f"wrote {path}")


COMMANDS.append(_add_plot)


def _extra_commands() -> list[Callable[[argparse._SubParsersAction], None]]:
    from aiayn.cli import backtranslate, distill, doctor, interop, serve, shortlist, variations, vision

    return [
        serve.add_serve,
        serve.add_attention,
        vision.add_vision_train,
        vision.add_vision_attention,
        *interop.COMMANDS,
        doctor.add_doctor,
        variations.add_variations,
        shortlist.add_shortlist,
        distill.add_distill,
        backtranslate.add_backtranslate,
    ]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aiayn", description="The Transformer of 'Attention Is All You Need': train, translate, serve."
    )
    parser.add_argument("--version", action="version", version=f"aiayn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS + _extra_commands():
        add(sub)
    parser.set_defaults(subcommands=sub.choices)  # main: a subcommand's own error for unknown options
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command line on `argv` (default: this process's arguments), in this process."""
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:  # the subcommand's usage line, not the top-level one
        args.subcommands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return int(args.handler(args) or 0)
    except AiaynError as err:
        print(f"aiayn {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"aiayn {args.command}: interrupted", file=sys.stderr)
        return 130
    except OSError as err:  # the machine's, not aiayn's: a full disk, a closed pipe, no permission
        where = f"{err.filename}: " if err.filename else ""
        print(f"aiayn {args.command}: error: {where}{err.strerror or err}", file=sys.stderr)
        _silence_stdout()
        return 1


def _silence_stdout() -> None:
    """If standard output is what failed (full, closed), point it at /dev/null, so that what is still
    buffered for it is not written again, with a second error, when Python exits."""
    try:
        sys.stdout.flush()
    except OSError:
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def entry() -> int:
    """The `aiayn` command and `python -m aiayn`: `main` under tcmalloc where it is installed
    (`aiayn.runtime.malloc` runs the command line again, once, before PyTorch is imported)."""
    run_under_tcmalloc()
    return main()


if __name__ == "__main__":
    sys.exit(entry())
