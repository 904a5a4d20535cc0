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
