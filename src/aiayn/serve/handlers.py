"""The server's error answers: every error is JSON {"detail": ...}, and on the LibreTranslate-compatible
endpoints LibreTranslate's {"error": "..."} with its codes (aiayn.serve.limits.error_body).

422 for malformed JSON, wrong types, numbers that are not finite, strings that are not Unicode or
unknown fields (a list of {"type", "loc", "msg"}: no input is echoed); 413 past a limit (texts past
the schema's bounds get the server's own limits); 400 for input the translator refuses (a one-line
AiaynError); 500, logged with its traceback, for anything else.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from aiayn.errors import AiaynError
from aiayn.serve.limits import LIBRE_PATHS, ClientError, ServeSettings, error_body
from aiayn.serve.schemas import TEXT_TOO_LONG, TOO_MANY_TEXTS, too_long, too_many_texts

log = logging.getLogger("aiayn.serve")
# FastAPI answers 400 with this when a JSON body is not UTF-8; for us it is malformed JSON like any other.
BODY_PARSE_ERROR = "There was an error parsing the body"
ECHO_CHARS = 80  # the most of a request's own text (a field's name) that an error repeats


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


def over_limit(errors: list[dict[str, Any]], settings: ServeSettings) -> ClientError | None:
    """Texts past the schema's bounds are past the server's limits too: its 413, with its limit."""
    for error in errors:
        ctx = error.get("ctx") or {}
        if error["type"] == TOO_MANY_TEXTS:
            return ClientError(413, too_many_texts(ctx["count"], settings.max_batch))
        if error["type"] == TEXT_TOO_LONG:
            return ClientError(413, too_long(ctx["what"], ctx["chars"], settings.max_chars))
    return None


def _answer(
    request: Request, status: int, detail: Any, headers: dict | None = None, libre_status: int | None = None
) -> JSONResponse:
    """The error in the shape of the endpoint asked (error_body)."""
    status, body = error_body(request.url.path, status, detail, libre_status)
    return JSONResponse(body, status_code=status, headers=headers)


def add_error_handlers(app: FastAPI) -> None:
    """The handlers of every error a request can meet."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, err: RequestValidationError) -> JSONResponse:
        errors = list(err.errors())
        over = over_limit(errors, request.app.state.settings)
        if over is not None:
            return _answer(request, over.status, over.detail, libre_status=over.libre_status)
        return _answer(request, 422, [_plain(e) for e in errors])

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, err: HTTPException) -> Response:
        if err.status_code == 400 and err.detail == BODY_PARSE_ERROR:
            msg = "the body could not be read as JSON (not UTF-8, or nested too deeply)"
            error = {"type": "json_invalid", "loc": ["body"], "msg": msg}
            return _answer(request, 422, [error])
        if request.url.path in LIBRE_PATHS:
            return _answer(request, err.status_code, str(err.detail), err.headers)
        return await http_exception_handler(request, err)

    @app.exception_handler(ClientError)
    async def _client_error(request: Request, err: ClientError) -> JSONResponse:
        return _answer(request, err.status, err.detail, err.headers, err.libre_status)

    @app.exception_handler(AiaynError)
    async def _aiayn_error(request: Request, err: AiaynError) -> JSONResponse:
        return _answer(request, 400, str(err))

    @app.exception_handler(Exception)
    async def _internal_error(request: Request, err: Exception) -> JSONResponse:
        log.exception("error while serving %s", request.url.path)
        return _answer(request, 500, f"internal error: {type(err).__name__}")
