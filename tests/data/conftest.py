"""Fixtures for the data tests: the built-in corpora, loaded (and bible-es-en prepared) once per session;
the installed English LibreOffice help pages parsed once per session, whichever corpora read them."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from aiayn.data.builtin import libreoffice as libreoffice_module
from aiayn.data.builtin import load_builtin
from aiayn.data.builtin.libreoffice import HELP_ROOT
from aiayn.data.builtin.sword import SWORD_ROOT


@pytest.fixture(scope="session")
def help_pages_read_once():
    """`read_units` of an installed English help page (HELP_ROOT/en-US, which a run does not change)
    parsed once: the English pages are one side of every LibreOffice corpus. Others are read as ever."""
    read_units = libreoffice_module.read_units
    english = functools.cache(read_units)

    def read(path: Path) -> dict[str, str]:
        return english(path) if path.is_relative_to(HELP_ROOT / "en-US") else read_units(path)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(libreoffice_module, "read_units", read)
        yield


@pytest.fixture(scope="session")
def bible():
    if not SWORD_ROOT.is_dir():
        pytest.skip(f"{SWORD_ROOT} missing: run `make deb`")
    return load_builtin("bible-es-en")


@pytest.fixture(scope="session")
def libreoffice(help_pages_read_once):
    if not (HELP_ROOT / "de").is_dir():
        pytest.skip(f"{HELP_ROOT}/de missing: run `make deb`")
    return load_builtin("libreoffice-en-de")


@pytest.fixture(scope="session")
def bible_data_dir(tmp_path_factory):
    """`prepare --corpus bible-es-en` once per session."""
    if not SWORD_ROOT.is_dir():
        pytest.skip(f"{SWORD_ROOT} missing: run `make deb`")
    from aiayn.data.prepare import prepare

    return prepare(tmp_path_factory.mktemp("bible") / "data", "bible-es-en", progress=False)


@pytest.fixture
def corpus(tmp_path, write_corpus):
    """300 good train pairs, 2 empty, 1 too long (> 40 tokens), 1 lopsided; 20 valid and 10 test pairs."""
    src, tgt = write_corpus(300, seed=0)
    for path, extra in ((src, ["", "the good", "water " * 60, "a"]), (tgt, ["the", "", "day", "long " * 30])):
        with open(path, "a", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in extra)
    valid = write_corpus(20, seed=1, names=("valid.es", "valid.en"))
    test = write_corpus(10, seed=2, names=("test.es", "test.en"))
    return src, tgt, valid, test


@pytest.fixture
def prepare_corpus():
    """prepare(out, corpus, **kwargs) of the `corpus` fixture's files: max_len 40, max_ratio 9, 120
    pieces, no progress bars unless asked."""
    from aiayn.data.prepare import prepare
    from aiayn.data.sources import Filters, PairFiles, SplitFiles

    def prepare_corpus(out, corpus, **kwargs):
        src, tgt, valid, test = corpus
        files = SplitFiles(PairFiles(src, tgt), PairFiles(*valid), PairFiles(*test))
        filters = Filters(max_len=40, max_ratio=9)
        return prepare(out, files, filters=filters, vocab_size=120, **{"progress": False, **kwargs})

    return prepare_corpus
