"""Fixtures for the data tests: the built-in corpora, loaded (and bible-es-en prepared) once per session."""

from __future__ import annotations

import pytest

from aiayn.data.builtin import load_builtin
from aiayn.data.builtin.libreoffice import HELP_ROOT
from aiayn.data.builtin.sword import SWORD_ROOT


@pytest.fixture(scope="session")
def bible():
    if not SWORD_ROOT.is_dir():
        pytest.skip(f"{SWORD_ROOT} missing: run `make deb`")
    return load_builtin("bible-es-en")


@pytest.fixture(scope="session")
def libreoffice():
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
