"""The HTTP API and the page: a FastAPI app around a `Translator` (beam search of section 6.1).

    POST /v1/translate   {"text": "..." | ["...", ...], "beam_size"?, "alpha"?, "n_best"?, "attention"?,
                          "prefix"?, "constraints"?, "sample"?, "align"?, "target"?}
    POST /v1/translate/stream  {"text": a document, ...}: server-sent events, a sentence at a time
    GET  /v1/health      {"status": "ok"}, or 503 when the model thread is stuck or the batcher stopped
    GET  /v1/model       languages (a multilingual model's target_languages), parameter count,
                         model config, limits
    GET  /               the page: translate and look at attention (section 7's figures)
    GET  /docs           OpenAPI docs
    POST /translate, POST /detect, GET /languages   LibreTranslate's API (aiayn.serve.libre), through
                         the same batcher and limits; `api_keys` (aiayn.serve.api_keys) guards them

Requests go through a `MicroBatcher` (aiayn.serve.batch: each text tokenized once, its ids carried
to the search); every error is JSON {"detail": ...} (aiayn.serve.handlers): 422 for a malformed
request, 413 past a limit (aiayn.serve.limits: body, texts, characters, attention, work), 503 past
the timeout, when the line is full (with Retry-After) or while shutting down. A request's model work
stops at the next search step once its deadline passes or its client disconnects. Texts are checked
and tokenized, documents split, and answers written to JSON in worker threads, outside the event
loop, so a large one holds up nobody.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from aiayn import __version__
from aiayn.decode.languages import target_languages
from aiayn.serve.api_keys import ApiKeys
from aiayn.serve.batch import Item, Options, TranslatorLike, run_batch, text_items
from aiayn.serve.batcher import MicroBatcher, QueueFull, Unavailable
from aiayn.serve.connections import quiet_accept_errors
from aiayn.serve.handlers import add_error_handlers
from aiayn.serve.libre import Run, add_libre_routes
from aiayn.serve.limits import BodyLimit, ClientError, ServeSettings
from aiayn.serve.schemas import (
    Error,
    Limits,
    ModelInfo,
    StreamRequest,
    TranslateRequest,
    TranslateResponse,
    Translation,
)
from aiayn.serve.stream import document_items, sentence_events

__all__ = ["ServeSettings", "create_app"]
RETRY_AFTER_S = 1  # what a 503 for a full line tells the client to wait
# The page's files, read once from the package: no request names a file.
PAGE_FILES = {"index.html": "text/html", "app.js": "text/javascript", "style.css": "text/css"}


def model_info(translator: TranslatorLike, settings: ServeSettings) -> ModelInfo:
    info, config = translator.info, translator.config
    tokens = settings.max_attention_tokens
    weights = config.n_heads * tokens**2 * (config.n_layers + 2 * config.decoder_layers)
    limits = Limits(
        max_batch=settings.max_batch,
        max_chars=settings.max_chars,
        timeout=settings.timeout,
        max_body_bytes=settings.max_body_bytes,
        max_work=settings.max_work,
        max_queue=settings.max_queue,
        attention_texts=1,
        max_attention_tokens=tokens,
        max_attention_weights=weights,
    )
    return ModelInfo(
        src_lang=info.get("src_lang"),
        tgt_lang=info.get("tgt_lang"),
        target_languages=target_languages(info),
        parameters=translator.bundle.model.num_parameters(),
        config=config.to_dict(),
        int8=translator.bundle.int8,
        limits=limits,
    )


def _page_files() -> dict[str, bytes]:
    static = resources.files("aiayn") / "static"
    return {name: (static / name).read_bytes() for name in PAGE_FILES}


def _add_page(app: FastAPI) -> None:
    files = _page_files()

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(files["index.html"])

    def static(name: str) -> Callable[[], Response]:  # no parameters: nothing a query string can set
        return lambda: Response(files[name], media_type=PAGE_FILES[name])

    for name in ("app.js", "style.css"):
        app.add_api_route(f"/static/{name}", static(name), include_in_schema=False)


async def _submit(
    batcher: MicroBatcher, items: list[Item], options: Options, costs: list[int], timeout: float
):
    """The batcher's answer, its refusals as ClientErrors (503)."""
    try:
        return await batcher.submit(items, options, costs, timeout)
    except TimeoutError:
        raise ClientError(503, f"the request took over {timeout:g} s; try again later") from None
    except QueueFull as err:
        detail = f"the server is busy: {err}; try again in {RETRY_AFTER_S} s"
        raise ClientError(503, detail, {"Retry-After": str(RETRY_AFTER_S)}, libre_status=429) from None
    except Unavailable as err:
        raise ClientError(503, str(err)) from None


async def _disconnected(request: Request) -> None:
    """Returns when the client disconnects (the body has been read: nothing else can arrive)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _unless_disconnected(request: Request, work: Coroutine) -> Any:
    """`work`'s result; if the client disconnects first, `work` is cancelled (and so its model work)."""
    task, gone = asyncio.ensure_future(work), asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait([task, gone], return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        task.cancel()  # nothing if it is done
    if not task.done() or task.cancelled():
        raise ClientError(499, "the client disconnected")  # nginx's code; nobody reads it
    return task.result()


def _json(results: list[Translation]) -> bytes:
    response = TranslateResponse(translations=results)
    return TranslateResponse.__pydantic_serializer__.to_json(response)  # bytes, without a str copy


def create_app(
    translator: TranslatorLike, settings: ServeSettings | None = None, api_keys: ApiKeys | None = None
) -> FastAPI:
    """The FastAPI app; the micro-batcher starts and stops with the app (its lifespan). `api_keys`:
    the keys the LibreTranslate-compatible endpoints require (None: open)."""
    settings = settings or ServeSettings()
    batcher = MicroBatcher(
        lambda items, options, stop: run_batch(
            translator, items, options, stop, settings.max_attention_tokens
        ),
        wait_ms=settings.batch_wait_ms,
        max_texts=settings.batch_texts,
        max_work=settings.batch_work,
        max_queue=settings.max_queue,
        stuck_after=settings.timeout,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        quiet_accept_errors(asyncio.get_running_loop())  # a flood of them is logged once a minute
        await batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(
        title="aiayn",
        summary="Transformer translation (Vaswani et al., 2017)",
        version=__version__,
        lifespan=lifespan,
    )
    app.state.batcher, app.state.settings = batcher, settings
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    add_error_handlers(app)
    _add_page(app)

    async def run(request: Request, items: list[Item], options: Options, costs: list[int]) -> list:
        """Items through the batcher, within the timeout, stopped if the client leaves."""
        return await _unless_disconnected(request, _submit(batcher, items, options, costs, settings.timeout))

    _add_translate_routes(app, translator, batcher, settings, run)
    _add_info_routes(app, translator, batcher, settings)
    add_libre_routes(app, translator, settings, api_keys, run)
    return app


def _add_translate_routes(
    app: FastAPI, translator: TranslatorLike, batcher: MicroBatcher, settings: ServeSettings, run: Run
) -> None:
    """POST /v1/translate and /v1/translate/stream: texts through the micro-batcher."""
    errors = {413: {"model": Error}, 503: {"model": Error}}

    @app.post("/v1/translate", response_model=TranslateResponse, responses=errors)
    async def translate(body: TranslateRequest, request: Request) -> Response:
        """Translate one text or a list; n-best hypotheses with scores; attention weights on request."""
        items, costs = await run_in_threadpool(text_items, translator, body, settings)
        options = Options(body.search, body.attention, body.sample, body.align)
        results = await run(request, items, options, costs)
        return Response(await run_in_threadpool(_json, results), media_type="application/json")

    @app.post("/v1/translate/stream", responses=errors, response_class=StreamingResponse)
    async def translate_stream(body: StreamRequest) -> StreamingResponse:
        """Translate a document sentence by sentence; each sentence is a server-sent event when done."""
        doc, items, costs = await run_in_threadpool(document_items, translator, body, settings)
        options = Options(body.search, sample=body.sample)

        def submit(items: list[Item], options: Options, costs: list[int]) -> Coroutine:
            return _submit(batcher, items, options, costs, settings.timeout)

        events = sentence_events(doc, items, options, costs, submit)
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}  # no proxy holds them back
        return StreamingResponse(events, media_type="text/event-stream", headers=headers)


def _add_info_routes(
    app: FastAPI, translator: TranslatorLike, batcher: MicroBatcher, settings: ServeSettings
) -> None:
    """GET /v1/health and /v1/model."""

    @app.get("/v1/health", responses={503: {"model": Error}})
    async def health() -> Response:
        """{"status": "ok"}, or 503 with the reason when no translation can come."""
        reason = batcher.health()
        if reason is not None:
            return JSONResponse({"status": "unavailable", "detail": reason}, status_code=503)
        return JSONResponse({"status": "ok"})

    info = model_info(translator, settings)

    @app.get("/v1/model", response_model=ModelInfo)
    async def model() -> ModelInfo:
        """Languages, parameter count, model config and this server's limits."""
        return info
