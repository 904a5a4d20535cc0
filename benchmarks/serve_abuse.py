"""Abuse test of `aiayn serve`: polite clients beside hostile ones.

Two runs on 127.0.0.1, each against a fresh `aiayn serve --timeout 2 --draft DRAFT` (other limits
at their defaults; `--draft` with the draft kind) of the same model: `--clients` polite clients as
benchmarks/serve_load.py (one toy sentence each, beam 4, the next as soon as the answer comes) for
`--seconds`, first alone, then beside `--hostile` clients that each loop over
  attention  the largest attention request the limits allow (one text of max_attention_tokens
             tokens, beam 16, n_best 16);
  body       a 1 GB body, streamed (Content-Length declared on every other try, chunked otherwise);
  timeout    the largest request the work budget allows (texts of max_chars characters, beam 16),
             which needs more than the 2 s timeout on the toy model beside the polite load;
  garbage    random bytes sent as JSON;
  splitter   documents of 100,000 characters that a sentence splitter finds hard (a word of dots,
             "a.a.a...", ". . . ...", 33,000 one-word paragraphs) sent to /v1/translate/stream;
  draft      greedy requests, which the server decodes speculatively with its draft model (whose
             own shortlist restricts its proposals): max_batch of the polite texts in one request,
             and one request for each word of them;
  slowheaders  (besides the loop) SLOW_CONNECTIONS connections that each send one header line
             every SLOW_EVERY_S s and never finish their request, reopened when the server closes them.
The body, garbage, timeout and draft kinds send every other request to the LibreTranslate-compatible
POST /translate instead (the same request in its shape: q, source, target, alternatives for the
n-best list), which goes through the same limits and batcher.
Throughout both runs one more client asks /v1/health every 50 ms. Reported: polite p50/p99 and
errors of both runs, /v1/health p99, the server's resident memory idle (after start and a
warm-up) and at its peak (VmHWM, start included), and what the hostile requests got. Targets:
0 polite errors, polite p99 under 3x its value alone, peak RSS under 2x idle, health p99 under 1 s,
no hostile request answered 500; the exit status is 1 if one is missed. Linux only (/proc for the
memory). Without --model the tests' toy model serves, and a smaller toy model with its shortlist
is its draft; with --model the draft kind needs --draft.

    python benchmarks/serve_abuse.py [--model DIR [--draft DIR]] [--clients 16] [--hostile 4] [--seconds 30]
                                     [--kinds K,...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from serve_load import V1, _client, _toy_model, start_server

TIMEOUT_S = 2.0
GIGABYTE, CHUNK = 1 << 30, 1 << 20
TARGET_P99_RATIO, TARGET_RSS_RATIO, TARGET_HEALTH_P99_MS = 3.0, 2.0, 1000.0
KINDS = ("attention", "body", "timeout", "garbage", "splitter", "draft", "slowheaders")
SPLITTER_TEXTS = ("." * 100_000, "a." * 49_999 + " x", ". " * 50_000, "a\n\n" * 33_000)
SLOW_CONNECTIONS, SLOW_EVERY_S = 75, 5.0  # per hostile client: 4 of them hold 300 slow connections


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS (now) and VmHWM (peak) of a process, in kB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {name: int(fields[name].split()[0]) for name in ("VmRSS", "VmHWM")}


def _fill(words: list[str], fits, rng: random.Random) -> str:
    """Words joined for as long as `fits(text)` says yes."""
    text = ""
    while True:
        longer = f"{text} {rng.choice(words)}".strip()
        if not fits(longer):
            return text
        text = longer


LIBRE_KINDS = ("body", "garbage", "timeout", "draft")  # kinds that also go to POST /translate


def libre_body(body: dict, info: dict) -> dict:
    """A /v1/translate body as a LibreTranslate POST /translate one (aiayn.serve.libre): the same
    texts, and the n-best list as alternatives (beam_size 16 is alternatives 15)."""
    n_best = max(body.get("n_best", 1), body.get("beam_size", 1) if body.get("beam_size", 1) > 4 else 1)
    target = (info.get("target_languages") or [info.get("tgt_lang")])[0]
    return {"q": body["text"], "source": info.get("src_lang"), "target": target, "alternatives": n_best - 1}


def hostile_requests(model_dir: Path, limits: dict, sentences: list[str]) -> dict[str, dict]:
    """The JSON bodies of the attention, timeout and draft requests, sized to the server's limits;
    `sentences`: the polite clients' texts."""
    from aiayn.decode.translator import Translator

    translator, rng = Translator.load(model_dir, device="cpu"), random.Random(0)
    words = sorted({w for t in sentences for w in t.split()})
    tokens = lambda text: len(translator.encode([text])[0])  # noqa: E731
    attention = _fill(words, lambda t: tokens(t) <= limits["max_attention_tokens"], rng)
    long_text = _fill(words, lambda t: len(t) <= limits["max_chars"], rng)
    cost = 16 * min(tokens(long_text) + 50, 1024)  # beam x longest output (the server's budget)
    count = min(limits["max_batch"], limits["max_work"] // cost)
    return {
        "attention": {"text": attention, "beam_size": 16, "n_best": 16, "attention": True},
        "timeout": {"text": [long_text] * count, "beam_size": 16},
        "draft": [{"text": sentences[: limits["max_batch"]], "beam_size": 1}]
        + [{"text": word, "beam_size": 1} for word in words],
    }


def _toy_draft(folder: Path) -> Path:
    """A smaller toy model (the tests' draft) with its shortlist, as the toy model's draft."""
    from aiayn.apps.shortlist import build_shortlist
    from toy import build_toy_model_dir  # tests/ is on the path once _toy_model has run
    from toy_translation import write_toy_data_dir

    print("training a toy draft model (a few seconds) ...", file=sys.stderr)
    draft = build_toy_model_dir(folder / "draft", steps=150, d_model=16, d_ff=32, n_heads=2, n_layers=1)
    build_shortlist(draft, write_toy_data_dir(folder / "draft-data", draft / "spm.model"), progress=False)
    return draft


async def _gigabyte():
    chunk = b" " * CHUNK
    for _ in range(GIGABYTE // CHUNK):
        yield chunk


async def _hostile_one(http: httpx.AsyncClient, url: str, kind: str, bodies: dict, tries: int) -> str:
    """One hostile request; those of LIBRE_KINDS go to POST /translate every other try."""
    libre = kind in LIBRE_KINDS and tries % 2 == 1
    post = f"{url}/translate" if libre else f"{url}/v1/translate"
    shaped = (lambda body: libre_body(body, bodies["info"])) if libre else (lambda body: body)  # noqa: E731
    json_type = {"content-type": "application/json"}
    try:
        if kind == "draft":
            response = await http.post(post, json=shaped(bodies[kind][tries // 2 % len(bodies[kind])]))
        elif kind in bodies:
            response = await http.post(post, json=shaped(bodies[kind]))
        elif kind == "splitter":
            text = SPLITTER_TEXTS[tries % len(SPLITTER_TEXTS)]
            response = await http.post(f"{url}/v1/translate/stream", json={"text": text})
        elif kind == "body":
            declared = {"content-length": str(GIGABYTE)} if tries // 2 % 2 == 0 else {}
            response = await http.post(post, content=_gigabyte(), headers=json_type | declared)
        else:
            response = await http.post(post, content=os.urandom(1000), headers=json_type)
        return f"{'libre ' * libre}{response.status_code}"
    except httpx.HTTPError as err:  # the server closed the connection on a refused body
        return type(err).__name__


async def _slow_connection(host: str, port: int, stop: float, out: Counter) -> None:
    """One connection that sends a header line every SLOW_EVERY_S s, reopened when it is closed."""
    while time.perf_counter() < stop:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError as err:
            out[f"slowheaders connect {type(err).__name__}"] += 1
            await asyncio.sleep(SLOW_EVERY_S)
            continue
        try:
            writer.write(b"POST /v1/translate HTTP/1.1\r\nHost: abuse\r\n")
            while time.perf_counter() < stop:
                try:
                    if await asyncio.wait_for(reader.read(1024), SLOW_EVERY_S) == b"":
                        out["slowheaders closed by the server"] += 1
                        break
                except TimeoutError:
                    writer.write(b"X-Slow: 1\r\n")
                    await writer.drain()
            else:
                out["slowheaders still open at the end"] += 1
        except OSError as err:
            out[f"slowheaders {type(err).__name__}"] += 1
        finally:
            writer.close()


async def _slow_headers(url: str, stop: float, out: Counter) -> None:
    host, port = httpx.URL(url).host, httpx.URL(url).port
    await asyncio.gather(*(_slow_connection(host, port, stop, out) for _ in range(SLOW_CONNECTIONS)))


async def _hostile(url: str, bodies: dict, kinds: list[str], stop: float, first: int, out: Counter) -> None:
    kinds = [k for k in kinds if k != "slowheaders"]
    if not kinds:
        return
    async with httpx.AsyncClient(timeout=60) as http:  # its own connections: it may lose them
        tries = 0
        while time.perf_counter() < stop:
            kind = kinds[(first + tries) % len(kinds)]
            out[f"{kind} {await _hostile_one(http, url, kind, bodies, tries // len(kinds))}"] += 1
            tries += 1


async def _health(http: httpx.AsyncClient, url: str, stop: float, out: dict) -> None:
    while time.perf_counter() < stop:
        start = time.perf_counter()
        try:
            ok = (await http.get(f"{url}/v1/health")).status_code == 200
        except httpx.HTTPError:
            ok = False
        out["latencies" if ok else "errors"].append(time.perf_counter() - start)
        await asyncio.sleep(0.05)


def _percentiles(latencies: list[float]) -> dict:
    lat = sorted(latencies)
    if not lat:
        return {"p50_ms": None, "p99_ms": None}
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    return {"p50_ms": round(1000 * statistics.median(lat), 1), "p99_ms": round(1000 * p99, 1)}


async def run(url: str, pid: int, texts: list[str], clients: int, hostile: int, bodies: dict, args) -> dict:
    polite: dict = {"latencies": [], "errors": 0}
    health: dict = {"latencies": [], "errors": []}
    got: Counter = Counter()
    limits = httpx.Limits(max_connections=clients + 1, max_keepalive_connections=clients + 1)
    async with httpx.AsyncClient(limits=limits, timeout=60) as http:
        await http.post(f"{url}/v1/translate", json={"text": texts})  # warm-up
        idle = memory_kb(pid)["VmRSS"]
        stop = time.perf_counter() + args.seconds
        await asyncio.gather(
            *(_client(http, url, V1(), texts, stop, seed, polite) for seed in range(clients)),
            _health(http, url, stop, health),
            *(_hostile(url, bodies, args.kinds.split(","), stop, i, got) for i in range(hostile)),
            *(_slow_headers(url, stop, got) for _ in range(hostile) if "slowheaders" in args.kinds),
        )
    return {
        "polite_requests": len(polite["latencies"]),
        "polite_errors": polite["errors"],
        **_percentiles(polite["latencies"]),
        "health_p99_ms": _percentiles(health["latencies"])["p99_ms"],
        "health_errors": len(health["errors"]),
        "idle_rss_mb": round(idle / 1024, 1),
        "peak_rss_mb": round(memory_kb(pid)["VmHWM"] / 1024, 1),
        "hostile": dict(sorted(got.items())),
    }


def report(alone: dict, abused: dict) -> bool:
    """Print the table and the targets; True if every target is met."""
    print("| run | polite p50 ms | polite p99 ms | polite requests | polite errors | health p99 ms |"
          " idle RSS MB | peak RSS MB |\n|---|---|---|---|---|---|---|---|")  # fmt: skip
    cols = (
        "p50_ms",
        "p99_ms",
        "polite_requests",
        "polite_errors",
        "health_p99_ms",
        "idle_rss_mb",
        "peak_rss_mb",
    )
    for name, r in (("polite alone", alone), ("with hostile clients", abused)):
        print("| " + " | ".join([name] + [str(r[c]) for c in cols]) + " |")
    print(f"\nhostile requests (kind, status or error): {abused['hostile']}\n")
    p99_ratio = abused["p99_ms"] / alone["p99_ms"]
    rss_ratio = abused["peak_rss_mb"] / abused["idle_rss_mb"]
    internal = sum(n for got, n in abused["hostile"].items() if got.endswith(" 500"))
    checks = [
        ("0 polite errors", alone["polite_errors"] + abused["polite_errors"] == 0),
        (f"polite p99 {p99_ratio:.2f}x alone (under {TARGET_P99_RATIO:g}x)", p99_ratio < TARGET_P99_RATIO),
        (f"peak RSS {rss_ratio:.2f}x idle (under {TARGET_RSS_RATIO:g}x)", rss_ratio < TARGET_RSS_RATIO),
        (f"health p99 under {TARGET_HEALTH_P99_MS:g} ms", abused["health_p99_ms"] < TARGET_HEALTH_P99_MS),
        (f"{internal} hostile requests answered 500 (none)", internal == 0),
    ]
    for name, ok in checks:
        print(f"{'yes' if ok else 'NO '}  {name}")
    return all(ok for _, ok in checks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a model directory (default: the tests' tiny toy model)")
    parser.add_argument("--draft", type=Path, help="its draft model, for the draft kind (default: a toy one)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--hostile", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help="what the hostile clients send, comma-separated"
    )
    args = parser.parse_args()
    if not set(args.kinds.split(",")) <= set(KINDS):
        parser.error(f"--kinds takes {', '.join(KINDS)}")
    drafted = "draft" in args.kinds.split(",")
    if drafted and args.model and not args.draft:
        parser.error("the draft kind with --model needs --draft DRAFT_MODEL")
    with tempfile.TemporaryDirectory() as tmp:
        model_dir, texts = (args.model, None) if args.model else _toy_model(Path(tmp))
        texts = texts or ["El perro come.", "La casa es grande.", "Buenos días."]
        flags = ["--timeout", str(TIMEOUT_S)]
        if drafted:
            flags += ["--draft", str(args.draft or _toy_draft(Path(tmp)))]
        results, bodies = {}, None
        for name, hostile in (("alone", 0), ("abused", args.hostile)):
            proc, url = start_server(model_dir, flags, Path(tmp) / f"{name}.log")
            try:
                if bodies is None:
                    info = httpx.get(f"{url}/v1/model").json()
                    bodies = hostile_requests(model_dir, info["limits"], texts) | {"info": info}
                results[name] = asyncio.run(run(url, proc.pid, texts, args.clients, hostile, bodies, args))
            finally:
                proc.terminate()
                proc.wait(timeout=30)
            print(f"{name}: {results[name]}", file=sys.stderr)
    model = args.model or "tiny toy"
    print(f"\n{args.clients} polite clients (+ {args.hostile} hostile) x {args.seconds:g} s, 127.0.0.1,")
    print(f"--timeout {TIMEOUT_S:g}, model {model}\n")
    return 0 if report(results["alone"], results["abused"]) else 1


if __name__ == "__main__":
    sys.exit(main())
