"""The page of `aiayn export-onnx` in headless Chromium: time to the first translation, sentences/s.

A model directory (default: `make demo`'s runs/quickstart/model) is exported with --int8 to a
temporary directory, served by Python's static file server on 127.0.0.1, and opened in Debian's
chromium (headless, through Playwright) once per dtype (fp32, and q8: the int8 files). Measured in
the page: from navigation to the model loaded, then to the first sentence translated, then
greedy translation of `--sentences` lines of `--source` one at a time (transformers.js, ONNX
Runtime Web's WebAssembly backend; one thread: a plain static server sends no cross-origin
isolation headers, so the page gets no SharedArrayBuffer). aiayn's greedy search on the same
lines (`--threads`, batched as `aiayn translate` batches) is printed beside it, and how many of the
page's translations equal aiayn's.

    python benchmarks/onnx_page.py [--model runs/quickstart/model] [--source FILE] [--sentences 40]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import tempfile
import threading
import time
from pathlib import Path

import torch

from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translator
from aiayn.interop.onnx_export import export_onnx

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def time_page(url: str, dtype: str, lines: list[str]) -> dict:
    """Seconds to load, to the first translation, and for all lines; the page's translations."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        start = time.perf_counter()
        page.goto(f"{url}?dtype={dtype}")
        page.wait_for_function("window.aiayn !== undefined")
        page.evaluate("window.aiayn.ready")
        loaded = time.perf_counter()
        page.evaluate("texts => window.aiayn.translate(texts)", lines[:1])
        first = time.perf_counter()
        out = page.evaluate("texts => window.aiayn.translate(texts)", lines)
        done = time.perf_counter()
        browser.close()
    return {"load": loaded - start, "first": first - start, "all": done - first, "out": out}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=Path("runs/quickstart/model"))
    p.add_argument("--source", type=Path, help="one sentence a line (default: the run's data/raw/test.src)")
    p.add_argument("--sentences", type=int, default=40)
    p.add_argument("--threads", type=int, default=2, help="aiayn's threads (the page has one)")
    args = p.parse_args()
    source = args.source or args.model.parent / "data" / "raw" / "test.src"
    lines = [line.strip() for line in source.read_text().splitlines() if line.strip()][: args.sentences]
    torch.set_num_threads(args.threads)
    translator = Translator.load(args.model, device="cpu")
    translate_texts(translator, lines[:2], beam_size=1)  # warm-up
    start = time.perf_counter()
    ours = translate_texts(translator, lines, beam_size=1)
    aiayn_s = time.perf_counter() - start
    print(f"{len(lines)} sentences of {source}; aiayn greedy ({args.threads} threads): "
          f"{len(lines) / aiayn_s:.1f} sentences/s")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        out = export_onnx(args.model, Path(tmp) / "onnx", int8=True)
        handler = functools.partial(Quiet, directory=str(out))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        try:
            for dtype in ("fp32", "q8"):
                t = time_page(url, dtype, lines)
                same = sum(a == b for a, b in zip(t["out"], ours, strict=True))
                print(f"page {dtype:4s}: model loaded {t['load']:.2f} s, first translation "
                      f"{t['first']:.2f} s after navigation, {len(lines) / t['all']:.1f} sentences/s; "
                      f"same text as aiayn's greedy: {same}/{len(lines)}")  # fmt: skip
                for page, aiayn in zip(t["out"], ours, strict=True):
                    if dtype == "fp32" and page != aiayn:
                        print(f"  page:  {page}\n  aiayn: {aiayn}")
        finally:
            server.shutdown()


if __name__ == "__main__":
    main()
