"""`aiayn translate` (aiayn.cli.translate) on the toy model: files, stdin, n-best, and its refusals
and failures, each one line with nothing lost."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from aiayn.cli import main
from aiayn.decode.texts import translate_texts
from toy_translation import toy_pairs


def test_translate_file_to_file_keeps_order_and_empty_lines(toy_model_dir, tmp_path, capsys):
    lines = [s for s, _ in toy_pairs(9, seed=5)]
    lines[3:3] = ["", "   "]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = main(
        ["translate", str(toy_model_dir), "-i", str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt")]
    )
    assert code == 0
    out = (tmp_path / "out.txt").read_text(encoding="utf-8").split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines)
    assert out[3] == "" and out[4] == ""
    from aiayn.decode.translator import Translator

    expected = translate_texts(Translator.load(toy_model_dir, "cpu"), lines)
    assert out[:-1] == expected


def test_nbest_tsv(toy_model_dir, tmp_path):
    (tmp_path / "in.txt").write_text("el gato\n\nagua verde\n", encoding="utf-8")
    out = tmp_path / "out.tsv"
    assert (
        main(
            ["translate", str(toy_model_dir), "-i", str(tmp_path / "in.txt"), "-o", str(out), "--nbest", "3"]
        )
        == 0
    )
    rows = [r.split("\t") for r in out.read_text(encoding="utf-8").splitlines()]
    assert all(len(r) == 5 for r in rows)
    assert [(r[0], r[1]) for r in rows] == [
        ("1", "1"),
        ("1", "2"),
        ("1", "3"),
        ("2", "1"),
        ("3", "1"),
        ("3", "2"),
        ("3", "3"),
    ]
    assert rows[3][2:] == ["0.0000", "0.0000", ""]
    scores = [float(r[2]) for r in rows[:3]]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.slow
def test_translate_streams_stdin_to_stdout_in_a_subprocess(toy_model_dir, tmp_path):
    lines = [s for s, _ in toy_pairs(5, seed=9)] + ["", " ".join(["sol"] * 1500)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "aiayn", "translate", str(toy_model_dir), "--beam", "2", "--max-len-a", "0"],
        input="\n".join(lines) + "\n", capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.split("\n")
    assert len(out) - 1 == len(lines) and out[5] == ""
    assert "warning: <stdin>:7: 1501 tokens, over the limit of 1024: translated in 2 parts" in proc.stderr


def test_translate_errors_are_one_line(toy_model_dir, tmp_path, capsys):
    assert main(["translate", str(tmp_path / "nope")]) == 2
    assert main(["translate", str(toy_model_dir), "-i", str(tmp_path / "missing.txt")]) == 2
    assert main(["translate", str(toy_model_dir), "--beam", "2", "--nbest", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("aiayn translate: error: ") for line in err)
    assert "not a model directory" in err[0] and "missing.txt" in err[1] and "n_best" in err[2]


def test_translate_never_empties_its_input_or_an_old_output(toy_model_dir, tmp_path, capsys, monkeypatch):
    """-o onto the input (or a prefix file) is refused before anything is opened; -o into a directory
    or a missing one is a one-line error; '-' is stdin."""
    text = "el gato\nagua verde\n"
    (tmp_path / "in.txt").write_text(text, encoding="utf-8")
    (tmp_path / "link.txt").symlink_to(tmp_path / "in.txt")
    (tmp_path / "out.txt").write_text("old output\n", encoding="utf-8")
    (tmp_path / "prefix.txt").write_text("a\nb\nc\n", encoding="utf-8")
    (tmp_path / "adir").mkdir()
    model, src = str(toy_model_dir), str(tmp_path / "in.txt")
    for args in (
        ["-i", src, "-o", src],
        ["-i", src, "-o", str(tmp_path / "link.txt")],
        ["-i", src, "-o", str(tmp_path / "prefix.txt"), "--prefix-file", str(tmp_path / "prefix.txt")],
        ["-i", src, "-o", str(tmp_path / "adir")],
        ["-i", src, "-o", str(tmp_path / "nodir" / "out.txt")],
        ["-i", str(tmp_path / "adir")],
        ["-i", src, "--prefix-file", str(tmp_path / "prefix.txt")],
    ):
        assert main(["translate", model, *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 7 and all(line.startswith("aiayn translate: error: ") for line in err)
    assert "is the input file" in err[0] and "is the input file" in err[1] and "is the input file" in err[2]
    assert "adir: is a directory; name a file" in err[3] and "no such directory" in err[4]
    assert "--input " in err[5] and "adir: is a directory, not a file" in err[5]
    assert f"--prefix-file {tmp_path / 'prefix.txt'} has 3 lines; {tmp_path / 'in.txt'} has 2" in err[6]
    assert (tmp_path / "in.txt").read_text(encoding="utf-8") == text
    assert (tmp_path / "prefix.txt").read_text(encoding="utf-8") == "a\nb\nc\n"
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "old output\n"
    assert len(list(tmp_path.iterdir())) == 5  # nothing written beside the inputs
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert main(["translate", model, "-i", "-", "-o", str(tmp_path / "out.txt")]) == 0
    assert len((tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()) == 2


def test_an_input_without_newlines_is_refused_not_read_whole(toy_model_dir, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_bytes(b"el perro\n" + b"sol\r" * 300_000)  # CR-only line ends: one 1.2 MB "line"
    assert main(["translate", str(toy_model_dir), "-i", str(source), "-o", str(tmp_path / "out.txt")]) == 2
    refusal = f"{source}:2: a line of more than 1,048,576 bytes; are its lines ended by CR only?"
    assert capsys.readouterr().err.strip().splitlines() == [f"aiayn translate: error: {refusal}"]
    assert not (tmp_path / "out.txt").exists()  # -o holds a whole translation or nothing


@pytest.mark.parametrize(
    "device, message",
    [
        ("foo", "'foo' is not a device (cpu, cuda, cuda:N, mps)"),
        ("cuda:99", "cuda:99: " + ("this machine has" if torch.cuda.is_available() else "no CUDA GPU here")),
        ("meta", "meta: aiayn runs on cpu, cuda or mps, not meta"),
    ],
)
def test_a_device_torch_or_this_machine_lacks_is_a_one_line_error(toy_model_dir, capsys, device, message):
    """--device is checked as it is parsed, by every command that has it (here translate)."""
    with pytest.raises(SystemExit) as exit_:
        main(["translate", str(toy_model_dir), "--device", device])
    err = capsys.readouterr().err.splitlines()[-1]
    assert exit_.value.code == 2 and err.startswith("aiayn translate: error: argument --device: ")
    assert message in err


def test_an_unknown_option_gets_the_subcommands_usage(toy_model_dir, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["translate", str(toy_model_dir), "--bogus"])
    err = capsys.readouterr().err.splitlines()
    assert exit_.value.code == 2 and err[0].startswith("usage: aiayn translate ")
    assert err[-1] == "aiayn translate: error: unrecognized arguments: --bogus"


def test_translate_never_writes_into_a_model_or_onto_its_stdin(toy_model_dir, tmp_path, capsys):
    """-o naming a model's file would replace its weights; `-o F < F` would empty F before it is read."""
    import shutil

    model = shutil.copytree(toy_model_dir, tmp_path / "model")
    weights = (model / "model.safetensors").read_bytes()
    (tmp_path / "in.txt").write_text("el gato\n", encoding="utf-8")
    args = ["translate", str(model), "-i", str(tmp_path / "in.txt"), "-o", str(model / "model.safetensors")]
    assert main(args) == 2
    assert f"--output {model / 'model.safetensors'} is inside the input directory {model}" in (
        capsys.readouterr().err
    )
    assert (model / "model.safetensors").read_bytes() == weights
    saved = os.dup(0)
    try:
        with open(tmp_path / "in.txt", "rb") as stdin:
            os.dup2(stdin.fileno(), 0)
            assert main(["translate", str(model), "-o", str(tmp_path / "in.txt")]) == 2
    finally:
        os.dup2(saved, 0)
        os.close(saved)
    assert "is the file standard input reads; write to another file" in capsys.readouterr().err
    assert (tmp_path / "in.txt").read_text(encoding="utf-8") == "el gato\n"


FULL_DISK = """
import contextlib, io, sys
from aiayn.cli import main
err = io.StringIO()
limit_files({limit})
with contextlib.redirect_stderr(err):
    code = main(["translate", {model!r}, "-i", {src!r}, "-o", {out!r}])
print(code, err.getvalue().strip(), sep="\\t")
"""


def test_a_full_disk_is_one_line_and_presents_no_partial_output(toy_model_dir, tmp_path, run_python):
    """The output file's writes fail midway (a file-size limit stands in for a full
    disk); the old output stays as it was and no temporary file is left."""
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("".join(s + "\n" for s, _ in toy_pairs(40, seed=3)), encoding="utf-8")
    out.write_text("old\n")
    printed = run_python(FULL_DISK.format(limit=64, model=str(toy_model_dir), src=str(src), out=str(out)))
    code, _, err = printed.strip().partition("\t")
    assert code == "1" and len(err.splitlines()) == 1 and "File too large" in err, printed
    assert out.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.txt"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_standard_output_is_one_line(toy_model_dir):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "aiayn", "translate", str(toy_model_dir)],
            input="a b c\n" * 200, stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=300,
        )  # fmt: skip
    err = proc.stderr.strip()
    assert proc.returncode == 1 and len(err.splitlines()) == 1, err
    assert err.startswith("aiayn translate: error:") and "No space left on device" in err, err
