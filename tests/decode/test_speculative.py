"""Speculative greedy decoding (aiayn.decode.speculative) on a real trained pair: the toy translator
as the teacher and a smaller toy model trained on the same pairs (or an untrained one) as the draft.
Its outputs must be the teacher's greedy outputs, token for token, whatever the draft proposes."""

from __future__ import annotations

import shutil

import pytest

from aiayn.apps.shortlist import build_shortlist
from aiayn.config import DecodeConfig
from aiayn.decode import ragged
from aiayn.decode import speculative as speculative_module
from aiayn.decode.bundle import ModelBundle
from aiayn.decode.speculative import Draft, check_same_vocabulary
from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translator
from aiayn.errors import AiaynError
from aiayn.model.io import load_model_dir
from aiayn.runtime.linear import ROW_PROBES, PackedLinear, panels_available
from aiayn.runtime.native_step import native_decoder
from toy import build_toy_model_dir, toy_pairs
from toy_translation import write_toy_data_dir

SMALL = {"d_model": 16, "d_ff": 32, "n_heads": 2, "n_layers": 1}  # the draft: a quarter of the teacher
TEXTS = [s for s, _ in toy_pairs(48, seed=5)]  # 1 to 6 words: rows of different lengths end apart


@pytest.fixture(scope="module")
def drafts(tmp_path_factory):
    """A draft trained on the teacher's pairs, and one never trained (it disagrees nearly always)."""
    root = tmp_path_factory.mktemp("drafts")
    return {
        "trained": build_toy_model_dir(root / "trained", steps=150, **SMALL),
        "untrained": build_toy_model_dir(root / "untrained", steps=0, **SMALL),
    }


@pytest.fixture(scope="module")
def speculative(toy_model_dir, drafts):
    """The toy translator with each draft."""
    return {name: Translator.load(toy_model_dir, device="cpu", draft=d) for name, d in drafts.items()}


def _greedy(translator, texts, **options):
    out = translator.translate_batch(texts, beam_size=1, **options)
    return [t[0] for t in out]


@pytest.mark.parametrize("k", [1, 2, 4, 8])
@pytest.mark.parametrize("which", ["trained", "untrained"])
def test_batches_are_the_teachers_greedy_outputs(translator, speculative, which, k):
    expected = _greedy(translator, TEXTS)
    found = _greedy(speculative[which], TEXTS, draft_tokens=k)  # one batch: rows accept on their own
    assert [t.tokens for t in found] == [t.tokens for t in expected]
    assert [t.text for t in found] == [t.text for t in expected]
    for a, b in zip(found, expected, strict=True):
        assert a.log_prob == pytest.approx(b.log_prob, abs=1e-4)
        assert a.score == pytest.approx(b.score, abs=1e-4)


@pytest.mark.parametrize("k", [1, 3, 8])
def test_in_a_batch_each_row_has_the_teachers_bits(speculative, k):
    """With the native step the teacher's products are row-invariant (every row class takes the panels, which
    loading a draft sets) and rows at different lengths attend in groups of one length: the scores
    of a speculative batch are its teacher's greedy scores to the last bit, not within a tolerance."""
    spec = speculative["trained"]
    if native_decoder(spec.bundle.model) is None:
        pytest.skip("the native step is not built here: the Python pass sums masked rows in another order")
    decoding = [*spec.bundle.model.decoder.modules(), spec.bundle.model.output_layer]
    invariant = "panels" if panels_available() else "packed"  # packed: an x86 CPU without FMA
    assert {m.kernels for m in decoding if isinstance(m, PackedLinear)} == {(invariant,) * len(ROW_PROBES)}
    teacher = Translator(
        ModelBundle([spec.bundle.model], spec.tokenizer, spec.info)
    )  # the same weights, no draft
    expected = _greedy(teacher, TEXTS)
    spec.bundle.draft.stats.__init__()
    found = _greedy(spec, TEXTS, draft_tokens=k)
    assert [t.tokens for t in found] == [t.tokens for t in expected]
    assert [t.log_prob for t in found] == [t.log_prob for t in expected]  # float equality
    assert spec.bundle.draft.stats.tokens_per_check > 1.0  # rows did accept proposals: lengths diverged


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_single_sentences_are_the_teachers_greedy_outputs(translator, speculative, k):
    for which in ("trained", "untrained"):
        for text in TEXTS[:12]:
            expected = _greedy(translator, [text])[0].tokens
            assert _greedy(speculative[which], [text], draft_tokens=k)[0].tokens == expected


def test_length_caps_and_small_batches_end_rows_early(translator, speculative):
    """EOS forced at each row's cap (a * |source| + b) ends rows in the middle of a draft."""
    for options in (
        {"max_len_a": 0.0, "max_len_b": 2},
        {"max_len_a": 0.5, "max_len_b": 1},
        {"batch_tokens": 24},
    ):
        expected = [t.tokens for t in _greedy(translator, TEXTS, **options)]
        for which in ("trained", "untrained"):
            found = _greedy(speculative[which], TEXTS, draft_tokens=4, **options)
            assert [t.tokens for t in found] == expected


def test_acceptance_is_counted(speculative):
    rates = {}
    for which, translator in speculative.items():
        translator.bundle.draft.stats.__init__()
        found = _greedy(translator, TEXTS, draft_tokens=4)
        stats = translator.bundle.draft.stats
        assert stats.tokens == sum(len(t.tokens) + 1 for t in found)  # every output token and EOS
        assert stats.checks <= stats.tokens <= 5 * stats.checks  # 1 to k + 1 tokens per teacher pass
        assert 0 <= stats.accepted <= stats.proposed == 4 * stats.checks
        assert "accepted (k=4)" in stats.summary(4)
        rates[which] = stats.acceptance
    assert rates["trained"] > 0.3 > 0.1 > rates["untrained"]  # the trained draft saves teacher passes


@pytest.mark.parametrize("side", ["target", "source"])
def test_a_draft_of_another_vocabulary_is_refused(toy_model_dir, drafts, translator, side):
    """Either side: a draft reads the teacher's source ids (an IndexError in its embedding once)."""

    class Shifted:
        def __getattr__(self, name):
            shifted = name == ("target_pieces" if side == "target" else "pieces")
            return (lambda ids: [f"x{i}" for i in ids]) if shifted else getattr(translator.tokenizer, name)

    draft, _ = load_model_dir(drafts["trained"], "cpu")
    with pytest.raises(
        AiaynError, match=rf"^draft model D does not share the vocabularies of T \({side} id 0 is 'x0'"
    ):
        check_same_vocabulary("D", "T", draft, translator.bundle.model, Shifted(), translator.tokenizer)
    draft.config.src_vocab_size = 40  # a draft of a smaller source vocabulary
    with pytest.raises(AiaynError, match=r"vocabulary sizes and special ids \(80, 40, "):
        check_same_vocabulary(
            "D", "T", draft, translator.bundle.model, translator.tokenizer, translator.tokenizer
        )


def test_what_a_draft_does_not_do(toy_model_dir, drafts, translator, speculative):
    with pytest.raises(AiaynError, match="not an ensemble"):
        Translator.load([toy_model_dir, toy_model_dir], device="cpu", draft=drafts["trained"])
    with pytest.raises(AiaynError, match="draft_tokens"):
        DecodeConfig(draft_tokens=0)
    # beam search and sampling are the teacher's own: the draft plays no part
    spec = speculative["trained"]
    assert translate_texts(spec, TEXTS[:6], beam_size=4) == translate_texts(
        translator, TEXTS[:6], beam_size=4
    )
    assert isinstance(spec.bundle.draft, Draft)


def test_translate_cli_with_a_draft(toy_model_dir, drafts, translator, tmp_path, capsys):
    from aiayn.cli import main

    (tmp_path / "in.txt").write_text("\n".join(TEXTS[:10]) + "\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    command = ["translate", str(toy_model_dir), "-i", str(tmp_path / "in.txt"), "-o", str(out)]
    assert main([*command, "--draft", str(drafts["trained"]), "--draft-tokens", "3"]) == 0
    assert out.read_text(encoding="utf-8").splitlines() == translate_texts(
        translator, TEXTS[:10], beam_size=1
    )
    assert "proposed tokens accepted (k=3)" in capsys.readouterr().err
    for flags, message in (
        (["--draft", str(drafts["trained"]), "--beam", "4"], "not with --beam > 1"),
        (["--draft", str(drafts["trained"]), "--sample"], "not with --sample"),
        (["--draft-tokens", "3"], "--draft-tokens needs --draft"),
    ):
        assert main([*command, *flags]) == 2
        assert message in capsys.readouterr().err


def test_serve_with_a_draft(toy_model_dir, drafts, translator, monkeypatch, capsys):
    import uvicorn
    from fastapi.testclient import TestClient

    from aiayn.cli import main

    seen = {}

    def run(server, sockets):
        with TestClient(server.config.app) as client:
            body = {"text": TEXTS[:5], "beam_size": 1}
            seen["greedy"] = client.post("/v1/translate", json=body).json()
        for sock in sockets:
            sock.close()

    monkeypatch.setattr(uvicorn.Server, "run", run)
    assert main(["serve", str(toy_model_dir), "--port", "0", "--draft", str(drafts["trained"])]) == 0
    assert f", draft {drafts['trained']} on http" in capsys.readouterr().out
    texts = [t["text"] for t in seen["greedy"]["translations"]]
    assert texts == translate_texts(translator, TEXTS[:5], beam_size=1)


def test_a_windowed_model_is_refused_as_a_draft(toy_model_dir, tmp_path):
    """Restricted self-attention (attention_window) keeps a ring buffer of one position a step, which the
    teacher's pass over k + 1 positions cannot write: refused in one line, before any decoding."""
    windowed = build_toy_model_dir(tmp_path / "windowed", steps=0, attention_window=2, **SMALL)
    with pytest.raises(
        AiaynError, match=r"windowed: speculative decoding takes no model with attention_window=2"
    ):
        Translator.load(toy_model_dir, device="cpu", draft=windowed)


def test_a_draft_with_a_shortlist_proposes_within_it(
    toy_model_dir, drafts, translator, speculative, tmp_path, monkeypatch
):
    """A shortlist in the draft's directory restricts its output layer (cheaper proposals); the
    outputs stay the teacher's."""
    draft = tmp_path / "draft"
    shutil.copytree(drafts["trained"], draft)
    build_shortlist(
        draft, write_toy_data_dir(tmp_path / "data", draft / "spm.model"), k=3, frequent=2, progress=False
    )
    spec = Translator.load(toy_model_dir, device="cpu", draft=draft)
    assert spec.bundle.draft.shortlist is not None
    if native_decoder(spec.bundle.draft.model) is not None:  # the shortlisted native call, never the full one
        monkeypatch.setattr(ragged, "propose_tokens", lambda *a: pytest.fail("not shortlisted"))
    expected = [t.tokens for t in _greedy(translator, TEXTS)]
    for k in (1, 3):
        spec.bundle.draft.stats.__init__()
        assert [t.tokens for t in _greedy(spec, TEXTS, draft_tokens=k)] == expected
    monkeypatch.undo()
    full = speculative["trained"].bundle.draft
    full.stats.__init__()
    _greedy(speculative["trained"], TEXTS, draft_tokens=3)
    # later proposals follow the ids of the earlier ones: as often right as the whole vocabulary's
    assert spec.bundle.draft.stats.acceptance > full.stats.acceptance - 0.1 > 0.2


def test_a_teacher_that_cannot_take_its_native_step_again_says_so(toy_model_dir, drafts, monkeypatch):
    """Loading a draft re-attaches the teacher's native step with row-invariant products; where that
    fails the teacher decodes in Python (not bit for bit its greedy search): a warning says so."""
    teacher = Translator.load(toy_model_dir, device="cpu")
    if native_decoder(teacher.bundle.model) is None:
        pytest.skip("no native step here")
    monkeypatch.setattr(speculative_module, "attach_native_decoder", lambda model: "a reason")
    with pytest.warns(RuntimeWarning, match=r"could not be attached again \(a reason\)"):
        Draft.load(drafts["trained"], toy_model_dir, teacher.bundle.model, teacher.tokenizer)


def test_a_draft_and_a_shortlist_are_refused_together(toy_model_dir, drafts, tmp_path, capsys):
    """Speculative search runs over the whole vocabulary: with a shortlist asked for, one line
    (translate, serve, the library), never the draft silently dropped."""
    from aiayn.cli import main

    model = tmp_path / "model"
    shutil.copytree(toy_model_dir, model)
    build_shortlist(
        model, write_toy_data_dir(tmp_path / "data", model / "spm.model"), k=3, frequent=2, progress=False
    )
    (tmp_path / "in.txt").write_text("el gato\n", encoding="utf-8")
    draft = ["--draft", str(drafts["trained"])]
    assert main(["translate", str(model), "-i", str(tmp_path / "in.txt"), *draft, "--shortlist"]) == 2
    assert main(["serve", str(model), "--port", "0", *draft, "--shortlist"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line.split("error: ")[1] for line in err] == [
        "--draft speeds up greedy search of one model: not with --shortlist"
    ] * 2
    spec = Translator.load(model, device="cpu", draft=drafts["trained"])
    with pytest.raises(AiaynError, match="without a shortlist: use one of the two"):
        translate_texts(spec, TEXTS[:3], beam_size=1, shortlist=True)
    assert translate_texts(
        spec, TEXTS[:3], beam_size=4, shortlist=True
    )  # beam search: the draft plays no part


@pytest.mark.parametrize(
    "draft", ["the teacher", "small, learned", "small, 8 learned positions", "sinusoidal"]
)
def test_near_the_end_of_learned_positions_no_position_past_them_is_read(drafts, tmp_path, draft):
    """A teacher of 16 learned positions (outputs up to 15 tokens) that never ends on its own: passes
    near the end propose fewer tokens (none at the last position), and the outputs stay its greedy ones."""
    learned = dict(positions="learned", max_positions=16)
    teacher = build_toy_model_dir(tmp_path / "teacher", steps=0, **learned)
    draft_dir = {
        "the teacher": teacher,
        "small, learned": build_toy_model_dir(tmp_path / "small", steps=0, **SMALL, **learned),
        "small, 8 learned positions": build_toy_model_dir(
            tmp_path / "eight", steps=0, **SMALL, positions="learned", max_positions=8
        ),
        "sinusoidal": drafts["untrained"],
    }[draft]
    spec = Translator.load(teacher, device="cpu", draft=draft_dir)
    plain = Translator(
        ModelBundle([spec.bundle.model], spec.tokenizer, spec.info)
    )  # the same weights, no draft
    expected = [t.tokens for t in _greedy(plain, TEXTS[:12])]
    assert max(map(len, expected)) == 15  # the last position is reached
    for k in (1, 3, 8):
        assert [t.tokens for t in _greedy(spec, TEXTS[:12], draft_tokens=k)] == expected
        assert [_greedy(spec, [text], draft_tokens=k)[0].tokens for text in TEXTS[:4]] == expected[:4]
    assert spec.bundle.draft.stats.checks > 0  # a draft of 8 positions: for the sources it can read
    from fastapi.testclient import TestClient

    from aiayn.serve import create_app

    with TestClient(create_app(spec)) as client:  # `aiayn serve TEACHER --draft DRAFT`
        answer = client.post("/v1/translate", json={"text": TEXTS[:12], "beam_size": 1})
    assert answer.status_code == 200
    assert [t["text"] for t in answer.json()["translations"]] == translate_texts(
        plain, TEXTS[:12], beam_size=1
    )
