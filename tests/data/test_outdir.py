"""aiayn.data.outdir: where prepare writes; what --force may replace; reuse of a prepared directory
only for its own corpus and cleaning; the free-space check before the build."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiayn.data import outdir
from aiayn.data.cleaning import Cleaning
from aiayn.data.datadir import DataDir
from aiayn.data.prepare import prepare
from aiayn.errors import AiaynError


def test_rerun_does_nothing_unless_force(tmp_path, corpus, capsys, prepare_corpus):
    out = prepare_corpus(tmp_path / "data", corpus)
    stamp = (out / "meta.json").stat().st_mtime_ns
    capsys.readouterr()
    prepare_corpus(out, corpus)  # without progress bars, still said
    assert (out / "meta.json").stat().st_mtime_ns == stamp
    assert "is already prepared; pass --force" in capsys.readouterr().err
    prepare_corpus(out, corpus, force=True)
    assert (out / "meta.json").stat().st_mtime_ns != stamp
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_force_never_deletes_files_prepare_did_not_write(tmp_path, corpus, prepare_corpus):
    out = prepare_corpus(tmp_path / "data", corpus)
    (out / "raw" / "notes.txt").write_text("keep me")
    meta = (out / "meta.json").read_text()
    with pytest.raises(AiaynError, match=r"--force would delete .*raw/notes.txt, which prepare did not"):
        prepare_corpus(out, corpus, force=True)
    assert (out / "raw" / "notes.txt").read_text() == "keep me" and (out / "meta.json").read_text() == meta


def test_force_removes_the_trainers_plan_cache(tmp_path, corpus, prepare_corpus):
    """The batch plans a trainer keeps in the data directory (aiayn.data.plan_cache) are derived from
    it: --force rebuilds without them, not refusing them as someone else's."""
    out = prepare_corpus(tmp_path / "data", corpus)
    (out / "plan-cache").mkdir()
    (out / "plan-cache" / "0123abcd-00000.npz").write_bytes(b"plan")
    prepare_corpus(out, corpus, force=True)
    assert not (out / "plan-cache").exists() and (out / "meta.json").is_file()


def test_a_prepared_directory_is_reused_only_for_its_own_corpus(
    tmp_path, corpus, write_corpus, prepare_corpus
):
    """Another corpus (here: a train file that is missing) is refused, not answered with the old data."""
    out = prepare_corpus(tmp_path / "data", corpus)
    meta = (out / "meta.json").read_text()
    other = (tmp_path / "missing.es", *corpus[1:])
    with pytest.raises(AiaynError, match=r"data is already prepared from another corpus \(files .*train"):
        prepare_corpus(out, other)
    with pytest.raises(AiaynError, match=r"already prepared from another corpus \(files"):
        prepare(out, "bible-es-en", progress=False)
    assert (out / "meta.json").read_text() == meta


def test_the_same_files_named_otherwise_are_the_same_corpus(tmp_path, corpus, monkeypatch, prepare_corpus):
    """meta.json records absolute paths: a relative name from another directory is the same file,
    and the same relative name from another directory is another file."""
    out = prepare_corpus(tmp_path / "data", corpus)
    assert DataDir(out).meta["inputs"]["train"]["src"] == str(corpus[0].resolve())
    monkeypatch.chdir(corpus[0].parent)
    relative = (Path(corpus[0].name), Path(corpus[1].name), *corpus[2:])
    stamp = (out / "meta.json").stat().st_mtime_ns
    prepare_corpus(out, relative)
    assert (out / "meta.json").stat().st_mtime_ns == stamp
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for path in corpus[:2]:
        (elsewhere / path.name).write_text("uno dos\n", encoding="utf-8")
    monkeypatch.chdir(elsewhere)
    with pytest.raises(AiaynError, match="already prepared from another corpus"):
        prepare_corpus(out, relative)


def test_out_under_a_file_is_a_one_line_error(tmp_path, corpus, prepare_corpus):
    with pytest.raises(AiaynError, match=rf"^--out {corpus[0]}/sub: a file is there, not a directory$"):
        prepare_corpus(corpus[0] / "sub", corpus)


def test_out_at_a_dangling_link_is_refused_and_its_target_not_made(tmp_path, corpus, prepare_corpus):
    (tmp_path / "out").symlink_to(tmp_path / "gone" / "deep" / "data")
    with pytest.raises(AiaynError, match=rf"^--out {tmp_path}/out: a link to {tmp_path}/gone/deep/data, "):
        prepare_corpus(tmp_path / "out", corpus)
    assert not (tmp_path / "gone").exists()


def test_refuses_to_replace_a_directory_that_is_not_a_data_directory(tmp_path, corpus, prepare_corpus):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(AiaynError, match="not a data directory"):
        prepare_corpus(tmp_path / "mine", corpus, force=True)


def test_too_little_free_space_is_refused_before_the_build(tmp_path, corpus, monkeypatch, prepare_corpus):
    real = outdir.shutil.disk_usage
    monkeypatch.setattr(outdir.shutil, "disk_usage", lambda p: real(p)._replace(free=1000))
    with pytest.raises(AiaynError, match=r"GiB free, but preparing this corpus needs about"):
        prepare_corpus(tmp_path / "data", corpus)
    assert not (tmp_path / "data").exists() and not list(tmp_path.glob(".data*"))


def test_the_same_files_cleaned_otherwise_are_named_as_such(tmp_path, corpus, prepare_corpus):
    out = prepare_corpus(tmp_path / "data", corpus)
    with pytest.raises(AiaynError, match="from this corpus with other cleaning"):
        prepare_corpus(out, corpus, clean=Cleaning(rules=("copies",)))
