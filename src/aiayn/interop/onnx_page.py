"""index.html of an `export-onnx` directory: a page that translates in the browser, no server needed.

The page loads the export beside it with transformers.js (the npm package @huggingface/transformers,
pinned in the checkout's web/package.json and installed there by `make test` with `npm ci`), whose
bundle and ONNX Runtime Web's WebAssembly files are copied into OUT/transformers/: nothing is
fetched from a CDN or the Hugging Face Hub (env.allowRemoteModels = false). It translates each
line typed with greedy search (beam 1, as aiayn's greedy: <pad> and <s> banned by
generation_config.json's bad_words_ids, at most |source| + 50 tokens). `?dtype=q8` runs the int8
files of `--int8`. Serve OUT with any static file server (`python -m http.server -d OUT`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

PACKAGES = Path(__file__).resolve().parents[3] / "web" / "node_modules"  # a checkout's `npm ci`
RUNTIME_FILES = {  # file in OUT/transformers/ <- where the npm packages have it
    "transformers.min.js": "@huggingface/transformers/dist/transformers.min.js",
    "LICENSE-transformers.js": "@huggingface/transformers/LICENSE",
    "ort-wasm-simd-threaded.asyncify.mjs": "onnxruntime-web/dist/ort-wasm-simd-threaded.asyncify.mjs",
    "ort-wasm-simd-threaded.asyncify.wasm": "onnxruntime-web/dist/ort-wasm-simd-threaded.asyncify.wasm",
}

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>aiayn: translation in the browser</title>
<style>
body { font: 16px/1.5 system-ui, sans-serif; max-width: 46rem; margin: 2rem auto; padding: 0 1rem; }
textarea { width: 100%; font: inherit; box-sizing: border-box; }
#translation p { margin: .3rem 0; }
#status { color: #666; }
</style>
</head>
<body>
<h1>Translate</h1>
<p>One sentence a line. The model runs in this page (transformers.js and ONNX Runtime Web).</p>
<textarea id="source" rows="5" autofocus></textarea>
<p><button id="translate" disabled>Translate</button> <span id="status">loading the model…</span></p>
<div id="translation"></div>
<script type="module">
import { env, AutoTokenizer, AutoModelForSeq2SeqLM } from "./transformers/transformers.min.js";

const here = new URL(".", location.href);
env.allowRemoteModels = false;  // the export beside this page, never the Hub
env.allowLocalModels = true;
env.localModelPath = here.href;
env.useBrowserCache = false;
env.backends.onnx.wasm.wasmPaths = new URL("transformers/", here).href;  // no CDN
const dtype = new URLSearchParams(location.search).get("dtype") || "fp32";
const status = document.getElementById("status");
const button = document.getElementById("translate");
const started = performance.now();
const ready = Promise.all([
  AutoTokenizer.from_pretrained("."),
  AutoModelForSeq2SeqLM.from_pretrained(".", { dtype, device: "wasm" }),
]);

async function translate(texts) {
  const [tokenizer, model] = await ready;
  const out = [];
  for (const text of texts) {
    const inputs = await tokenizer(text);
    const ids = await model.generate({
      // aiayn's cap, |source| + 50 tokens before EOS: transformers.js counts the start token too
      ...inputs, num_beams: 1, do_sample: false, max_new_tokens: inputs.input_ids.dims[1] + 51,
    });
    out.push(tokenizer.decode(ids[0], { skip_special_tokens: true }));
  }
  return out;
}

window.aiayn = { translate, ready: ready.then(() => performance.now() - started) };
ready.then(() => { status.textContent = `ready (${dtype})`; button.disabled = false; },
           (err) => { status.textContent = `could not load the model: ${err}`; });
button.addEventListener("click", async () => {
  const lines = document.getElementById("source").value.split("\\n").filter((l) => l.trim());
  status.textContent = "translating…";
  const t0 = performance.now();
  const done = await translate(lines);
  const box = document.getElementById("translation");
  box.replaceChildren(...done.map((t) => Object.assign(document.createElement("p"), { textContent: t })));
  status.textContent = `${lines.length} sentence(s) in ${((performance.now() - t0) / 1000).toFixed(2)} s`;
});
</script>
</body>
</html>
"""


def write_page(out: Path) -> str | None:
    """index.html and transformers/ (the runtime) in `out`; None, or why the runtime is missing."""
    (out / "index.html").write_text(PAGE)
    packages = Path(os.environ.get("AIAYN_NODE_MODULES", PACKAGES))
    missing = [source for source in RUNTIME_FILES.values() if not (packages / source).is_file()]
    if missing:
        return (
            f"{packages / missing[0]} is missing: index.html needs transformers.js in {out / 'transformers'} "
            "(run `npm ci --ignore-scripts` in aiayn's web/, or set AIAYN_NODE_MODULES to a node_modules "
            "holding @huggingface/transformers and onnxruntime-web)"
        )
    (out / "transformers").mkdir()
    for name, source in RUNTIME_FILES.items():
        shutil.copyfile(packages / source, out / "transformers" / name)
    return None
