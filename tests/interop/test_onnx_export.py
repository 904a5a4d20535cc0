"""`export-onnx` of the trained toy translator, run by ONNX Runtime as transformers.js runs it.

The merged decoder is driven step by step (use_cache_branch false, then true with the previous
step's present tensors) under aiayn's own greedy and beam search (aiayn.interop.onnx_runtime), so
equal outputs mean the exported network makes every choice aiayn's makes; its logits are checked
against aiayn's model directly, at the first step and at later ones. tokenizer.json (read here by
the `tokenizers` library, an independent implementation) gives aiayn's ids.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from onnx_helpers import HELD_OUT, TRAINING, export_ids

from aiayn.cli import main
from aiayn.decode.texts import translate_texts
from aiayn.errors import AiaynError
from aiayn.interop import onnx_export
from aiayn.interop.onnx_export import export_onnx
from aiayn.interop.onnx_graphs import past_names

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install aiayn[onnx])")
tokenizers = pytest.importorskip("tokenizers", reason="needs tokenizers (installed with transformers)")


def test_the_directory_is_optimums_seq2seq_layout(onnx_dir):
    names = sorted(p.name for p in (onnx_dir / "onnx").iterdir())
    assert names == [
        "decoder_model_merged.onnx", "decoder_model_merged_quantized.onnx",
        "encoder_model.onnx", "encoder_model_quantized.onnx",
    ]  # fmt: skip
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        assert (onnx_dir / name).is_file()
    assert not (onnx_dir / "model.safetensors").exists()
    config = json.loads((onnx_dir / "config.json").read_text())
    layers, heads = config["decoder_layers"], config["decoder_attention_heads"]
    encoder = ort.InferenceSession(str(onnx_dir / "onnx/encoder_model.onnx"))
    assert [i.name for i in encoder.get_inputs()] == ["input_ids", "attention_mask"]
    assert [o.name for o in encoder.get_outputs()] == ["last_hidden_state"]
    decoder = ort.InferenceSession(str(onnx_dir / "onnx/decoder_model_merged.onnx"))
    inputs = {i.name: i for i in decoder.get_inputs()}
    steps = ["input_ids", "encoder_attention_mask", "encoder_hidden_states"]
    assert list(inputs) == [*steps, *past_names(layers), "use_cache_branch"]
    assert [o.name for o in decoder.get_outputs()] == ["logits", *past_names(layers, "present")]
    # transformers.js makes the first step's empty past from these shapes: named axes -> batch or 0
    width = config["d_model"] // heads
    assert inputs["past_key_values.0.decoder.key"].shape == [
        "batch_size",
        heads,
        "past_decoder_sequence_length",
        width,
    ]
    assert inputs["past_key_values.1.encoder.value"].shape == [
        "batch_size",
        heads,
        "encoder_sequence_length",
        width,
    ]
    assert inputs["use_cache_branch"].type == "tensor(bool)" and inputs["use_cache_branch"].shape == [1]


def test_tokenizer_json_gives_aiayns_ids(onnx_dir, onnx_toy):
    translator, _, to_export = onnx_toy
    texts = HELD_OUT + sorted(TRAINING)[:200] + ["  el   gato  ", "EL GATO"]
    src = export_ids(onnx_dir, texts)
    for row, text in zip(src.tolist(), texts, strict=True):
        ours = to_export[torch.tensor(translator.encode([text])[0])].tolist()
        assert row[: len(ours)] == ours, text


def test_bad_input_is_one_line(toy_model_dir, tmp_path, capsys, monkeypatch):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    (tmp_path / "model.onnx").write_text("mine")
    vision = tmp_path / "vit"
    vision.mkdir()
    (vision / "config.json").write_text(json.dumps({"format_version": 1, "vision": {"patch": 4}}))
    cases = [
        ([str(toy_model_dir), str(tmp_path / "full")], "exists and is not an empty directory"),
        ([str(toy_model_dir), str(tmp_path / "model.onnx")], "model.onnx: a file is there, not a directory"),
        ([str(vision), str(tmp_path / "a")], "a vision model"),
        ([str(tmp_path / "nothing"), str(tmp_path / "b")], "not a model directory"),
        ([str(toy_model_dir), str(toy_model_dir)], "cannot be the model directory itself"),
    ]
    for args, message in cases:
        assert main(["export-onnx", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err and err.startswith("aiayn export-onnx: error:")
    assert (tmp_path / "full" / "notes.txt").read_text() == (tmp_path / "model.onnx").read_text() == "mine"
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    windowed = SimpleNamespace(attention_window=16)  # the field restricted self-attention adds
    monkeypatch.setattr(onnx_export, "read_config", lambda model_dir: (windowed, {}))
    with pytest.raises(AiaynError, match="attention_window=16"):
        export_onnx(toy_model_dir, tmp_path / "c")


def test_a_killed_export_leaves_its_copies_beside_out_for_the_next_export(
    toy_model_dir, tmp_path, monkeypatch
):
    system_tmp = tmp_path / "tmp"
    system_tmp.mkdir()
    code = (
        "import os, signal\nfrom aiayn.interop import onnx_export\n"
        "onnx_export.write_graphs = lambda *args: os.kill(os.getpid(), signal.SIGKILL)\n"
        f"onnx_export.export_onnx({str(toy_model_dir)!r}, {str(tmp_path / 'first')!r})\n"
    )
    env = {**os.environ, "TMPDIR": str(system_tmp), "PYTHONPATH": str(Path(onnx_export.__file__).parents[2])}
    killed = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".first.tmp-")]
    assert len(left) == 1 and list(system_tmp.iterdir()) == []  # the weights' copy is in there
    assert list(left[0].glob("tmp*/hf/model.safetensors"))
    monkeypatch.setattr(onnx_export, "write_graphs", lambda *args: None)
    export_onnx(toy_model_dir, tmp_path / "second", warn=lambda message: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["second", "tmp"]
    assert not list((tmp_path / "second").glob("tmp*"))


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.mark.slow
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (Debian package chromium)")
def test_the_page_translates_in_chromium_as_aiayn(onnx_dir, onnx_toy):
    """index.html served by a plain static file server on 127.0.0.1: transformers.js loads the export
    and its own runtime from there (any other request fails the test) and translates as aiayn's greedy."""
    from playwright.sync_api import sync_playwright

    if not (onnx_dir / "transformers" / "transformers.min.js").is_file():
        pytest.skip(
            "no transformers.js in the export: run `npm ci --ignore-scripts` in web/ (make test does)"
        )
    translator, _, _ = onnx_toy
    texts = HELD_OUT[:6]
    expected = translate_texts(translator, texts, beam_size=1)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(onnx_dir))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url, elsewhere = f"http://127.0.0.1:{server.server_address[1]}/", []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.on("request", lambda r: r.url.startswith(url) or elsewhere.append(r.url))
            page.goto(url)
            page.wait_for_function("window.aiayn !== undefined")
            page.evaluate("window.aiayn.ready")
            assert page.evaluate("texts => window.aiayn.translate(texts)", texts) == expected
            page.fill("#source", "\n".join(texts[:2]))
            page.click("#translate")
            page.wait_for_selector("#translation p")
            assert (
                page.eval_on_selector_all("#translation p", "ps => ps.map(p => p.textContent)")
                == expected[:2]
            )
            browser.close()
    finally:
        server.shutdown()
    assert elsewhere == [] and all(expected)
