"""`aiayn translate MODEL_DIR --format FORMAT -i FILE -o OUT` on the toy model: the file translated and
written whole, a summary line; a broken file is one line and leaves OUT as it was."""

from __future__ import annotations

import polib
import pytest

from aiayn.cli import main

PO = b"""msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

#, c-format
msgid "el perro %s come"
msgstr ""

msgid "la luna"
msgstr "der Mond"
"""


def test_a_po_file_through_the_command_line(toy_model_dir, tmp_path, capsys):
    (tmp_path / "in.po").write_bytes(PO)
    argv = ["translate", str(toy_model_dir), "--format", "po", "-i", str(tmp_path / "in.po")]
    assert main([*argv, "-o", str(tmp_path / "out.po")]) == 0
    po = polib.pofile(str(tmp_path / "out.po"))
    filled = po.find("el perro %s come")
    assert filled.fuzzy and "%s" in filled.msgstr and po.find("la luna").msgstr == "der Mond"
    assert f"{tmp_path / 'in.po'}: 1 translated, 1 already translated and kept" in capsys.readouterr().err


def test_an_html_page_to_standard_output(toy_model_dir, tmp_path, capsys):
    (tmp_path / "in.html").write_text('<p>el <a href="x">perro</a> come</p>', encoding="utf-8")
    assert main(["translate", str(toy_model_dir), "--format", "html", "-i", str(tmp_path / "in.html")]) == 0
    assert capsys.readouterr().out.count('<a href="x">') == 1


def test_a_broken_file_is_one_line_and_out_is_kept(toy_model_dir, tmp_path, capsys):
    (tmp_path / "in.po").write_bytes(b'msgid "a"\nmsgstr "b\n')
    (tmp_path / "out.po").write_text("before\n", encoding="utf-8")
    argv = ["translate", str(toy_model_dir), "--format", "po", "-i", str(tmp_path / "in.po")]
    assert main([*argv, "-o", str(tmp_path / "out.po")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{tmp_path / 'in.po'}:2: not PO syntax" in err[0]
    assert (tmp_path / "out.po").read_text(encoding="utf-8") == "before\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


@pytest.mark.parametrize("flags", [["--nbest", "2"], ["--align"], ["--document"]])
def test_per_line_flags_are_refused_with_a_format(flags, toy_model_dir, tmp_path, capsys):
    (tmp_path / "in.srt").write_text("1\n00:00:01,000 --> 00:00:02,000\nel sol\n", encoding="utf-8")
    argv = ["translate", str(toy_model_dir), "--format", "srt", "-i", str(tmp_path / "in.srt"), *flags]
    assert main(argv) != 0
    assert f"--format srt translates one whole file; not with {flags[0]}" in capsys.readouterr().err
