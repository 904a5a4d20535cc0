"""The tools people convert exports with run them: CTranslate2 and Transformers' `generate`.

`TransformersConverter` (what `ct2-transformers-converter` runs) converts `export_hf` of the trained
toy translator, and CTranslate2 translates held-out lines as aiayn does: greedy, and beam search
with length_penalty_style="fairseq" (CTranslate2 stops once beam-size hypotheses have ended, as
fairseq; return_end_token=True makes it count EOS in |Y| as aiayn does). `MarianMTModel.generate`
on the same directory gives aiayn's "len" outputs (and "fairseq" ones with early_stopping=True).
An OPUS-MT-style model imported with import-marian and exported again converts to the same
CTranslate2 model as the original directory.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from marian_helpers import SOURCE_WORDS, make_marian, quiet_sacremoses, synthetic_text

from aiayn.decode.translator import Translator
from aiayn.interop.hf_export import export_hf
from aiayn.interop.marian_import import import_marian
from aiayn.interop.opus_layout import OpusLayout
from aiayn.model.io import load_model_dir
from toy_translation import toy_pairs

ctranslate2 = pytest.importorskip("ctranslate2", reason="needs ctranslate2 (pip install ctranslate2)")
transformers = pytest.importorskip("transformers", reason="needs transformers (pip install transformers)")
from ctranslate2.converters import TransformersConverter  # noqa: E402

TRAINING = {src for src, _ in toy_pairs(4096)}  # what build_toy_model_dir trains on
HELD_OUT = [src for src, _ in toy_pairs(80, seed=11) if src not in TRAINING][:40]
EOS = "</s>"


def read_json(path):
    return json.loads(path.read_text())


def convert(hf_dir, out_dir) -> ctranslate2.Translator:
    with quiet_sacremoses():
        TransformersConverter(str(hf_dir)).convert(str(out_dir))
    return ctranslate2.Translator(str(out_dir), device="cpu")


def marian_tokenizer(hf_dir):
    with quiet_sacremoses():
        return transformers.MarianTokenizer.from_pretrained(hf_dir)


def ct2_translate(ct2, tokenizer, texts, beam: int, alpha: float) -> tuple[list[list[int]], list[float]]:
    """CTranslate2's best hypotheses as the export's ids, and their scores. min_decoding_length=0
    allows an empty translation, as aiayn does; return_end_token counts EOS in the length penalty."""
    source = [tokenizer.convert_ids_to_tokens(ids) for ids in tokenizer(texts)["input_ids"]]
    results = ct2.translate_batch(
        source, beam_size=beam, length_penalty=alpha, min_decoding_length=0, return_end_token=True,
        return_scores=True,
    )  # fmt: skip
    pieces = [r.hypotheses[0] for r in results]
    assert all(p[-1:] == [EOS] for p in pieces)  # every one ended by EOS, none cut at the cap
    return [tokenizer.convert_tokens_to_ids(p[:-1]) for p in pieces], [r.scores[0] for r in results]


def aiayn_translate(translator, texts, layout, **options) -> tuple[list[list[int]], list[float]]:
    """aiayn's best hypotheses, renumbered as the export's ids (layout: None when they are already)."""
    best = [t[0] for t in translator.translate_batch(texts, **options)]
    to_export = torch.argsort(layout.target) if layout is not None else None
    ids = [t.tokens if to_export is None else to_export[t.tokens].tolist() for t in best]
    return ids, [t.score for t in best]


def rescored(model_dir, translator, texts, outputs, alpha: float, drop: list[int]) -> torch.Tensor:
    """The fairseq-style score sum(log P) / |Y|^alpha of each output (aiayn ids, EOS appended)
    recomputed in float64 by the teacher-forced model, with the ids `drop` left out of the softmax."""
    model, config = load_model_dir(model_dir, "cpu")[0].double().eval(), translator.config
    scores = []
    for text, ids in zip(texts, outputs, strict=True):
        src = torch.tensor([translator.encode([text])[0]])
        target = torch.tensor([ids + [config.eos_id]])
        tgt_in = torch.cat([torch.tensor([[config.start_id]]), target[:, :-1]], dim=1)
        with torch.no_grad():
            logits = model(src, tgt_in)[0]  # (|Y|, vocab) float64
        logits[:, drop] = -math.inf
        logp = logits.log_softmax(-1).gather(1, target.T).sum()
        scores.append(logp / target.size(1) ** alpha)
    return torch.stack(scores)


@pytest.fixture(scope="module")
def toy_export(toy_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("ct2")
    hf_dir = export_hf(toy_model_dir, root / "hf")
    translator = Translator.load(toy_model_dir, device="cpu")
    layout = OpusLayout.of(translator.config)
    return translator, layout, hf_dir, marian_tokenizer(hf_dir), convert(hf_dir, root / "ct2")


@pytest.mark.parametrize("beam, alpha", [(1, 1.0), (4, 1.0), (4, 0.6)])
def test_ctranslate2_translates_the_export_as_aiayn(toy_export, toy_model_dir, beam, alpha):
    translator, layout, _, tokenizer, ct2 = toy_export
    ours, our_scores = aiayn_translate(
        translator, HELD_OUT, layout, beam_size=beam, alpha=alpha, length_penalty_style="fairseq"
    )
    theirs, their_scores = ct2_translate(ct2, tokenizer, HELD_OUT, beam, alpha)
    assert theirs == ours
    assert sum(map(len, ours)) > 3 * len(HELD_OUT)  # real translations, not empty ones
    # Both scores against a float64 re-computation: CTranslate2 leaves <pad> out of the softmax
    # (log P a hair higher, by the pad's probability mass), aiayn masks it after the softmax.
    options = dict(beam_size=beam, alpha=alpha, length_penalty_style="fairseq")
    own = [t[0].tokens for t in translator.translate_batch(HELD_OUT, **options)]
    pad = [translator.config.pad_id]
    reference = rescored(toy_model_dir, translator, HELD_OUT, own, alpha, drop=[])
    torch.testing.assert_close(torch.tensor(our_scores, dtype=torch.float64), reference, atol=1e-5, rtol=0)
    reference = rescored(toy_model_dir, translator, HELD_OUT, own, alpha, drop=pad)
    torch.testing.assert_close(torch.tensor(their_scores, dtype=torch.float64), reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "generate_options, style",
    [(dict(num_beams=1), "len"), (dict(), "len"), (dict(early_stopping=True), "fairseq")],
)
def test_generate_translates_the_export_as_aiayn(toy_export, generate_options, style):
    """generate() with the export's generation_config.json (beam 4, <pad> and <s> banned, EOS forced
    at max_length 512) and its default length_penalty 1.0."""
    translator, layout, hf_dir, tokenizer, _ = toy_export
    model = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
    with torch.no_grad():
        out = model.generate(**tokenizer(HELD_OUT, return_tensors="pt", padding=True), **generate_options)
    special = {tokenizer.pad_token_id, tokenizer.eos_token_id}
    theirs = [[t for t in row[1:] if t not in special] for row in out.tolist()]  # drop start, EOS, pad
    beam = generate_options.get("num_beams", 4)
    ours, _ = aiayn_translate(
        translator, HELD_OUT, layout, beam_size=beam, alpha=1.0, length_penalty_style=style
    )
    assert theirs == ours


def test_an_imported_opus_mt_model_exports_to_the_same_ctranslate2_model(tokenizer_files, tmp_path):
    """make_marian builds the model with transformers as HF's conversion script lays out OPUS-MT."""
    original = make_marian(tmp_path / "opus", tokenizer_files["shared"], seed=0, std=0.3, eos_bias=2.0)
    translator = Translator.load(import_marian(original, tmp_path / "aiayn"), device="cpu")
    again = export_hf(tmp_path / "aiayn", tmp_path / "again")
    assert read_json(again / "vocab.json") == read_json(original / "vocab.json")
    ids = ("pad_token_id", "eos_token_id", "decoder_start_token_id", "vocab_size")
    original_config, again_config = read_json(original / "config.json"), read_json(again / "config.json")
    assert {k: again_config[k] for k in ids} == {k: original_config[k] for k in ids}
    convert(original, tmp_path / "ct2")
    ct2 = convert(again, tmp_path / "ct2-again")
    files = sorted(f.name for f in (tmp_path / "ct2").iterdir())
    assert "model.bin" in files and files == sorted(f.name for f in (tmp_path / "ct2-again").iterdir())
    for name in files:  # the same CTranslate2 model, byte for byte
        assert (tmp_path / "ct2" / name).read_bytes() == (tmp_path / "ct2-again" / name).read_bytes(), name
    texts = synthetic_text(SOURCE_WORDS, 12, 7)
    # (scores differ here: this random model gives <pad>, which CTranslate2 leaves out, real mass)
    theirs, _ = ct2_translate(ct2, marian_tokenizer(again), texts, 4, 1.0)
    ours, _ = aiayn_translate(translator, texts, None, beam_size=4, alpha=1.0, length_penalty_style="fairseq")
    assert theirs == ours and all(ours)


def test_ctranslate2_takes_the_shortlist_as_its_vmap(toy_model_dir, tmp_path):
    """export-hf writes the shortlist as vmap.txt; converted with it, CTranslate2's use_vmap outputs
    stay within each sentence's candidates and agree with aiayn's shortlisted outputs."""
    import shutil

    from aiayn.apps.shortlist import build_shortlist
    from toy_translation import write_toy_data_dir

    model = tmp_path / "model"
    shutil.copytree(toy_model_dir, model)
    build_shortlist(
        model, write_toy_data_dir(tmp_path / "data", model / "spm.model"), k=3, frequent=2, progress=False
    )
    hf_dir = export_hf(model, tmp_path / "hf")
    assert (hf_dir / "vmap.txt").is_file()
    with quiet_sacremoses():
        TransformersConverter(str(hf_dir)).convert(str(tmp_path / "ct2"), vmap=str(hf_dir / "vmap.txt"))
    ct2 = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu")
    tokenizer, translator = marian_tokenizer(hf_dir), Translator.load(model, device="cpu")
    layout = OpusLayout.of(translator.config)
    same = 0
    for text in HELD_OUT:
        source = tokenizer.convert_ids_to_tokens(tokenizer([text])["input_ids"][0])
        result = ct2.translate_batch([source], beam_size=1, use_vmap=True, min_decoding_length=0)
        theirs = tokenizer.convert_tokens_to_ids(result[0].hypotheses[0])
        kept = translator.bundle.shortlist.kept(torch.tensor([translator.encode([text])[0]]))
        assert set(theirs) <= set(torch.argsort(layout.target)[kept].tolist())  # kept, as export ids
        ours, _ = aiayn_translate(translator, [text], layout, beam_size=1, shortlist=True)
        same += theirs == ours[0]
    assert same >= 0.9 * len(HELD_OUT)
    assert not (export_hf(toy_model_dir, tmp_path / "plain") / "vmap.txt").exists()  # no shortlist, no vmap
