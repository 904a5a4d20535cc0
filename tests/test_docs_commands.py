"""Every `aiayn ...` command that README.md and docs/ show exists, with every flag it shows.

Commands are read from fenced code blocks (a trailing backslash continues a line) and from inline
code; each is checked against the real argument parser (`aiayn.cli.build_parser`), so the docs
cannot drift from the command line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aiayn.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
COMMAND = re.compile(r"(?:^|(?<=[\s|;&(/]))(?<!from )(?<!import )aiayn +([a-z][a-z0-9-]*)")  # not Python
COMMENT = re.compile(r"(?:^|\s)#.*")
FLAG = re.compile(r"^--?[A-Za-z][A-Za-z0-9-]*")
STOP = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "2>&1"}  # where the shell's next command begins


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, text) of every piece of code: lines of fenced blocks, joined where a line
    ends with a backslash, and each inline code span outside them."""
    pieces, fenced, pending = [], False, None
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced, pending = not fenced, None
            continue
        if not fenced:
            pieces += [(number, span) for span in re.findall(r"`([^`\n]+)`", line)]
            continue
        start, joined = pending if pending else (number, "")
        joined += " " + line.rstrip().removesuffix("\\")
        pending = (start, joined) if line.rstrip().endswith("\\") else None
        if pending is None:
            pieces.append((start, joined))
    return pieces


def commands(code: str) -> list[tuple[str, list[str]]]:
    """Each `aiayn COMMAND ...` in a piece of code: the command and the flags it shows, read up to
    the shell's next command or a comment (`|` inside a synopsis's brackets is an alternative)."""
    found, code = [], COMMENT.sub("", code)
    for match in COMMAND.finditer(code):
        flags, depth = [], 0
        for token in code[match.end() :].split():
            if token in STOP and depth == 0:
                break
            depth += token.count("[") + token.count("(") - token.count("]") - token.count(")")
            flag = FLAG.match(token.lstrip("[("))
            if flag:
                flags.append(flag.group(0))
        found.append((match.group(1), flags))
    return found


def problems(code: str) -> list[str]:
    """What the parser lacks of the commands in `code`, one line each."""
    subcommands = build_parser().get_default("subcommands")
    out = []
    for name, flags in commands(code):
        if name not in subcommands:
            out.append(f"no command `aiayn {name}`")
            continue
        known = set(subcommands[name]._option_string_actions)
        out += [f"`aiayn {name}` has no flag {flag}" for flag in flags if flag not in known]
    return out


def test_the_checker_finds_commands_and_their_flags():
    code = "aiayn translate M --beam 1 -i a.txt < in.txt | aiayn evaluate --hyp h --ref r  # aiayn x"
    assert commands(code) == [("translate", ["--beam", "-i"]), ("evaluate", ["--hyp", "--ref"])]
    synopsis = "aiayn variations D --out DIR (--steps N | --minutes M) [--rows A,B]"
    assert commands(synopsis) == [("variations", ["--out", "--steps", "--minutes", "--rows"])]
    assert commands("torchrun --nproc_per_node=8 -m aiayn train d --preset base") == [("train", ["--preset"])]
    assert commands("`aiayn.model.linear` and .venv/bin/aiayn prepare --corpus x") == [
        ("prepare", ["--corpus"])
    ]
    assert commands("from aiayn import ModelConfig; import aiayn as a") == []
    assert problems("aiayn translate M --beam 2 --no-such-flag") == [
        "`aiayn translate` has no flag --no-such-flag"
    ]
    assert problems("aiayn translat M") == ["no command `aiayn translat`"]


def test_code_lines_join_continued_lines_and_read_inline_code():
    text = "see `aiayn plot RUN`\n```\naiayn train d \\\n    --out r\n```\n"
    assert [(n, " ".join(c.split())) for n, c in code_lines(text)] == [
        (1, "aiayn plot RUN"),
        (3, "aiayn train d --out r"),
    ]


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_shown_exists_with_its_flags(path: Path):
    found = [f"{path.name}:{n}: {p}" for n, code in code_lines(path.read_text()) for p in problems(code)]
    assert not found, "\n".join(found)


def test_the_docs_show_commands():
    shown = sum(len(commands(code)) for path in doc_files() for _, code in code_lines(path.read_text()))
    assert shown > 150  # the check reads the commands, not nothing
