"""`aiayn translate --format FORMAT -i FILE -o OUT`: a file of one of the formats read, translated
and written whole (to a temporary beside OUT, renamed at the end: OUT holds the whole translation
or what it held before), and what was done, in one line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiayn.config import DecodeConfig
from aiayn.errors import AiaynError

if TYPE_CHECKING:
    from aiayn.decode.translator import Translator

FORMATS = ("text", "html", "po", "xliff", "srt", "vtt")  # text: translate's lines, not this module's


@dataclass
class Filled:
    """A translated file: its bytes, how many entries (units, cues) were translated, how many were
    already translated and kept, and a line for each entry left untranslated."""

    data: bytes
    translated: int
    kept: int = 0
    refused: list[str] = field(default_factory=list)

    def summary(self, name: str) -> str:
        kept = f", {self.kept} already translated and kept" if self.kept else ""
        refused = f", {len(self.refused)} left untranslated" if self.refused else ""
        return f"{name}: {self.translated} translated{kept}{refused}"


def primary(code: str) -> str:
    """A language code's primary subtag, lower-cased: "pt_BR", "pt-BR", "PT" -> "pt"."""
    return re.split(r"[-_.@]", code.strip(), maxsplit=1)[0].lower()


def check_languages(
    info: dict[str, Any], name: str, source: str | None, target: str | None, chosen: str | None
) -> None:
    """One line when a file declares another language pair than the translation's: its `source`
    language against the model's src_lang, its `target` language against `chosen` (--to) or the
    model's tgt_lang. Compared by primary subtag ("de-AT" is German); an empty or absent
    declaration, or a model that names no language, passes."""
    own = info.get("src_lang")
    if source and own and primary(source) != primary(own):
        raise AiaynError(f"{name}: the file's source language is {source}; the model translates from {own}")
    into = chosen or (None if info.get("target_languages") else info.get("tgt_lang"))
    if target and into and primary(target) != primary(into):
        how = "--to" if chosen else "the model translates into"
        raise AiaynError(f"{name}: the file's target language is {target}; {how} {into}")


def read_text(data: bytes, name: str) -> str:
    """UTF-8 text (a byte order mark dropped), or a one-line error naming the file."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise AiaynError(f"{name}:{line}: not UTF-8 text") from None


def translate_file(
    translator: Translator,
    fmt: str,
    data: bytes,
    name: str,
    options: DecodeConfig | None = None,
    **controls: Any,
) -> Filled:
    """The file's bytes (`name` for messages) translated as `fmt` (html, po, xliff, srt, vtt)."""
    from aiayn.formats import html, po, subtitles, xliff

    if fmt == "html":
        page = read_text(data, name)
        text = html.translate_html(translator, page, options, **controls)
        return Filled(text.encode("utf-8"), html.unit_count(page))
    if fmt == "po":
        return po.translate_po(translator, data, name, options, **controls)
    if fmt == "xliff":
        return xliff.translate_xliff(translator, data, name, options, **controls)
    if fmt in ("srt", "vtt"):
        return subtitles.translate_subtitles(translator, fmt, data, name, options, **controls)
    raise AiaynError(f"--format {fmt}: not one of {', '.join(FORMATS)}")


def write_file(path: str | Path, data: bytes) -> None:
    """OUT written aside and renamed (aiayn.safe_io.atomic_write_bytes)."""
    from aiayn.safe_io import atomic_write_bytes

    atomic_write_bytes(path, data)
