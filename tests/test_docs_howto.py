"""Each how-to guide's first code block runs as written, on the tests' toy model: docs/howto/*.md and
the guides of the nav's "How-to guides" that live in docs/ (GUIDES_IN_DOCS).

The guides' paths are the quickstart's: `runs/quickstart/model` and `runs/quickstart/data`. Each
block runs with bash (-e, pipefail) in a fresh directory where

- `runs/quickstart/model` is a copy of the stored toy translator (tests/decode/golden/toy_a, the
  model of `build_toy_model_dir`; Spanish -> English word for word) and `runs/quickstart/data` a
  data directory of its task in its vocabulary (`write_toy_data_dir`);
- `aiayn` is the aiayn under test, and this Python's bin/ (torchrun, ct2-transformers-converter,
  python) is on PATH. So that each command does not import PyTorch and aiayn anew (seconds a
  command), `aiayn ARGS` is a stand-in that asks a fork server (`run_commands`, one per test module,
  which imported them once, under tcmalloc as the command runs) to run `aiayn.cli.main(ARGS)` in a
  child with the stand-in's directory, environment, stdin, stdout and stderr, and exits with its
  status; a block that serves runs the command itself, as its own process (`python -m aiayn`);
- what would reach the network is a stand-in: `hf download REPO --local-dir DIR` writes the toy
  translator exported as a Marian (OPUS-MT) directory (`aiayn export-hf`) into DIR, and the WMT 2014
  files that wmt14.md reads are the toy data's pairs, laid out and named as WMT's are, beside the
  shipped recipe `wmt14-en-de.yaml`, with Common Crawl's noise (a pair again, a line copied to both
  sides). wmt14.md's block is the recipe's end-to-end test: its data directory must name the three
  sources, with that noise removed, and its scores the test set.

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

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
import urllib.request
from collections.abc import Callable, Iterator
from importlib import import_module
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
WMT14_FILES = {  # the toy data's split -> the WMT 2014 files standing in for it (name: distinct pairs)
    "train": {
        "training/europarl-v7.de-en": 30,
        "commoncrawl.de-en": 16,
        "training/news-commentary-v9.de-en": 10,
    },
    "valid": {"newstest2013": 8},
    "test": {"newstest2014": 7},
}
CRAWL_NOISE = ("commoncrawl.de-en", {"duplicates": 1, "copies": 1})  # what lay_out_wmt14 adds to it

HF_STAND_IN = """#!/bin/sh
# hf download REPO --local-dir DIR: the toy translator as a Marian directory, not a download
[ "$1" = download ] && [ "$3" = --local-dir ] || { echo "stand-in hf: unexpected $*" >&2; exit 2; }
cp -r "{marian}" "$4"
"""


AIAYN_CLIENT = """#!{python} -IS
# aiayn ARGS: run by the fork server of tests/test_docs_howto.py with this directory, environment and
# standard streams; its exit status is the command's
import json, os, socket, sys
request = json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}}).encode()
with socket.socket(socket.AF_UNIX) as server:
    server.connect({socket!r})
    socket.send_fds(server, [len(request).to_bytes(8, "big") + request], [0, 1, 2])
    answer = b""
    while chunk := server.recv(64):
        answer += chunk
sys.exit(int(answer) if answer else "aiayn stand-in: the fork server gave no exit status")
"""
PRELOADED = (  # what the guides' commands import, imported once by the fork server
    "aiayn.apps.distill",
    "aiayn.decode.translator",
    "aiayn.evaluate",
    "aiayn.interop.hf_export",
    "aiayn.interop.marian_import",
    "aiayn.train.checkpoint",
    "aiayn.train.trainer",
    "torch._dynamo",  # what loading a model directory imports (its shapes checked on the meta device)
)


def run_commands(path: str) -> None:
    """The fork server: import the CLI, PyTorch and PRELOADED once, then for each connection on the
    Unix socket `path` fork a child that runs the command the stand-in sends (run_command)."""
    from aiayn.runtime.malloc import run_under_tcmalloc

    run_under_tcmalloc()  # as the `aiayn` command does, before PyTorch is imported
    from aiayn.cli import build_parser, main

    for module in PRELOADED:
        import_module(module)
    build_parser()
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(16)
    # the children waited for, as they end and before the server stops: their CPU time is counted
    # in the server's, and so in the test run's, as a command's that the shell waits for
    signal.signal(signal.SIGCHLD, lambda *_: reap(os.WNOHANG))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(reap(0)))
    print("ready", flush=True)
    while True:
        connection, _ = server.accept()
        if os.fork() == 0:
            server.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os._exit(run_command(connection, main))
        connection.close()


def reap(options: int) -> None:
    """Wait for the fork server's children that have ended (os.WNOHANG), or (0) for all of them."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, options)[0]:
            pass


def run_command(connection: socket.socket, main: Callable[[list[str]], int]) -> int:
    """In the fork server's child: take the stand-in's streams, directory and environment, run
    `main(argv)` as `python -m aiayn` would, send the exit status back."""
    data, fds, _, _ = socket.recv_fds(connection, 1 << 20, 3)
    size, body = int.from_bytes(data[:8], "big"), data[8:]
    while len(body) < size:
        body += connection.recv(1 << 20)
    request = json.loads(body)
    for number, fd in enumerate(fds):  # stdin, stdout, stderr
        os.dup2(fd, number)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["aiayn", *request["argv"]]
    code = 1
    try:
        code = main(request["argv"])
    except SystemExit as stop:  # argparse: --help (0), a usage error (2)
        code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError):
                stream.flush()
        connection.sendall(str(code).encode())
    return code


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


@pytest.fixture(scope="module")
def commands(tmp_path_factory) -> Iterator[Path]:
    """The fork server (run_commands), started once per module; -> its socket."""
    folder = tmp_path_factory.mktemp("commands")
    tests = Path(__file__).parent
    code = "import sys; from test_docs_howto import run_commands; run_commands(sys.argv[1])"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(aiayn.__file__).parents[1]), str(tests)])}
    with (folder / "server.log").open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-c", code, str(folder / "socket")],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
    try:
        ready = server.stdout.readline()
        assert ready == "ready\n", (folder / "server.log").read_text()[-3000:]
        yield folder / "socket"
    finally:
        server.terminate()
        server.wait(timeout=60)


def workdir(tmp_path: Path, toy: dict[str, Path], commands: Path | None = None) -> dict[str, str]:
    """Lay out the guides' paths in tmp_path; -> the environment to run a block in. `aiayn` runs
    in the fork server listening on `commands`, or (None) as `python -m aiayn`."""
    shutil.copytree(TOY_MODEL, tmp_path / "runs" / "quickstart" / "model")
    shutil.copytree(toy["data"], tmp_path / "runs" / "quickstart" / "data")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "wmt").symlink_to(tmp_path / "runs" / "quickstart" / "data")
    lay_out_wmt14(tmp_path, toy["data"])
    shutil.copy(toy["config"], tmp_path / "toy.yaml")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_ins = {
        "aiayn": AIAYN_CLIENT.format(python=sys.executable, socket=str(commands))
        if commands
        else f'#!/bin/sh\nexec "{sys.executable}" -m aiayn "$@"\n',
        "hf": HF_STAND_IN.replace("{marian}", str(toy["marian"])),
    }
    for name, script in stand_ins.items():
        (bin_dir / name).write_text(script)
        (bin_dir / name).chmod(0o755)
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]])
    return {**os.environ, "PATH": path, "PYTHONPATH": str(Path(aiayn.__file__).parents[1])}


def lay_out_wmt14(folder: Path, data: Path) -> None:
    """The toy data's distinct pairs as WMT 2014's files (`NAME.en`, `NAME.de`), Common Crawl's
    noise (CRAWL_NOISE) added, and the shipped recipe."""
    for split, files in WMT14_FILES.items():
        sources = (data / "raw" / f"{split}.src").read_text().splitlines()
        targets = (data / "raw" / f"{split}.tgt").read_text().splitlines()
        pairs = list(dict.fromkeys(zip(sources, targets, strict=True)))
        assert len(pairs) == sum(files.values()), f"{split}: {len(pairs)} distinct pairs"
        start = 0
        for name, n in files.items():
            chosen = pairs[start : start + n]
            if name == CRAWL_NOISE[0]:
                chosen += [chosen[0], ("the same on both sides", "the same on both sides")]
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / f"{name}.en").write_text("".join(f"{s}\n" for s, _ in chosen))
            (folder / f"{name}.de").write_text("".join(f"{t}\n" for _, t in chosen))
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
def test_the_first_block_runs_as_written(name, toy, commands, tmp_path):
    block = sized(name, first_block(guide(name)))
    if name in SERVES:  # it answers a translation: the toy's words, in English
        answer = serve_block(block, tmp_path, workdir(tmp_path, toy), SERVES[name])
        assert set(answer["translations"][0]["text"].split()) & {"the", "cat", "drinks", "water"}, answer
        return
    done = run_block(block, tmp_path, workdir(tmp_path, toy, commands))
    missing = [f for f in GETS[name] if not (tmp_path / f).is_file()]
    assert not missing, f"{name}: the block ran but did not write {missing}"
    if name == "opus-mt.md":  # the translation it prints: the toy's words, in English
        assert set(done.stdout.split()) & {"the", "cat", "drinks", "water"}, done.stdout
    if name == "many-gpus.md":  # two processes trained it
        assert json.loads((tmp_path / "runs/base/run.json").read_text())["world_size"] == 2
    if name == "wmt14.md":
        check_wmt14_run(tmp_path)


def check_wmt14_run(folder: Path) -> None:
    """The recipe's data: its three sources in order, Common Crawl's noise removed, newstest2013 and
    2014 whole as valid and test, into German; the scores: of the test set."""
    meta = json.loads((folder / "data/wmt14-en-de/meta.json").read_text())
    assert [s["name"] for s in meta["sources"]] == ["europarl", "commoncrawl", "news-commentary"]
    assert meta["sources"][1]["removed"] == CRAWL_NOISE[1]
    assert meta["pairs"]["valid"] == WMT14_FILES["valid"]["newstest2013"]
    assert meta["pairs"]["test"] == WMT14_FILES["test"]["newstest2014"] and meta["tgt_lang"] == "de"
    scores = json.loads((folder / "runs/wmt14-base/model/eval/scores.json").read_text())
    assert scores["split"] == "test" and "BLEU" in scores["bleu_text"], scores
