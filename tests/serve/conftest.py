"""Fixtures of the serving tests: one tiny trained model directory per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_model import build_tiny_model_dir


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return build_tiny_model_dir(tmp_path_factory.mktemp("serve") / "model")
