"""`aiayn quickstart` end to end with a small budget: every artefact exists and is well formed."""

import json
import shutil
from pathlib import Path

import matplotlib.image
import pytest
import torch

from aiayn.cli import main
from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translator
from aiayn.runtime.linear import linear_backend

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/usr/share/sword").is_dir(), reason="Debian SWORD Bible modules missing"),
]


def _is_png(path: Path) -> bool:
    image = matplotlib.image.imread(path)
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and image.ndim == 3 and min(image.shape[:2]) > 100


def test_quickstart_writes_every_artefact_and_reuses_them(tmp_path, capsys):
    out = tmp_path / "qs"
    args = ["quickstart", "--steps", "30", "--out", str(out), "--test-limit", "12"]
    assert main(args) == 0
    captured = capsys.readouterr()
    printed = captured.out
    assert "the rest takes about" in captured.err  # the time the budget takes, measured early on
    probed = linear_backend.enabled and not linear_backend.forced and not torch.cuda.is_available()
    assert ("matrix products: " in captured.err) == probed  # oneDNN or MKL, timed on the first updates
    assert "BLEU|nrefs:1" in printed and "chrF2|nrefs:1" in printed
    assert printed.count("reference:") == 5 and "aiayn translate" in printed

    meta = json.loads((out / "data" / "meta.json").read_text())
    assert meta["pairs"]["test"] > 900
    translator = Translator.load(out / "model")
    assert len(translate_texts(translator, ["Y dijo Dios: Sea la luz."], beam_size=2)) == 1
    scores = json.loads((out / "eval" / "scores.json").read_text())
    assert scores["n_sentences"] == 12 and 0 <= scores["bleu"] <= 100 and 0 <= scores["chrf"] <= 100
    assert len((out / "eval" / "test.hyp").read_text().splitlines()) == 12
    assert _is_png(out / "attention.png")
    assert _is_png(out / "plots" / "loss.png") and _is_png(out / "plots" / "lr.png")

    # a second run reuses the data and the model instead of training again
    assert main(args) == 0
    again = capsys.readouterr()
    assert "reusing the finished model" in again.out and "already prepared" in again.out + again.err

    # another seed or budget asks for another model: refused in one line, the model kept
    before = (out / "model" / "model.safetensors").read_bytes()
    assert main([*args, "--seed", "2"]) == 2
    assert "was trained with --seed 1, not --seed 2; use another --out" in capsys.readouterr().err
    assert main(["quickstart", "--steps", "60", "--out", str(out)]) == 2
    assert "was trained with --steps 30, not --steps 60" in capsys.readouterr().err
    assert (out / "model" / "model.safetensors").read_bytes() == before
    shutil.rmtree(out / "model")  # as if interrupted after its checkpoints: a re-run resumes them
    assert main([*args, "--seed", "2"]) == 2
    assert f"the interrupted run in {out} was trained with --seed 1, not --seed 2" in capsys.readouterr().err
