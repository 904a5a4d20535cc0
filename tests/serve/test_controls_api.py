"""Decoding controls in the server: prefix, constraints, sample and align fields, and the streaming
endpoint, each compared with `Translator.translate_batch` on the toy model (the reference the CLI is
tested against)."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

from aiayn.config import SamplingConfig
from aiayn.decode.document import split_document
from aiayn.decode.texts import translate_document, translate_texts
from aiayn.serve import ServeSettings, create_app
from aiayn.serve.schemas import Sample

TEXTS = ["el perro come", "la casa", "un gato verde bebe agua"]


@pytest.fixture(scope="module")
def settings() -> ServeSettings:
    return ServeSettings(max_batch=8, max_chars=200)


def _translations(client, body) -> list[dict]:
    response = client.post("/v1/translate", json=body)
    assert response.status_code == 200, response.text
    return response.json()["translations"]


def test_prefix_and_constraints_per_text(client, translator):
    prefix, constraints = ["a green", None, "a"], [None, ["moon", "big"], None]
    expected = translate_texts(translator, TEXTS, beam_size=4, prefix=prefix, constraints=constraints)
    got = _translations(client, {"text": TEXTS, "prefix": prefix, "constraints": constraints})
    assert [t["text"] for t in got] == expected
    assert got[0]["text"].startswith("a green") and "moon" in got[1]["text"] and "big" in got[1]["text"]
    (one,) = _translations(client, {"text": TEXTS[1], "constraints": ["moon"]})
    assert one["text"] == translate_texts(translator, [TEXTS[1]], constraints=[["moon"]])[0]


def test_samples_do_not_depend_on_batching(client, translator):
    """A text's samples are the same alone, in a list, or batched with other clients' texts."""
    sample = {"temperature": 1.5, "top_k": 5, "top_p": 0.9, "seed": 3}
    body = {"text": TEXTS, "sample": sample, "n_best": 3, "beam_size": 3}
    config = SamplingConfig(**sample)
    expected = translator.translate_batch(TEXTS, n_best=3, beam_size=3, sample=config)
    with ThreadPoolExecutor(4) as pool:  # concurrent: the batcher merges them into shared calls
        answers = list(pool.map(lambda _: _translations(client, body), range(4)))
    for got in answers:
        assert [[h["text"] for h in t["hypotheses"]] for t in got] == [[h.text for h in e] for e in expected]
    (alone,) = _translations(client, body | {"text": TEXTS[0]})
    assert [h["text"] for h in alone["hypotheses"]] == [h.text for h in expected[0]]


def test_sample_schema_checks_what_sampling_config_checks():
    for field in ("temperature", "top_k", "top_p", "seed"):
        assert Sample.model_fields[field].default == getattr(SamplingConfig(), field)
    with pytest.raises(ValueError, match="top_p"):
        Sample(top_p=1.5)


def test_align_returns_the_translators_pairs(client, translator):
    expected = translator.translate_batch(TEXTS, align=True)
    got = _translations(client, {"text": TEXTS, "align": True})
    assert [[tuple(p) for p in t["alignment"]] for t in got] == [e[0].alignment for e in expected]
    assert _translations(client, {"text": TEXTS[0]})[0]["alignment"] is None


@pytest.mark.parametrize(
    "body, message",
    [
        ({"text": TEXTS, "prefix": "a"}, "prefix: one entry per text"),
        ({"text": TEXTS, "prefix": ["a"]}, "prefix has 1 entries for 3 texts"),
        ({"text": "el sol", "prefix": ["a"]}, "prefix: for one text, a string"),
        ({"text": TEXTS, "constraints": ["moon"]}, "constraints: one entry per text"),
        ({"text": "el sol", "constraints": [["moon"]]}, "constraints: for one text, a list of strings"),
        ({"text": "el sol", "sample": {"top_p": 0}}, "top_p"),
    ],
)
def test_bad_controls_are_422_with_the_reason(client, body, message):
    response = client.post("/v1/translate", json=body)
    assert response.status_code == 422 and message in response.text


def test_a_bad_constraint_fails_its_own_request_only(client, translator):
    """An empty constraint is found in the model thread: the answer names the request's own text."""
    response = client.post("/v1/translate", json={"text": TEXTS, "constraints": [None, None, [" "]]})
    assert response.status_code == 400 and response.json()["detail"] == "text 3: constraint 1 is empty"
    assert _translations(client, {"text": TEXTS})[0]["text"] == translate_texts(translator, TEXTS[:1])[0]


def _events(response) -> list[tuple[str, dict]]:
    out = []
    for block in response.text.split("\n\n"):
        if block.strip():
            name, data = block.split("\n")
            out.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return out


def test_stream_sends_each_sentence_then_the_document(client, translator):
    doc = "El perro come. La casa es grande.\n\nUn gato bebe agua.\n"
    response = client.post("/v1/translate/stream", json={"text": doc, "beam_size": 2})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = _events(response)
    sentences = split_document(doc, "es").sentences
    expected = translator.translate_batch(sentences, beam_size=2)
    assert [name for name, _ in events] == ["sentence"] * 3 + ["done"]
    for i, (_, data) in enumerate(events[:3]):
        assert (data["index"], data["source"], data["text"]) == (i, sentences[i], expected[i][0].text)
        assert data["score"] == pytest.approx(expected[i][0].score, abs=1e-5)
    assert [data["paragraph"] for _, data in events[:3]] == [0, 0, 1]
    assert events[-1][1] == {"text": translate_document(translator, doc, beam_size=2), "sentences": 3}


def test_stream_limits_answer_before_the_first_event(client):
    response = client.post("/v1/translate/stream", json={"text": "Sol. " * 9})
    assert response.status_code == 413 and "the document has 9 sentences; the limit is 8" in response.text
    response = client.post("/v1/translate/stream", json={"text": "sol " * 60 + "."})
    assert response.status_code == 413 and "sentence 1 has 241 characters; the limit is 200" in response.text


def test_stream_of_an_empty_document(client):
    response = client.post("/v1/translate/stream", json={"text": "\n\n"})
    assert _events(response) == [("done", {"text": "\n\n", "sentences": 0})]


def test_stream_stops_the_work_when_the_client_goes(translator):
    """Cancelling the event generator (what Starlette does on a disconnect) cancels every sentence
    still waiting: the batcher is left with nothing to do."""
    from aiayn.serve.stream import sentence_events

    started, cancelled = [], []

    async def submit(items, options, costs):
        started.append(items[0])
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(items[0])
            raise

    async def main():
        doc = split_document("Uno. Dos. Tres.", "es")
        events = sentence_events(doc, doc.sentences, None, [1, 1, 1], submit)
        task = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await events.aclose()
        await asyncio.sleep(0)

    asyncio.run(main())
    assert started == ["Uno.", "Dos.", "Tres."] and sorted(cancelled) == sorted(started)


def test_a_prefix_or_constraints_count_in_the_limits(translator):
    """The search lengthens an output to hold its prefix or constraints: --max-work and the attention
    cap count those tokens, and refuse before any model work (413), not after a timeout."""
    settings = ServeSettings(max_batch=8, max_attention_tokens=8, max_work=300)
    long = "green " * 100
    with TestClient(create_app(translator, settings)) as c:
        assert c.post("/v1/translate", json={"text": "sol"}).status_code == 200  # 4 x (2 + 50) = 208
        for controls in ({"prefix": long}, {"constraints": [long]}):
            response = c.post("/v1/translate", json={"text": "sol", **controls})
            assert response.status_code == 413 and "decoding steps" in response.text, response.text
            response = c.post("/v1/translate", json={"text": "sol", "attention": True, **controls})
            assert response.status_code == 413, response.text
            expected = "attention: the prefix or constraints need 100 output tokens; the limit is 7"
            assert expected in response.text
        response = c.post("/v1/translate", json={"text": "sol", "prefix": "green", "attention": True})
        assert response.status_code == 200, response.text
        assert len(response.json()["translations"][0]["attention"]["tgt_tokens"]) <= 8
