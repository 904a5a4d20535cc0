"""`aiayn attention MODEL_DIR TEXT --out F.png` on a tiny model directory."""

from __future__ import annotations

import pytest

from aiayn.cli import main
from aiayn.decode.translator import Translator

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_cli_attention(toy_model_dir, tmp_path, capsys):
    out = tmp_path / "attn.png"
    assert main(["attention", str(toy_model_dir), "el gato come", "--out", str(out), "--layer", "1"]) == 0
    expected = Translator.load(toy_model_dir, device="cpu").attention("el gato come")["translation"]
    assert capsys.readouterr().out.splitlines() == [expected, f"wrote {out}"]
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert main(["attention", str(toy_model_dir), "el gato", "--out", str(out), "--head", "9"]) == 2
    assert "head 9 is out of range" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_attention_self_attention(toy_model_dir, tmp_path):
    """Encoder and decoder self-attention of the default (last) layer, all heads."""
    for kind in ("encoder", "decoder"):
        out = tmp_path / f"{kind}.png"
        assert main(["attention", str(toy_model_dir), "la casa", "--out", str(out), "--kind", kind]) == 0
        assert out.read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["hola", "--out", "a.txt"], "--out a.txt: the file name must end in .png"),
        (["hola", "--out", "adir"], "--out adir: the file name must end in .png"),
        (["", "--out", "a.png"], "TEXT is empty"),
        ([" \t", "--out", "a.png"], "TEXT is empty"),
    ],
)
def test_cli_attention_bad_input_is_refused_before_the_model_loads(
    tmp_path, monkeypatch, capsys, args, message
):
    """MODEL_DIR does not exist: the error is about the input, before any loading or writing."""
    monkeypatch.chdir(tmp_path)
    assert main(["attention", str(tmp_path / "no-model"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"aiayn attention: error: {message}")
    assert list(tmp_path.iterdir()) == []
