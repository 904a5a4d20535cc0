"""`aiayn serve`: a translation HTTP API with micro-batching, and a page that shows attention.

from aiayn.serve import ServeSettings, create_app, serve
serve("runs/quickstart/model", host="127.0.0.1", port=8000)     # blocks; Ctrl-C stops it
"""

from __future__ import annotations

import socket
from pathlib import Path

from aiayn.errors import AiaynError
from aiayn.serve.api_keys import ApiKeys
from aiayn.serve.app import create_app
from aiayn.serve.batcher import MicroBatcher
from aiayn.serve.connections import KEEP_ALIVE_S, guarded_protocol
from aiayn.serve.limits import ServeSettings

__all__ = ["MicroBatcher", "ServeSettings", "create_app", "serve"]


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket, so that a port in use is a clear one-line error."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except (OSError, UnicodeError, ValueError) as err:  # UnicodeError: a host name IDNA cannot encode
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err) or type(err).__name__
        raise AiaynError(f"cannot listen on {host}:{port}: {reason}") from None
    return sock


def server_url(host: str, port: int) -> str:
    """The page's address as a browser takes it: an IPv6 host in brackets."""
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/"


def serve(
    model_dir: str | Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    settings: ServeSettings | None = None,
    device: str | None = None,
    int8: bool = False,
    draft: str | Path | None = None,
    shortlist: bool = False,
    api_keys: str | Path | None = None,
) -> None:
    """Load the model directory and serve it until interrupted (127.0.0.1 unless told otherwise).

    `int8`: int8 linear layers (aiayn.runtime.quantize; CPU only). `draft`: a draft model's
    directory: greedy requests (beam_size 1, no sampling, prefix or constraints) decode
    speculatively (aiayn.decode.speculative), with the same outputs. `shortlist`: every batch's
    output layer restricted to the model's shortlist (aiayn.decode.shortlist); not with a draft.
    `api_keys`: a key file (aiayn.serve.api_keys) whose keys the LibreTranslate-compatible
    endpoints require; without one they are open.
    """
    import uvicorn

    from aiayn.decode.bundle import load_bundle
    from aiayn.decode.translator import Translator

    if draft is not None and shortlist:
        raise AiaynError("--draft speeds up greedy search of one model: not with --shortlist")
    keys = None if api_keys is None else ApiKeys.read(api_keys)
    sock = _bind(host, port)  # a bad address or a port in use is said before the model loads
    try:
        translator = Translator(load_bundle(model_dir, device, int8=int8, draft=draft, shortlist=shortlist))
    except BaseException:
        sock.close()
        raise
    app = create_app(translator, settings, keys)
    url = server_url(host, sock.getsockname()[1])
    mode = ", int8" * int8 + (f", draft {draft}" if draft else "") + ", shortlist" * shortlist
    mode += f", {len(keys.digests)} API key(s)" if keys else ""
    print(f"aiayn serve: {model_dir}{mode} on {url} (API docs at {url}docs)", flush=True)
    config = uvicorn.Config(
        app, log_level="warning", http=guarded_protocol(), timeout_keep_alive=KEEP_ALIVE_S
    )  # slow or idle connections are closed (aiayn.serve.connections)
    uvicorn.Server(config).run(sockets=[sock])
