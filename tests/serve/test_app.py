"""The HTTP API against a real tiny model directory, compared with calling the Translator directly."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from fastapi.testclient import TestClient

from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translator
from aiayn.errors import AiaynError
from aiayn.serve import ServeSettings, create_app

TEXTS = ["el gato come", "la casa grande", "un perro verde bebe agua", "sol"]


@pytest.fixture(scope="module")
def settings() -> ServeSettings:
    return ServeSettings(max_batch=5, max_chars=40)


def _post(client, body):
    response = client.post("/v1/translate", json=body)
    assert response.headers["content-type"] == "application/json", response.text
    return response


def test_health(client):
    assert client.get("/v1/health").json() == {"status": "ok"}


def test_model_info(client, translator):
    info = client.get("/v1/model").json()
    assert (info["src_lang"], info["tgt_lang"]) == ("es", "en")
    assert info["parameters"] == sum(p.numel() for p in translator.bundle.model.parameters())
    assert info["config"] == translator.config.to_dict()
    assert info["int8"] is False
    config = translator.config
    weights = config.n_heads * 128**2 * (config.n_layers + 2 * config.decoder_layers)
    assert info["limits"] == {
        "max_batch": 5,
        "max_chars": 40,
        "timeout": 30.0,
        "max_body_bytes": 4096 + 5 * (12 * 40 + 8),
        "max_work": 262_144,
        "max_queue": 1024,
        "attention_texts": 1,
        "max_attention_tokens": 128,
        "max_attention_weights": weights,
    }


def test_one_text_matches_translator(client, translator):
    (expected,) = translator.translate_batch(["el gato come"])
    (got,) = _post(client, {"text": "el gato come"}).json()["translations"]
    assert got["text"] == expected[0].text and got["text"]
    assert got["score"] == pytest.approx(expected[0].score, abs=1e-5)
    assert got["log_prob"] == pytest.approx(expected[0].log_prob, abs=1e-5)
    assert got["attention"] is None and len(got["hypotheses"]) == 1


def test_list_keeps_order_and_options(client, translator):
    expected = translate_texts(translator, TEXTS, beam_size=2, alpha=1.0)
    got = _post(client, {"text": TEXTS, "beam_size": 2, "alpha": 1.0}).json()["translations"]
    assert [t["text"] for t in got] == expected


def test_n_best(client, translator):
    expected = translator.translate_batch(TEXTS[:2], beam_size=4, n_best=3)
    got = _post(client, {"text": TEXTS[:2], "n_best": 3}).json()["translations"]
    for want, have in zip(expected, got, strict=True):
        hyps = have["hypotheses"]
        assert [h["text"] for h in hyps] == [t.text for t in want]
        assert [h["score"] for h in hyps] == pytest.approx([t.score for t in want], abs=1e-5)
        assert [h["score"] for h in hyps] == sorted((h["score"] for h in hyps), reverse=True)
        assert have["text"] == hyps[0]["text"]


def test_empty_text_translates_to_empty(client):
    got = _post(client, {"text": ["", "  ", "sol"]}).json()["translations"]
    assert [t["text"] for t in got[:2]] == ["", ""] and got[2]["text"]
    for text in ("", "  "):  # attention comes for one text per request
        (one,) = _post(client, {"text": text, "attention": True}).json()["translations"]
        assert one["text"] == "" and one["attention"] is None
    (one,) = _post(client, {"text": "sol", "attention": True}).json()["translations"]
    assert one["text"] and one["attention"]["src_tokens"][-1] == "</s>"


def test_attention_shapes_and_values(client, translator):
    text = "un perro verde bebe agua"
    (got,) = _post(client, {"text": text, "attention": True}).json()["translations"]
    attn, ref = got["attention"], translator.attention(text)
    n_src, n_tgt = len(attn["src_tokens"]), len(attn["tgt_tokens"])
    assert attn["src_tokens"] == ref["src_tokens"] and attn["tgt_tokens"] == ref["tgt_tokens"]
    assert got["text"] == ref["translation"]
    assert attn["src_tokens"][-1] == "</s>" and n_src == len(translator.encode([text])[0])
    config = translator.config
    shapes = {"cross": (n_tgt, n_src), "encoder": (n_src, n_src), "decoder": (n_tgt, n_tgt)}
    for kind, (q, k) in shapes.items():
        weights = torch.tensor(attn[kind])  # (layers, heads, q, k)
        assert weights.shape == (config.n_layers, config.n_heads, q, k), kind
        torch.testing.assert_close(weights, torch.stack(ref[kind]), atol=5.1e-5, rtol=0)
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=2e-3, rtol=0)
    causal = torch.tensor(attn["decoder"]).triu(diagonal=1)
    assert causal.abs().max() == 0  # no decoder position looks ahead


@pytest.mark.parametrize(
    "body",
    [
        {"text": 5},
        {"text": ["ok", 3]},
        {"text": []},
        {},
        {"text": "x", "beam_size": "4"},
        {"text": "x", "beam_size": 0},
        {"text": "x", "beam_size": 17},
        {"text": "x", "beam_size": 2.5},
        {"text": "x", "alpha": "high"},
        {"text": "x", "attention": "yes"},
        {"text": "x", "beam_size": 2, "n_best": 3},
        {"text": "x", "model_dir": "/etc"},  # unknown fields are refused: no field becomes a path
    ],
)
def test_wrong_types_are_422(client, body):
    response = _post(client, body)
    assert response.status_code == 422
    assert isinstance(response.json()["detail"], list) and response.json()["detail"]


def test_search_options_are_checked_by_decode_config(client):
    response = _post(client, {"text": "x", "beam_size": 2, "n_best": 3})
    assert response.status_code == 422
    assert "n_best=3 must be between 1 and beam_size=2" in response.json()["detail"][0]["msg"]


@pytest.mark.parametrize("raw", [b"{not json", b"", b"[1, 2", '{"text": "\xe9"}'.encode("latin-1")])
def test_malformed_json_is_422(client, raw):
    response = client.post("/v1/translate", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/json"


def test_too_many_texts_is_413(client):
    response = _post(client, {"text": ["sol"] * 6})
    assert response.status_code == 413
    assert response.json() == {"detail": "6 texts in one request; the limit is 5"}
    assert _post(client, {"text": ["sol"] * 5}).status_code == 200


def test_too_long_text_is_413(client):
    response = _post(client, {"text": ["sol", "a" * 41]})
    assert response.status_code == 413
    assert response.json() == {"detail": "text 2 has 41 characters; the limit is 40"}
    assert _post(client, {"text": "a" * 40}).status_code == 200


class GatedTranslator:
    """Wraps a Translator; translate_batch() waits until `gate` is set (a model call in progress)."""

    def __init__(self, translator: Translator):
        self.inner, self.gate, self.entered = translator, threading.Event(), threading.Event()
        self.config, self.info, self.bundle = translator.config, translator.info, translator.bundle
        self.batches: list[list[str]] = []

    def translate_batch(self, texts, options, **kwargs):
        self.batches.append(list(texts))
        self.entered.set()
        self.gate.wait(timeout=30)
        return self.inner.translate_batch(texts, options, **kwargs)

    def attention_maps(self, src_ids, tokens):
        return self.inner.attention_maps(src_ids, tokens)

    def encode_inputs(self, texts, prefix=None, constraints=None, target_language=None):
        return self.inner.encode_inputs(texts, prefix, constraints, target_language)


def test_timeout_is_503_and_loop_stays_free(translator):
    gated = GatedTranslator(translator)
    with TestClient(create_app(gated, ServeSettings(timeout=0.2))) as client:
        response = _post(client, {"text": "el gato"})
        assert response.status_code == 503
        assert response.json() == {"detail": "the request took over 0.2 s; try again later"}
        assert gated.entered.is_set() and not gated.gate.is_set()  # the model call is still running ...
        assert client.get("/v1/health").status_code == 200  # ... and the event loop answers
        gated.gate.set()  # the server recovers (tries: a loaded machine may need more than 0.2 s)
        assert any(_post(client, {"text": "el gato"}).status_code == 200 for _ in range(20))


def test_concurrent_requests_share_model_calls(translator):
    gated = GatedTranslator(translator)
    settings = ServeSettings(batch_wait_ms=0.0, batch_texts=64)
    with TestClient(create_app(gated, settings)) as client, ThreadPoolExecutor(8) as pool:
        first = pool.submit(_post, client, {"text": TEXTS[0]})
        assert gated.entered.wait(timeout=30)  # the first call holds the model; the rest queue up
        rest = [pool.submit(_post, client, {"text": t}) for t in TEXTS[1:] * 2]
        for _ in range(3000):
            if client.app.state.batcher.queued == len(rest):
                break
            threading.Event().wait(0.01)
        gated.gate.set()
        responses = [first.result()] + [f.result() for f in rest]
    expected = translate_texts(translator, TEXTS[:1] + TEXTS[1:] * 2)
    assert [r.json()["translations"][0]["text"] for r in responses] == expected
    first_call, second_call = gated.batches  # two model calls for seven requests
    assert first_call == TEXTS[:1] and sorted(second_call) == sorted(TEXTS[1:] * 2)


def test_settings_are_checked():
    with pytest.raises(AiaynError, match="max_batch must be positive"):
        ServeSettings(max_batch=0)
    with pytest.raises(AiaynError, match="batch_wait_ms"):
        ServeSettings(batch_wait_ms=-1)
