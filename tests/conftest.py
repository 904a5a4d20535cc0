"""Shared test settings: deterministic, two threads (the CI machine has two cores), the toy
translator's model directory (toy_translation.py), trained once per session, and a child process
whose files cannot grow past a limit (a full disk, for the tests of atomic writes)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import aiayn
from toy_translation import build_toy_model_dir

torch.set_num_threads(2)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def toy_model_dir(tmp_path_factory) -> Path:
    """config.json + model.safetensors + spm.model of the toy translator."""
    return build_toy_model_dir(tmp_path_factory.mktemp("toy") / "model")


FILE_LIMIT_PRELUDE = """
import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
def limit_files(size):
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))
"""


@pytest.fixture
def run_python():
    """run_python(code) -> stdout of `code` run by a child Python that imports the aiayn under test.

    The code may call `limit_files(size)`: from then on no file can grow past `size` bytes, as when a
    disk fills up in the middle of a write.
    """

    def run(code: str) -> str:
        env = {**os.environ, "PYTHONPATH": str(Path(aiayn.__file__).parents[1])}
        argv = [sys.executable, "-c", FILE_LIMIT_PRELUDE + code]
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    return run
