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
