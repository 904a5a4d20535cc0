"""The release: one version (aiayn.__version__, which pyproject.toml reads), `aiayn --version`, the
version in every model directory and run, CHANGELOG.md's newest release, the sdist holding every
file of the package, and the wheel built from it installed into a fresh virtual environment working
on its own (`aiayn --version`, `quickstart --help`, `serve --help` and its page, a translation of a
stored toy model with the native step built from the wheel's sources)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import site
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
import sentencepiece as spm

import aiayn
from aiayn.cli import main
from aiayn.model.io import save_model_dir
from aiayn.model.transformer import Transformer
from aiayn.train.run import write_run_files
from toy_translation import tiny_config

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "decode" / "golden"
RELEASE = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", re.MULTILINE)


def test_pyproject_reads_the_version_from_the_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "aiayn.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", aiayn.__version__)


def test_aiayn_version_prints_the_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"aiayn {aiayn.__version__}\n"


@pytest.mark.parametrize("args", [["--version"], ["distill", "--help"], ["serve", "--help"]])
def test_the_command_answers_without_importing_torch(args):
    """`aiayn --version` and a command's --help build the whole parser: PyTorch stays unimported (its
    import is seconds). -X importtime logs every module the command imports, the re-run included."""
    env = {**os.environ, "PYTHONPATH": str(Path(aiayn.__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "aiayn", *args], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    modules = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "aiayn.cli" in modules and "torch" not in modules, sorted(m for m in modules if "torch" in m)


def test_the_changelog_opens_with_this_release():
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = RELEASE.findall(text)
    assert releases, "CHANGELOG.md: no '## [X.Y.Z] - YYYY-MM-DD' release heading"
    assert releases[0][0] == aiayn.__version__
    assert text.index("## [Unreleased]") < text.index(f"## [{aiayn.__version__}]")


def test_a_model_directory_records_the_version(tmp_path):
    out = save_model_dir(Transformer(tiny_config().model), tmp_path / "model")
    assert json.loads((out / "config.json").read_text())["aiayn_version"] == aiayn.__version__


def test_a_run_records_the_version(tmp_path, data_dir):
    run = tmp_path / "run"
    write_run_files(run, data_dir, tiny_config(), 1, None, resuming=False)
    assert json.loads((run / "run.json").read_text())["aiayn_version"] == aiayn.__version__


def test_doctor_shows_the_version(capsys):
    assert main(["doctor", "--no-measure"]) == 0
    assert f"aiayn {aiayn.__version__}" in capsys.readouterr().out


def _golden_beam_texts() -> tuple[list[str], list[str]]:
    """The golden test's sources and the stored beam-4 outputs of golden/toy_a, as text."""
    spec = importlib.util.spec_from_file_location("golden_test", ROOT / "tests" / "decode" / "test_golden.py")
    golden_test = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(golden_test)
    stored = json.loads((GOLDEN / "outputs.json").read_text())["beam"]
    sp = spm.SentencePieceProcessor(model_file=str(GOLDEN / "toy_a" / "spm.model"))
    return golden_test.TEXTS, [sp.decode(hyps[0]["tokens"]) for hyps in stored]


def _fresh_venv(path: Path) -> Path:
    """A virtual environment without aiayn that sees this one's dependencies (a .pth file naming
    its site-packages: no download, and none of its .pth files, so not the checkout's aiayn)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


def _package_files() -> set[str]:
    """Every file of the package in this checkout, relative to src/aiayn (no bytecode)."""
    package = ROOT / "src" / "aiayn"
    return {
        p.relative_to(package).as_posix()
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def _build_sdist(tree: Path, dist: Path) -> Path:
    """The sdist of `tree`, built by setuptools' PEP 517 backend as `python -m build --sdist` has
    it built (without the isolated environment: nothing is downloaded)."""
    code = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    done = subprocess.run(
        [sys.executable, "-c", code, str(dist)], cwd=tree, check=True, capture_output=True, text=True
    )
    return dist / done.stdout.splitlines()[-1]


@pytest.mark.slow
def test_the_sdist_and_its_wheel_install_and_run_in_a_fresh_venv(tmp_path):
    tree = tmp_path / "tree"  # a copy: the build writes *.egg-info beside the sources
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    package = _package_files()  # the Python modules, the native step's C++, static/, configs/
    assert {"runtime/native_step.cpp", "runtime/native_beam.h", "static/app.js", "configs/big.yaml"} < package

    sdist = _build_sdist(tree, tmp_path / "sdist")
    assert sdist.name == f"aiayn-{aiayn.__version__}.tar.gz"
    top = f"aiayn-{aiayn.__version__}/src/aiayn/"
    with tarfile.open(sdist) as archive:
        in_sdist = {n.removeprefix(top) for n in archive.getnames() if n.startswith(top)}
    assert package <= in_sdist, f"not in the sdist: {sorted(package - in_sdist)}"

    # the wheel built from the sdist, as `python -m build` builds it
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", tmp_path / "dist", sdist]
    subprocess.run(build, check=True)
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert wheel.name == f"aiayn-{aiayn.__version__}-py3-none-any.whl"
    in_wheel = {n.removeprefix("aiayn/") for n in zipfile.ZipFile(wheel).namelist() if n.startswith("aiayn/")}
    assert package <= in_wheel, f"not in the wheel: {sorted(package - in_wheel)}"

    python = _fresh_venv(tmp_path / "venv")
    subprocess.run([*pip, "--python", python, "install", "--no-deps", "--no-index", wheel], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AIAYN_NATIVE")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")  # the native step built anew, from the wheel's files
    aiayn_bin = str(tmp_path / "venv" / "bin" / "aiayn")

    def run(*args: str, stdin: str = "") -> str:
        done = subprocess.run(args, env=env, input=stdin, capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout

    where = run(str(python), "-c", "import aiayn; print(aiayn.__file__)")
    assert where.startswith(str(tmp_path / "venv")), where
    assert run(aiayn_bin, "--version") == f"aiayn {aiayn.__version__}\n"
    assert "--steps" in run(aiayn_bin, "quickstart", "--help")
    assert "--port" in run(aiayn_bin, "serve", "--help")
    page = "from importlib import resources as r; print((r.files('aiayn') / 'static/index.html').is_file())"
    assert run(str(python), "-c", page) == "True\n"  # the page serve sends, found as the server finds it
    texts, want = _golden_beam_texts()
    got = run(aiayn_bin, "translate", str(GOLDEN / "toy_a"), "--beam", "4", stdin="\n".join(texts) + "\n")
    assert got.splitlines() == want
    built = list((tmp_path / "cache").glob("aiayn/native/*/aiayn_native_step.so"))
    assert len(built) == 1, "the translation did not build the native step"
