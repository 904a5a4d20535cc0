"""Read verse text from SWORD Bible modules (zText) and strip their OSIS markup.

A zText module stores each testament as three files: `.bzv` maps every verse slot of the module's
versification to (block, offset, length); `.bzs` maps every block to its place in `.bzz`; `.bzz` holds
the zlib-compressed blocks (one per book). We decompress each block once, which makes reading a whole
Bible take well under a second (pysword decompresses a whole book for every verse read, ~40 s per
module), and we clean the raw OSIS ourselves: pysword's cleaner glues words where a note or an added
word (`<transChange>`) was cut, keeps KJV pilcrows and `\\nd` codes and deletes the Psalm titles that
the Spanish keeps.
"""

from __future__ import annotations

import html
import re
import struct
import zlib
from pathlib import Path

from pysword.canons import canons

from aiayn.errors import AiaynError

SWORD_ROOT = Path("/usr/share/sword")

Ref = tuple[str, int, int]  # (OSIS book, chapter, verse), e.g. ("Gen", 1, 1)

_NOTE = re.compile(r"<note\b[^>]*>.*?</note>", re.S)
_SPEAKER = re.compile(r"<speaker\b[^>]*>.*?</speaker>", re.S)  # WEB's "Beloved"/"Friends" labels
_GLOSSARY = re.compile(r"<div\b[^>]*type=\"glossary\".*", re.S)  # WEB appends one to Rev 22:21
_LONE_W = re.compile(r"(?<!>)(?:<w\b[^>]*>|</w>)(?!<)")  # most tags: one word's own, removed outright
_TAG_RUN = re.compile(r"(?:<[^>]*>)+")
_TAG_NAME = re.compile(r"<\s*/?\s*([A-Za-z]+)")
_USFM = re.compile(r"\\\+?[a-z]+\d?\*?")  # stray USFM codes such as "\nd " in the KJV
# Tags that end a line or a block of text: they always separate words.
_BLOCK_TAGS = frozenset({"chapter", "div", "item", "l", "lb", "lg", "list", "milestone", "p", "title"})


class MissingPackageError(AiaynError):
    """A built-in corpus needs a Debian package that is not installed."""


def _conf(root: Path, module: str, package: str) -> dict[str, str]:
    path = root / "mods.d" / f"{module}.conf"
    if not path.exists():
        raise MissingPackageError(
            f"SWORD module {module} not found ({path}); install the Debian package {package}: "
            f"apt-get update && apt-get install {package}"
        )
    conf = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            conf.setdefault(key.strip(), value.strip())
    if conf.get("ModDrv", "").lower() != "ztext" or conf.get("CompressType", "ZIP") != "ZIP":
        raise AiaynError(f"{path}: only zText modules with ZIP compression are supported")
    return conf


def _read_testament(base: Path, books: list, letter: str) -> dict[Ref, str]:
    """All verses of one testament: `books` is the versification's list of (name, osis, abbr, lengths)."""
    index = (base.parent / f"{base.name}.{letter}zv").read_bytes()  # 10 bytes per slot: <IIH
    blocks = (base.parent / f"{base.name}.{letter}zs").read_bytes()  # 12 bytes per block: <III
    data = (base.parent / f"{base.name}.{letter}zz").read_bytes()
    cache: dict[int, bytes] = {}
    verses: dict[Ref, str] = {}
    slot = 2  # slots 0 and 1: module and testament headings
    for _, osis, _, chapter_lengths in books:
        slot += 1  # book heading
        for chapter, n_verses in enumerate(chapter_lengths, start=1):
            slot += 1  # chapter heading
            for verse in range(1, n_verses + 1):
                if 10 * (slot + 1) <= len(index):
                    block, start, length = struct.unpack_from("<IIH", index, 10 * slot)
                    if block not in cache:
                        offset, size, _ = struct.unpack_from("<III", blocks, 12 * block)
                        cache[block] = zlib.decompress(data[offset : offset + size])
                    raw = cache[block][start : start + length]
                    verses[(osis, chapter, verse)] = raw.decode("utf-8", errors="replace")
                slot += 1
    return verses


def read_module(module: str, package: str, root: Path = SWORD_ROOT) -> dict[Ref, str]:
    """Raw OSIS text of every verse slot of a SWORD zText module, keyed by (book, chapter, verse)."""
    conf = _conf(root, module, package)
    canon = canons[conf.get("Versification", "KJV").lower()]
    letter = {"BOOK": "b", "CHAPTER": "c", "VERSE": "v"}[conf.get("BlockType", "CHAPTER").upper()]
    data_path = root / conf["DataPath"].lstrip("./")
    verses: dict[Ref, str] = {}
    for testament in ("ot", "nt"):
        if (data_path / f"{testament}.{letter}zv").exists():
            verses.update(_read_testament(data_path / testament, canon[testament], letter))
    return verses


def _replace_tags(match: re.Match) -> str:
    """Replace a run of adjacent tags: by a space where it separates two words, else by nothing.

    A note, a block tag, or an added word (`<transChange>`) next to a `<w>` boundary separates
    words; a bare `<transChange>` inside a word is an enclitic ("preguntándo" + "le") and one
    split `<w>` element is a split word ("give</w>n").
    """
    run, text = match.group(0), match.string
    names = set(_TAG_NAME.findall(run))
    if names & _BLOCK_TAGS:
        return " "
    before = text[match.start() - 1] if match.start() else " "
    after = text[match.end()] if match.end() < len(text) else " "
    if not (before.isalnum() and after.isalnum()):
        return ""
    if "note" in names or ("transChange" in names and "w" in names):
        return " "
    return ""


def clean_osis(raw: str) -> str:
    """Plain text of one verse's OSIS markup: notes dropped, words kept apart, whitespace collapsed."""
    text = _GLOSSARY.sub("", raw)
    text = _NOTE.sub("<note/>", text)
    text = _SPEAKER.sub("<lb/>", text)
    text = _TAG_RUN.sub(_replace_tags, _LONE_W.sub("", text))
    text = _USFM.sub(" ", html.unescape(text)).replace("¶", " ")
    return " ".join(text.split())
