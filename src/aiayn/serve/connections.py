"""Connections that send nothing useful: uvicorn's HTTP/1.1 protocol with a deadline for a
request's head and a cap on open connections, and floods of failed accept() logged once a minute.

uvicorn (0.54) times out only idle keep-alive connections (`timeout_keep_alive`, after a response):
a client that sends a header line every few seconds is kept forever, and a few hundred of them use
up the process's files, after which every accept() fails and asyncio logs a traceback for each
(105 MB of log in 30 s, measured with uvicorn 0.54). Here:

- a connection has HEAD_TIMEOUT_S seconds, from its opening or from its last response, to send a
  whole request head (the request line and every header), else it is closed;
- at most `max_connections` are open, fewer than the process's file limit (FILES_KEPT files are
  left for the model, the log and threads): a new connection past it closes the oldest one still
  waiting for its head, or itself when none is waiting;
- accept()'s "out of system resource" errors are logged once a minute with their count.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("aiayn.serve")
HEAD_TIMEOUT_S = 10.0  # to send a request's head; a polite client takes milliseconds
KEEP_ALIVE_S = 5  # an idle keep-alive connection is closed after this (uvicorn's timeout_keep_alive)
FILES_KEPT = 64  # files below the process's limit kept for the model, the log and threads
MAX_CONNECTIONS = 4096  # the most open connections, whatever the file limit
ACCEPT_ERROR = "socket.accept() out of system resource"  # asyncio's message for EMFILE and the like
LOG_EVERY_S = 60.0


def connection_limit() -> int:
    """The most connections to keep open: the file limit less FILES_KEPT (at least 16)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(16, min(MAX_CONNECTIONS, soft - FILES_KEPT))


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, with a deadline for each request head and a cap on connections."""

    head_timeout: float = HEAD_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.opened, self.head_timer = time.monotonic(), None
        self._await_head()
        if len(self.connections) > self.max_connections:
            waiting = [c for c in self.connections if getattr(c, "head_timer", None) is not None]
            oldest = min(waiting, key=lambda c: c.opened, default=self)
            log.debug("%d connections open: closing one waiting for its request", len(self.connections))
            oldest.transport.close()

    def _await_head(self) -> None:
        if not self.transport.is_closing():
            self.head_timer = self.loop.call_later(self.head_timeout, self._head_late)

    def _head_late(self) -> None:
        self.head_timer = None
        self.transport.close()  # connection_lost follows; nothing was asked, so nothing is answered

    def _stop_waiting(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # a head came (or the connection failed)
            self._stop_waiting()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.head_timer is None and self.conn.their_state is h11.IDLE:
            self._await_head()  # keep-alive: the next request's head has a deadline too

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)


def guarded_protocol(head_timeout: float = HEAD_TIMEOUT_S, max_connections: int | None = None) -> type:
    """GuardedH11Protocol with these limits (uvicorn.Config's `http`)."""
    limits = {"head_timeout": head_timeout, "max_connections": max_connections or connection_limit()}
    return type("GuardedH11Protocol", (GuardedH11Protocol,), limits)


def quiet_accept_errors(loop: asyncio.AbstractEventLoop, every: float = LOG_EVERY_S) -> None:
    """Log accept()'s resource errors once per `every` seconds with their count; others as before."""
    state = {"last": -float("inf"), "count": 0}
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != ACCEPT_ERROR:
            if previous is None:
                loop.default_exception_handler(context)
            else:
                previous(loop, context)
            return
        state["count"] += 1
        now = time.monotonic()
        if now - state["last"] >= every:
            error = context.get("exception")
            log.error(
                "accept() failed %d times (%s): too many open connections for the process's file limit",
                state["count"],
                error,
            )
            state["last"], state["count"] = now, 0

    loop.set_exception_handler(handler)
