"""Fixtures of the training tests; the helpers live in toy_data.py."""

import pytest
from toy_data import write_data_dir


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    return write_data_dir(tmp_path_factory.mktemp("data"))
