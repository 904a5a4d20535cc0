"""Bodies that are JSON but no request: NaN, lone surrogates, sizes past the schema's bounds.

Each is a 4xx with a message that says what is wrong and where (texts count from 1), never a 500,
a traceback in the log or an echo of the input.
"""

from __future__ import annotations

import json
import logging

import pytest

# `client` (conftest.py) serves the default limits: max_batch 64, max_chars 2000.


@pytest.fixture(autouse=True)
def no_errors_logged(caplog):
    """Bad input is the client's problem: the server logs nothing at ERROR (no traceback)."""
    yield
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def _raw(client, body: str, path: str = "/v1/translate"):
    """POST `body` as it is: json= would refuse NaN, and escapes are the client's own."""
    return client.post(path, content=body.encode(), headers={"content-type": "application/json"})


def _one_error(response, status: int = 422) -> dict:
    assert response.status_code == status, response.text
    (error,) = response.json()["detail"]
    return error


@pytest.mark.parametrize(
    "path, body, loc",
    [
        ("/v1/translate", '{"text": "hola", "alpha": NaN}', ["alpha"]),
        ("/v1/translate", '{"text": "hola", "alpha": Infinity}', ["alpha"]),
        ("/v1/translate", '{"text": "hola", "alpha": -Infinity}', ["alpha"]),
        ("/v1/translate", '{"text": "hola", "sample": {"temperature": NaN}}', ["sample", "temperature"]),
        ("/v1/translate", '{"text": "hola", "sample": {"top_p": NaN}}', ["sample", "top_p"]),
        ("/v1/translate/stream", '{"text": "Hola.", "alpha": Infinity}', ["alpha"]),
        (
            "/v1/translate/stream",
            '{"text": "Hola.", "sample": {"temperature": NaN}}',
            ["sample", "temperature"],
        ),
    ],
)
def test_numbers_that_are_not_finite_are_422_naming_the_field(client, path, body, loc):
    error = _one_error(_raw(client, body, path))
    assert error == {"type": "finite_number", "loc": ["body", *loc], "msg": "Input should be a finite number"}


@pytest.mark.parametrize(
    "path, body, message",
    [
        (
            "/v1/translate",
            '{"text": "\\ud800"}',
            "text 1 is not valid Unicode: a lone surrogate at character 1",
        ),
        (
            "/v1/translate",
            '{"text": ["ok", "a\\udc00b"]}',
            "text 2 is not valid Unicode: a lone surrogate at character 2",
        ),
        (
            "/v1/translate",
            '{"text": ["ok", "sol"], "prefix": [null, "\\ud800"]}',
            "text 2: the prefix is not valid Unicode: a lone surrogate at character 1",
        ),
        (
            "/v1/translate",
            '{"text": "sol", "constraints": ["moon", "\\ud800"]}',
            "text 1: constraint 2 is not valid Unicode: a lone surrogate at character 1",
        ),
        (
            "/v1/translate",
            '{"text": ["a", "b"], "constraints": [null, ["\\ud800"]]}',
            "text 2: constraint 1 is not valid Unicode: a lone surrogate at character 1",
        ),
        (
            "/v1/translate/stream",
            '{"text": "Hola. \\ud800"}',
            "the document is not valid Unicode: a lone surrogate at character 7",
        ),
    ],
)
def test_lone_surrogates_are_422_naming_the_text(client, path, body, message):
    assert _one_error(_raw(client, body, path)) == {"type": "unicode", "loc": ["body"], "msg": message}


def test_a_surrogate_pair_is_one_character(client):
    """JSON's escaped pairs (an emoji) are valid Unicode: only lone halves are refused."""
    response = _raw(client, '{"text": ["sol \\ud83d\\ude00", "agua"]}')
    assert response.status_code == 200 and len(response.json()["translations"]) == 2


def test_unknown_field_names_come_back_valid_and_short(client):
    """A field named with a lone surrogate (pydantic refuses the name itself), or 10,000 characters long."""
    error = _one_error(_raw(client, '{"text": "sol", "\\ud800": 1}'))
    assert error["type"] == "string_unicode" and error["loc"] == ["body"]
    error = _one_error(_raw(client, json.dumps({"text": "sol", "k" * 10_000: 1})))
    assert error["loc"] == ["body", "k" * 80 + "..."]


def test_validation_errors_echo_no_input(client):
    """A 70 KB text next to a wrong field, or a NaN where a text should be: short answers, no input."""
    response = _raw(client, json.dumps({"text": ["a" * 70_000], "beam_size": "4"}))
    assert response.status_code == 422 and len(response.content) < 500
    assert [e["loc"] for e in response.json()["detail"]] == [["body", "beam_size"]]
    response = _raw(client, '{"text": ["sol", NaN]}')
    assert response.status_code == 422 and "NaN" not in response.text
    assert all(set(e) == {"type", "loc", "msg"} for e in response.json()["detail"])
    error = _one_error(_raw(client, '{"text": '))
    assert error["type"] == "json_invalid" and error["msg"] == "JSON decode error: Expecting value"


@pytest.mark.parametrize("body", [b"[" * 100_000 + b"]" * 100_000, b'{"text": "caf\xe9"}'])
def test_a_body_json_cannot_read_is_one_short_error(client, body):
    """Nested past Python's recursion limit, or not UTF-8: a 422 that says so, not a 400 or a 500."""
    response = client.post("/v1/translate", content=body, headers={"content-type": "application/json"})
    error = _one_error(response)
    assert error == {
        "type": "json_invalid",
        "loc": ["body"],
        "msg": "the body could not be read as JSON (not UTF-8, or nested too deeply)",
    }


@pytest.mark.parametrize(
    "body, detail",
    [
        ({"text": [""] * 4097}, "4097 texts in one request; the limit is 64"),
        ({"text": "a" * 100_001}, "text 1 has 100001 characters; the limit is 2000"),
        ({"text": ["sol", "a" * 100_001]}, "text 2 has 100001 characters; the limit is 2000"),
    ],
)
def test_texts_past_the_schemas_bounds_get_the_servers_413(client, body, detail):
    response = client.post("/v1/translate", json=body)
    assert response.status_code == 413 and response.json() == {"detail": detail}


@pytest.mark.parametrize(
    "path, body, message",
    [
        (
            "/v1/translate",
            {"text": "sol", "prefix": "a" * 100_001},
            "text 1: the prefix has 100001 characters",
        ),
        ("/v1/translate", {"text": ["a", "b"], "prefix": ["b"] * 4097}, "prefix has 4097 entries"),
        ("/v1/translate", {"text": "sol", "constraints": ["a"] * 33}, "text 1: 33 constraints"),
        ("/v1/translate/stream", {"text": "a" * 100_001}, "the document has 100001 characters"),
    ],
)
def test_other_strings_past_the_schemas_bounds_are_422_with_the_limit(client, path, body, message):
    error = _one_error(client.post(path, json=body))
    assert error["loc"] == ["body"] and error["msg"].startswith(message + "; the limit is ")


def test_texts_count_from_1_in_every_message(client):
    """The server's own limits and the model thread's errors (TextError) number texts alike."""
    response = client.post("/v1/translate", json={"text": ["sol", "a" * 2001]})
    assert response.json() == {"detail": "text 2 has 2001 characters; the limit is 2000"}
    response = client.post("/v1/translate", json={"text": ["sol", "agua"], "constraints": [None, [" "]]})
    assert response.status_code == 400 and response.json() == {"detail": "text 2: constraint 1 is empty"}
