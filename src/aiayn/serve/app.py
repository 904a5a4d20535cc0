"""The HTTP API and the page: a FastAPI app around a `Translator` (beam search of section 6.1).

    POST /v1/translate   {"text": "..." | ["...", ...], "beam_size"?, "alpha"?, "n_best"?, "attention"?}
    GET  /v1/health      {"status": "ok"}
    GET  /v1/model       languages, parameter count, model config, limits
    GET  /               the page: translate and look at attention (section 7's figures)
    GET  /docs           OpenAPI docs

Requests go through a `MicroBatcher`; every error is JSON {"detail": ...}: 422 for malformed JSON,
wrong types or unknown fields, 413 for too many or too long texts, 503 past the timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException

from aiayn.errors import AiaynError
from aiayn.serve.batcher import MicroBatcher
from aiayn.serve.schemas import (
    Attention,
    Error,
    Hypothesis,
    Limits,
    ModelInfo,
    TranslateRequest,
    TranslateResponse,
    Translation,
)

log = logging.getLogger("aiayn.serve")
ATTENTION_DECIMALS = 4
# The page's files, read once from the package: no request names a file.
PAGE_FILES = {"index.html": "text/html", "app.js": "text/javascript", "style.css": "text/css"}
# FastAPI answers 400 with this when a JSON body is not UTF-8; for us it is malformed JSON like any other.
BODY_PARSE_ERROR = "There was an error parsing the body"


class TranslatorLike(Protocol):
    """What the server needs of `aiayn.decode.Translator`."""

    config: Any
    info: dict[str, Any]
    model: Any

    def translate(self, texts: list[str], beam_size: int, alpha: float, n_best: int, return_scores: bool): ...

    def attention(self, text: str, beam_size: int, alpha: float) -> dict[str, Any]: ...

    def encode(self, texts: list[str]) -> list[list[int]]: ...


@dataclass(frozen=True)
class ServeSettings:
    """Limits and micro-batching: --max-batch, --max-chars, --timeout, --batch-wait-ms, --batch-texts."""

    max_batch: int = 64  # texts in one request
    max_chars: int = 2000  # characters in one text
    timeout: float = 30.0  # seconds per request, queueing included
    batch_wait_ms: float = 5.0  # how long the batcher waits for more requests
    batch_texts: int = 64  # texts in one model call; 1 turns micro-batching off

    def __post_init__(self) -> None:
        for name in ("max_batch", "max_chars", "timeout", "batch_texts"):
            if getattr(self, name) <= 0:
                raise AiaynError(f"serve: {name} must be positive, got {getattr(self, name)}")
        if self.batch_wait_ms < 0:
            raise AiaynError(f"serve: batch_wait_ms must be >= 0, got {self.batch_wait_ms}")


@dataclass(frozen=True)
class Options:
    """Decoding options: requests share a model call only when these are equal."""

    beam_size: int
    alpha: float
    n_best: int
    attention: bool


class ClientError(Exception):
    """A request the server refuses with `status` (413, 503) and a one-line `detail`."""

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status, self.detail = status, detail


def _rounded(weights: list[Any]) -> list:
    """Per-layer (heads, q, k) tensors -> nested lists rounded to ATTENTION_DECIMALS."""
    return [w.float().round(decimals=ATTENTION_DECIMALS).tolist() for w in weights]


def _attention(maps: dict[str, Any]) -> Attention:
    return Attention(
        src_tokens=maps["src_tokens"],
        tgt_tokens=maps["tgt_tokens"],
        **{kind: _rounded(maps[kind]) for kind in ("cross", "encoder", "decoder")},
    )


def _translation(hyps: list[Any], attention: Attention | None = None) -> Translation:
    best = hyps[0]
    listed = [Hypothesis(text=h.text, score=h.score, log_prob=h.log_prob) for h in hyps]
    return Translation(
        text=best.text, score=best.score, log_prob=best.log_prob, hypotheses=listed, attention=attention
    )


def run_batch(translator: TranslatorLike, texts: list[str], options: Options) -> list[Translation]:
    """One model call for texts that share `options` (runs in the model thread).

    With attention, each text is translated on its own, as `Translator.attention` does, so the
    weights belong to exactly the translation returned.
    """
    search = {"beam_size": options.beam_size, "alpha": options.alpha}
    if not options.attention:
        hyps = translator.translate(texts, **search, n_best=options.n_best, return_scores=True)
        return [_translation(h) for h in hyps]
    out = []
    for text in texts:
        (hyps,) = translator.translate([text], **search, n_best=options.n_best, return_scores=True)
        attention = None
        if translator.encode([text])[0]:  # "" or "  " has no tokens: nothing to attend to
            attention = _attention(translator.attention(text, **search))
        out.append(_translation(hyps, attention))
    return out


def _check_limits(texts: list[str], settings: ServeSettings) -> None:
    if len(texts) > settings.max_batch:
        raise ClientError(413, f"{len(texts)} texts in one request; the limit is {settings.max_batch}")
    for i, text in enumerate(texts):
        if len(text) > settings.max_chars:
            raise ClientError(413, f"text {i} has {len(text)} characters; the limit is {settings.max_chars}")


def model_info(translator: TranslatorLike, settings: ServeSettings) -> ModelInfo:
    info = translator.info
    return ModelInfo(
        src_lang=info.get("src_lang"),
        tgt_lang=info.get("tgt_lang"),
        parameters=translator.model.num_parameters(),
        config=translator.config.to_dict(),
        int8=bool(getattr(translator, "int8", False)),
        limits=Limits(max_batch=settings.max_batch, max_chars=settings.max_chars, timeout=settings.timeout),
    )


def _page_files() -> dict[str, bytes]:
    static = resources.files("aiayn") / "static"
    return {name: (static / name).read_bytes() for name in PAGE_FILES}


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, err: HTTPException) -> Response:
        if err.status_code == 400 and err.detail == BODY_PARSE_ERROR:
            error = {"type": "json_invalid", "loc": ["body"], "msg": "the body is not UTF-8 JSON"}
            return JSONResponse({"detail": [error]}, status_code=422)
        return await http_exception_handler(request, err)

    @app.exception_handler(ClientError)
    async def _client_error(request: Request, err: ClientError) -> JSONResponse:
        return JSONResponse({"detail": err.detail}, status_code=err.status)

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


def create_app(translator: TranslatorLike, settings: ServeSettings | None = None) -> FastAPI:
    """The FastAPI app; the micro-batcher starts and stops with the app (its lifespan)."""
    settings = settings or ServeSettings()
    batcher = MicroBatcher(
        lambda texts, options: run_batch(translator, texts, options),
        wait_ms=settings.batch_wait_ms,
        max_texts=settings.batch_texts,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(title="aiayn", summary="Transformer translation (Vaswani et al., 2017)", lifespan=lifespan)
    app.state.batcher, app.state.settings = batcher, settings
    _add_error_handlers(app)
    _add_page(app)
    errors = {413: {"model": Error}, 503: {"model": Error}}

    @app.post("/v1/translate", response_model=TranslateResponse, responses=errors)
    async def translate(request: TranslateRequest) -> TranslateResponse:
        """Translate one text or a list; n-best hypotheses with scores; attention weights on request."""
        texts = request.texts
        _check_limits(texts, settings)
        options = Options(request.beam_size, request.alpha, request.n_best, request.attention)
        try:
            results = await asyncio.wait_for(batcher.submit(texts, options), settings.timeout)
        except TimeoutError:
            raise ClientError(503, f"the request took over {settings.timeout:g} s; try again later") from None
        return TranslateResponse(translations=results)

    @app.get("/v1/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    info = model_info(translator, settings)

    @app.get("/v1/model", response_model=ModelInfo)
    async def model() -> ModelInfo:
        """Languages, parameter count, model config and this server's limits."""
        return info

    return app
