"""`aiayn translate`: text line by line (stdin to stdout by default) with beam search (section 6.1),
sampling, decoding controls, documents and formatted files; a file into a file is a job in parts
that resumes after an interruption (`translate_job`)."""

from __future__ import annotations

import argparse
import contextlib
import sys

from aiayn.cli import translate_job
from aiayn.cli.decoding import (
    add_draft_options,
    add_search_options,
    add_target_option,
    decode_config,
    draft_summary,
    target_language,
    translate_formatted,
)
from aiayn.cli.options import add_format_option, check_document_flags, check_format_flags, check_line_counts
from aiayn.config import DecodeConfig, SamplingConfig


def add_translate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "translate",
        help="translate text line by line (stdin to stdout by default)",
        description="Translate with beam search (6.1): one line in, one line out, in order. With --nbest N, "
        "up to N rows per line: LINE<TAB>RANK<TAB>SCORE<TAB>LOG_PROB<TAB>TRANSLATION.",
    )
    p.add_argument(
        "model_dirs",
        nargs="+",
        metavar="MODEL_DIR",
        help="a model directory; several: an ensemble (one vocabulary)",
    )
    p.add_argument("-i", "--input", metavar="F", help="input file (default or '-': stdin)")
    p.add_argument("-o", "--output", metavar="F", help="output file (default or '-': stdout)")
    p.add_argument(
        "--nbest", type=int, default=DecodeConfig.n_best, help="hypotheses per line (TSV output when > 1)"
    )
    add_search_options(p)
    add_draft_options(p)
    g = p.add_argument_group("decoding controls")
    g.add_argument("--prefix-file", metavar="F", help="per input line, a start the translation must continue")
    g.add_argument(
        "--constraints-file", metavar="F", help="per input line, tab-separated phrases it must contain"
    )
    g.add_argument("--sample", action="store_true", help="sample --nbest outputs instead of searching")
    s = SamplingConfig
    g.add_argument("--temperature", type=float, default=s.temperature, help="with --sample: divide log-probs")
    g.add_argument(
        "--top-k", type=int, default=s.top_k, help="with --sample: only the k most probable (0: all)"
    )
    g.add_argument(
        "--top-p", type=float, default=s.top_p, help="with --sample: the smallest set with this mass"
    )
    g.add_argument("--seed", type=int, default=s.seed, help="with --sample: the draws' seed")
    g.add_argument(
        "--align", action="store_true", help="write 'translation ||| i-j ...' (source-target words)"
    )
    g.add_argument("--replace-unk", action="store_true", help="<unk> words become their aligned source word")
    g.add_argument("--document", action="store_true", help="the input is one document: split into sentences")
    add_target_option(g)
    add_format_option(g)
    translate_job.add_progress_option(p)
    p.set_defaults(handler=_run_translate)


def controls_of(args: argparse.Namespace) -> dict:
    """translate()'s keyword arguments for the decoding-control flags (files read whole)."""
    from aiayn.decode.stream import read_lines

    controls: dict = {"align": args.align, "replace_unk": args.replace_unk}
    if args.sample:
        controls["sample"] = SamplingConfig(args.temperature, args.top_k, args.top_p, args.seed)
    if args.prefix_file:
        controls["prefix"] = read_lines(args.prefix_file)
    if args.constraints_file:
        controls["constraints"] = [
            [c for c in line.split("\t") if c.strip()] for line in read_lines(args.constraints_file)
        ]
    return controls


def _run_translate(args: argparse.Namespace) -> None:
    from aiayn.decode.bundle import load_bundle
    from aiayn.decode.stream import read_document, translate_stream
    from aiayn.decode.texts import translate_document
    from aiayn.decode.translator import Translator
    from aiayn.safe_io import atomic_path, input_file, output_file

    options = decode_config(args, args.nbest)
    check_document_flags(args)
    check_format_flags(args)
    args.input = None if args.input == "-" else args.input
    if args.input:
        input_file(args.input, "--input", stream=True)
    args.output = None if args.output == "-" else args.output
    if args.output:
        inputs = (args.input, args.prefix_file, args.constraints_file, *args.model_dirs)
        output_file(args.output, "--output", inputs, reads_stdin=args.input is None)
    controls = controls_of(args)
    check_line_counts(args, controls)
    dirs = args.model_dirs[0] if len(args.model_dirs) == 1 else args.model_dirs
    resumable = args.output and _regular(args.output) and translate_job.resumable(args)
    job = translate_job.open_job(args) if resumable else None  # parts of another job refused here
    translator = Translator(load_bundle(dirs, args.device, int8=args.int8, draft=args.draft))
    controls["target_language"] = target_language(args, translator.info)
    if args.format != "text":
        return translate_formatted(args, translator, options, controls)
    progress = translate_job.show_progress(args)
    if job is not None:  # a file into a file: a job in parts that resumes
        job.run(translate_job.render(translator, options, args.input, controls), progress)
        return draft_summary(translator, options)
    with contextlib.ExitStack() as stack:
        lines = stack.enter_context(open(args.input, "rb")) if args.input else sys.stdin.buffer
        name = args.input or "<stdin>"
        document = read_document(lines, name) if args.document else None  # a bad input empties no -o
        out = sys.stdout
        if args.output and _regular(args.output):  # written aside, renamed at the end: no partial output
            out = stack.enter_context(
                open(stack.enter_context(atomic_path(args.output)), "w", encoding="utf-8")
            )
        if document is not None:
            out.write(translate_document(translator, document, options, **controls))
        else:
            bar = stack.enter_context(translate_job.progress_bar(progress))
            translate_stream(
                translator, lines, out, sys.stderr, name, options=options, progress=bar.update, **controls
            )
    draft_summary(translator, options)


def _regular(path: str) -> bool:
    """Whether `path` is (or will be) a regular file, not a device or a pipe (`-o /dev/stdout`)."""
    import stat
    from pathlib import Path

    return not Path(path).exists() or stat.S_ISREG(Path(path).stat().st_mode)
