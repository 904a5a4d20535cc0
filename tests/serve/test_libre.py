"""The LibreTranslate-compatible endpoints (aiayn.serve.libre): the request and answer shapes of
LibreTranslate's API documentation and of its own API tests, JSON and form bodies, its error shape
and codes, API keys, and the same batcher and limits as /v1. The real `libretranslatepy` client
talks to a running `aiayn serve` at the end."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.error

import httpx
import pytest
from fastapi.testclient import TestClient

from aiayn.decode.translator import Translator
from aiayn.errors import AiaynError
from aiayn.serve import ServeSettings, create_app
from aiayn.serve.api_keys import ApiKeys
from aiayn.serve.batcher import QueueFull
from toy import LEXICON_DE

KEY = "k3y-for-tests"


@pytest.fixture(scope="module")
def keyed(translator, tmp_path_factory):
    """A client of a server started with a key file holding KEY."""
    path = tmp_path_factory.mktemp("keys") / "keys.txt"
    path.write_text(f"{KEY}\n")
    with TestClient(create_app(translator, ServeSettings(), api_keys=ApiKeys.read(path))) as client:
        yield client


def _v1(client, text, **fields) -> list[str]:
    response = client.post("/v1/translate", json={"text": text, **fields})
    return [t["text"] for t in response.json()["translations"]]


# The examples of LibreTranslate's API documentation (docs.libretranslate.com, "API Usage"), with
# this model's languages (es -> en) in place of theirs.


def test_simple_translation(client):
    response = client.post(
        "/translate", json={"q": "el gato come", "source": "es", "target": "en", "api_key": ""}
    )
    assert response.status_code == 200
    assert response.json() == {"translatedText": _v1(client, "el gato come")[0]}
    assert response.json()["translatedText"] == "the cat eats"


def test_auto_detection_of_the_source_language(client):
    response = client.post(
        "/translate", json={"q": "la casa grande y el perro verde", "source": "auto", "target": "en"}
    )
    answer = response.json()
    assert set(answer) == {"detectedLanguage", "translatedText"}
    assert answer["detectedLanguage"]["language"] == "es"
    assert 0 < answer["detectedLanguage"]["confidence"] <= 100


def test_alternative_translations(client):
    response = client.post(
        "/translate", json={"q": "el gato come", "source": "es", "target": "en", "alternatives": 3}
    )
    answer = response.json()
    assert set(answer) == {"alternatives", "translatedText"}
    v1 = client.post("/v1/translate", json={"text": "el gato come", "beam_size": 4, "n_best": 4}).json()
    hypotheses = [h["text"] for h in v1["translations"][0]["hypotheses"]]
    assert [answer["translatedText"], *answer["alternatives"]] == hypotheses


def test_html_is_refused_for_now(client):
    response = client.post(
        "/translate",
        json={"q": '<p class="green">el gato</p>', "source": "es", "target": "en", "format": "html"},
    )
    assert response.status_code == 400 and "format html is not supported" in response.json()["error"]


# The cases of LibreTranslate's own API tests (libretranslate/tests/test_api), same shapes.


def test_a_form_body_as_libretranslate_reads_it(client):
    response = client.post(
        "/translate", data={"q": "el perro", "source": "es", "target": "en", "format": "text"}
    )
    assert response.status_code == 200 and response.json() == {"translatedText": _v1(client, "el perro")[0]}


def test_a_list_gives_lists(client):
    texts = ["el gato", "la luna", "agua"]
    answer = client.post(
        "/translate", json={"q": texts, "source": "auto", "target": "en", "alternatives": 1}
    ).json()
    assert answer["translatedText"] == _v1(client, texts)
    assert len(answer["alternatives"]) == 3 and all(len(a) == 1 for a in answer["alternatives"])
    assert [d["language"] for d in answer["detectedLanguage"]] == ["es"] * 3


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"source": "es", "target": "en"}, 400, "Invalid request: missing q parameter"),
        ({"q": [], "source": "es", "target": "en"}, 400, "Invalid request: missing q parameter"),
        ({"q": "el", "target": "en"}, 400, "Invalid request: missing source parameter"),
        ({"q": "el", "source": "es"}, 400, "Invalid request: missing target parameter"),
        ({"q": "el", "source": "es", "target": "zz"}, 400, "zz is not supported (this model has en)"),
        ({"q": "el", "source": "zz", "target": "en"}, 400, "zz is not supported (this model has es)"),
        ({"q": "el", "source": "es", "target": "en", "format": "xml"}, 400, "xml format is not supported"),
        (
            {"q": "el", "source": "es", "target": "en", "alternatives": "abc"},
            400,
            "Invalid request: alternatives parameter is not a number",
        ),
    ],
)
def test_bad_requests_in_libretranslates_shape(client, body, status, error):
    for sent in ({"json": body}, {"data": {k: str(v) for k, v in body.items() if not isinstance(v, list)}}):
        if "data" in sent and body.get("q") == []:
            continue
        response = client.post("/translate", **sent)
        assert (response.status_code, response.json()) == (status, {"error": error})


def test_malformed_bodies(client):
    for content in (b'["not", "a", "dict"]', b"{nope", b'{"q": ' * 100_000):
        response = client.post("/translate", content=content, headers={"content-type": "application/json"})
        assert (response.status_code, response.json()) == (400, {"error": "Invalid JSON format"})
    assert client.get("/detect").status_code == 405 and "error" in client.get("/detect").json()
    response = client.post("/detect")
    assert response.status_code == 400 and response.json() == {
        "error": "Invalid request: missing q parameter"
    }
    lone = client.post(
        "/translate",
        content=b'{"q": "\\ud800", "source": "es", "target": "en"}',
        headers={"content-type": "application/json"},
    )
    assert lone.status_code == 400 and "not valid Unicode" in lone.json()["error"]


def test_detect(client):
    response = client.post("/detect", data={"q": "This is an English sentence for detection"})
    assert response.status_code == 200
    (best, *_) = response.json()
    assert best["language"] == "en" and 0 < best["confidence"] <= 100
    both = client.post("/detect", json={"q": ["This is an English sentence", "Esta es una frase en español"]})
    assert [found[0]["language"] for found in both.json()] == ["en", "es"]


def test_languages(client, toy_multilingual_model_dir):
    assert client.get("/languages").json() == [
        {"code": "es", "name": "Spanish", "targets": ["en"]},
        {"code": "en", "name": "English", "targets": []},
    ]
    multilingual = Translator.load(toy_multilingual_model_dir, device="cpu")
    with TestClient(create_app(multilingual)) as multi:
        assert multi.post("/languages").json()[0] == {
            "code": "es",
            "name": "Spanish",
            "targets": ["de", "en"],
        }
        answer = multi.post("/translate", json={"q": ["el gato", "la casa"], "source": "es", "target": "de"})
        assert set(" ".join(answer.json()["translatedText"]).split()) <= set(LEXICON_DE.values())


# The same limits, batcher and protections as /v1 (aiayn.serve.limits, batcher, connections).


def test_the_limits_of_v1_answer_in_libretranslates_shape(translator):
    with TestClient(create_app(translator, ServeSettings(max_batch=2, max_chars=20))) as client:
        many = client.post("/translate", json={"q": ["a", "b", "c"], "source": "es", "target": "en"})
        assert (many.status_code, many.json()) == (400, {"error": "3 texts in one request; the limit is 2"})
        long = client.post("/translate", json={"q": "el gato " * 5, "source": "es", "target": "en"})
        assert (long.status_code, long.json()) == (
            400,
            {"error": "text 1 has 40 characters; the limit is 20"},
        )
        detect = client.post("/detect", json={"q": ["a", "b", "c"]})
        assert detect.status_code == 400
        huge = client.post("/translate", content=b"q=" + b"a" * 200_000, headers={"content-type": "x"})
        assert huge.status_code == 413 and huge.json()["error"].startswith("the body has 200,002 bytes")
        v1 = client.post("/v1/translate", json={"text": ["a", "b", "c"]})
        assert (v1.status_code, v1.json()) == (413, {"detail": "3 texts in one request; the limit is 2"})


def test_a_full_line_is_429_with_retry_after(translator, monkeypatch):
    app = create_app(translator)
    with TestClient(app) as client:

        async def full(*args, **kwargs):
            raise QueueFull("1024 texts wait for the model; the limit is 1024")

        monkeypatch.setattr(app.state.batcher, "submit", full)
        response = client.post("/translate", json={"q": "el gato", "source": "es", "target": "en"})
        assert response.status_code == 429 and response.headers["retry-after"] == "1"
        assert response.json()["error"].startswith("the server is busy: 1024 texts wait")
        assert client.post("/v1/translate", json={"text": "el gato"}).status_code == 503  # /v1 as before


def test_libretranslate_and_v1_requests_share_model_calls(translator):
    app = create_app(translator, ServeSettings(batch_wait_ms=200))
    with TestClient(app) as client:
        before = app.state.batcher.calls

        async def both():
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
                return await asyncio.gather(
                    http.post(
                        "/translate", json={"q": ["el gato", "la luna"], "source": "es", "target": "en"}
                    ),
                    http.post("/v1/translate", json={"text": ["agua verde"]}),
                )

        libre, v1 = client.portal.call(both)
        assert app.state.batcher.calls - before == 1
    expected = [t[0].text for t in translator.translate_batch(["el gato", "la luna", "agua verde"])]
    assert libre.json()["translatedText"] == expected[:2]
    assert v1.json()["translations"][0]["text"] == expected[2]


def test_api_keys(keyed):
    body = {"q": "el gato", "source": "es", "target": "en"}
    missing = keyed.post("/translate", json=body)
    assert (missing.status_code, missing.json()) == (
        400,
        {"error": "Please contact the server operator to get an API key"},
    )
    wrong = keyed.post("/translate", data={**body, "api_key": "bogus-key"})
    assert (wrong.status_code, wrong.json()) == (403, {"error": "Invalid API key"})
    assert keyed.post("/detect", json={"q": "hola", "api_key": "nope"}).status_code == 403
    assert keyed.post("/translate", json={**body, "api_key": KEY}).json() == {"translatedText": "the cat"}
    assert keyed.get("/languages").status_code == 200  # as in LibreTranslate: no key needed
    assert keyed.post("/v1/translate", json={"text": "el gato"}).status_code == 200  # /v1 stays open


def test_a_key_file(tmp_path):
    path = tmp_path / "keys.txt"
    path.write_text("# operators\nfirst-key\n\n  second-key  \n")
    keys = ApiKeys.read(path)
    assert keys.check("first-key") is None and keys.check("second-key") is None
    assert keys.check("first") == (403, "Invalid API key") and keys.check(None)[0] == 400
    for text, message in (("# none\n\n", "no keys in it"), ("a b\n", r"keys.txt:1: a key is one word")):
        path.write_text(text)
        with pytest.raises(AiaynError, match=message):
            ApiKeys.read(path)
    with pytest.raises(AiaynError, match="cannot read it"):
        ApiKeys.read(tmp_path / "missing.txt")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_the_libretranslatepy_client_against_a_running_server(toy_model_dir, tmp_path):
    from libretranslatepy import LibreTranslateAPI

    (tmp_path / "keys.txt").write_text(f"{KEY}\n")
    port = _free_port()
    command = [sys.executable, "-m", "aiayn", "serve", str(toy_model_dir), "--port", str(port),
               "--api-keys", str(tmp_path / "keys.txt")]  # fmt: skip
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(600):
            assert proc.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if httpx.get(url + "v1/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        client = LibreTranslateAPI(url, api_key=KEY)
        assert client.translate("el gato come", "es", "en") == "the cat eats"
        assert client.languages() == [
            {"code": "es", "name": "Spanish", "targets": ["en"]},
            {"code": "en", "name": "English", "targets": []},
        ]
        assert client.detect("Esta es una frase en español")[0]["language"] == "es"
        with pytest.raises(urllib.error.HTTPError) as refused:
            LibreTranslateAPI(url, api_key="wrong").translate("el gato", "es", "en")
        assert refused.value.code == 403
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
