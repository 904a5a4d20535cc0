"""Line-by-line streams (aiayn.decode.stream): chunks of lines read in order, n-best TSV,
per-line controls."""

from __future__ import annotations

import io

import pytest

from aiayn.decode.stream import format_nbest, read_chunks, translate_stream
from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translation
from aiayn.errors import AiaynError
from toy_translation import toy_pairs


def test_read_chunks_keeps_order_and_reports_bad_utf8():
    data = io.BytesIO(b"a\nb\r\n\nc")
    assert [x for chunk in read_chunks(data, max_lines=2) for x in chunk] == ["a", "b", "", "c"]
    chunks = read_chunks(io.BytesIO(b"ok\n\xff\xfe\n"), name="in.txt")
    with pytest.raises(Exception, match=r"in.txt:2: invalid UTF-8"):
        list(chunks)


def test_a_stream_is_its_lines_translated_whatever_the_chunks(translator):
    lines = [s for s, _ in toy_pairs(5, seed=3)]
    lines.insert(2, "")
    expected = "".join(t + "\n" for t in translate_texts(translator, lines))
    for max_lines in (1, 4, 100):
        out, warn = io.StringIO(), io.StringIO()
        data = io.BytesIO("".join(line + "\n" for line in lines).encode())
        assert translate_stream(translator, data, out, warn, max_lines=max_lines) == len(lines)
        assert out.getvalue() == expected
        assert warn.getvalue() == ""


def test_a_prefix_file_must_cover_the_stream(translator):
    data = io.BytesIO(b"a b\nc d\ne f\n")
    with pytest.raises(AiaynError, match=r"^the prefix file has 2 lines; in.txt has more \(line 3 on\)"):
        translate_stream(translator, data, io.StringIO(), io.StringIO(), "in.txt", prefix=["", ""])
    data = io.BytesIO(b"a b\n")
    with pytest.raises(AiaynError, match=r"^the prefix file has 2 lines; in.txt has 1: they must match"):
        translate_stream(translator, data, io.StringIO(), io.StringIO(), "in.txt", prefix=["", ""])


def test_nbest_rows_number_lines_and_ranks_and_flatten_tabs():
    results = [
        [Translation("a\tb", -0.5, -1.25, [])],
        [Translation("c", -1, -2, []), Translation("d\ne", -3, -4, [])],
    ]
    assert format_nbest(7, results) == (
        "7\t1\t-0.5000\t-1.2500\ta b\n8\t1\t-1.0000\t-2.0000\tc\n8\t2\t-3.0000\t-4.0000\td e\n"
    )
