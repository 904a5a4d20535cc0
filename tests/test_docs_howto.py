"""Each how-to guide's first code block (docs/howto/*.md) runs as written, on the tests' toy model.

The guides' paths are the quickstart's: `runs/quickstart/model` and `runs/quickstart/data`. Each
block runs with bash (-e, pipefail) in a fresh directory where

- `runs/quickstart/model` is a copy of the stored toy translator (tests/decode/golden/toy_a, the
  model of `build_toy_model_dir`; Spanish -> English word for word) and `runs/quickstart/data` a
  data directory of its task in its vocabulary (`write_toy_data_dir`);
- `aiayn` is the aiayn under test, and this Python's bin/ (torchrun, ct2-transformers-converter,
  python) is on PATH;
- what would reach the network is a stand-in: `hf download REPO --local-dir DIR` writes the toy
  translator exported as a Marian (OPUS-MT) directory (`aiayn export-hf`) into DIR.

Where a block as written would train for an hour or needs 8 GPUs, the test runs a toy-size
variant: each (old, new) of SIZED replaces text that must be in the block, and nothing else
changes. fast-student: a d_model-32 student trained for 4 updates instead of configs/student.yaml's
3,000. many-gpus: 2 CPU processes (gloo) instead of 8 GPUs, and the 6-update 1-layer model of
`tiny_config` instead of the base model, on the toy data as `data/wmt`. After each block, the
files the guide says you get must be there (GETS).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import aiayn
from toy_translation import tiny_config, write_toy_data_dir

ROOT = Path(__file__).resolve().parents[1]
HOWTO = ROOT / "docs" / "howto"
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
}
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
}

HF_STAND_IN = """#!/bin/sh
# hf download REPO --local-dir DIR: the toy translator as a Marian directory, not a download
[ "$1" = download ] && [ "$3" = --local-dir ] || { echo "stand-in hf: unexpected $*" >&2; exit 2; }
cp -r "{marian}" "$4"
"""


def guides() -> list[Path]:
    return sorted(HOWTO.glob("*.md"))


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


def test_every_guide_is_in_the_nav_and_has_its_checks():
    nav = (ROOT / "mkdocs.yml").read_text()
    for path in guides():
        assert f"howto/{path.name}" in nav, f"{path.name} is not in mkdocs.yml's nav"
        assert path.name in GETS, f"{path.name}: say in GETS what its first block gives"
    assert set(SIZED) <= set(GETS)


@pytest.mark.slow
@pytest.mark.parametrize("name", [p.name for p in guides()])
def test_the_first_block_runs_as_written(name, toy, tmp_path):
    block = sized(name, first_block(HOWTO / name))
    env = workdir(tmp_path, toy)
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"{name}:\n{block}\n{done.stderr[-3000:]}"
    missing = [f for f in GETS[name] if not (tmp_path / f).is_file()]
    assert not missing, f"{name}: the block ran but did not write {missing}"
    if name == "opus-mt.md":  # the translation it prints: the toy's words, in English
        assert set(done.stdout.split()) & {"the", "cat", "drinks", "water"}, done.stdout
    if name == "many-gpus.md":  # two processes trained it
        assert json.loads((tmp_path / "runs/base/run.json").read_text())["world_size"] == 2
