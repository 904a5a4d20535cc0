"""`aiayn translate -i F -o OUT` as a job in parts (aiayn.apps.translate_job): a run killed midway
goes on from its finished parts to the bytes an uninterrupted run writes, a damaged part is
translated again, parts of another job (options, input) are refused and kept, and a bar shows the
lines done and the time left when asked."""

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import aiayn
from aiayn.apps import translate_job
from aiayn.cli import main
from toy_translation import toy_pairs

CHUNK = 3  # lines per part here: 11 lines make 4 parts
KILL_AFTER_TWO_PARTS = """
import os, signal, sys
from aiayn.apps import translate_job
from aiayn.cli import main
translate_job.CHUNK = {chunk}
write = translate_job._write_part
written = []
def write_then_die(*args):
    written.append(write(*args))
    if len(written) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return written[-1]
translate_job._write_part = write_then_die
main(["translate", {model!r}, "-i", {src!r}, "-o", {out!r}, "--beam", "2"])
"""


@pytest.fixture
def source(tmp_path) -> Path:
    lines = [s for s, _ in toy_pairs(10, seed=4)]
    lines.insert(5, "")
    path = tmp_path / "in.txt"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


WRITE = translate_job._write_part


def count_parts(monkeypatch, stop_after: int | None = None) -> list[int]:
    """From now on parts of CHUNK lines; -> the indices of the parts written, in order. With
    `stop_after`: a Ctrl-C once that many are written."""
    monkeypatch.setattr(translate_job, "CHUNK", CHUNK)
    written = []

    def counted(parts, index, text):
        written.append(index)
        path = WRITE(parts, index, text)
        if len(written) == stop_after:
            raise KeyboardInterrupt
        return path

    monkeypatch.setattr(translate_job, "_write_part", counted)
    return written


def translate(model, source, out, *flags) -> int:
    return main(["translate", str(model), "-i", str(source), "-o", str(out), "--beam", "2", *flags])


@pytest.mark.slow
def test_a_job_killed_midway_goes_on_to_the_same_bytes(toy_model_dir, source, tmp_path, monkeypatch):
    """SIGKILL after two of four parts; the next run translates only the last two, and OUT is byte
    for byte an uninterrupted run's, OUT.parts removed."""
    chunked = count_parts(monkeypatch)
    assert translate(toy_model_dir, source, tmp_path / "whole.txt") == 0
    assert chunked == [0, 1, 2, 3] and not (tmp_path / "whole.txt.parts").exists()
    out = tmp_path / "out.txt"
    code = KILL_AFTER_TWO_PARTS.format(chunk=CHUNK, model=str(toy_model_dir), src=str(source), out=str(out))
    env = {**os.environ, "PYTHONPATH": str(Path(aiayn.__file__).parents[1])}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    parts = tmp_path / "out.txt.parts"
    assert not out.exists() and len(list(parts.glob("part-*.txt"))) == 2 and (parts / "job.json").is_file()
    chunked.clear()
    assert translate(toy_model_dir, source, out) == 0
    assert chunked == [2, 3]
    assert out.read_bytes() == (tmp_path / "whole.txt").read_bytes()
    assert not parts.exists()


@pytest.mark.slow
def test_an_interrupted_job_goes_on_and_a_damaged_part_is_redone(
    toy_model_dir, source, tmp_path, monkeypatch, capsys
):
    count_parts(monkeypatch)
    assert translate(toy_model_dir, source, tmp_path / "whole.txt") == 0
    count_parts(monkeypatch, stop_after=2)
    out, parts = tmp_path / "out.txt", tmp_path / "out.txt.parts"
    assert translate(toy_model_dir, source, out) == 130
    assert f"{parts}: 2 of 4 parts done; the same command goes on" in capsys.readouterr().err
    first, second = sorted(parts.glob("part-*.txt"))
    second.write_bytes(second.read_bytes()[:-3])  # damaged since it was written
    written = count_parts(monkeypatch)
    assert translate(toy_model_dir, source, out) == 0
    assert f"warning: {second}: damaged; translating its lines again" in capsys.readouterr().err
    assert written == [1, 2, 3] and not parts.exists()
    assert out.read_bytes() == (tmp_path / "whole.txt").read_bytes()


def test_parts_of_another_job_are_refused_and_kept(toy_model_dir, source, tmp_path, monkeypatch, capsys):
    """Other options or another input: one line naming what changed; the parts stay as they were."""
    count_parts(monkeypatch, stop_after=2)
    out, parts = tmp_path / "out.txt", tmp_path / "out.txt.parts"
    assert translate(toy_model_dir, source, out) == 130
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in parts.iterdir()}
    count_parts(monkeypatch)
    assert translate(toy_model_dir, source, out, "--alpha", "1.0") == 2
    source.write_text(source.read_text(encoding="utf-8") + "agua\n", encoding="utf-8")
    assert translate(toy_model_dir, source, out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith(f"aiayn translate: error: {parts} holds") for line in err)
    assert "(options.alpha changed)" in err[0] and "(input changed)" in err[1]
    assert {p.name: p.read_bytes() for p in parts.iterdir()} == before and not out.exists()


def test_samples_are_the_same_in_parts_as_in_a_stream(toy_model_dir, source, tmp_path, monkeypatch, capsys):
    """Each line's samples are seeded by its line number: a file in parts of 3 lines gives what the
    same file streamed from stdin does (read in chunks of whatever has arrived)."""
    flags, chunked = ["--sample", "--seed", "5", "--nbest", "2"], count_parts(monkeypatch)
    assert translate(toy_model_dir, source, tmp_path / "out.tsv", *flags) == 0
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(source.read_bytes())))
    assert main(["translate", str(toy_model_dir), "--beam", "2", *flags]) == 0
    assert capsys.readouterr().out == (tmp_path / "out.tsv").read_text(encoding="utf-8")
    assert chunked == [0, 1, 2, 3]


def test_progress_shows_the_lines_and_the_time_left_only_when_asked(toy_model_dir, source, tmp_path, capsys):
    assert translate(toy_model_dir, source, tmp_path / "a.txt") == 0
    assert capsys.readouterr().err == ""  # stderr is no terminal here
    assert translate(toy_model_dir, source, tmp_path / "b.txt", "--progress") == 0
    err = capsys.readouterr().err
    assert "11/11" in err and "line/s" in err and "<00:00" in err
