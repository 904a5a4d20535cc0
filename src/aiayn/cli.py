"""The `aiayn` command line. Each subcommand is a small `_add_<name>` function that declares its
arguments and a handler that calls typed library functions; no Namespace travels further.

Errors that a user can fix (`AiaynError`) print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from aiayn.errors import AiaynError

Handler = Callable[[argparse.Namespace], int | None]


# Each entry adds one subcommand (its arguments, and `handler` via set_defaults).
COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = []


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aiayn", description="The Transformer of 'Attention Is All You Need': train, translate, serve."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except AiaynError as err:
        print(f"aiayn {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"aiayn {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
