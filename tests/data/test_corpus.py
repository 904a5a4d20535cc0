"""Reading and validating a user's parallel text: every bad input gets one clear line."""

from __future__ import annotations

import os

import pytest

from aiayn.data.corpus import (
    CorpusError,
    ParallelText,
    count_lines,
    held_out_indices,
    held_out_split,
    remove_train_overlap,
)
from aiayn.errors import AiaynError


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_count_lines_counts_a_last_line_without_newline(tmp_path):
    assert count_lines(_write(tmp_path / "a", b"one\ntwo\nthree")) == 3
    assert count_lines(_write(tmp_path / "b", b"one\ntwo\n")) == 2
    assert count_lines(_write(tmp_path / "c", b"")) == 0


def test_different_line_counts_name_both_files_and_counts(tmp_path):
    src = _write(tmp_path / "train.es", b"uno\ndos\ntres\n")
    tgt = _write(tmp_path / "train.en", b"one\ntwo\n")
    with pytest.raises(CorpusError) as err:
        ParallelText.open(src, tgt)
    message = str(err.value)
    assert f"{src} has 3 lines but {tgt} has 2" in message and "\n" not in message


def test_invalid_utf8_names_file_and_line(tmp_path):
    src = _write(tmp_path / "corpus.es", b"uno\ndos\nt\xffres\n")
    tgt = _write(tmp_path / "corpus.en", b"one\ntwo\nthree\n")
    with pytest.raises(CorpusError, match=rf"^{src}:3: invalid UTF-8 \(byte 0xff at column 2\)"):
        list(ParallelText.open(src, tgt))


def test_skip_bad_lines_skips_and_counts(tmp_path):
    src = _write(tmp_path / "corpus.es", b"uno\nd\xc3os\ntres\n")
    tgt = _write(tmp_path / "corpus.en", b"one\ntwo\nth\xffree\n")
    text = ParallelText.open(src, tgt, skip_bad_lines=True)
    assert list(text) == [(1, "uno", "one")]
    assert text.bad_lines == 2


def test_tsv_needs_exactly_one_tab(tmp_path):
    tsv = _write(tmp_path / "corpus.tsv", b"uno\tone\ndos two\ntres\tthree\n")
    with pytest.raises(CorpusError, match=rf"^{tsv}:2: expected 2 tab-separated fields .*found 1"):
        list(ParallelText.open(tsv=tsv))
    text = ParallelText.open(tsv=tsv, skip_bad_lines=True)
    assert [(s, t) for _, s, t in text] == [("uno", "one"), ("tres", "three")]
    assert text.bad_lines == 1


def test_lines_split_on_newline_only_and_whitespace_collapses(tmp_path):
    src = _write(tmp_path / "a.es", "\ufeffuno\u2028dos\r\n  tres\tcuatro \n".encode())
    tgt = _write(tmp_path / "a.en", b"one\x0btwo\r\nthree\n")
    assert list(ParallelText.open(src, tgt)) == [(1, "uno dos", "one two"), (2, "tres cuatro", "three")]


def test_missing_file_and_bad_arguments(tmp_path):
    with pytest.raises(CorpusError, match="nope.es: no such file"):
        ParallelText.open(tmp_path / "nope.es", tmp_path / "nope.en")
    with pytest.raises(CorpusError, match="either a source and a target file, or one TSV"):
        ParallelText.open(src=tmp_path / "a")


def test_held_out_split_is_seeded_disjoint_and_leak_free():
    pairs = [(f"s{i % 4000}", f"t{i}") for i in range(5000)]  # sources 0..999 occur twice
    a, b, c = held_out_split(pairs, seed=1), held_out_split(pairs, seed=1), held_out_split(pairs, seed=2)
    assert a == b and a != c
    valid, test = held_out_indices(5000, seed=1)
    assert len(valid) == len(test) == 100 and not set(valid.tolist()) & set(test.tolist())
    train_sources = {s for s, _ in a["train"]}
    assert not train_sources & {s for s, _ in a["valid"] + a["test"]}
    assert len(a["train"]) == 5000 - 200
    assert 0 < len(a["valid"]) < 100  # some held-out sources also occur in train and are removed


def test_remove_train_overlap():
    splits = {"train": [("a", "x")], "valid": [("a", "y"), ("b", "z")], "test": [("c", "w")]}
    assert remove_train_overlap(splits) == {
        "train": [("a", "x")],
        "valid": [("b", "z")],
        "test": [("c", "w")],
    }


BINARY = bytes(b for b in range(256) if b not in b"\r\n") * 5000  # no line end anywhere


@pytest.mark.parametrize("content, hint", [(b"hola\r" * 250_000, "ended by CR only"), (BINARY, "text file")])
def test_a_file_without_newlines_is_refused_at_its_first_line(tmp_path, content, hint):
    """A CR-only or binary file would be read whole as one line; it is refused once the line passes 1 MiB."""
    src = _write(tmp_path / "corpus.es", b"uno\n" + content)
    tgt = _write(tmp_path / "corpus.en", b"one\ntwo\n")
    text = ParallelText.open(src, tgt, skip_bad_lines=True)
    with pytest.raises(AiaynError, match=rf"^{src}:2: a line of more than 1,048,576 bytes; .*{hint}"):
        list(text)


def test_a_directory_or_a_pipe_as_a_corpus_file_is_a_one_line_error(tmp_path):
    """A corpus file is counted, then read: a directory or a pipe (read once) is refused by name."""
    from aiayn.data.corpus import CorpusError, count_lines

    (tmp_path / "adir").mkdir()
    with pytest.raises(CorpusError, match=r"adir: is a directory, not a file$"):
        count_lines(tmp_path / "adir")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(CorpusError, match=r"fifo: not a regular file \(it is read twice\)"):
        count_lines(tmp_path / "fifo")
