"""The vocabulary shortlist (aiayn.decode.shortlist, aiayn.apps.shortlist): restricted decoding equals
unrestricted decoding when every id is kept, stays within the shortlist otherwise, its logits are the
full logits' kept columns, and a missing or foreign shortlist is a one-line error."""

import math
import shutil

import pytest
import torch

from aiayn.cli import main
from aiayn.decode.shortlist import SHORTLIST_FILE, TENSORS, KeptOutput, Shortlist, read_shortlist, write_vmap
from aiayn.decode.stepper import TransformerStepper
from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translator
from aiayn.errors import AiaynError
from aiayn.runtime.native_step import decode_step, native_decoder
from toy_translation import toy_pairs

SOURCES = [s for s, _ in toy_pairs(40, seed=11)]


def everything(translator: Translator) -> Shortlist:
    """A shortlist that keeps every target id for every source piece."""
    c = translator.config
    ids = torch.arange(c.vocab_size, dtype=torch.int32).repeat(c.source_vocab_size, 1)
    none = torch.zeros(0, dtype=torch.int32)
    return Shortlist(ids, torch.ones(ids.shape), none, none)


@pytest.mark.parametrize("beam", [1, 4])
def test_keeping_every_id_is_the_unrestricted_search(translator, beam):
    full = translator.translate_batch(SOURCES, beam_size=beam)
    translator.bundle.shortlist = everything(translator)
    try:
        kept = translator.translate_batch(SOURCES, beam_size=beam, shortlist=True)
    finally:
        translator.bundle.shortlist = None
    for a, b in zip(full, kept, strict=True):
        assert a[0].tokens == b[0].tokens
        assert a[0].score == pytest.approx(b[0].score, abs=1e-4)


@pytest.mark.parametrize("beam", [1, 4])
def test_a_real_shortlist_keeps_outputs_within_it(shortlisted, beam):
    model, _ = shortlisted
    translator = Translator.load(model, device="cpu")
    shortlist = translator.bundle.shortlist
    assert shortlist is not None and shortlist.candidates.shape[1] == 3
    full = translator.translate_batch(SOURCES, beam_size=beam)
    same = 0
    for text, reference in zip(SOURCES, full, strict=True):  # one text a batch: its own candidates
        out = translator.translate_batch([text], beam_size=beam, shortlist=True)[0][0]
        src = torch.tensor([translator.encode([text])[0]])
        assert set(out.tokens) <= set(shortlist.kept(src).tolist())
        same += out.tokens == reference[0].tokens
    assert same >= 0.8 * len(SOURCES)
    kept = shortlist.kept(torch.tensor([translator.encode([SOURCES[0]])[0]]))
    assert len(kept) < translator.config.vocab_size / 2  # a real restriction


@pytest.mark.parametrize("int8", [False, True])
@pytest.mark.parametrize("native", [True, False])
def test_restricted_logits_are_the_full_logits_kept_columns(shortlisted, int8, native):
    model, _ = shortlisted
    translator = Translator.load(model, device="cpu", int8=int8)
    m = translator.bundle.model
    src = translator._src_tensor(translator.encode(SOURCES[:4]))  # (4, src_len)
    kept = translator.bundle.shortlist.kept(src)
    full, restricted = TransformerStepper(m, src, 2, 8), TransformerStepper(m, src, 2, 8)
    restricted.output = KeptOutput(m, kept, native=native)
    assert (restricted.output.native is not None) == (native and native_decoder(m) is not None)
    columns = {int(t): c for c, t in enumerate(kept.tolist())}
    tokens = torch.full((8,), m.config.start_id)
    with torch.inference_mode():
        for _ in range(3):
            logits = decode_step(m, tokens, full.state)  # (8, vocab)
            mine = restricted.output.step(torch.tensor([columns[int(t)] for t in tokens]), restricted.state)
            assert mine.shape == (8, len(kept))
            torch.testing.assert_close(mine, logits[:, kept], atol=1e-4, rtol=1e-4)
            tokens = kept[mine.argmax(dim=1)]  # (8,) the same next tokens for both


def test_without_a_shortlist_it_says_so_in_one_line(translator, toy_model_dir, tmp_path, capsys):
    with pytest.raises(AiaynError, match="has no shortlist"):
        translate_texts(translator, ["el gato"], shortlist=True)
    assert translate_texts(translator, ["el gato"]) == translate_texts(
        translator, ["el gato"], shortlist=False
    )
    (tmp_path / "in.txt").write_text("el gato\n")
    code = main(["translate", str(toy_model_dir), "--shortlist", "-i", str(tmp_path / "in.txt")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "has no shortlist" in err and "aiayn shortlist" in err


def test_a_foreign_or_damaged_file_is_refused(shortlisted, tmp_path):
    model, _ = shortlisted
    config = Translator.load(model, device="cpu").config
    other = tmp_path / "other"
    other.mkdir()
    ids = torch.zeros(config.source_vocab_size + 1, 2, dtype=torch.int32)
    Shortlist(ids, ids.float(), ids[0], ids[0]).save(other)
    with pytest.raises(AiaynError, match="another vocabulary"):
        read_shortlist(other, config)
    (other / SHORTLIST_FILE).write_bytes(b"not a safetensors file")
    with pytest.raises(AiaynError, match="not a shortlist"):
        read_shortlist(other, config)


def test_vmap_lists_the_pieces(shortlisted, tmp_path):
    model, _ = shortlisted
    translator = Translator.load(model, device="cpu")
    path = write_vmap(translator.bundle.shortlist, translator.tokenizer, tmp_path / "vmap.txt")
    lines = path.read_text(encoding="utf-8").splitlines()
    tok, shortlist = translator.tokenizer, translator.bundle.shortlist
    always = [t for t in torch.cat([shortlist.frequent, shortlist.always]).tolist()]
    assert lines[0] == "\t" + " ".join(tok.target_pieces(always))
    gato = tok.encode(["gato"])[0][0]
    (row,) = [line for line in lines[1:] if line.split("\t")[0] == tok.pieces([gato])[0]]
    kept = [t for t in shortlist.candidates[gato].tolist() if t >= 0]
    assert row.split("\t")[1].split(" ") == tok.target_pieces(kept)
    assert "▁cat" in row.split("\t")[1].split(" ")


def test_serve_shortlist(shortlisted, toy_model_dir, monkeypatch, capsys):
    """`aiayn serve --shortlist` up to where uvicorn would serve, then the app; none: one line."""
    uvicorn = pytest.importorskip("uvicorn")
    from fastapi.testclient import TestClient

    seen = {}

    def run(server, sockets):
        with TestClient(server.config.app) as client:
            seen["translation"] = client.post("/v1/translate", json={"text": "el gato come"}).json()
        for sock in sockets:
            sock.close()

    monkeypatch.setattr(uvicorn.Server, "run", run)
    model, _ = shortlisted
    assert main(["serve", str(model), "--port", "0", "--shortlist"]) == 0
    assert ", shortlist on http://127.0.0.1:" in capsys.readouterr().out
    assert (
        seen["translation"]["translations"][0]["text"]
        == translate_texts(Translator.load(model), ["el gato come"])[0]
    )
    assert main(["serve", str(toy_model_dir), "--port", "0", "--shortlist"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no shortlist" in err


def _write(model, **tensors) -> None:
    """model's shortlist.safetensors holding `tensors` (its own for the names not given)."""
    from safetensors.torch import save_file

    own = read_shortlist(model, Translator.load(model, device="cpu").config)
    save_file({name: getattr(own, name) for name in TENSORS} | tensors, str(model / SHORTLIST_FILE))


I32 = dict(dtype=torch.int32)
BAD = {
    "-1 in frequent": (dict(frequent=torch.tensor([5, -1], **I32)), "frequent holds ids outside 0 .."),
    "-1 in always": (dict(always=torch.tensor([0, -1, 3], **I32)), "always holds ids outside 0 .."),
    "an id past the vocabulary": (dict(always=torch.tensor([80], **I32)), "always holds ids outside"),
    "0-d frequent": (dict(frequent=torch.tensor(5, **I32)), "frequent and always 1-d"),
    "2-d frequent": (dict(frequent=torch.zeros(2, 2, **I32)), "frequent and always 1-d"),
    "float candidates": (dict(candidates=torch.full((80, 3), math.nan)), "must hold integers"),
    "probabilities of another shape": (dict(probabilities=torch.zeros(80, 2)), "must be .source_vocab, k."),
}  # fmt: skip


@pytest.mark.parametrize("bad", BAD)
def test_a_malformed_file_is_one_line_naming_it_and_only_when_used(shortlisted, tmp_path, capsys, bad):
    """Read when a search asks for it (a plain translation never does), checked whole: dtypes,
    shapes, ids of the model's vocabulary (only candidates may be -1)."""
    tensors, message = BAD[bad]
    model = tmp_path / "model"
    shutil.copytree(shortlisted[0], model)
    _write(model, **tensors)
    translator = Translator.load(model, device="cpu")
    assert translate_texts(translator, ["el gato come"])[0]
    with pytest.raises(AiaynError, match=message) as err:
        translate_texts(translator, ["el gato come"], shortlist=True)
    assert str(err.value).startswith(f"{model / SHORTLIST_FILE}: ") and "\n" not in str(err.value)
    (tmp_path / "in.txt").write_text("el gato\n")
    assert main(["translate", str(model), "-i", str(tmp_path / "in.txt"), "-o", str(tmp_path / "out")]) == 0
    assert main(["translate", str(model), "--shortlist", "-i", str(tmp_path / "in.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(model / SHORTLIST_FILE) in err


@pytest.mark.parametrize("int8", [False, True])
def test_a_shortlist_without_eos_or_the_start_id_decodes(shortlisted, tmp_path, int8):
    """EOS and the decoder's start are kept whatever the shortlist says: every search runs."""
    from aiayn.config import SamplingConfig

    model = tmp_path / "model"
    shutil.copytree(shortlisted[0], model)
    none = torch.zeros(0, dtype=torch.int32)
    _write(model, frequent=none, always=none)
    translator = Translator.load(model, device="cpu", int8=int8)
    texts = SOURCES[:6]  # one batch: its sources' candidates
    kept = translator.bundle.shortlist.kept(translator._src_tensor(translator.encode(texts)))
    forced = [t for ids in translator.tokenizer.encode_target(["the", "cat"]) for t in ids]
    allowed = {*kept.tolist(), *forced, translator.config.eos_id}
    for search in (
        dict(beam_size=1),
        dict(beam_size=4, n_best=2),
        dict(sample=SamplingConfig(seed=1)),
        dict(prefix=["the"] * len(texts)),
        dict(constraints=[["cat"]] * len(texts)),
    ):
        out = translator.translate_batch(texts, shortlist=True, **search)
        assert all(hyps and set(h.tokens) <= allowed for hyps in out for h in hyps)
    from fastapi.testclient import TestClient

    from aiayn.serve import create_app

    served = Translator.load(model, device="cpu", int8=int8, shortlist=True)  # `aiayn serve --shortlist`
    with TestClient(create_app(served)) as client:
        for beam in (1, 4):
            assert client.post("/v1/translate", json={"text": texts, "beam_size": beam}).status_code == 200
