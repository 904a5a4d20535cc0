"""What `aiayn serve` refuses before a request reaches the model, and the settings that say so.

Every refusal comes at once, before any model work, as JSON {"detail": "..."} with status 413
(LibreTranslate's {"error": "..."} and 400 on its endpoints, 413 for a body):
- body: over `ServeSettings.max_body_bytes` (room for max_batch texts of max_chars characters,
  each JSON-escaped), seen in Content-Length before a byte is read, or counted while reading
  (chunked bodies), so no oversized body is held or parsed;
- texts: more than max_batch texts, or a text over max_chars characters (also when past the
  schema's own bounds: aiayn.serve.app answers those with these limits);
- attention: weights come for one text per request, of at most max_attention_tokens source
  tokens, and its output is cut to as many tokens (with </s>), so an answer holds at most
  heads x tokens^2 x (encoder layers + 2 x decoder layers) weights;
- work: texts x beam x longest possible output (|source| + 50 tokens, as section 6.1's decoding
  allows) over max_work: a request that could not finish in time is refused, not started.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import torch
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from aiayn.config import DecodeConfig, ModelConfig
from aiayn.decode.generate import max_lengths
from aiayn.errors import AiaynError
from aiayn.serve.schemas import MAX_TEXT_CHARS, MAX_TEXTS, too_long, too_many_texts

LEN_A, LEN_B = DecodeConfig.max_len_a, DecodeConfig.max_len_b  # the longest output: a * |source| + b
LIBRE_PATHS = frozenset({"/translate", "/detect", "/languages"})  # LibreTranslate's (aiayn.serve.libre)
JSON_BYTES_PER_CHAR = 12  # the most a character takes in JSON: "\ud83d\ude00" for one emoji
BODY_OVERHEAD = 4096  # the other fields, whitespace and brackets


@dataclass(frozen=True)
class ServeSettings:
    """Limits and micro-batching: the flags of `aiayn serve` (--max-batch, --max-chars, ...)."""

    max_batch: int = 64  # texts in one request
    max_chars: int = 2000  # characters in one text
    timeout: float = 30.0  # seconds per request, queueing included
    batch_wait_ms: float = 5.0  # how long the batcher waits for more requests
    batch_texts: int = 64  # texts in one model call; 1 turns micro-batching off
    max_attention_tokens: int = 128  # tokens on each side of an attention answer
    max_work: int = 262_144  # texts x beam x longest output in one request
    batch_work: int = 16_384  # the same in one model call (16 x 1024: one longest text, widest beam)
    max_queue: int = 1024  # texts waiting for the model

    def __post_init__(self) -> None:
        for name in (
            "max_batch",
            "max_chars",
            "timeout",
            "batch_texts",
            "max_work",
            "batch_work",
            "max_queue",
        ):
            if getattr(self, name) <= 0:
                raise AiaynError(f"serve: {name} must be positive, got {getattr(self, name)}")
        if not math.isfinite(self.timeout):
            raise AiaynError(f"serve: timeout must be a finite number of seconds, got {self.timeout}")
        if not 0 <= self.batch_wait_ms < 1000 * self.timeout:
            raise AiaynError(
                f"serve: batch_wait_ms must be >= 0 and under the timeout ({self.timeout:g} s), "
                f"got {self.batch_wait_ms}"
            )
        least = DecodeConfig.beam_size * (LEN_A * 2 + LEN_B)  # one one-word text (with </s>)
        if self.max_work < least:
            raise AiaynError(
                f"serve: max_work must be at least {least:g} (one one-word text at beam "
                f"{DecodeConfig.beam_size}), got {self.max_work}"
            )
        if self.max_attention_tokens < 2:
            raise AiaynError(
                f"serve: max_attention_tokens must be at least 2, got {self.max_attention_tokens}"
            )
        for name, most in (("max_batch", MAX_TEXTS), ("max_chars", MAX_TEXT_CHARS)):
            if getattr(self, name) > most:
                raise AiaynError(f"serve: {name} must be at most {most}, got {getattr(self, name)}")
        if self.max_queue < self.max_batch:
            raise AiaynError(
                f"serve: max_queue ({self.max_queue}) must hold one request (max_batch {self.max_batch})"
            )

    @property
    def max_body_bytes(self) -> int:
        """The largest body a request within max_batch and max_chars can need."""
        return BODY_OVERHEAD + self.max_batch * (JSON_BYTES_PER_CHAR * self.max_chars + 8)


class ClientError(Exception):
    """A request the server refuses with `status` (413, 503) and a one-line `detail`; on the
    LibreTranslate-compatible endpoints with `libre_status` (default: 400 for a limit, 413, as
    LibreTranslate answers a text over its limit; else `status`)."""

    def __init__(
        self, status: int, detail: str, headers: dict[str, str] | None = None, libre_status: int | None = None
    ):
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers
        self.libre_status = libre_status or (400 if status == 413 else status)


def error_body(path: str, status: int, detail: Any, libre_status: int | None = None) -> tuple[int, dict]:
    """An error's status and JSON: {"detail": ...} on /v1, LibreTranslate's {"error": "..."} with
    `libre_status` (default: `status`, 400 for a malformed request, 422) on its endpoints."""
    if path not in LIBRE_PATHS:
        return status, {"detail": detail}
    text = detail if isinstance(detail, str) else "Invalid request"
    return libre_status or (400 if status == 422 else status), {"error": text}


def check_texts(texts: list[str], settings: ServeSettings) -> None:
    """At most max_batch texts of at most max_chars characters (texts count from 1), else 413."""
    if len(texts) > settings.max_batch:
        raise ClientError(413, too_many_texts(len(texts), settings.max_batch))
    for i, text in enumerate(texts):
        if len(text) > settings.max_chars:
            raise ClientError(413, too_long(f"text {i + 1}", len(text), settings.max_chars))


def output_limits(sources: list[list[int]], config: ModelConfig, attention_tokens: int | None) -> list[int]:
    """The most output tokens (before EOS) of each source: a * |source| + b, the translator's
    default, and with attention at most attention_tokens - 1 (its tgt_tokens end with </s>)."""
    lens = max_lengths(torch.tensor([len(ids) for ids in sources]), config, LEN_A, LEN_B).tolist()
    return [min(n, attention_tokens - 1) for n in lens] if attention_tokens else lens


def text_costs(
    sources: list[list[int]],
    config: ModelConfig,
    beam_size: int,
    attention: bool,
    settings: ServeSettings,
    forced: list[int] | None = None,
) -> list[int]:
    """Each text's work, beam x its longest output (0 for an empty text: no model call); `forced`:
    the output tokens each text's prefix or constraints need (aiayn.decode.inputs.Encoded.forced),
    which can lengthen it past a*|src|+b.

    Raises ClientError(413) past the attention bound or the request's budget (max_work).
    """
    forced = forced or [0] * len(sources)
    if attention:
        if len(sources) > 1:
            raise ClientError(413, f"attention comes for one text per request; this one has {len(sources)}")
        if len(sources[0]) > settings.max_attention_tokens:
            raise ClientError(
                413,
                f"attention: the text has {len(sources[0])} tokens with </s>; "
                f"the limit is {settings.max_attention_tokens}",
            )
        if forced[0] > settings.max_attention_tokens - 1:
            raise ClientError(
                413,
                f"attention: the prefix or constraints need {forced[0]} output tokens; "
                f"the limit is {settings.max_attention_tokens - 1}",
            )
    limits = output_limits(sources, config, settings.max_attention_tokens if attention else None)
    limits = [max(n, need) for n, need in zip(limits, forced, strict=True)]
    costs = [beam_size * n if ids else 0 for ids, n in zip(sources, limits, strict=True)]
    if sum(costs) > settings.max_work:
        raise ClientError(
            413,
            f"this request could take {sum(costs):,} decoding steps (texts x beam {beam_size} x up to "
            f"|source| + {LEN_B} output tokens); the limit is {settings.max_work:,}",
        )
    return costs


class BodyLimit:
    """ASGI middleware: 413 for a body over `limit` bytes, before it is read (Content-Length) or
    as soon as the bytes read pass the limit, so nothing larger is held in memory or parsed."""

    def __init__(self, app: ASGIApp, limit: int):
        self.app, self.limit = app, limit

    def _detail(self, size: str) -> str:
        return f"the body has {size} bytes; the limit is {self.limit:,} (--max-batch texts of --max-chars)"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await _refuse(send, scope["path"], self._detail(f"{int(declared):,}"))
            return
        read = 0

        async def counted() -> Any:
            nonlocal read
            message = await receive()
            read += len(message.get("body", b""))
            if read > self.limit:  # FastAPI passes an HTTPException raised while reading the body on
                raise HTTPException(
                    413, self._detail(f"over {self.limit:,}"), headers={"Connection": "close"}
                )
            return message

        await self.app(scope, counted, send)


async def _refuse(send: Send, path: str, detail: str) -> None:
    """413 with Connection: close, so the server does not read (and throw away) the unread body."""
    body = json.dumps(error_body(path, 413, detail)[1]).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send(
        {"type": "http.response.start", "status": 413, "headers": headers + [(b"connection", b"close")]}
    )
    await send({"type": "http.response.body", "body": body})
