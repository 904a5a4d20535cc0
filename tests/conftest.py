"""Shared test settings: deterministic, two threads (the CI machine has two cores), the toy data of
toy_translation.py (the toy translator's model directory, from its stored copy, its reverse, and its
Translator, loaded once per test module; its multilingual sibling, Spanish into German or English,
trained once per run: under pytest-xdist by the first worker that asks, the others reuse it;
a data directory of its task, and small corpora written on demand), and a child process whose
files cannot grow past a limit (a full disk, for the tests of atomic writes)."""

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from filelock import FileLock

import aiayn
from toy import stored_toy_model_dir, stored_toy_reverse_model_dir
from toy_translation import toy_pairs, unrelated_pairs, write_data_dir, write_parallel

# one intra-op thread a pytest-xdist worker (make test runs one worker a core), two alone
torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else 2)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def built_once(tmp_path_factory, name: str, build: Callable[[Path], Path]) -> Path:
    """build(NAME/model) once per run. Under pytest-xdist each worker has its own temporary directory;
    NAME goes into the one above them, which the run's workers share: the first to ask builds it
    (the others wait on the lock) and every later one reuses it. Not to be written into."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return build(tmp_path_factory.mktemp(name) / "model")
    shared = tmp_path_factory.getbasetemp().parent / name
    with FileLock(f"{shared}.lock"):
        if not (shared / "built").is_file():  # absent, or left half-built by a worker that crashed
            shutil.rmtree(shared, ignore_errors=True)
            build(shared / "model")
            (shared / "built").touch()
    return shared / "model"


@pytest.fixture(scope="session")
def toy_model_dir(tmp_path_factory) -> Path:
    """config.json + model.safetensors + spm.model of the toy translator (a copy of the stored one)."""
    return stored_toy_model_dir(tmp_path_factory.mktemp("toy") / "model")


@pytest.fixture(scope="session")
def toy_reverse_model_dir(tmp_path_factory) -> Path:
    """The toy translator's reverse, English->Spanish word for word (a copy of its stored weights)."""
    return stored_toy_reverse_model_dir(tmp_path_factory.mktemp("toy-reverse") / "model")


@pytest.fixture
def monolingual_text(tmp_path) -> tuple[Path, list[str]]:
    """25 toy Spanish sentences in a file with a blank line after the tenth (back-translation's
    input), and the sentences."""
    from toy_translation import toy_pairs

    path = tmp_path / "mono.es"
    lines = [s for s, _ in toy_pairs(25, seed=3)]
    path.write_text("\n".join(lines[:10]) + "\n\n" + "\n".join(lines[10:]) + "\n", encoding="utf-8")
    return path, lines


@pytest.fixture(scope="session")
def onnx_dir(toy_model_dir, tmp_path_factory) -> Path:
    """The toy translator exported for ONNX Runtime and transformers.js (int8 too), once per run."""
    from aiayn.interop.onnx_export import export_onnx

    return built_once(tmp_path_factory, "toy-onnx", lambda out: export_onnx(toy_model_dir, out, int8=True))


@pytest.fixture(scope="session")
def toy_multilingual_model_dir(tmp_path_factory) -> Path:
    """The toy translator of Spanish into German or English, chosen by a >>de<< / >>en<< tag."""
    from toy import build_toy_multilingual_model_dir

    return built_once(tmp_path_factory, "toy-mul", build_toy_multilingual_model_dir)


@pytest.fixture(scope="module")
def translator(toy_model_dir):
    """The toy translator loaded on the CPU, once per test module."""
    from aiayn.decode.translator import Translator

    return Translator.load(toy_model_dir, device="cpu")


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    """The training tests' data directory (toy_translation.write_data_dir): spm.model, train/valid shards."""
    return write_data_dir(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="session")
def toy_data_dir(tmp_path_factory) -> Path:
    """A data directory of the toy task with only what evaluation reads: raw/test.src and raw/test.tgt."""
    data = tmp_path_factory.mktemp("decode-data")
    (data / "raw").mkdir()
    write_parallel(toy_pairs(40, seed=7), data / "raw" / "test.src", data / "raw" / "test.tgt")
    return data


@pytest.fixture
def write_corpus(tmp_path):
    """write_corpus(n, seed=0, names=("corpus.es", "corpus.en")) -> (src, tgt): n unrelated_pairs."""

    def write(
        n: int, seed: int = 0, names: tuple[str, str] = ("corpus.es", "corpus.en")
    ) -> tuple[Path, Path]:
        return write_parallel(unrelated_pairs(n, seed), tmp_path / names[0], tmp_path / names[1])

    return write


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


TICK = 10.0


@pytest.fixture
def fake_clock(monkeypatch):
    """time.monotonic() returns `now[0]`; each update (text or vision) adds TICK seconds."""
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    from aiayn.train.trainer import Trainer
    from aiayn.vision.train import VisionTrainer

    for cls in (Trainer, VisionTrainer):
        update = cls._update

        def ticking(self, update=update):
            now[0] += TICK
            return update(self)

        monkeypatch.setattr(cls, "_update", ticking)
    return now


@pytest.fixture(scope="session")
def shortlisted(toy_model_dir, tmp_path_factory) -> tuple[Path, Path]:
    """A copy of the toy model with a real shortlist (3 candidates, 2 frequent), and its data (the
    toy task in its vocabulary); tests that change either change a copy."""
    from aiayn.apps.shortlist import build_shortlist
    from toy_translation import write_toy_data_dir

    root = tmp_path_factory.mktemp("shortlist")
    model = root / "model"
    shutil.copytree(toy_model_dir, model)
    data = write_toy_data_dir(root / "data", model / "spm.model")
    build_shortlist(model, data, k=3, frequent=2, progress=False)
    return model, data
