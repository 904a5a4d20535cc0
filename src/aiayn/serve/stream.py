"""POST /v1/translate/stream: a document translated sentence by sentence, as server-sent events.

The document is split as `aiayn translate --document` splits it (aiayn.decode.document: paragraphs
at blank lines, Moses' sentence rules), every sentence goes to the micro-batcher as a request of
its own (so they share model calls with each other and with other clients), and each is sent as
soon as it and the sentences before it are done, in document order:

    event: sentence
    data: {"index": 0, "paragraph": 0, "source": "...", "text": "...", "score": ..., "log_prob": ...}

then `event: done` with the whole translated document (`{"text": ..., "sentences": n}`), or
`event: error` with `{"detail": ..., "index": i}` if a sentence fails (nothing follows it). The
limits of /v1/translate hold before the first event (413 as JSON): at most --max-batch sentences
of at most --max-chars characters, and the work budget over all of them; what no split can bring
within them (a word over --max-chars, more characters than --max-batch sentences hold, more
paragraphs than --max-batch) is refused before splitting, and splitting (linear in the text:
aiayn.decode.document) runs in a worker thread, never on the event loop. A client that
disconnects stops the work of the sentences not yet done.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from aiayn.decode.document import (
    Document,
    bounds,
    join_document,
    paragraph_count,
    split_document,
)
from aiayn.errors import AiaynError
from aiayn.serve.batch import items_of, request_target
from aiayn.serve.limits import ClientError, ServeSettings, text_costs
from aiayn.serve.schemas import StreamRequest, too_long

log = logging.getLogger("aiayn.serve")

Submit = Callable[[list[Any], Any, list[int]], Coroutine]  # (items, options, costs) -> results


def event(name: str, data: dict[str, Any]) -> bytes:
    """One server-sent event (its data is one line of JSON)."""
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def check_before_splitting(text: str, settings: ServeSettings) -> None:
    """ClientError 413 for a document that no split brings within the limits, found in a few linear
    passes (aiayn.decode.document.bounds): a word over max_chars (a sentence holds whole words), more
    characters besides spaces than max_batch sentences of max_chars hold, a stretch of over max_chars
    where no sentence can end, more paragraphs with words than max_batch sentences."""
    found, longest, most = bounds(text), settings.max_chars, settings.max_batch
    if found.longest_word > longest:
        raise ClientError(413, too_long("a word of the document", found.longest_word, longest))
    if found.solid > most * longest:
        raise ClientError(
            413,
            f"the document has {found.solid} characters besides spaces; the limit is {most * longest} "
            f"({most} sentences of {longest})",
        )
    if found.unbroken > longest:
        detail = (
            f"a sentence of the document has at least {found.unbroken} characters; the limit is {longest}"
        )
        raise ClientError(413, detail)
    paragraphs = paragraph_count(text, most)
    if paragraphs > most:
        detail = (
            f"the document has over {most} paragraphs, so as many sentences at least; the limit is {most}"
        )
        raise ClientError(413, detail)


def split_checked(body: StreamRequest, language: str, settings: ServeSettings) -> Document:
    """The document's sentences, within the request limits (else ClientError 413): the limits
    that need no split are checked first. Work linear in the text, for a worker thread."""
    check_before_splitting(body.text, settings)

    def check(ended: int, open_chars: int) -> None:  # the split stops as soon as a limit is past
        most, longest = settings.max_batch, settings.max_chars
        if ended > most:
            raise ClientError(413, f"the document has over {most} sentences; the limit is {most}")
        if open_chars > longest:
            detail = f"sentence {ended + 1} has at least {open_chars} characters; the limit is {longest}"
            raise ClientError(413, detail)

    doc = split_document(body.text, language, check)
    if len(doc.sentences) > settings.max_batch:
        raise ClientError(
            413, f"the document has {len(doc.sentences)} sentences; the limit is {settings.max_batch}"
        )
    for i, sentence in enumerate(doc.sentences):
        if len(sentence) > settings.max_chars:  # counted from 1 (the events' "index" from 0)
            raise ClientError(413, too_long(f"sentence {i + 1}", len(sentence), settings.max_chars))
    return doc


def paragraph_of(doc: Document) -> list[int]:
    """The paragraph index of each sentence."""
    return [p for p, count in enumerate(doc.shape) for _ in range(count)]


async def sentence_events(
    doc: Document, items: list[Any], options: Any, costs: list[int], submit: Submit
) -> AsyncIterator[bytes]:
    """The events of one document: submit every sentence now, send each in order when done."""
    tasks = [
        asyncio.ensure_future(submit([item], options, [cost]))
        for item, cost in zip(items, costs, strict=True)
    ]
    paragraphs, texts = paragraph_of(doc), []
    try:
        for i, task in enumerate(tasks):
            try:
                (result,) = await task
            except ClientError as err:
                yield event("error", {"detail": err.detail, "index": i})
                return
            except AiaynError as err:
                yield event("error", {"detail": str(err), "index": i})
                return
            except Exception:  # a bug: still an event the client reads, and the traceback in the log
                log.exception("sentence %d of a streamed document failed", i)
                yield event("error", {"detail": "internal error (the server's log has it)", "index": i})
                return
            texts.append(result.text)
            yield event(
                "sentence",
                {
                    "index": i,
                    "paragraph": paragraphs[i],
                    "source": doc.sentences[i],
                    "text": result.text,
                    "score": result.score,
                    "log_prob": result.log_prob,
                },
            )
        yield event("done", {"text": join_document(doc, texts), "sentences": len(texts)})
    finally:  # finished, failed or the client has gone: no work is left for anyone
        for task in tasks:
            task.cancel()


def document_items(
    translator: Any, body: StreamRequest, settings: ServeSettings
) -> tuple[Document, list[Any], list[int]]:
    """The document split (split_checked), its sentences as batch items (aiayn.serve.batch),
    each tokenized once, and each one's work, the budget checked over all of them. For a worker
    thread: the work is linear in the document, but not small."""
    doc = split_checked(body, translator.info.get("src_lang") or "en", settings)
    encoded = translator.encode_inputs(doc.sentences, target_language=request_target(translator, body.target))
    sources = encoded.sources(translator.config.eos_id)
    costs = text_costs(sources, translator.config, body.beam_size, False, settings)
    return doc, items_of(doc.sentences, encoded), costs
