"""POST /v1/translate/stream's document (aiayn.serve.stream): what no split brings within the limits
is refused before splitting, and splitting runs off the event loop."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from aiayn.decode import document
from aiayn.serve import ServeSettings, stream

PARAGRAPHS = "paragraphs, so as many sentences at least"


@pytest.fixture(scope="module")
def settings() -> ServeSettings:
    return ServeSettings(max_batch=8, max_chars=2000)  # a body of 196,256 bytes


@pytest.mark.parametrize(
    "text, message",
    [
        ("." * 100_000, "a word of the document has 100000 characters; the limit is 2000"),
        (
            "sol " * 6000,
            "the document has 18000 characters besides spaces; the limit is 16000 (8 sentences of 2000)",
        ),
        (". " * 5000, "a sentence of the document has at least 5000 characters; the limit is 2000"),
        ("tú." + " él" * 999, "a sentence of the document has at least 2001 characters; the limit is 2000"),
        ("Sol.\n\n" * 9, "the document has over 8 paragraphs, so as many sentences at least; the limit is 8"),
        (
            "a\n\n" * 15_000,
            "the document has over 8 paragraphs, so as many sentences at least; the limit is 8",
        ),
    ],
)
def test_what_no_split_brings_within_the_limits_is_refused_before_splitting(
    client, monkeypatch, text, message
):
    monkeypatch.setattr(stream, "split_document", lambda *args: pytest.fail("the document was split"))
    response = client.post("/v1/translate/stream", json={"text": text})
    assert response.status_code == 413 and response.json() == {"detail": message}


def test_the_document_is_split_off_the_event_loop(client, monkeypatch):
    """A split that takes long holds up nobody: /v1/health answers while it runs."""
    split, entered, gate, released = stream.split_document, threading.Event(), threading.Event(), []

    def slow_split(text: str, language: str, check):
        with pytest.raises(RuntimeError):  # no event loop runs in this thread
            asyncio.get_running_loop()
        entered.set()
        released.append(gate.wait(timeout=5))  # False if health had to wait for it
        return split(text, language, check)

    monkeypatch.setattr(stream, "split_document", slow_split)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(client.post, "/v1/translate/stream", json={"text": "Sol. Luna."})
        assert entered.wait(timeout=5)
        assert client.get("/v1/health").json() == {"status": "ok"}
        gate.set()
        response = pending.result(timeout=60)
    assert released == [True]
    assert response.status_code == 200 and response.text.count("event: sentence") == 2


@pytest.mark.parametrize(
    "text, message",
    [
        ("Sr. Pérez " * 700, "sentence 1 has at least 2559 characters; the limit is 2000"),
        ("Sol. " * 3_000, "the document has over 8 sentences; the limit is 8"),
    ],
)
def test_the_split_stops_as_soon_as_a_limit_is_past(client, monkeypatch, text, message):
    """A document within the limits that need no split is split only until one is past: a few
    windows of the splitter, not the whole document."""
    split, calls = document._splitter("es"), []

    class Counted:
        def split(self, text: str) -> list[str]:
            calls.append(text)
            return split.split(text)

    monkeypatch.setattr(document, "_splitter", lambda language: Counted())
    response = client.post("/v1/translate/stream", json={"text": text})
    assert response.status_code == 413 and response.json() == {"detail": message}
    assert len(calls) <= 5


def test_any_failure_of_a_sentence_is_an_error_event(caplog):
    """A failure other than a client's or aiayn's own used to drop the connection."""

    async def failing(items, options, costs):
        raise IndexError("index 90 is out of bounds")

    async def events():
        doc = document.split_document("Sol. Luna.", "es")
        return [e async for e in stream.sentence_events(doc, [1, 2], None, [1, 1], failing)]

    sent = asyncio.run(events())
    assert len(sent) == 1 and sent[0].startswith(b"event: error\n"), sent
    assert b"internal error" in sent[0] and "IndexError" in caplog.text
