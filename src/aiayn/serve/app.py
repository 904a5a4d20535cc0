"""The HTTP API and the page: a FastAPI app around a `Translator` (beam search of section 6.1).

    POST /v1/translate   {"text": "..." | ["...", ...], "beam_size"?, "alpha"?, "n_best"?, "attention"?,
                          "prefix"?, "constraints"?, "sample"?, "align"?}
    POST /v1/translate/stream  {"text": a document, ...}: server-sent events, a sentence at a time
    GET  /v1/health      {"status": "ok"}, or 503 when the model thread is stuck or the batcher stopped
    GET  /v1/model       languages, parameter count, model config, limits
    GET  /               the page: translate and look at attention (section 7's figures)
    GET  /docs           OpenAPI docs

Requests go through a `MicroBatcher`; every error is JSON {"detail": ...}: 422 for malformed JSON,
wrong types, numbers that are not finite, strings that are not Unicode or unknown fields (a list
of {"type", "loc", "msg"}: no input is echoed), 413 past a limit (aiayn.serve.limits: body, texts,
characters, attention, work; texts past the schema's bounds get the same answer), 503 past the
timeout, when the line is full (with Retry-After) or while shutting down. A request's model work
stops at the next search step once its deadline passes or its client disconnects. Answers are
written to JSON outside the event loop, so a large one holds up nobody.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from aiayn.config import DecodeConfig, SamplingConfig
from aiayn.errors import AiaynError
from aiayn.serve.batcher import MicroBatcher, QueueFull, StopHook, Unavailable
from aiayn.serve.limits import (
    BodyLimit,
    ClientError,
    ServeSettings,
    check_texts,
    forced_tokens,
    output_limits,
    text_costs,
)
from aiayn.serve.schemas import (
    TEXT_TOO_LONG,
    TOO_MANY_TEXTS,
    Attention,
    Error,
    Hypothesis,
    Limits,
    ModelInfo,
    Sample,
    StreamRequest,
    TranslateRequest,
    TranslateResponse,
    Translation,
    too_long,
    too_many_texts,
)
from aiayn.serve.stream import sentence_costs, sentence_events, split_checked

__all__ = ["ServeSettings", "create_app"]
log = logging.getLogger("aiayn.serve")
ATTENTION_DECIMALS = 4
RETRY_AFTER_S = 1  # what a 503 for a full line tells the client to wait
# The page's files, read once from the package: no request names a file.
PAGE_FILES = {"index.html": "text/html", "app.js": "text/javascript", "style.css": "text/css"}
# FastAPI answers 400 with this when a JSON body is not UTF-8; for us it is malformed JSON like any other.
BODY_PARSE_ERROR = "There was an error parsing the body"
ECHO_CHARS = 80  # the most of a request's own text (a field's name) that an error repeats


class TranslatorLike(Protocol):
    """What the server needs of `aiayn.decode.Translator`."""

    config: Any
    info: dict[str, Any]
    model: Any

    def translate(self, texts: list[str], options: DecodeConfig, **controls: Any): ...

    def attention_maps(self, src_ids: list[int], tokens: list[int]) -> dict[str, Any]: ...

    def encode(self, texts: list[str]) -> list[list[int]]: ...


@dataclass(frozen=True)
class Options:
    """Decoding options: requests share a model call only when these are equal."""

    search: DecodeConfig
    attention: bool = False
    sample: Sample | None = None
    align: bool = False


@dataclass
class Item:
    """One text of a request and what steers its search alone: the batcher's unit of work."""

    text: str
    prefix: str | None = None
    constraints: list[str] | None = None
    key: int = 0  # its index in its request: what seeds its samples, whatever the batching


def _rounded(weights: list[Any]) -> list:
    """Per-layer (heads, q, k) tensors -> nested lists rounded to ATTENTION_DECIMALS."""
    return [w.float().round(decimals=ATTENTION_DECIMALS).tolist() for w in weights]


def _attention(maps: dict[str, Any]) -> Attention:
    """The weights as nested lists of floats, built as the schema says (no validation pass: it
    would copy every list)."""
    return Attention.model_construct(
        src_tokens=maps["src_tokens"],
        tgt_tokens=maps["tgt_tokens"],
        **{kind: _rounded(maps[kind]) for kind in ("cross", "encoder", "decoder")},
    )


def _translation(hyps: list[Any], attention: Attention | None = None) -> Translation:
    best = hyps[0]
    listed = [Hypothesis(text=h.text, score=h.score, log_prob=h.log_prob) for h in hyps]
    return Translation(
        text=best.text,
        score=best.score,
        log_prob=best.log_prob,
        hypotheses=listed,
        attention=attention,
        alignment=best.alignment,
    )


def _controls(items: list[Item]) -> dict[str, Any]:
    """Translator.translate's per-text arguments for `items` (None where no text has one)."""
    prefixes, constraints = [i.prefix for i in items], [i.constraints for i in items]
    return {
        "prefix": prefixes if any(prefixes) else None,
        "constraints": constraints if any(constraints) else None,
        "keys": [i.key for i in items],
    }


def run_batch(
    translator: TranslatorLike,
    items: list[Item],
    options: Options,
    should_stop: StopHook,
    attention_tokens: int,
) -> list[Translation]:
    """One model call for texts that share `options` (runs in the model thread).

    With attention, each text is translated on its own, its output cut to attention_tokens tokens
    (with </s>), and the weights are those of exactly the translation returned.
    """
    sample = None if options.sample is None else SamplingConfig(**options.sample.model_dump())
    common = dict(return_scores=True, should_stop=should_stop, align=options.align, sample=sample)
    if not options.attention:
        found = translator.translate([i.text for i in items], options.search, **common, **_controls(items))
        return [_translation(h) for h in found]
    out = []
    for item in items:
        (src_ids,) = translator.encode([item.text])
        (longest,) = output_limits([src_ids], translator.config, attention_tokens)
        search = options.search.replace(max_len_a=0.0, max_len_b=longest)
        (hyps,) = translator.translate([item.text], search, **common, **_controls([item]))
        attention = None
        if src_ids:  # "" or "  " has no tokens: nothing to attend to
            attention = _attention(translator.attention_maps(src_ids, hyps[0].tokens))
        out.append(_translation(hyps, attention))
    return out


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
        parameters=translator.model.num_parameters(),
        config=config.to_dict(),
        int8=bool(getattr(translator, "int8", False)),
        limits=limits,
    )


def _page_files() -> dict[str, bytes]:
    static = resources.files("aiayn") / "static"
    return {name: (static / name).read_bytes() for name in PAGE_FILES}


def _printable(part: Any) -> Any:
    """A location part or message as valid, short UTF-8 (an unknown field's name is the client's)."""
    if not isinstance(part, str):
        return part
    part = part.encode("utf-8", "backslashreplace").decode()
    return part if len(part) <= ECHO_CHARS else part[:ECHO_CHARS] + "..."


def _plain(error: dict[str, Any]) -> dict[str, Any]:
    """A validation error without its input and context: they may be large, or no JSON (NaN)."""
    msg, ctx = error["msg"], error.get("ctx") or {}
    if error["type"] == "json_invalid" and isinstance(ctx.get("error"), str):
        msg = f"{msg}: {ctx['error']}"
    return {"type": error["type"], "loc": [_printable(p) for p in error["loc"]], "msg": _printable(msg)}


def _over_limit(errors: list[dict[str, Any]], settings: ServeSettings) -> ClientError | None:
    """Texts past the schema's bounds are past the server's limits too: its 413, with its limit."""
    for error in errors:
        ctx = error.get("ctx") or {}
        if error["type"] == TOO_MANY_TEXTS:
            return ClientError(413, too_many_texts(ctx["count"], settings.max_batch))
        if error["type"] == TEXT_TOO_LONG:
            return ClientError(413, too_long(ctx["what"], ctx["chars"], settings.max_chars))
    return None


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, err: RequestValidationError) -> JSONResponse:
        errors = list(err.errors())
        over = _over_limit(errors, request.app.state.settings)
        if over is not None:
            return JSONResponse({"detail": over.detail}, status_code=over.status)
        return JSONResponse({"detail": [_plain(e) for e in errors]}, status_code=422)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, err: HTTPException) -> Response:
        if err.status_code == 400 and err.detail == BODY_PARSE_ERROR:
            msg = "the body could not be read as JSON (not UTF-8, or nested too deeply)"
            error = {"type": "json_invalid", "loc": ["body"], "msg": msg}
            return JSONResponse({"detail": [error]}, status_code=422)
        return await http_exception_handler(request, err)

    @app.exception_handler(ClientError)
    async def _client_error(request: Request, err: ClientError) -> JSONResponse:
        return JSONResponse({"detail": err.detail}, status_code=err.status, headers=err.headers)

    @app.exception_handler(AiaynError)
    async def _aiayn_error(request: Request, err: AiaynError) -> JSONResponse:
        return JSONResponse({"detail": str(err)}, status_code=400)

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, err: Exception) -> JSONResponse:
        log.exception("error while serving %s", request.url.path)
        return JSONResponse({"detail": f"internal error: {type(err).__name__}"}, status_code=500)


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
        raise ClientError(503, detail, {"Retry-After": str(RETRY_AFTER_S)}) from None
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


def create_app(translator: TranslatorLike, settings: ServeSettings | None = None) -> FastAPI:
    """The FastAPI app; the micro-batcher starts and stops with the app (its lifespan)."""
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
        await batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(title="aiayn", summary="Transformer translation (Vaswani et al., 2017)", lifespan=lifespan)
    app.state.batcher, app.state.settings = batcher, settings
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    _add_error_handlers(app)
    _add_page(app)
    _add_translate_routes(app, translator, batcher, settings)
    _add_info_routes(app, translator, batcher, settings)
    return app


def _add_translate_routes(
    app: FastAPI, translator: TranslatorLike, batcher: MicroBatcher, settings: ServeSettings
) -> None:
    """POST /v1/translate and /v1/translate/stream: texts through the micro-batcher."""
    errors = {413: {"model": Error}, 503: {"model": Error}}

    @app.post("/v1/translate", response_model=TranslateResponse, responses=errors)
    async def translate(body: TranslateRequest, request: Request) -> Response:
        """Translate one text or a list; n-best hypotheses with scores; attention weights on request."""
        texts = body.texts
        check_texts(texts, settings)
        sources = translator.encode(texts)  # whole texts (a long one is translated in parts)
        forced = forced_tokens(translator.encode, body.prefixes, body.constraint_lists)
        costs = text_costs(sources, translator.config, body.beam_size, body.attention, settings, forced)
        options = Options(body.search, body.attention, body.sample, body.align)
        items = [
            Item(*entry, key)
            for key, entry in enumerate(zip(texts, body.prefixes, body.constraint_lists, strict=True))
        ]
        results = await _unless_disconnected(
            request, _submit(batcher, items, options, costs, settings.timeout)
        )
        return Response(await run_in_threadpool(_json, results), media_type="application/json")

    @app.post("/v1/translate/stream", responses=errors, response_class=StreamingResponse)
    async def translate_stream(body: StreamRequest) -> StreamingResponse:
        """Translate a document sentence by sentence; each sentence is a server-sent event when done."""
        language = translator.info.get("src_lang") or "en"
        doc = await run_in_threadpool(split_checked, body, language, settings)
        costs = await run_in_threadpool(sentence_costs, translator, doc, body, settings)
        options = Options(body.search, sample=body.sample)
        items = [Item(sentence, key=key) for key, sentence in enumerate(doc.sentences)]

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
