"""Built-in corpora read from Debian packages (section 5.1 trains on WMT; these install offline).

`load_builtin(name)` returns {"train": pairs, "valid": pairs, "test": pairs} with (source, target)
string pairs; `CORPORA[name]` says the languages and the Debian packages a corpus needs. A missing
package is an `AiaynError` that names the package to install.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aiayn.data.builtin.bible import load_bible
from aiayn.data.builtin.libreoffice import load_libreoffice
from aiayn.data.sources import SYNTHETIC_TREES
from aiayn.errors import AiaynError

Splits = dict[str, list[tuple[str, str]]]


@dataclass(frozen=True)
class BuiltinCorpus:
    src_lang: str
    tgt_lang: str
    packages: tuple[str, ...]
    description: str
    load: Callable[[], Splits]


CORPORA: dict[str, BuiltinCorpus] = {
    "bible-es-en": BuiltinCorpus(
        "es",
        "en",
        ("sword-text-sparv", "sword-text-kjv"),
        "Reina-Valera 1909 -> King James, verse-aligned, split by whole books",
        lambda: load_bible("kjv"),
    ),
    "bible-es-en-web": BuiltinCorpus(
        "es",
        "en",
        ("sword-text-sparv", "sword-text-web"),
        "Reina-Valera 1909 -> World English Bible, verse-aligned, split by whole books",
        lambda: load_bible("web"),
    ),
    "libreoffice-en-de": BuiltinCorpus(
        "en",
        "de",
        ("libreoffice-help-en-us", "libreoffice-help-de"),
        "LibreOffice help paragraphs aligned by (page, element id), seeded split",
        load_libreoffice,
    ),
    "libreoffice-es-en": BuiltinCorpus(
        "es",
        "en",
        ("libreoffice-help-es", "libreoffice-help-en-us"),
        "LibreOffice help paragraphs, Spanish -> English, aligned by (page, element id), seeded split",
        lambda: load_libreoffice(source="es", target="en-US"),
    ),
    "libreoffice-en-es": BuiltinCorpus(
        "en",
        "es",
        ("libreoffice-help-en-us", "libreoffice-help-es"),
        "LibreOffice help paragraphs, English -> Spanish, aligned by (page, element id), seeded split",
        lambda: load_libreoffice(target="es"),
    ),
    "libreoffice-en-fr": BuiltinCorpus(
        "en",
        "fr",
        ("libreoffice-help-en-us", "libreoffice-help-fr"),
        "LibreOffice help paragraphs, English -> French, aligned by (page, element id), seeded split",
        lambda: load_libreoffice(target="fr"),
    ),
}


def get_corpus(name: str) -> BuiltinCorpus:
    if name not in CORPORA:
        known = f"{', '.join(CORPORA)}, and {SYNTHETIC_TREES} (parsing)"
        raise AiaynError(f"unknown corpus {name!r}; built-in corpora: {known}")
    return CORPORA[name]


def load_builtin(name: str) -> Splits:
    """Train / valid / test (source, target) pairs of a built-in corpus."""
    return get_corpus(name).load()
