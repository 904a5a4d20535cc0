"""User-facing text speaks of versions, dates, machines and commits, never of the project's work
sessions, rounds or tracker items: README.md, BENCHMARKS.md, CHANGELOG.md, the docs, every source
file of the package (docstrings and comments, the static page), the benchmark scripts (whose
docstrings are their --help) and the test suite are read for such mentions; this file, whose
examples are deliberate, is not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# Files whose mentions are still to be rewritten, by their owners: each entry is a path relative to
# the repository root. Empty when every file is clean; a file listed here that is clean fails the test.
PENDING: frozenset[str] = frozenset()

ROOT = Path(__file__).resolve().parent.parent
SOURCE_SUFFIXES = {".py", ".cpp", ".h", ".html", ".js", ".css", ".yaml"}

# Each pattern names one kind of mention. Mentions of other projects' trackers ("fairseq #308"),
# measurement rounds ("best of 3 rounds", `--rounds 3`), HTTP or ONNX Runtime sessions, Python's
# round() and u8 x s8 products are not matched; a work branch is lower-case ("i39n's"), so a dtype name
# ("**I32)") is not one.
PATTERNS = {
    "a numbered work session": r"\bsessions?[- ]\d+",
    "a work session by reference": r"\b(?:this|that|same|previous|next|earlier|later|work(?:ing)?)"
    r" sessions?\b",
    "a session label": r"(?<![\w(])\(s\d{1,2}\b(?=[),\- ])|\bs\d{1,2}-s\d{1,2}\b|\bs\d{1,2}'s\b"
    r"|\b(?:in|since|from|than|before|after|history\.md) s\d{1,2}\b"
    r"|\bs\d{1,2} (?:tree|rows?|runs?|figures?|table)\b",
    "a numbered round": r"(?<![-\w])rounds? \d+(?!\s*(?:x|times|s\b|ms\b))",
    "a tracker issue": r"\bissues? \d+|\bthe issue(?:'s)?\b|\bin the issue\b",
    "a tracker item": r"\bitems? \d+(?:-\d+)?\b",
    "a tracker number": r"(?<![\w&#/])#\d{1,5}\b(?![\w;'\]])",
    "a work branch": r"(?-i:\bi\d{2}[a-z]?\b)(?= branch|'s|\))|\bmerg\w* (?:branch )?'?i\d{2}",
}
# A number after one of these names is that project's issue, not this project's: "fairseq #308".
OTHER_PROJECTS = {"fairseq", "pytorch", "torch", "transformers", "ctranslate2", "sentencepiece", "sacrebleu"}
MENTION = re.compile("|".join(f"(?P<p{i}>{p})" for i, p in enumerate(PATTERNS.values())), re.IGNORECASE)
KINDS = list(PATTERNS)


def user_facing_files() -> list[Path]:
    """README, BENCHMARKS and CHANGELOG, docs/ (pages and hooks), the package's source files, and the
    Python files of benchmarks/ and tests/ (all but this one)."""
    files = [ROOT / name for name in ("README.md", "BENCHMARKS.md", "CHANGELOG.md")]
    files += sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "docs" / "hooks.py"]
    src = ROOT / "src" / "aiayn"
    files += sorted(p for p in src.rglob("*") if p.suffix in SOURCE_SUFFIXES and "__pycache__" not in p.parts)
    for folder in ("benchmarks", "tests"):
        files += sorted(p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)
    return [f for f in files if f.is_file() and f != Path(__file__).resolve()]


def mentions(text: str) -> list[tuple[int, str, str]]:
    """(line number, kind, the words matched) of each mention in `text`. Each line is read joined to
    the next, so that a mention broken across two lines ("Session\n24's") is found, once, at the
    line it starts on, and a lookahead sees what follows on the next line ("round 3\ntimes")."""
    found, lines, skip = [], text.splitlines(), 0
    for number, line in enumerate(lines, 1):
        head = line.rstrip()
        following = lines[number] if number < len(lines) else ""
        tail = following.lstrip()
        joined, spill = (f"{head} {tail}" if tail else head), 0
        for match in MENTION.finditer(joined):
            if not skip <= match.start() < len(head):  # inside the last line's mention, or the next's
                continue
            before = (lines[number - 2].split()[-1:] if number > 1 else []) + line[: match.start()].split()
            if match.group(0).startswith("#") and before and before[-1].lower() in OTHER_PROJECTS:
                continue
            kind = KINDS[int(next(name for name, value in match.groupdict().items() if value)[1:])]
            found.append((number, kind, match.group(0)))
            spill = max(spill, match.end() - len(head) - 1 + len(following) - len(tail))
        skip = spill
    return found


@pytest.mark.parametrize(
    "text",
    [
        "Session 15's figures",
        "in int8. Session\n24's search kernels",
        "the figures of (issue\n38)",
        "the i39n\nbranch",
        "measured (s26\n, Zen 3)",
        "in session 26 (BENCHMARKS.md)",
        "sessions 14-17",
        "this session's cache compaction",
        "measured in s17 (s14 was slower)",
        "Kept (s26, Zen 3)",
        "the s24 tree as OLD",
        "history.md s25",
        "round 3 of the review",
        "issue 53",
        "targets (issue 15)",
        "reported in the issue",
        "issue 38 item 16",
        "items 6-11",
        "fixed by #53",
        "after merging i39n",
        "the i39n branch",
        "i38's tests",
    ],
)
def test_history_mentions_are_found(text):
    assert mentions(text), text


@pytest.mark.parametrize(
    "text", ["this\nsession 24", "after merging\ni39n's tests", "this session 24", "see issue 38\nitem 4"]
)
def test_a_mention_over_two_lines_is_counted_once(text):
    assert len(mentions(text)) == len(mentions(text.replace("\n", " "))), mentions(text)


@pytest.mark.parametrize(
    "text",
    [
        "an HTTP session",
        "the two ONNX Runtime sessions",
        "ort.SessionOptions()",
        "round(p * 2^15)",
        "rounded to 4 decimals",
        "best of 3 rounds",
        "students.py --rounds 3",
        "pairs of u8 x s8 products",
        "absorb<n>(v, m, s8);",
        "color: #666;",
        "fairseq #308",
        "list of items",
        "schema.get('items', {})",
        "for key, value in d.items():",
        "an issue with the input",
        "torch.tensor([5, -1], **I32))",
        "I32's width",
        "round 3\ntimes",
        "fairseq\n#308",
    ],
)
def test_ordinary_words_are_not_mentions(text):
    assert not mentions(text), mentions(text)


def test_user_facing_text_names_no_work_sessions_or_tracker_items():
    hits = []
    for path in user_facing_files():
        name = path.relative_to(ROOT).as_posix()
        if name in PENDING:
            continue
        for number, kind, words in mentions(path.read_text(encoding="utf-8", errors="replace")):
            hits.append(f"{name}:{number}: {kind}: {words!r}")
    assert not hits, "development history in user-facing text:\n" + "\n".join(hits)


def test_the_pending_files_still_need_their_rewrite():
    clean = [name for name in sorted(PENDING) if not mentions((ROOT / name).read_text(encoding="utf-8"))]
    assert not clean, f"no mention left in {clean}: take them off PENDING"
