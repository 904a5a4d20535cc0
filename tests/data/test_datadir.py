"""A prepared data directory (aiayn.data.datadir): meta.json read once, with one-line errors when it
is missing or malformed, the counts prepare reports, parse data told apart, and split names that
cannot lead out of the directory."""

import pytest

from aiayn.data.datadir import DataDir
from aiayn.errors import AiaynError

META = {"pairs": {"train": 28876, "valid": 544}, "dropped": {"train": {"empty": 3, "long": 4}, "valid": {}}}


def test_meta_is_read_once_and_rewritten_by_write_meta(tmp_path):
    data = DataDir(tmp_path)
    assert not data.prepared
    data.write_meta(META)
    assert data.prepared and data.meta == META
    (tmp_path / "meta.json").write_text("{}")  # a change on disk is not seen: read once ...
    assert data.meta == META
    data.write_meta({**META, "task": "parse"})  # ... unless written through the DataDir
    assert data.is_parse and data.parse_meta()["task"] == "parse"


def test_the_counts_prepare_reports(tmp_path):
    data = DataDir(tmp_path)
    data.write_meta(META)
    assert data.counts() == ("train 28,876, valid 544", 7)


@pytest.mark.parametrize(
    "text, message",
    [
        (None, r"not a prepared data directory \(no meta.json\); run `aiayn prepare`$"),
        ("{not json", r"meta.json: not valid JSON \(.*\); prepare the directory again with --force$"),
        ("[1, 2]", r"meta.json: not a JSON object; prepare the directory again with --force$"),
    ],
)
def test_a_missing_or_malformed_meta_is_a_one_line_error(tmp_path, text, message):
    if text is not None:
        (tmp_path / "meta.json").write_text(text)
    with pytest.raises(AiaynError, match=message) as caught:
        _ = DataDir(tmp_path).meta
    assert "\n" not in str(caught.value)


def test_translation_data_is_not_parse_data(tmp_path):
    data = DataDir(tmp_path)
    data.write_meta(META)
    assert not data.is_parse
    with pytest.raises(AiaynError, match=r'not parse data \(meta.json has no "task": "parse"\)$'):
        data.parse_meta()


def test_paths_need_nothing_on_disk_and_a_split_is_a_plain_name(tmp_path):
    data = DataDir(tmp_path / "absent")
    assert data.raw("test", "src") == tmp_path / "absent" / "raw" / "test.src"
    assert data.spm_path == tmp_path / "absent" / "spm.model"
    for split in ("../train", "a/b", ""):
        with pytest.raises(AiaynError, match="split"):
            data.raw(split, "src")
