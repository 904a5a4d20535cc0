"""LibreOffice help paragraphs (technical prose): libreoffice-en-de, and libreoffice-es-en.

Debian's `libreoffice-help-<language>` packages install the same HTML pages in every language. Every
paragraph, heading and table cell with an `id` attribute is one translation unit; units align by
(page path, element id). Pages embed paragraphs of other pages under the same ids, so we keep unique
(source, target) pairs and skip units left untranslated (both sides equal). The split is seeded
(`held_out_split`), with dev/test pairs that share a side with train removed.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from aiayn.data.builtin.sword import MissingPackageError
from aiayn.data.corpus import held_out_split

HELP_ROOT = Path("/usr/share/libreoffice/help")
PACKAGES = {"en-US": "libreoffice-help-en-us", "de": "libreoffice-help-de", "es": "libreoffice-help-es"}
_UNITS = frozenset({"p", "h1", "h2", "h3", "h4", "h5", "h6", "td"})
_VOID = frozenset(
    {"br", "img", "input", "meta", "link", "hr", "area", "base", "col", "embed", "source", "wbr"}
)


class _UnitParser(HTMLParser):
    """Collects the text of every unit element that has an id; a unit nested in another is its own.

    Text that the page shows only on some systems or in some modules (a hidden `<span>` whose id does
    not start with "default": "Command" on macOS next to the default "Ctrl") is skipped.
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.units: dict[str, str] = {}
        self._open: list[tuple[str, str | None, list[str]]] = []  # (tag, id or None, text parts)
        self._hidden_depth = 0  # > 0 inside a skipped element

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            if tag == "br" and self._open and not self._hidden_depth:
                self._open[-1][2].append(" ")
            return
        attributes = dict(attrs)
        if self._hidden_depth or (
            "hidden" in attributes and not (attributes.get("id") or "").startswith("default")
        ):
            self._hidden_depth += 1
        elif tag in _UNITS:
            self._open.append((tag, attributes.get("id"), []))

    def handle_endtag(self, tag: str) -> None:
        if self._hidden_depth:
            self._hidden_depth -= 1
            return
        if tag not in _UNITS:
            return
        while self._open:
            open_tag, unit_id, parts = self._open.pop()
            if unit_id:
                self.units.setdefault(unit_id, " ".join("".join(parts).split()))
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._open and not self._hidden_depth:
            self._open[-1][2].append(data)


def read_units(path: Path) -> dict[str, str]:
    """{element id: text} for one help page."""
    parser = _UnitParser()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    return parser.units


def _language_root(language: str, root: Path) -> Path:
    text = root / language / "text"
    if not text.is_dir():
        package = PACKAGES[language]
        raise MissingPackageError(
            f"LibreOffice help not found ({text}); install the Debian package {package}: "
            f"apt-get update && apt-get install {package}"
        )
    return text


def aligned_pairs(root: Path = HELP_ROOT, source: str = "en-US", target: str = "de") -> list[tuple[str, str]]:
    """Unique (source, target) unit pairs, in page order; `source`/`target` name help directories."""
    src_root, tgt_root = _language_root(source, root), _language_root(target, root)
    pairs: dict[tuple[str, str], None] = {}
    for src_page in sorted(src_root.rglob("*.html")):
        tgt_page = tgt_root / src_page.relative_to(src_root)
        if not tgt_page.exists():
            continue
        translations = read_units(tgt_page)
        for unit_id, text in read_units(src_page).items():
            translation = translations.get(unit_id, "")
            if text and translation and translation != text and _has_letters(text):
                pairs[(text, translation)] = None
    return list(pairs)


def _has_letters(text: str) -> bool:
    return re.search(r"[^\W\d_]", text) is not None


def load_libreoffice(
    seed: int = 1, source: str = "en-US", target: str = "de"
) -> dict[str, list[tuple[str, str]]]:
    """Help paragraphs (default English -> German) split into train / valid / test with a seeded shuffle."""
    return held_out_split(aligned_pairs(source=source, target=target), seed)
