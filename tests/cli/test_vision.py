"""`aiayn vision-attention` (aiayn.cli.vision): a bad --out refused in one line before the model loads."""

from __future__ import annotations

import pytest

from aiayn.cli import main


@pytest.mark.parametrize(
    ("name", "message"),
    [("a.txt", "must end in .png"), ("adir", "must end in .png"), ("d.png", "is a folder")],
)
def test_cli_vision_attention_writes_only_a_png_file(tmp_path, capsys, name, message):
    """A bad --out is refused before the model loads (MODEL_DIR does not exist here)."""
    (tmp_path / "d.png").mkdir()
    assert main(["vision-attention", str(tmp_path / "no-model"), "--out", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--out {tmp_path / name}: " in err and message in err
    assert [p.name for p in tmp_path.iterdir()] == ["d.png"]
