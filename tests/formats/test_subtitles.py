"""translate_subtitles: cue text translated (its markup and line breaks placed by the alignments),
numbers, identifiers, timings, notes, line endings and blank lines byte for byte; a block that is
not a cue, or a WebVTT file without its header, is one line."""

from __future__ import annotations

import pytest
from word_models import Copier, Reverser

from aiayn.formats.subtitles import SubtitleError, translate_subtitles

SRT = (
    "1\r\n00:00:01,000 --> 00:00:04,000\r\nel perro come\r\nla <i>luna grande</i>\r\n\r\n"
    "2\r\n00:00:05,000 --> 00:00:06,500 X1:10 X2:20\r\nTom &amp; Jerry\r\n\r\n"
    "3\r\n00:01:00,000 --> 00:01:02,000\r\n\r\n"
    "4\r\n01:00:00,000 --> 01:00:03,250\r\nel sol"
)
VTT = (
    "\ufeffWEBVTT - a film\n\nNOTE the dog\nand the cat\n\nSTYLE\n::cue { color: red }\n\n"
    "intro\n00:01.000 --> 00:04.000 line:0 align:start\n<v Bob>el perro</v> come\nla luna\n\n"
    "00:05.000 --> 00:06.000\nTom &amp; <c.yellow>Jerry</c>\n"
)


def kept_lines(text: str) -> list[str]:
    """The lines that are not cue text: numbers, identifiers, timings, notes and blank lines."""
    lines, out, in_cue = text.split("\n"), [], False
    for line in lines:
        if "-->" in line:
            in_cue = True
        elif not line.strip("\r"):
            in_cue = False
        elif in_cue:
            continue
        out.append(line)
    return out


@pytest.mark.parametrize("model", [Copier, Reverser])
def test_srt_timings_and_numbers_byte_for_byte(model):
    filled = translate_subtitles(model(), "srt", SRT.encode(), "a.srt")
    out = filled.data.decode()
    assert kept_lines(out) == kept_lines(SRT) and filled.translated == 3
    cues = out.split("\r\n\r\n")
    assert cues[1].split("\r\n")[2] in ("TOM &AMP; JERRY", "JERRY &AMP; TOM")  # SubRip text is plain text
    assert cues[3].endswith("SOL") if model is Copier else cues[3].endswith("EL")  # no newline added
    first = cues[0].split("\r\n")[2:]
    if model is Copier:
        assert first == ["EL PERRO COME", "LA <i>LUNA GRANDE</i>"]
    else:
        assert first == ["<i>GRANDE LUNA</i> LA", "COME PERRO EL"]  # the break before "la"'s word


def test_webvtt_header_notes_and_markup_kept():
    filled = translate_subtitles(Copier(), "vtt", VTT.encode("utf-8"), "a.vtt")
    out = filled.data.decode("utf-8")
    assert out.startswith(
        "\ufeffWEBVTT - a film\n\nNOTE the dog\nand the cat\n\nSTYLE\n::cue { color: red }\n\n"
    )
    assert kept_lines(out) == kept_lines(VTT) and filled.translated == 2
    assert "<v Bob>EL PERRO</v> COME\nLA LUNA\n" in out
    assert "TOM &amp; <c.yellow>JERRY</c>\n" in out


def test_the_toy_translator_on_subtitles(translator):
    from aiayn.decode.texts import translate_texts

    out = translate_subtitles(translator, "srt", SRT.encode(), "a.srt").data.decode()
    assert kept_lines(out) == kept_lines(SRT)
    last = out.split("\r\n\r\n")[3].split("\r\n")[2]
    assert last == translate_texts(translator, ["el sol"])[0]


@pytest.mark.parametrize(
    "fmt, text, message",
    [
        (
            "srt",
            "1\n00:00:01,000 --> 00:00:02,000\nhola\n\nno cue here\nat all\n",
            r"^a:5: not a cue: 'no cue here'",
        ),
        ("srt", "1\n00:00:01 --> 00:00:02\nhola\n", r"^a:1: not a cue: '1' \(expected a number, then"),
        ("vtt", "1\n00:01.000 --> 00:02.000\nhola\n", r"^a:1: a WebVTT file starts with WEBVTT$"),
    ],
)
def test_a_file_that_is_not_subtitles_is_one_line(fmt, text, message):
    with pytest.raises(SubtitleError, match=message):
        translate_subtitles(Copier(), fmt, text.encode(), "a")
