"""No line of a fenced code block in README.md or docs/ is wider than WIDTH characters: a code block
of the site shows 90 characters at 1280 px, beside both sidebars, before it scrolls (its 12 px code
font, docs/css/extra.css; measured in Chromium), and a reader copying a command should see all of
it (long commands continue on the next line after a backslash). The CLI pages' help is wrapped to
the same width (docs/hooks.py)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 90


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line inside a fenced code block (``` or ~~~, indented or not)."""
    lines, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        mark = line.lstrip()[:3]
        if fence is None and mark in ("```", "~~~"):
            fence = mark
        elif fence is not None and mark == fence:
            fence = None
        elif fence is not None:
            lines.append((number, line))
    return lines


def too_wide(text: str) -> list[str]:
    return [f"{n}: {len(line)} characters" for n, line in code_lines(text) if len(line) > WIDTH]


def test_the_checker_reads_fenced_lines_only():
    wide = "x" * (WIDTH + 1)
    text = f"{wide}\n```\nshort\n{wide}\n```\n  ~~~python\n  {wide}\n  ~~~\n{wide}\n"
    assert [n for n, _ in code_lines(text)] == [3, 4, 7]
    assert too_wide(text) == [f"4: {WIDTH + 1} characters", f"7: {WIDTH + 3} characters"]


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_code_line_is_wider_than_the_page(path: Path):
    found = [f"{path.relative_to(ROOT)}:{problem}" for problem in too_wide(path.read_text())]
    assert not found, f"code lines over {WIDTH} characters:\n" + "\n".join(found)


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """`aiayn` and each of its commands by name, from the real parser."""
    from aiayn.cli import build_parser

    parser = build_parser()
    return {"aiayn": parser, **parser.get_default("subcommands")}


def test_every_command_s_usage_and_help_fit_the_page(monkeypatch):
    """`aiayn COMMAND --help` as the CLI pages show it (docs/hooks.py: COLUMNS 92, argparse wraps at
    90): no line wider than the page, usage lines included, which argparse does not wrap inside a
    group of exclusive options."""
    monkeypatch.setenv("COLUMNS", "92")
    wide = [
        f"aiayn {name}: {len(line)} characters: {line.strip()[:40]}..."
        for name, parser in command_parsers().items()
        for line in parser.format_help().splitlines()
        if len(line) > WIDTH
    ]
    assert not wide, "\n".join(wide)


def test_prepare_s_written_usage_names_every_option():
    """`aiayn prepare`'s usage is written by hand (its sources are one group, too wide as argparse
    writes it): it must still name each of the parser's options."""
    parser = command_parsers()["prepare"]
    named = set(re.findall(r"-[\w-]+", parser.format_usage()))
    missing = [a.option_strings for a in parser._actions if not named & set(a.option_strings)]
    assert not missing, f"aiayn prepare's usage does not name {missing}"
