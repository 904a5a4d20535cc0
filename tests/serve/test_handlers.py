"""The server's error answers (aiayn.serve.handlers), on a bare app with routes that fail each way:
{"detail": ...} on /v1, LibreTranslate's {"error": "..."} on its paths, no input echoed, 500 logged."""

from __future__ import annotations

import logging

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel, ConfigDict

from aiayn.errors import AiaynError
from aiayn.serve.handlers import ECHO_CHARS, add_error_handlers
from aiayn.serve.limits import ClientError, ServeSettings


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int


@pytest.fixture(scope="module")
def client():
    app = FastAPI()
    app.state.settings = ServeSettings()
    add_error_handlers(app)
    for path in ("/v1/fail", "/translate"):

        @app.post(path)
        def fail(body: Body):
            if body.count == 1:
                raise AiaynError("text 1: the model's scores are not finite")
            if body.count == 2:
                raise ClientError(503, "the queue is full", {"Retry-After": "1"})
            raise RuntimeError("a bug")

    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def test_each_error_has_its_status_and_shape(client, caplog):
    answer = client.post("/v1/fail", json={"count": 1})
    assert (answer.status_code, answer.json()) == (
        400,
        {"detail": "text 1: the model's scores are not finite"},
    )
    answer = client.post("/translate", json={"count": 1})
    assert (answer.status_code, answer.json()) == (
        400,
        {"error": "text 1: the model's scores are not finite"},
    )
    answer = client.post("/v1/fail", json={"count": 2})
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
    with caplog.at_level(logging.ERROR, logger="aiayn.serve"):
        answer = client.post("/v1/fail", json={"count": 3})
    assert (answer.status_code, answer.json()) == (500, {"detail": "internal error: RuntimeError"})
    assert "error while serving /v1/fail" in caplog.text and "a bug" in caplog.text


def test_malformed_requests_are_422_without_their_input_and_400_for_libre(client):
    name = "x" * 200
    answer = client.post("/v1/fail", json={"count": "many", name: 1})
    assert answer.status_code == 422
    errors = answer.json()["detail"]
    assert {e["type"] for e in errors} == {"int_parsing", "extra_forbidden"}
    assert all(set(e) == {"type", "loc", "msg"} for e in errors)  # no "input": nothing echoed
    (extra,) = [e for e in errors if e["type"] == "extra_forbidden"]
    assert extra["loc"] == ["body", "x" * ECHO_CHARS + "..."]
    answer = client.post("/v1/fail", content=b"{not json", headers={"content-type": "application/json"})
    assert answer.status_code == 422 and answer.json()["detail"][0]["type"] == "json_invalid"
    answer = client.post("/translate", json={"count": "many"})
    assert (answer.status_code, answer.json()) == (400, {"error": "Invalid request"})
    assert client.get("/v1/nowhere").json() == {"detail": "Not Found"}
