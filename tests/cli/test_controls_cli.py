"""`aiayn translate`'s decoding-control flags on the toy model."""

from __future__ import annotations

import re

from aiayn.cli import main
from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translator
from toy_translation import toy_pairs


def translate(args: list[str], tmp_path, lines: list[str]) -> list[str]:
    (tmp_path / "in.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "out.txt"
    assert main(["translate", *args, "-i", str(tmp_path / "in.txt"), "-o", str(out)]) == 0
    return out.read_text(encoding="utf-8").splitlines()


def test_prefix_and_constraints_files(toy_model_dir, tmp_path):
    (tmp_path / "prefix.txt").write_text("a green\n\n", encoding="utf-8")
    (tmp_path / "terms.txt").write_text("\nmoon\tbig\n", encoding="utf-8")
    lines = ["el perro come", "la casa"]
    free = translate([str(toy_model_dir)], tmp_path, lines)  # an empty line asks for nothing
    out = translate([str(toy_model_dir), "--prefix-file", str(tmp_path / "prefix.txt")], tmp_path, lines)
    assert out[0].startswith("a green") and out[1] == free[1]
    out = translate([str(toy_model_dir), "--constraints-file", str(tmp_path / "terms.txt")], tmp_path, lines)
    assert out[0] == free[0] and "moon" in out[1] and "big" in out[1]


def test_a_short_prefix_file_is_a_one_line_error(toy_model_dir, tmp_path, capsys):
    (tmp_path / "prefix.txt").write_text("a\n", encoding="utf-8")
    (tmp_path / "in.txt").write_text("sol\nluna\n", encoding="utf-8")
    code = main(
        [
            "translate",
            str(toy_model_dir),
            "-i",
            str(tmp_path / "in.txt"),
            "--prefix-file",
            str(tmp_path / "prefix.txt"),
        ]
    )
    assert code != 0
    assert (
        f"--prefix-file {tmp_path / 'prefix.txt'} has 1 lines; {tmp_path / 'in.txt'} has 2"
        in capsys.readouterr().err
    )


def test_a_longer_constraints_file_is_refused_before_the_model_loads(tmp_path, capsys, monkeypatch):
    """The count of constraint lines used to be checked only after every line was translated."""
    from aiayn.decode.translator import Translator

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(Translator, "load", no_model)
    (tmp_path / "terms.txt").write_text("a\nb\nc\n", encoding="utf-8")
    (tmp_path / "in.txt").write_text("sol\nluna\n", encoding="utf-8")
    argv = [
        "translate",
        "M",
        "-i",
        str(tmp_path / "in.txt"),
        "--constraints-file",
        str(tmp_path / "terms.txt"),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(
        f"--constraints-file {tmp_path / 'terms.txt'} has 3 lines; {tmp_path / 'in.txt'} has 2"
    ), err


def test_align_writes_pharaoh_pairs(toy_model_dir, tmp_path):
    out = translate([str(toy_model_dir), "--align"], tmp_path, ["el perro come agua", "", "sol"])
    text, pairs = out[0].split(" ||| ")
    assert text == "the dog eats water" and re.fullmatch(r"(\d+-\d+ ?)+", pairs)
    assert out[1].strip() == "|||"  # an empty line: no words, no pairs
    assert out[2].startswith("sun ||| 0-0")


def test_sampling_flags_are_seeded(toy_model_dir, tmp_path):
    lines = [s for s, _ in toy_pairs(6, seed=8)]
    args = [str(toy_model_dir), "--sample", "--temperature", "2", "--top-p", "0.9", "--seed", "3"]
    assert translate(args, tmp_path, lines) == translate(args, tmp_path, lines)
    assert main(["translate", str(toy_model_dir), "--sample", "--top-p", "1.5"]) == 2


def test_sampling_draws_nbest_whatever_the_beam(toy_model_dir, tmp_path):
    """The beam plays no part in sampling: --nbest 8 needs no --beam 8, and --beam changes nothing."""
    args = [str(toy_model_dir), "--sample", "--nbest", "8", "--seed", "5"]
    rows = translate(args, tmp_path, ["el perro come", "sol"])
    assert [row.split("\t")[:2] for row in rows] == [[str(i), str(r)] for i in (1, 2) for r in range(1, 9)]
    assert translate([*args, "--beam", "16"], tmp_path, ["el perro come", "sol"]) == rows
    assert translate([*args, "--beam", "1"], tmp_path, ["el perro come", "sol"]) == rows


def test_an_ensemble_on_the_command_line(toy_model_dir, tmp_path):
    lines = [s for s, _ in toy_pairs(6, seed=4)]
    assert translate([str(toy_model_dir)] * 2, tmp_path, lines) == translate_texts(
        Translator.load(toy_model_dir, "cpu"), lines
    )


def test_document_mode_keeps_blank_lines(toy_model_dir, tmp_path):
    out = translate(
        [str(toy_model_dir), "--document"], tmp_path, ["el perro come. la luna.", "", "", "el sol."]
    )
    assert (
        len(out) == 4 and out[1] == out[2] == "" and "dog" in out[0] and "moon" in out[0] and "sun" in out[3]
    )


def test_document_mode_refuses_per_line_flags_and_keeps_an_old_output(toy_model_dir, tmp_path, capsys):
    """--nbest, --align, prefix and constraints files have no lines to apply to in one document: an error,
    not silently dropped; an input refused while it is read leaves an existing -o file as it was."""
    (tmp_path / "in.txt").write_text("el sol.\n", encoding="utf-8")
    document = ["translate", str(toy_model_dir), "--document", "-i", str(tmp_path / "in.txt")]
    for flags in (["--nbest", "2", "--beam", "2"], ["--align"], ["--prefix-file", str(tmp_path / "in.txt")]):
        assert main([*document, *flags]) == 2
        expected = f"--document translates one whole text; {flags[0]} apply to input lines"
        assert expected in capsys.readouterr().err
    (tmp_path / "bad.txt").write_bytes(b"el sol.\n\xff\xfe\n")
    (tmp_path / "keep.txt").write_text("old output\n", encoding="utf-8")
    args = ["translate", str(toy_model_dir), "--document", "-i", str(tmp_path / "bad.txt")]
    assert main([*args, "-o", str(tmp_path / "keep.txt")]) == 2
    assert "bad.txt:2: invalid UTF-8" in capsys.readouterr().err
    assert (tmp_path / "keep.txt").read_text(encoding="utf-8") == "old output\n"
