"""`aiayn serve` failures that a user can fix: one line on stderr, exit status 2, no traceback."""

from __future__ import annotations

import socket

import pytest
import uvicorn
from fastapi.testclient import TestClient

from aiayn.cli import main
from aiayn.serve import server_url


def test_port_in_use(toy_model_dir, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", str(toy_model_dir), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"aiayn serve: error: cannot listen on 127.0.0.1:{port}: ") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-batch", "0"], "max_batch must be positive, got 0"),
        (["--timeout", "-1"], "timeout must be positive, got -1.0"),
        (["--batch-wait-ms", "-5"], "batch_wait_ms must be >= 0 and under the timeout (30 s), got -5.0"),
        (["--batch-wait-ms", "inf"], "batch_wait_ms must be >= 0 and under the timeout (30 s), got inf"),
        (["--timeout", "nan"], "timeout must be a finite number of seconds, got nan"),
        (["--max-work", "10"], "max_work must be at least 208 (one one-word text at beam 4), got 10"),
    ],
)
def test_bad_settings(tmp_path, capsys, flags, message):
    assert main(["serve", str(tmp_path), *flags]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_a_port_out_of_range_is_a_one_line_error(tmp_path, capsys, port):
    with pytest.raises(SystemExit) as exit_:
        main(["serve", str(tmp_path), "--port", port])
    err = capsys.readouterr().err.splitlines()[-1]
    assert exit_.value.code == 2
    assert err == f"aiayn serve: error: argument --port: {port!r} is not a port number (0-65535)"


def test_an_address_that_cannot_be_encoded_is_a_one_line_error(tmp_path, capsys):
    """A host name IDNA refuses (an empty label) is said before the model loads, as a port in use."""
    assert main(["serve", str(tmp_path / "nothing"), "--host", "a..b", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("aiayn serve: error: cannot listen on a..b:0: ") and err.count("\n") == 1


def test_the_printed_address_is_one_a_browser_takes():
    assert server_url("127.0.0.1", 8000) == "http://127.0.0.1:8000/"
    assert server_url("::1", 8000) == "http://[::1]:8000/"


def test_not_a_model_dir(tmp_path, capsys):
    assert main(["serve", str(tmp_path / "nothing"), "--port", "0"]) == 2
    assert "not a model directory" in capsys.readouterr().err


def test_serve_int8_loads_an_int8_model(toy_model_dir, monkeypatch, capsys):
    """`aiayn serve --int8` up to the point where uvicorn would start serving, then the app itself."""
    seen = {}

    def run(server, sockets):
        with TestClient(server.config.app) as client:
            seen["model"] = client.get("/v1/model").json()
            seen["translation"] = client.post("/v1/translate", json={"text": "el gato come"}).json()
        for sock in sockets:
            sock.close()

    monkeypatch.setattr(uvicorn.Server, "run", run)
    assert main(["serve", str(toy_model_dir), "--port", "0", "--int8"]) == 0
    assert ", int8 on http://127.0.0.1:" in capsys.readouterr().out
    assert seen["model"]["int8"] is True and seen["model"]["parameters"] > 0
    assert seen["translation"]["translations"][0]["text"]


def test_every_serve_setting_has_its_flag_and_the_dataclass_default():
    """One home per default: a flag left out is ServeSettings' own default, and each field has a flag."""
    from dataclasses import fields

    from aiayn.cli import build_parser
    from aiayn.cli.serve import serve_settings
    from aiayn.serve import ServeSettings

    parser = build_parser()
    assert serve_settings(parser.parse_args(["serve", "DIR"])) == ServeSettings()
    for f in fields(ServeSettings):
        flag = "--" + f.name.replace("_", "-")
        changed = type(f.default)(f.default * 2)  # every field's default doubled is valid
        args = parser.parse_args(["serve", "DIR", flag, str(changed)])
        settings = serve_settings(args)
        assert getattr(settings, f.name) == changed and type(getattr(settings, f.name)) is type(f.default)
        assert settings == ServeSettings(**{f.name: changed}), flag
