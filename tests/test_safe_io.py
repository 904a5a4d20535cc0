"""safe_io: atomic writes, directories replaced whole, names kept inside their directory, capped lines."""

from __future__ import annotations

import fcntl
import io
import os

import pytest

from aiayn.errors import AiaynError
from aiayn.safe_io import (
    atomic_path,
    atomic_write_text,
    building_directory,
    capped_lines,
    resolve_inside,
    vacant,
)


def hidden(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_a_write_that_fails_midway_leaves_the_old_file_whole(tmp_path, run_python):
    path = tmp_path / "notes.txt"
    path.write_text("old " * 100)
    out = run_python(
        f"from aiayn.safe_io import atomic_write_text\nlimit_files(64)\n"
        f"try:\n    atomic_write_text({str(path)!r}, 'new ' * 100)\n"
        f"except OSError as err:\n    print('failed', err.errno)\n"
    )
    assert out.startswith("failed")  # the "disk" filled up
    assert path.read_text() == "old " * 100 and hidden(tmp_path) == []
    atomic_write_text(path, "new")
    assert path.read_text() == "new" and hidden(tmp_path) == []


def test_atomic_files_get_an_ordinary_files_mode(tmp_path):
    """safetensors writes 0600 files: a model directory must be readable as its siblings are."""
    import torch
    from safetensors.torch import save_file

    (tmp_path / "plain").write_text("x")
    with atomic_path(tmp_path / "model.safetensors") as tmp:
        save_file({"a": torch.zeros(2)}, str(tmp))
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes["model.safetensors"] == modes["plain"], modes


def test_resolve_inside_takes_plain_names_only(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "secret").write_text("key")
    (tmp_path / "model" / "vocab.json").write_text("{}")
    (tmp_path / "model" / "inner").symlink_to("vocab.json")
    (tmp_path / "model" / "outer").symlink_to(tmp_path / "secret")
    model = tmp_path / "model"
    assert resolve_inside(model, "vocab.json", "config.json: vocab") == model / "vocab.json"
    assert resolve_inside(model, "inner", "config.json: vocab") == model / "inner"
    for name in [str(tmp_path / "secret"), "../secret", "sub/vocab.json", "..", ".", "", None, 3]:
        with pytest.raises(AiaynError, match=r"^config.json: vocab: .* is not a plain file name"):
            resolve_inside(model, name, "config.json: vocab")
    with pytest.raises(AiaynError, match=r"^config.json: vocab: 'outer' is a link that leads outside"):
        resolve_inside(model, "outer", "config.json: vocab")


def test_capped_lines_stop_at_an_over_long_line():
    lines = capped_lines(io.BytesIO(b"ab\ncde\n\nf"), "in.txt", limit=3)
    assert list(lines) == [b"ab\n", b"cde\n", b"\n", b"f"]
    with pytest.raises(AiaynError, match=r"^in.txt:2: a line of more than 3 bytes; is it a text file\?"):
        list(capped_lines(io.BytesIO(b"ab\nabcd\n"), "in.txt", limit=3))
    with pytest.raises(AiaynError, match=r"^in.txt:1: .*ended by CR only\?"):
        list(capped_lines(io.BytesIO(b"a\rb\rc\r"), "in.txt", limit=3))


def test_building_directory_replaces_whole_or_not_at_all(tmp_path):
    out = tmp_path / "out"
    with building_directory(out) as work:
        (work / "a").write_text("1")
    assert [p.name for p in out.iterdir()] == ["a"] and hidden(tmp_path) == []
    with pytest.raises(KeyboardInterrupt), building_directory(out) as work:
        (work / "b").write_text("2")
        raise KeyboardInterrupt
    assert [p.name for p in out.iterdir()] == ["a"] and hidden(tmp_path) == []
    with building_directory(out) as work:
        (work / "b").write_text("2")
    assert [p.name for p in out.iterdir()] == ["b"] and oct(out.stat().st_mode)[-3:] == "755"


def test_a_linked_out_is_followed_and_the_link_kept(tmp_path):
    """`prepare --force`, `export-hf` and `import-marian` with --out a symbolic link."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "old").write_text("0")
    link = tmp_path / "link"
    link.symlink_to("real")
    with building_directory(link) as work:
        (work / "new").write_text("1")
    assert link.is_symlink() and [p.name for p in (tmp_path / "real").iterdir()] == ["new"]
    assert (link / "new").read_text() == "1" and hidden(tmp_path) == []


def test_a_link_to_nothing_is_refused_and_nothing_made(tmp_path):
    (tmp_path / "dangling").symlink_to("nowhere/deep")
    (tmp_path / "under").symlink_to("gone")
    for out in (tmp_path / "dangling", tmp_path / "under" / "out"):
        with pytest.raises(AiaynError, match=r"^--out .*: (.* is )?a link to (nowhere/deep|gone), which"):
            building_directory(out).__enter__()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "under"]


def test_leftovers_of_dead_runs_go_and_a_live_runs_stay(tmp_path):
    out = tmp_path / "out"
    with building_directory(out) as work:
        (work / "a").write_text("old")
    out.rename(tmp_path / ".out.old-killed")  # a run killed between its two renames
    (tmp_path / ".out.tmp-dead0000").mkdir()
    live = tmp_path / ".out.tmp-live0000"
    live.mkdir()
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # held by another (here: this) process, which is alive
    try:
        with building_directory(out) as work:
            assert (out / "a").read_text() == "old"  # put back before anything else happens
            (work / "a").write_text("new")
        assert (out / "a").read_text() == "new"
        assert hidden(tmp_path) == [".out.tmp-live0000"]
    finally:
        os.close(fd)


def test_dead_runs_temporaries_go_whatever_they_were_building(tmp_path):
    """A killed `export-onnx other` left .other.tmp-*: the next run into the same parent removes it,
    and leaves a user's directory that only looks temporary."""
    dead, mine = tmp_path / ".other.tmp-k1ll3d_0", tmp_path / ".notes.tmp-mine"
    for path in (dead, mine):
        path.mkdir()
        (path / "weights").write_text("x")
    with building_directory(tmp_path / "out") as work:
        (work / "a").write_text("1")
    assert hidden(tmp_path) == [".notes.tmp-mine"]


def test_vacant_is_absent_or_an_empty_directory(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / ".hidden").write_text("x")
    (tmp_path / "file").write_text("")
    assert vacant(tmp_path / "absent") and vacant(tmp_path / "empty")
    assert not vacant(tmp_path / "full") and not vacant(tmp_path / "file")
