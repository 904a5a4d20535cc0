"""Load test of `aiayn serve`: 32 concurrent clients for 20 s, with and without micro-batching.

Each mode starts its own `aiayn serve` subprocess on 127.0.0.1 (the same model directory, the
same limits), waits for /v1/health, then runs `--clients` asyncio clients (httpx) that each post
one sentence to /v1/translate, wait for the answer and post the next, for `--seconds`. Reported:
requests/s (completed answers / wall time), p50 and p99 latency, errors (any status but 200, or a
failed connection). It exits with status 1 if any request failed.

    batched     --batch-wait-ms 5 --batch-texts 64   (the server's defaults)
    unbatched   --batch-wait-ms 0 --batch-texts 1    (one request per model call)

`--api v1,libre` runs every mode twice, once against /v1/translate and once against the
LibreTranslate-compatible POST /translate ({q, source, target}, the model's first languages from
GET /languages), and prints LibreTranslate's requests/s over /v1's: the two share one batcher, so
the ratio should read 1 within noise.

Without --model it trains the tests' toy model (tests/toy.py, a few seconds)
in a temporary folder. `--int8` starts every server with `--int8`. `--json PATH` writes
{"rows": [...], "results": {...}} for benchmarks/run_all.py: requests/s and p50 latency of the
micro-batched server against the one-at-a-time one.

    python benchmarks/serve_load.py [--model MODEL_DIR] [--clients 32] [--seconds 20] [--int8]
                                    [--api v1,libre] [--json F]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

MODES = {
    "batched": ["--batch-wait-ms", "5", "--batch-texts", "64"],
    "unbatched": ["--batch-wait-ms", "0", "--batch-texts", "1"],
}
MAX_SECONDS = 300
# run_all.py's bars for micro-batching against one request at a time, under --clients concurrent clients
TARGET_THROUGHPUT, TARGET_LATENCY = 2.0, 0.5  # at least twice the requests/s; at most half the p50


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(model_dir: Path, flags: list[str], log_path: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "aiayn",
        "serve",
        str(model_dir),
        "--port",
        str(port),
        "--timeout",
        "60",
        *flags,
    ]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}
        )
    url = f"http://127.0.0.1:{port}"
    for _ in range(1200):
        if proc.poll() is not None:
            raise SystemExit(f"aiayn serve exited:\n{log_path.read_text()}")
        try:
            if httpx.get(f"{url}/v1/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    proc.terminate()
    raise SystemExit(f"aiayn serve did not answer within 2 minutes:\n{log_path.read_text()}")


class V1:
    """One sentence a request to /v1/translate."""

    path = "/v1/translate"

    def body(self, text: str | list[str]) -> dict:
        return {"text": text}

    def answered(self, response: httpx.Response) -> bool:
        return len(response.json()["translations"]) == 1


class Libre:
    """One sentence a request to LibreTranslate's POST /translate, in the model's languages."""

    path = "/translate"

    def __init__(self, url: str):
        first = httpx.get(f"{url}/languages", timeout=10).json()[0]
        self.source, self.target = first["code"], (first["targets"] or [first["code"]])[0]

    def body(self, text: str | list[str]) -> dict:
        return {"q": text, "source": self.source, "target": self.target}

    def answered(self, response: httpx.Response) -> bool:
        return isinstance(response.json()["translatedText"], str)


async def _client(
    http: httpx.AsyncClient, url: str, api: V1 | Libre, texts: list[str], stop: float, seed: int, out: dict
) -> None:
    rng = random.Random(seed)
    while time.perf_counter() < stop:
        start = time.perf_counter()
        what = "ok"
        try:
            response = await http.post(f"{url}{api.path}", json=api.body(rng.choice(texts)))
            ok = response.status_code == 200 and api.answered(response)
            what = "ok" if ok else f"{response.status_code} {response.text[:80]}"
        except (httpx.HTTPError, ValueError, KeyError) as err:
            ok, what = False, type(err).__name__
        if ok:
            out["latencies"].append(time.perf_counter() - start)
        else:
            out["errors"] += 1
            out.setdefault("failures", {}).setdefault(what, 0)
            out["failures"][what] += 1


async def load(url: str, api: V1 | Libre, texts: list[str], clients: int, seconds: float) -> dict:
    """`clients` closed-loop clients for `seconds`: requests/s, p50/p99 latency (ms), errors."""
    out: dict = {"latencies": [], "errors": 0}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=120) as http:
        await http.post(f"{url}{api.path}", json=api.body(texts))  # warm-up
        begin = time.perf_counter()
        stop = begin + seconds
        await asyncio.gather(*(_client(http, url, api, texts, stop, seed, out) for seed in range(clients)))
        elapsed = time.perf_counter() - begin
    lat = sorted(out["latencies"])
    return {
        "requests": len(lat),
        "errors": out["errors"],
        "seconds": round(elapsed, 2),
        "requests_per_s": round(len(lat) / elapsed, 1),
        "p50_ms": round(1000 * statistics.median(lat), 1) if lat else None,
        "p99_ms": round(1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 1) if lat else None,
        "failures": out.get("failures", {}),  # what each failed request got: status and body, or error
    }


def _toy_model(folder: Path) -> tuple[Path, list[str]]:
    sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))  # the toy task is a test fixture
    from toy import build_toy_model_dir, toy_pairs

    print("training the tests' toy model (a few seconds) ...", file=sys.stderr)
    return build_toy_model_dir(folder / "model"), [src for src, _ in toy_pairs(64, seed=1)]


def run_modes(
    model_dir: Path,
    texts: list[str],
    modes: list[str],
    clients: int,
    seconds: float,
    tmp: Path,
    extra_flags: list[str] | None = None,
    apis: tuple[str, ...] = ("v1",),
) -> dict:
    """Each mode's figures under its name; with more than /v1, under "mode api" (one server a mode,
    the APIs loaded one after the other)."""
    results = {}
    for mode in modes:
        proc, url = start_server(model_dir, MODES[mode] + (extra_flags or []), tmp / f"{mode}.log")
        try:
            for name in apis:
                api = Libre(url) if name == "libre" else V1()
                key = mode if apis == ("v1",) else f"{mode} {name}"
                results[key] = asyncio.run(load(url, api, texts, clients, seconds))
                print(f"{key}: {results[key]}", file=sys.stderr)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return results


def report(results: dict) -> None:
    columns = ["requests_per_s", "p50_ms", "p99_ms", "requests", "errors"]
    print("| mode | requests/s | p50 ms | p99 ms | requests | errors |\n|---|---|---|---|---|---|")
    for mode, r in results.items():
        print("| " + " | ".join([mode] + [str(r[c]) for c in columns]) + " |")


def rows(results: dict, clients: int, int8: bool) -> list[dict]:
    """run_all.py rows: the micro-batched server against the one-at-a-time one (when both ran)."""
    batched, single = results.get("batched"), results.get("unbatched")
    if not (batched and single and batched["p50_ms"] and single["p50_ms"] and single["requests_per_s"]):
        return []
    label = f"serve {clients} clients{' int8' if int8 else ''}"
    return [
        dict(
            measure=f"{label}, requests/s", aiayn=batched["requests_per_s"], peer="one at a time",
            peer_value=single["requests_per_s"], ratio=batched["requests_per_s"] / single["requests_per_s"],
            target=TARGET_THROUGHPUT, higher_is_better=True,
        ),
        dict(
            measure=f"{label}, p50 ms", aiayn=batched["p50_ms"], peer="one at a time",
            peer_value=single["p50_ms"], ratio=batched["p50_ms"] / single["p50_ms"],
            target=TARGET_LATENCY, higher_is_better=False,
        ),
    ]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a model directory (default: the tests' tiny toy model)")
    parser.add_argument("--texts", type=Path, help="sentences to send, one per line (default: toy sentences)")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--modes", default="batched,unbatched", help=f"comma-separated: {', '.join(MODES)}")
    parser.add_argument("--int8", action="store_true", help="serve with --int8 (int8 linear layers)")
    parser.add_argument("--api", default="v1", help="comma-separated: v1 (/v1/translate), libre (/translate)")
    parser.add_argument("--json", type=Path, help="also write the rows and results here (for run_all.py)")
    args = parser.parse_args()
    modes, apis = args.modes.split(","), tuple(args.api.split(","))
    if not 0 < args.seconds <= MAX_SECONDS or args.clients < 1 or not set(modes) <= set(MODES):
        parser.error(f"need 0 < --seconds <= {MAX_SECONDS}, --clients >= 1, --modes from {', '.join(MODES)}")
    if not set(apis) <= {"v1", "libre"}:
        parser.error("--api takes v1, libre or both (comma-separated)")
    with tempfile.TemporaryDirectory() as tmp:
        model_dir, texts = (args.model, None) if args.model else _toy_model(Path(tmp))
        if args.texts:
            texts = [line for line in args.texts.read_text().splitlines() if line.strip()]
        texts = texts or ["El perro come.", "La casa es grande.", "Buenos días."]
        extra = ["--int8"] if args.int8 else []
        results = run_modes(model_dir, texts, modes, args.clients, args.seconds, Path(tmp), extra, apis)
    print(
        f"\n{args.clients} clients x {args.seconds:g} s against 127.0.0.1, model {args.model or 'tiny toy'}"
        f"{', int8' if args.int8 else ''}\n"
    )
    report(results)
    for mode in modes:
        if {f"{mode} v1", f"{mode} libre"} <= results.keys():
            v1, libre = results[f"{mode} v1"]["requests_per_s"], results[f"{mode} libre"]["requests_per_s"]
            ratio = libre / v1
            print(f"{mode}: LibreTranslate /translate {libre} requests/s, /v1/translate {v1}: {ratio:.2f}x")
    if args.json:
        data = {"rows": rows(results, args.clients, args.int8), "results": results}
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    errors = sum(r["errors"] for r in results.values())
    if errors:
        print(f"FAILED: {errors} requests failed", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
