"""The serve tests' shared set-up: the toy translator, and a client of an app around it.

A module sets its limits by overriding the `settings` fixture; `client` serves them.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from aiayn.decode.translator import Translator
from aiayn.serve import ServeSettings, create_app


@pytest.fixture(scope="module")
def translator(toy_model_dir) -> Translator:
    """The toy translator on the CPU, loaded once per module."""
    return Translator.load(toy_model_dir, device="cpu")


@pytest.fixture(scope="module")
def settings() -> ServeSettings:
    """The limits `client` serves with: the defaults unless a module overrides this fixture."""
    return ServeSettings()


@pytest.fixture(scope="module")
def client(translator, settings):
    """A test client of the app around `translator` (its batcher running), for a whole module."""
    with TestClient(create_app(translator, settings)) as client:
        yield client
