"""The page at /: its files, and a real browser (Debian's chromium) driving `aiayn serve`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

import aiayn

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def test_page_files_are_served(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="/static/app.js">' in page.text
    assert client.get("/static/app.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/static/style.css").headers["content-type"].startswith("text/css")
    # a query string cannot pick another file (or a missing one)
    for query in ("name=index.html", "name=nothing"):
        response = client.get(f"/static/app.js?{query}")
        assert response.status_code == 200 and response.text == client.get("/static/app.js").text
    for path in ("/static/index.html", "/static/../../config.json", "/static/spm.model", "/config.json"):
        response = client.get(path)
        assert response.status_code == 404 and response.json() == {"detail": "Not Found"}
    assert client.get("/docs").status_code == 200
    schema = client.get("/openapi.json").json()
    assert "/v1/translate" in schema["paths"] and schema["info"]["version"] == aiayn.__version__


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def server(toy_model_dir, tmp_path):
    """`aiayn serve` in a subprocess on 127.0.0.1; yields its base URL."""
    port = _free_port()
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed below
    cmd = [
        sys.executable,
        "-m",
        "aiayn",
        "serve",
        str(toy_model_dir),
        "--port",
        str(port),
        "--max-chars",
        "200",
    ]
    proc = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            if proc.poll() is not None:
                pytest.fail(f"aiayn serve exited: {(tmp_path / 'server.log').read_text()}")
            try:
                if httpx.get(f"{url}/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _cells(page) -> list[dict]:
    return page.eval_on_selector_all("#heatmap rect.cell", "els => els.map(e => ({...e.dataset}))")


def _check_cells(cells, rows, cols, weights):
    """One cell per (row token, column token) pair, labelled and weighted as the API says."""
    assert len(cells) == len(rows) * len(cols)
    grid = np.zeros((len(rows), len(cols)))
    for cell in cells:
        q, k = int(cell["row"]), int(cell["col"])
        assert (cell["query"], cell["key"]) == (rows[q], cols[k])
        grid[q, k] = float(cell["weight"])
    np.testing.assert_allclose(grid, weights, atol=2e-4)


@pytest.mark.slow
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (Debian package chromium)")
def test_browser_translates_and_draws_attention(server, tmp_path):
    from playwright.sync_api import sync_playwright

    text = "el perro come"
    api = httpx.post(f"{server}/v1/translate", json={"text": text, "attention": True}, timeout=60).json()
    (expected,) = api["translations"]
    attn = expected["attention"]
    src, tgt = attn["src_tokens"], attn["tgt_tokens"]
    cross = np.array(attn["cross"])  # (layers, heads, tgt, src)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.goto(server)
        page.fill("#source", text)
        page.click("#translate")
        page.wait_for_selector("#heatmap rect.cell", timeout=60_000)
        assert page.inner_text("#translation").strip() == expected["text"] != ""
        assert page.is_visible("#attention")

        _check_cells(_cells(page), tgt, src, cross[-1].mean(axis=0))  # last layer, average of heads
        page.select_option("#layer", "0")
        page.select_option("#head", "1")
        _check_cells(_cells(page), tgt, src, cross[0, 1])

        page.click("button[data-kind=encoder]")
        _check_cells(_cells(page), src, src, np.array(attn["encoder"])[0, 1])
        page.click("button[data-kind=decoder]")
        decoder_inputs = ["<s>"] + tgt[:-1]
        _check_cells(_cells(page), decoder_inputs, decoder_inputs, np.array(attn["decoder"])[0, 1])

        page.click("button[data-kind=cross]")
        page.select_option("#head", "avg")
        cell = page.locator(f'#heatmap rect.cell[data-row="0"][data-col="{len(src) - 1}"]')
        cell.hover()
        tooltip = page.inner_text("#tooltip")
        assert tooltip == f"{tgt[0]} \u2192 {src[-1]}: {cross[0, :, 0, -1].mean():.4f}"
        page.screenshot(path=str(tmp_path / "page.png"), full_page=True)

        _sentences_stream_in_and_each_shows_its_attention(page, server)

        page.fill("#source", "a" * 201)
        page.click("#translate")
        page.wait_for_selector("#error:not([hidden])")
        assert "the limit is 200" in page.inner_text("#error")
        browser.close()
    assert (tmp_path / "page.png").stat().st_size > 10_000


def _sentences_stream_in_and_each_shows_its_attention(page, server):
    """Two paragraphs of two and one sentences: the page shows what /v1/translate/stream sends, in
    paragraphs, and a click on a sentence draws that sentence's attention."""
    doc = "El perro come. La casa es grande.\n\nEl sol."  # Moses splits before a capital
    stream = httpx.post(f"{server}/v1/translate/stream", json={"text": doc}, timeout=60).text
    sent = [json.loads(line[6:]) for line in stream.splitlines() if line.startswith("data: ")][:-1]
    page.fill("#source", doc)
    page.click("#translate")
    count = "document.querySelectorAll('#translation .sentence').length === 3"
    page.wait_for_function(count, timeout=60_000)
    spans = page.eval_on_selector_all(
        "#translation .sentence", "els => els.map(e => [e.closest('p').dataset.paragraph, e.textContent])"
    )
    assert spans == [[str(s["paragraph"]), s["text"]] for s in sent]
    assert [s["paragraph"] for s in sent] == [0, 0, 1]
    second = sent[1]["source"]
    api = httpx.post(f"{server}/v1/translate", json={"text": second, "attention": True}, timeout=60).json()
    attn = api["translations"][0]["attention"]
    page.click('#translation .sentence[data-index="1"]')
    page.wait_for_selector('#heatmap[data-sentence="1"]', timeout=60_000)
    page.select_option("#layer", "0")
    page.select_option("#head", "0")
    _check_cells(_cells(page), attn["tgt_tokens"], attn["src_tokens"], np.array(attn["cross"])[0, 0])
