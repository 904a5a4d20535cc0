"""The server's limits against unkind requests: answer size, deadlines, body size, the line, health."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from fastapi.testclient import TestClient
from pydantic import ValidationError

from aiayn.decode.rules import SearchStopped
from aiayn.decode.translator import Translator
from aiayn.serve import ServeSettings, create_app
from aiayn.serve.schemas import MAX_TEXT_CHARS, MAX_TEXTS, TranslateRequest

WORDS = ["el", "gato", "come", "la", "casa", "grande", "un", "perro", "verde", "bebe", "agua", "sol"]


def _post(client, body):
    return client.post("/v1/translate", json=body)


class Waiting:
    """Wraps a Translator: translate_batch() waits until `gate` is set or (if it listens) `should_stop()`."""

    def __init__(self, translator: Translator, listens: bool = True):
        self.inner, self.listens = translator, listens
        self.config, self.info, self.bundle = translator.config, translator.info, translator.bundle
        self.gate, self.entered, self.stopped = threading.Event(), threading.Event(), threading.Event()

    def translate_batch(self, texts, options, should_stop, **kwargs):
        self.entered.set()
        while not self.gate.wait(timeout=0.005):
            if self.listens and should_stop():
                self.stopped.set()
                raise SearchStopped("stopped")
        return self.inner.translate_batch(texts, options, should_stop=should_stop, **kwargs)

    def attention_maps(self, src_ids, tokens):
        return self.inner.attention_maps(src_ids, tokens)

    def encode_inputs(self, texts, prefix=None, constraints=None, target_language=None):
        return self.inner.encode_inputs(texts, prefix, constraints, target_language)


# --- 1. attention answers are bounded --------------------------------------------------------


def test_attention_is_for_one_short_text(translator):
    settings = ServeSettings(max_attention_tokens=8)
    with TestClient(create_app(translator, settings)) as client:
        response = _post(client, {"text": ["sol", "agua"], "attention": True})
        assert response.status_code == 413
        assert response.json() == {"detail": "attention comes for one text per request; this one has 2"}
        text = " ".join(WORDS)
        n = len(translator.encode([text])[0])
        response = _post(client, {"text": text, "attention": True})
        assert response.status_code == 413 and n > 8
        assert response.json() == {"detail": f"attention: the text has {n} tokens with </s>; the limit is 8"}
        assert _post(client, {"text": text}).status_code == 200  # without attention it is fine
        limits = client.get("/v1/model").json()["limits"]
        assert limits["attention_texts"] == 1 and limits["max_attention_tokens"] == 8


def test_attention_output_is_cut_at_the_bound(translator):
    text = "un perro verde bebe agua"
    (full,) = translator.translate_batch([text])
    src_len = len(translator.encode([text])[0])
    bound = max(src_len, len(full[0].tokens))  # the output gets bound - 1 tokens + </s>: shorter than it was
    assert len(full[0].tokens) >= bound - 1 >= 1
    with TestClient(create_app(translator, ServeSettings(max_attention_tokens=bound))) as client:
        (got,) = _post(client, {"text": text, "attention": True}).json()["translations"]
    (cut,) = translator.translate_batch([text], max_len_a=0.0, max_len_b=bound - 1)
    attn = got["attention"]
    assert got["text"] == cut[0].text and len(attn["tgt_tokens"]) == len(cut[0].tokens) + 1 <= bound
    ref = translator.attention_maps(translator.encode([text])[0], cut[0].tokens)
    torch.testing.assert_close(torch.tensor(attn["cross"]), torch.stack(ref["cross"]), atol=5.1e-5, rtol=0)


# --- 2. the work of a request stops with it; what cannot finish does not start ------------------


def test_work_past_the_deadline_stops(translator):
    waiting = Waiting(translator)
    with TestClient(create_app(waiting, ServeSettings(timeout=0.2))) as client:
        response = _post(client, {"text": "el gato"})
        assert response.status_code == 503
        assert waiting.stopped.wait(timeout=30)  # the model thread left the search by itself
        assert client.get("/v1/health").json() == {"status": "ok"}
        waiting.gate.set()  # the server recovers (tries: a loaded machine may need more than 0.2 s)
        assert any(_post(client, {"text": "el gato"}).status_code == 200 for _ in range(20))


def _scope(headers: dict[str, str]) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/translate",
        "raw_path": b"/v1/translate",
        "query_string": b"",
        "root_path": "",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
        "state": {},
    }


def _asgi(client: TestClient, headers: dict[str, str], messages: list[dict]) -> tuple[list[dict], int]:
    """Drive the app with raw ASGI messages (then a disconnect); what it sent, and how many it read."""
    sent, read = [], 0

    async def receive():
        nonlocal read
        read += 1
        if read <= len(messages):
            return messages[read - 1]
        while not sent:
            await asyncio.sleep(0.01)  # the client waits for the answer ...
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    async def call():
        await client.app(_scope(headers), receive, send)

    client.portal.call(call)
    return sent, read


def test_a_client_that_disconnects_stops_its_work(translator):
    waiting = Waiting(translator)
    body = json.dumps({"text": "el gato"}).encode()
    with TestClient(create_app(waiting)) as client:
        sent = []

        async def receive():
            if not sent:
                sent.append(True)
                return {"type": "http.request", "body": body, "more_body": False}
            while not waiting.entered.is_set():
                await asyncio.sleep(0.01)
            return {"type": "http.disconnect"}  # ... and leaves while its text is in the model thread

        async def call():
            answer = []

            async def send(message):
                answer.append(message)

            await client.app(_scope({"content-type": "application/json"}), receive, send)
            return answer[0]["status"]

        assert client.portal.call(call) == 499
        assert waiting.stopped.wait(timeout=30)


def test_a_request_over_the_work_budget_is_refused(translator):
    with TestClient(create_app(translator, ServeSettings(max_work=400))) as client:
        texts = ["el gato come", "sol"]
        lens = [len(ids) + 50 for ids in translator.encode(texts)]
        assert 4 * sum(lens) > 400 >= 4 * lens[0]
        response = _post(client, {"text": texts})
        assert response.status_code == 413
        assert response.json() == {
            "detail": f"this request could take {4 * sum(lens):,} decoding steps (texts x beam 4 x up to "
            "|source| + 50 output tokens); the limit is 400"
        }
        assert _post(client, {"text": texts[0]}).status_code == 200
        assert _post(client, {"text": texts, "beam_size": 1}).status_code == 200


# --- 3. bodies are limited before they are read and parsed ----------------------------------------


def test_a_declared_large_body_is_refused_unread(translator):
    settings = ServeSettings(max_batch=2, max_chars=10)
    limit = settings.max_body_bytes
    with TestClient(create_app(translator, settings)) as client:
        headers = {"content-type": "application/json", "content-length": str(10**9)}
        sent, read = _asgi(client, headers, [{"type": "http.request", "body": b"{}", "more_body": False}])
        assert read == 0 and sent[0]["status"] == 413 and (b"connection", b"close") in sent[0]["headers"]
        detail = (
            f"the body has 1,000,000,000 bytes; the limit is {limit:,} (--max-batch texts of --max-chars)"
        )
        assert json.loads(sent[1]["body"]) == {"detail": detail}
        assert client.get("/v1/model").json()["limits"]["max_body_bytes"] == limit == 4096 + 2 * (12 * 10 + 8)


def test_a_streamed_large_body_stops_being_read_at_the_limit(translator):
    settings = ServeSettings(max_batch=2, max_chars=10)
    with TestClient(create_app(translator, settings)) as client:
        chunk = b" " * 1000  # JSON whitespace: only its size is wrong
        messages = [{"type": "http.request", "body": chunk, "more_body": i < 999} for i in range(1000)]
        sent, read = _asgi(client, {"content-type": "application/json"}, messages)
        assert sent[0]["status"] == 413 and read == settings.max_body_bytes // 1000 + 1
        assert json.loads(sent[1]["body"])["detail"].startswith(
            "the body has over 4,352 bytes; the limit is 4,352"
        )
        assert _post(client, {"text": ["a" * 10] * 2}).status_code == 200


def test_the_schema_bounds_lists_and_strings():
    with pytest.raises(ValidationError, match="4097 texts in one request; the limit is 4096"):
        TranslateRequest.model_validate({"text": [""] * (MAX_TEXTS + 1)})
    for text in ("a" * (MAX_TEXT_CHARS + 1), ["a" * (MAX_TEXT_CHARS + 1)]):
        with pytest.raises(ValidationError, match="text 1 has 100001 characters; the limit is 100000"):
            TranslateRequest.model_validate({"text": text})


# --- 4. the line is bounded ----------------------------------------------------------------------


def test_a_full_line_is_503_with_retry_after_at_once(translator):
    waiting = Waiting(translator)
    settings = ServeSettings(max_batch=1, max_queue=2, batch_wait_ms=0)
    with TestClient(create_app(waiting, settings)) as client, ThreadPoolExecutor(2) as pool:
        first = pool.submit(_post, client, {"text": "el gato"})
        assert waiting.entered.wait(timeout=30)
        second = pool.submit(_post, client, {"text": "sol"})
        batcher = client.app.state.batcher
        for _ in range(3000):
            if batcher.queued == 1:
                break
            threading.Event().wait(0.01)
        response = _post(client, {"text": "agua"})  # answered while the model thread is still busy
        assert not waiting.gate.is_set() and response.status_code == 503
        assert response.headers["retry-after"] == "1"
        assert response.json() == {
            "detail": "the server is busy: 2 texts wait for the model; the limit is 2; try again in 1 s"
        }
        waiting.gate.set()
        assert first.result().status_code == second.result().status_code == 200


# --- 5. health tells the truth ------------------------------------------------------------------


def test_health_is_503_while_the_model_thread_is_stuck(translator):
    waiting = Waiting(translator, listens=False)  # a model call that hangs
    with TestClient(create_app(waiting, ServeSettings(timeout=0.1))) as client:
        assert _post(client, {"text": "el gato"}).status_code == 503
        for _ in range(3000):
            if client.get("/v1/health").status_code == 503:
                break
            threading.Event().wait(0.01)
        health = client.get("/v1/health")
        assert health.status_code == 503 and health.json()["status"] == "unavailable"
        assert health.json()["detail"].startswith("the model thread is stuck")
        waiting.gate.set()
