"""A multilingual model behind /v1: `target` chooses the language, GET /v1/model lists them, and
requests for several languages share the micro-batcher's model calls, each text with its own tag."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient

from aiayn.config import DecodeConfig
from aiayn.decode.translator import Translator
from aiayn.serve import ServeSettings, create_app
from aiayn.serve.batch import Options, items_of, run_batch
from toy import LEXICON, LEXICON_DE, word_for_word

TEXTS = [s for s, _ in word_for_word(8, seed=31)]


@pytest.fixture(scope="module")
def multilingual(toy_multilingual_model_dir) -> Translator:
    return Translator.load(toy_multilingual_model_dir, device="cpu")


@pytest.fixture(scope="module")
def multi_client(multilingual):
    with TestClient(create_app(multilingual, ServeSettings(batch_wait_ms=50))) as client:
        yield client


def _expected(translator: Translator, texts: list[str], language: str) -> list[str]:
    found = translator.translate_batch(texts, DecodeConfig(beam_size=2), target_language=language)
    return [t[0].text for t in found]


def test_model_info_lists_the_target_languages(multi_client, client):
    info = multi_client.get("/v1/model").json()
    assert (info["src_lang"], info["tgt_lang"], info["target_languages"]) == ("es", "mul", ["de", "en"])
    assert client.get("/v1/model").json()["target_languages"] == []  # the one-language toy


def test_target_chooses_the_language(multi_client, multilingual):
    for language in ("de", "en"):
        response = multi_client.post(
            "/v1/translate", json={"text": TEXTS, "beam_size": 2, "target": language}
        )
        assert response.status_code == 200, response.text
        texts = [t["text"] for t in response.json()["translations"]]
        assert texts == _expected(multilingual, TEXTS, language)
    lexicon_de = set(LEXICON_DE.values())
    assert sum(w in lexicon_de for t in texts for w in t.split()) == 0  # the English ones hold no German


def test_the_stream_takes_a_target(multi_client, multilingual):
    body = {"text": "el gato come. la casa verde.", "beam_size": 2, "target": "de"}
    with multi_client.stream("POST", "/v1/translate/stream", json=body) as response:
        text = "".join(response.iter_text())
    assert "event: done" in text and "event: error" not in text
    assert set(LEXICON.values()).isdisjoint(text.split('"text": "')[-1].split('"')[0].split())


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"text": "el gato"}, "the model translates into de, en: choose one with target"),
        (
            {"text": "el gato", "target": "fr"},
            "target fr: the model does not translate into it; it has de, en",
        ),
    ],
)
def test_a_missing_or_unknown_target_is_400(multi_client, body, detail):
    response = multi_client.post("/v1/translate", json=body)
    assert (response.status_code, response.json()) == (400, {"detail": detail})
    stream = multi_client.post("/v1/translate/stream", json=body)
    assert (stream.status_code, stream.json()) == (400, {"detail": detail})


def test_a_target_the_one_language_model_lacks_is_400(client):
    response = client.post("/v1/translate", json={"text": "el gato", "target": "de"})
    assert response.status_code == 400 and "translates into en only" in response.json()["detail"]
    assert client.post("/v1/translate", json={"text": "el gato", "target": "en"}).status_code == 200
    bad = client.post("/v1/translate", json={"text": "el gato", "target": "<b>"})
    assert bad.status_code == 422


def test_one_model_call_holds_texts_of_several_languages(multilingual):
    """What the batcher's model thread runs for two requests, into German and into English: each
    text's answer is the one it gets alone."""
    items = []
    for language in ("de", "en"):
        encoded = multilingual.encode_inputs(TEXTS[:3], target_language=language)
        items += items_of(TEXTS[:3], encoded)
    results = run_batch(multilingual, items, Options(DecodeConfig(beam_size=2)), lambda: False, 128)
    assert [r.text for r in results] == _expected(multilingual, TEXTS[:3], "de") + _expected(
        multilingual, TEXTS[:3], "en"
    )


def test_concurrent_requests_of_two_languages_share_calls(multilingual):
    app = create_app(multilingual, ServeSettings(batch_wait_ms=200))
    with TestClient(app) as client:
        batcher = app.state.batcher
        before = batcher.calls

        async def both():
            import httpx

            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
                return await asyncio.gather(
                    *(
                        http.post("/v1/translate", json={"text": TEXTS[:3], "beam_size": 2, "target": lang})
                        for lang in ("de", "en")
                    )
                )

        de, en = client.portal.call(both)
        assert batcher.calls - before == 1
    assert [t["text"] for t in de.json()["translations"]] == _expected(multilingual, TEXTS[:3], "de")
    assert [t["text"] for t in en.json()["translations"]] == _expected(multilingual, TEXTS[:3], "en")
