"""SubRip (SRT) and WebVTT subtitles: cue text translated, everything else byte for byte.

A file is read as blocks of lines between blank lines. In SRT a cue is a number, a timing line
(`00:00:01,000 --> 00:00:04,000`, position settings allowed) and its text; in WebVTT the file starts
with `WEBVTT`, and a cue is an optional identifier, a timing line (`00:01.000 --> 00:04.000 line:0`)
and its text, while NOTE, STYLE and REGION blocks and the header are kept. Only the text lines of
cues change: numbers, identifiers, timings, line endings (CRLF stays CRLF) and blank lines are
written back as they were.

A cue's lines are one segment (a sentence often runs over both), translated with its markup
(`<i>`, `<b>`, `<font color>`, WebVTT's `<v Speaker>` and `<c.class>`) carried by the word
alignments (aiayn.formats.inline), and its line breaks too: each goes before the target word aligned
to the word that followed it, so a two-line cue stays two lines where the translation allows (a
line break that lands at either end is dropped, and no line is left empty: an empty line would end
the cue). WebVTT text escapes `&`, `<` and `>`; SRT text is written as it is.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from aiayn.config import DecodeConfig
from aiayn.errors import AiaynError
from aiayn.formats.files import Filled, read_text
from aiayn.formats.html import escaper, inline_tree, render
from aiayn.formats.inline import Atom, Node, Span, has_words
from aiayn.formats.segments import translate_segments

if TYPE_CHECKING:
    from aiayn.decode.translator import Translator

TIME = {"srt": r"\d{1,3}:\d\d:\d\d[,.]\d{1,3}", "vtt": r"(?:\d+:)?\d\d:\d\d\.\d\d\d"}
TIMING = {fmt: re.compile(rf"\s*{t}\s*-->\s*{t}(?:\s.*)?") for fmt, t in TIME.items()}
LINE_BREAK = "\n"


class SubtitleError(AiaynError):
    """A subtitle file aiayn cannot read: which line and why."""


def _blocks(lines: list[str]) -> list[list[int]]:
    """The indices of the lines of each block (runs of lines that are not blank)."""
    blocks: list[list[int]] = []
    for i, line in enumerate(lines):
        if line.strip():
            if i == 0 or not lines[i - 1].strip():
                blocks.append([])
            blocks[-1].append(i)
    return blocks


def _cue_text(fmt: str, lines: list[str], block: list[int], name: str, first: bool) -> list[int]:
    """The text lines of a block that is a cue ([] for WebVTT's header, notes, styles, regions)."""
    heads = [lines[i].strip() for i in block[:2]]
    if fmt == "vtt" and (first or heads[0].split(maxsplit=1)[0] in ("NOTE", "STYLE", "REGION")):
        return []
    for k, head in enumerate(heads):
        if TIMING[fmt].fullmatch(head) and (k == 0 or fmt == "vtt" or heads[0].isdigit()):
            return block[k + 1 :]
    expected = "a number, then 00:00:01,000 --> 00:00:04,000" if fmt == "srt" else "00:01.000 --> 00:04.000"
    found = lines[block[0]].strip()[:40]
    raise SubtitleError(f"{name}:{block[0] + 1}: not a cue: {found!r} (expected {expected})")


def _with_breaks(node: Node) -> Node:
    """The cue's line breaks as atoms, so that the alignment places them."""
    if isinstance(node, Span):
        children: list[Node] = []
        for child in node.children:
            children += _broken(child) if isinstance(child, str) else [_with_breaks(child)]
        return Span(node.payload, children)
    return node


def _broken(text: str) -> list[Node]:
    if LINE_BREAK not in text:
        return [text]
    parts = text.split(LINE_BREAK)
    out: list[Node] = [parts[0]]
    for part in parts[1:]:
        out += [Atom(LINE_BREAK), part]
    return [n for n in out if n != ""]


def _cue_lines(text: str) -> list[str]:
    return [line.strip() for line in text.split(LINE_BREAK) if line.strip()]


def translate_subtitles(
    translator: Translator,
    fmt: str,
    data: bytes,
    name: str,
    options: DecodeConfig | None = None,
    **controls: Any,
) -> Filled:
    """An SRT (`fmt` "srt") or WebVTT ("vtt") file with its cue text translated."""
    text = read_text(data, name)
    bom = "\ufeff" if data.startswith(b"\xef\xbb\xbf") else ""
    lines = text.splitlines(keepends=True)
    if fmt == "vtt" and not (lines and re.match(r"WEBVTT(?:[ \t]|$)", lines[0].rstrip("\r\n"))):
        raise SubtitleError(f"{name}:1: a WebVTT file starts with WEBVTT")
    cues = []
    for k, block in enumerate(_blocks(lines)):
        found = _cue_text(fmt, lines, block, name, k == 0)
        if found:
            cues.append(found)
    sources = [LINE_BREAK.join(lines[i].rstrip("\r\n") for i in cue) for cue in cues]
    trees = [_with_breaks(inline_tree(source, references=fmt == "vtt")) for source in sources]
    targets = translate_segments(translator, trees, options, **controls)
    escape = escaper(trees) if fmt == "vtt" else str
    for cue, tree, target in zip(cues, trees, targets, strict=True):
        if not has_words(tree):
            continue
        new = _cue_lines(render(target, escape)) or _cue_lines(render(tree, escape))
        endings = [lines[i][len(lines[i].rstrip("\r\n")) :] for i in cue]
        for i in cue:
            lines[i] = ""
        lines[cue[0]] = (endings[0] or "\n").join(new) + endings[-1]  # the file's last line may have none
    translated = sum(1 for tree in trees if has_words(tree))
    return Filled((bom + "".join(lines)).encode("utf-8"), translated)
