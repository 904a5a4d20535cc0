"""aiayn.serve.connections against a real uvicorn server on loopback: a slow request head is cut off,
connections past the cap close the oldest idle one, accept()'s resource errors are logged once."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time

import pytest
import uvicorn

from aiayn.serve.connections import ACCEPT_ERROR, guarded_protocol, quiet_accept_errors

HEAD = b"GET / HTTP/1.1\r\nHost: test\r\n\r\n"


async def hello(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
def server():
    """(host, port) of a uvicorn server whose heads are due in 0.5 s, with at most 4 connections."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    protocol = guarded_protocol(head_timeout=0.5, max_connections=4)
    config = uvicorn.Config(hello, http=protocol, log_level="warning", lifespan="off")
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not running.started:
        time.sleep(0.01)
    yield sock.getsockname()
    running.should_exit = True
    thread.join(timeout=10)


def _closed_within(conn: socket.socket, seconds: float, trickle: bytes = b"") -> bool:
    """Whether the server closes `conn` within `seconds`, while a header line is sent every 0.1 s."""
    conn.settimeout(0.1)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if trickle:
                conn.sendall(trickle)
            if conn.recv(1024) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:  # reset by the server
            return True
    return False


def _get(address) -> bytes:
    with socket.create_connection(address, timeout=5) as conn:
        conn.sendall(HEAD)
        return conn.recv(1024)


def test_a_head_sent_a_line_at_a_time_is_cut_off(server):
    with socket.create_connection(server) as slow:
        slow.sendall(b"GET / HTTP/1.1\r\n")
        assert _closed_within(slow, 5.0, trickle=b"X-Slow: 1\r\n")
    assert _get(server).startswith(b"HTTP/1.1 200")


def test_a_keep_alive_connection_owes_its_next_head_in_time(server):
    with socket.create_connection(server) as conn:
        conn.sendall(HEAD)
        assert conn.recv(1024).startswith(b"HTTP/1.1 200")
        conn.sendall(b"GET / HTTP/1.1\r\n")
        assert _closed_within(conn, 5.0, trickle=b"X-Slow: 1\r\n")


def test_connections_past_the_cap_close_the_oldest_waiting_one(server):
    idle = [socket.create_connection(server) for _ in range(4)]
    try:
        time.sleep(0.1)
        assert _get(server).startswith(b"HTTP/1.1 200")  # the fifth: the oldest idle one made room
        assert _closed_within(idle[0], 0.3)
    finally:
        for conn in idle:
            conn.close()


def test_accept_errors_are_logged_once_with_their_count(caplog):
    loop = asyncio.new_event_loop()
    try:
        quiet_accept_errors(loop, every=60)
        with caplog.at_level(logging.ERROR, logger="aiayn.serve"):
            for _ in range(1000):
                loop.call_exception_handler({"message": ACCEPT_ERROR, "exception": OSError(24, "Too many")})
    finally:
        loop.close()
    (message,) = [r.getMessage() for r in caplog.records]
    assert message.startswith("accept() failed 1 times ([Errno 24] Too many)")
