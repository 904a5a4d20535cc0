"""Each how-to guide's first code block runs as written, on the tests' toy model: docs/howto/*.md and
the guides of the nav's "How-to guides" that live in docs/ (GUIDES_IN_DOCS).

The guides' paths are the quickstart's: `runs/quickstart/model` and `runs/quickstart/data`. Each
block runs with bash (-e, pipefail) in a fresh directory where

- `runs/quickstart/model` is a copy of the stored toy translator (tests/decode/golden/toy_a, the
  model of `build_toy_model_dir`; Spanish -> English word for word) and `runs/quickstart/data` a
  data directory of its task in its vocabulary (`write_toy_data_dir`);
- `aiayn` is the aiayn under test, and this Python's bin/ (torchrun, ct2-transformers-converter,
  python) is on PATH;
- what would reach the network is a stand-in: `hf download REPO --local-dir DIR` writes the toy
  translator exported as a Marian (OPUS-MT) directory (`aiayn export-hf`) into DIR, and the WMT 2014
  files that wmt14.md reads are the toy data's pairs, laid out and named as WMT's are, beside the
  shipped recipe `wmt14-en-de.yaml`.

A block that serves (SERVES) runs until the server answers the path given, on a free port instead
of the default 8000 (`--port` added), is asked for a translation, and is stopped.

Where a block as written would train for an hour or needs 8 GPUs, the test runs a toy-size
variant: each (old, new) of SIZED replaces text that must be in the block, and nothing else
changes. fast-student: a d_model-32 student trained for 4 updates instead of configs/student.yaml's
3,000. many-gpus: 2 CPU processes (gloo) instead of 8 GPUs, and the 6-update 1-layer model of
`tiny_config` instead of the base model, on the toy data as `data/wmt`. wmt14: 1 CPU process and
that model. training: that model instead of 1,000 updates of the tiny preset. After each block, the
files the guide says you get must be there (GETS).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import aiayn
from aiayn.configs import config_path
from toy_translation import tiny_config, write_toy_data_dir

ROOT = Path(__file__).resolve().parents[1]
HOWTO = ROOT / "docs" / "howto"
GUIDES_IN_DOCS = ("data.md", "training.md", "translating.md", "serving.md", "wmt14.md")
TOY_MODEL = ROOT / "tests" / "decode" / "golden" / "toy_a"
FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)

SIZED = {
    "fast-student.md": [
        ("--out runs/student", "--out runs/student --steps 4 --set d_model=32 --set d_ff=64")
    ],
    "many-gpus.md": [
        ("--nproc_per_node=8", "--nproc_per_node=2"),
        ("--preset base", "--config toy.yaml --device cpu --no-progress"),
    ],
    "training.md": [("--preset tiny --max-steps 1000", "--config toy.yaml --device cpu --no-progress")],
    "wmt14.md": [
        ("--nproc_per_node=8", "--nproc_per_node=1"),
        ("--preset base", "--config toy.yaml --device cpu --no-progress"),
    ],
}
SERVES = {"serving.md": "/v1/model"}
GETS = {
    "fast-student.md": [
        "runs/student/data/meta.json",
        "runs/student/model/config.json",
        "runs/student/model/shortlist.safetensors",
        "runs/student/model/eval/scores.json",
    ],
    "many-gpus.md": ["runs/base/run.json", "runs/base/model/config.json"],
    "opus-mt.md": ["models/es-en/config.json", "models/es-en/source.spm"],
    "deploy.md": ["hf-es-en/config.json", "hf-es-en/model.safetensors", "ct2-es-en/model.bin"],
    "data.md": ["data/mine/meta.json", "data/mine/spm.model", "data/mine/train.src.bin"],
    "training.md": ["runs/mine/model/config.json", "runs/mine/metrics.jsonl", "runs/mine/config.yaml"],
    "translating.md": ["test.en"],
    "wmt14.md": ["runs/wmt14-base/model/config.json", "runs/wmt14-base/model/eval/scores.json"],
    "serving.md": [],
}
WMT14_FILES = {  # the toy data's split -> the WMT 2014 files standing in for it (name: pairs)
    "train": {
        "training/europarl-v7.de-en": 30,
        "commoncrawl.de-en": 20,
        "training/news-commentary-v9.de-en": 10,
    },
    "valid": {"newstest2013": 8},
    "test": {"newstest2014": 8},
}

HF_STAND_IN = """#!/bin/sh
# hf download REPO --local-dir DIR: the toy translator as a Marian directory, not a download
[ "$1" = download ] && [ "$3" = --local-dir ] || { echo "stand-in hf: unexpected $*" >&2; exit 2; }
cp -r "{marian}" "$4"
"""


def guides() -> list[Path]:
    return [*sorted(HOWTO.glob("*.md")), *(ROOT / "docs" / name for name in GUIDES_IN_DOCS)]


def guide(name: str) -> Path:
    return next(path for path in guides() if path.name == name)


def first_block(path: Path) -> str:
    """The guide's first fenced code block, which must be shell."""
    found = FENCE.search(path.read_text())
    assert found, f"{path.name}: no code block"
    assert found.group(1) in ("", "bash", "sh", "shell"), f"{path.name}: the first block is {found.group(1)}"
    return found.group(2)


def sized(name: str, block: str) -> str:
    for old, new in SIZED.get(name, []):
        assert old in block, f"{name}: the toy-size variant replaces {old!r}, which the block lacks"
        block = block.replace(old, new)
    return block


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> dict[str, Path]:
    """What every guide's directory is built from: the toy data directory, the toy translator as a
    Marian directory, and the toy training config."""
    from aiayn.interop.hf_export import export_hf

    root = tmp_path_factory.mktemp("howto-toy")
    data = write_toy_data_dir(root / "data", TOY_MODEL / "spm.model", n_train=60, n_test=8)
    marian = export_hf(TOY_MODEL, root / "marian", lambda message: None)
    config = root / "toy.yaml"
    tiny_config().to_yaml(config)
    return {"data": data, "marian": marian, "config": config}


def workdir(tmp_path: Path, toy: dict[str, Path]) -> dict[str, str]:
    """Lay out the guides' paths in tmp_path; -> the environment to run a block in."""
    shutil.copytree(TOY_MODEL, tmp_path / "runs" / "quickstart" / "model")
    shutil.copytree(toy["data"], tmp_path / "runs" / "quickstart" / "data")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "wmt").symlink_to(tmp_path / "runs" / "quickstart" / "data")
    lay_out_wmt14(tmp_path, toy["data"])
    shutil.copy(toy["config"], tmp_path / "toy.yaml")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_ins = {
        "aiayn": f'#!/bin/sh\nexec "{sys.executable}" -m aiayn "$@"\n',
        "hf": HF_STAND_IN.replace("{marian}", str(toy["marian"])),
    }
    for name, script in stand_ins.items():
        (bin_dir / name).write_text(script)
        (bin_dir / name).chmod(0o755)
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]])
    return {**os.environ, "PATH": path, "PYTHONPATH": str(Path(aiayn.__file__).parents[1])}


def lay_out_wmt14(folder: Path, data: Path) -> None:
    """The toy data's pairs as WMT 2014's files (`NAME.en`, `NAME.de`) and the shipped recipe."""
    for split, files in WMT14_FILES.items():
        sources = (data / "raw" / f"{split}.src").read_text().splitlines()
        targets = (data / "raw" / f"{split}.tgt").read_text().splitlines()
        start = 0
        for name, n in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / f"{name}.en").write_text("\n".join(sources[start : start + n]) + "\n")
            (folder / f"{name}.de").write_text("\n".join(targets[start : start + n]) + "\n")
            start += n
    shutil.copy(config_path("tiny").parent / "data" / "wmt14-en-de.yaml", folder)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_block(block: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"{block}\n{done.stderr[-3000:]}"
    return done


def serve_block(block: str, cwd: Path, env: dict[str, str], path: str) -> dict:
    """Start a block that serves, on a free port; wait until `path` answers; -> the translation of
    a line; stop the server (its whole process group)."""
    port = free_port()
    assert "aiayn serve " in block
    block = block.replace("aiayn serve ", f"aiayn serve --port {port} ", 1)
    log = cwd / "serve.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            ["bash", "-e", "-c", block], cwd=cwd, env=env, stdout=out, stderr=out, start_new_session=True
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300
        while True:
            assert server.poll() is None, f"{block}\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"{path} did not answer in 300 s\n{log.read_text()[-3000:]}"
            try:
                urllib.request.urlopen(url + path, timeout=5).read()
                break
            except OSError:
                time.sleep(0.5)
        request = urllib.request.Request(
            url + "/v1/translate",
            data=json.dumps({"text": "El gato bebe agua."}).encode(),
            headers={"content-type": "application/json"},
        )
        return json.loads(urllib.request.urlopen(request, timeout=120).read())
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def test_every_guide_is_in_the_nav_and_has_its_checks():
    nav = (ROOT / "mkdocs.yml").read_text()
    for path in guides():
        page = path.relative_to(ROOT / "docs").as_posix()
        assert f": {page}\n" in nav, f"{page} is not in mkdocs.yml's nav"
        assert path.name in GETS, f"{path.name}: say in GETS what its first block gives"
    assert set(SIZED) <= set(GETS) and set(SERVES) <= set(GETS)


@pytest.mark.slow
@pytest.mark.parametrize("name", [p.name for p in guides()])
def test_the_first_block_runs_as_written(name, toy, tmp_path):
    block = sized(name, first_block(guide(name)))
    env = workdir(tmp_path, toy)
    if name in SERVES:  # it answers a translation: the toy's words, in English
        answer = serve_block(block, tmp_path, env, SERVES[name])
        assert set(answer["translations"][0]["text"].split()) & {"the", "cat", "drinks", "water"}, answer
        return
    done = run_block(block, tmp_path, env)
    missing = [f for f in GETS[name] if not (tmp_path / f).is_file()]
    assert not missing, f"{name}: the block ran but did not write {missing}"
    if name == "opus-mt.md":  # the translation it prints: the toy's words, in English
        assert set(done.stdout.split()) & {"the", "cat", "drinks", "water"}, done.stdout
    if name == "many-gpus.md":  # two processes trained it
        assert json.loads((tmp_path / "runs/base/run.json").read_text())["world_size"] == 2
