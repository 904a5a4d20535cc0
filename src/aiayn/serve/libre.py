"""LibreTranslate's API on the same server, beside /v1 (the programs that already talk to a
self-hosted LibreTranslate: browser extensions, chat plugins, Nextcloud, translate-shell, the
`libretranslatepy` client):

    POST /translate       {q: str | [str], source: "es" | "auto", target, format?: "text" | "html",
                           alternatives?: int, api_key?} -> {translatedText, alternatives?,
                           detectedLanguage?} (lists for a list of texts)
    POST /detect          {q, api_key?} -> [{language, confidence}], best first (a list per text
                           for a list)
    GET|POST /languages   [{code, name, targets}] from the model directory's languages

Bodies are JSON or url-encoded forms (what libretranslatepy sends); the query string counts too,
as in LibreTranslate. A request is checked and translated exactly as a /v1/translate one: its texts
become a TranslateRequest (the same schema bounds), then the same items, limits and work budget
(aiayn.serve.batch, aiayn.serve.limits), and the same micro-batcher, timeout and disconnect
handling (the `run` that aiayn.serve.app gives). Errors are LibreTranslate's {"error": "..."}
(aiayn.serve.handlers): 400 for a bad request or a limit, 403 for a wrong api_key, 429 when the
line is full, 500 for a bug. `alternatives` are the n-best list after the best (beam widened to
hold them); `source: "auto"` reports the model's source language with the identifier's
probability that the text is in it (as LibreTranslate detects among the languages it serves),
while /detect answers the identifier's best guesses among all the languages it knows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from aiayn.decode.languages import target_languages
from aiayn.errors import AiaynError
from aiayn.serve.api_keys import ApiKeys
from aiayn.serve.batch import Item, Options, TranslatorLike, text_items
from aiayn.serve.detect import identify, probability
from aiayn.serve.handlers import over_limit
from aiayn.serve.limits import ClientError, ServeSettings, check_texts
from aiayn.serve.schemas import DEFAULT, MAX_BEAM, TranslateRequest

Run = Callable[[Request, list[Item], Options, list[int]], Coroutine]  # the batcher, as /v1 uses it
FORMATS = ("text", "html")
MAX_FORM_FIELDS = 16
NAMES = {
    "ar": "Arabic", "ca": "Catalan", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek",
    "en": "English", "es": "Spanish", "et": "Estonian", "eu": "Basque", "fi": "Finnish", "fr": "French",
    "ga": "Irish", "gl": "Galician", "he": "Hebrew", "hi": "Hindi", "hu": "Hungarian", "id": "Indonesian",
    "it": "Italian", "ja": "Japanese", "ko": "Korean", "lt": "Lithuanian", "lv": "Latvian", "nb": "Norwegian",
    "nl": "Dutch", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sk": "Slovak",
    "sl": "Slovenian", "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}  # fmt: skip


def translate_html(translator: TranslatorLike, text: str, **options: Any) -> str:
    """`format: "html"`: the text of an HTML fragment translated, its tags put back. Not in this
    version: a clear 400 instead of markup lost or translated as words."""
    raise AiaynError("format html is not supported by this server yet; send format text")


def languages(info: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(source languages, target languages) of a model directory's config.json: its src_lang, and
    its tags' languages or its tgt_lang ([] where it records none)."""
    sources = [info["src_lang"]] if info.get("src_lang") else []
    targets = target_languages(info) or ([info["tgt_lang"]] if info.get("tgt_lang") else [])
    return sources, targets


def language_list(info: dict[str, Any]) -> list[dict[str, Any]]:
    """GET /languages: each language with the languages it translates into (a target-only one: [])."""
    sources, targets = languages(info)
    codes = list(dict.fromkeys(sources + targets))
    return [{"code": c, "name": NAMES.get(c, c), "targets": targets if c in sources else []} for c in codes]


async def _params(request: Request) -> dict[str, Any]:
    """The request's fields: the query string, then a JSON object or a url-encoded form."""
    params: dict[str, Any] = dict(request.query_params)
    body = await request.body()
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            raise ClientError(400, "Invalid JSON format") from None
        if not isinstance(data, dict):
            raise ClientError(400, "Invalid JSON format")
        return {**params, **data}
    if kind == "multipart/form-data":
        raise ClientError(400, "multipart forms are not read here: send JSON or a url-encoded form")
    try:
        form = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)
    except UnicodeDecodeError:
        raise ClientError(400, "Invalid request: the form is not UTF-8") from None
    except ValueError:
        raise ClientError(400, f"Invalid request: more than {MAX_FORM_FIELDS} fields") from None
    return {**params, **{key: values[0] for key, values in form.items()}}


def _required(params: dict[str, Any], name: str) -> Any:
    value = params.get(name)
    if value is None or value == "" or value == []:
        raise ClientError(400, f"Invalid request: missing {name} parameter")
    return value


def _alternatives(params: dict[str, Any]) -> int:
    value = params.get("alternatives", 0)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ClientError(400, "Invalid request: alternatives parameter is not a number")
    if value > MAX_BEAM - 1:
        raise ClientError(400, f"Invalid request: at most {MAX_BEAM - 1} alternatives")
    return value


def _checked(q: Any, settings: ServeSettings, **fields: Any) -> TranslateRequest:
    """The texts and search as a /v1/translate request: the schema's bounds and Unicode checks,
    and texts past them answered with the server's own limits, as on /v1."""
    try:
        return TranslateRequest.model_validate({"text": q, **fields})
    except ValidationError as err:
        errors = list(err.errors())
        over = over_limit(errors, settings)
        raise over or ClientError(400, f"Invalid request: {errors[0]['msg']}") from None


def _language(code: Any, known: list[str]) -> str:
    """A language code the model has, else LibreTranslate's "xx is not supported"."""
    if not isinstance(code, str) or (known and code not in known):
        shown = code if isinstance(code, str) and len(code) <= 32 else "this language"
        raise ClientError(400, f"{shown} is not supported (this model has {', '.join(known) or 'none'})")
    return code


def _detected(texts: list[str], source: str | None) -> list[dict[str, Any]]:
    """`source: "auto"`: the model's source language with its probability (percent) per text."""
    return [
        {"language": source or "auto", "confidence": round(100 * probability(t, source or ""), 1)}
        for t in texts
    ]


class LibreApi:
    """The three endpoints' work, on one translator and server."""

    def __init__(self, translator: TranslatorLike, settings: ServeSettings, keys: ApiKeys | None, run: Run):
        self.translator, self.settings, self.keys, self.run = translator, settings, keys, run

    def _key(self, params: dict[str, Any]) -> None:
        refusal = None if self.keys is None else self.keys.check(params.get("api_key"))
        if refusal is not None:
            raise ClientError(*refusal)

    async def translate(self, request: Request) -> JSONResponse:
        params = await _params(request)
        self._key(params)
        q = _required(params, "q")
        sources, targets = languages(self.translator.info)
        source = _required(params, "source")
        if source != "auto":
            _language(source, sources)
        target = _language(_required(params, "target"), targets)
        form = params.get("format") or "text"
        if form not in FORMATS:
            raise ClientError(400, f"{str(form)[:32]} format is not supported")
        alternatives = _alternatives(params)
        n_best = alternatives + 1
        search = {"beam_size": max(DEFAULT.beam_size, n_best), "n_best": n_best}
        body = _checked(q, self.settings, **search, target=target if targets else None)
        if form == "html":
            await run_in_threadpool(lambda: [translate_html(self.translator, t) for t in body.texts])
        items, costs = await run_in_threadpool(text_items, self.translator, body, self.settings)
        results = await self.run(request, items, Options(body.search), costs)
        return JSONResponse(
            await run_in_threadpool(self._answer, body, results, alternatives, source, sources)
        )

    @staticmethod
    def _answer(body: TranslateRequest, results: list, alternatives: int, source: str, sources) -> dict:
        one = isinstance(body.text, str)
        pick = (lambda values: values[0]) if one else (lambda values: values)  # noqa: E731
        answer: dict[str, Any] = {"translatedText": pick([r.text for r in results])}
        if alternatives:
            answer["alternatives"] = pick([[h.text for h in r.hypotheses[1:]] for r in results])
        if source == "auto":
            answer["detectedLanguage"] = pick(_detected(body.texts, sources[0] if sources else None))
        return answer

    async def detect(self, request: Request) -> JSONResponse:
        params = await _params(request)
        self._key(params)
        body = _checked(_required(params, "q"), self.settings)
        check_texts(body.texts, self.settings)
        found = await run_in_threadpool(identify, body.texts)
        answers = [[{"confidence": round(100 * p, 1), "language": lang} for lang, p in f] for f in found]
        return JSONResponse(answers[0] if isinstance(body.text, str) else answers)


def add_libre_routes(
    app: FastAPI, translator: TranslatorLike, settings: ServeSettings, keys: ApiKeys | None, run: Run
) -> None:
    """POST /translate, POST /detect, GET and POST /languages (not in the OpenAPI document: their
    bodies are LibreTranslate's, read by hand)."""
    api, listed = LibreApi(translator, settings, keys, run), language_list(translator.info)
    app.add_api_route("/translate", api.translate, methods=["POST"], include_in_schema=False)
    app.add_api_route("/detect", api.detect, methods=["POST"], include_in_schema=False)

    async def languages_route() -> JSONResponse:
        return JSONResponse(listed)

    app.add_api_route("/languages", languages_route, methods=["GET", "POST"], include_in_schema=False)
