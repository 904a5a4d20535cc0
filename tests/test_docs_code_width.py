"""No line of a fenced code block in README.md or docs/ is wider than WIDTH characters: a code block
of the site shows 90 characters at 1280 px, beside both sidebars, before it scrolls (its 12 px code
font, docs/css/extra.css; measured in Chromium), and a reader copying a command should see all of
it (long commands continue on the next line after a backslash). The CLI pages' help is wrapped to
the same width (docs/hooks.py)."""

from __future__ import annotations

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
