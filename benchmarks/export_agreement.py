"""Do the tools people convert aiayn's exports with translate as aiayn does?

Exports MODEL_DIR with `aiayn export-hf`, converts the result with CTranslate2's converter (what
`ct2-transformers-converter` runs), and translates the first --limit lines of DATA/raw/test.src
with aiayn, CTranslate2 and Transformers' `MarianMTModel.generate`, counting identical outputs
(token for token). Each row pairs a tool's call with the aiayn settings that should match it; the
"defaults" rows show what a user of that tool gets without them. Lengths are each tool's default
(aiayn: |source| + 50 tokens; CTranslate2: 256; generate: max_length 512); the lines where aiayn
reached its cap are counted.

    python benchmarks/export_agreement.py --model runs/quickstart/model --data runs/quickstart/data \\
        [--limit 500] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import warnings
from pathlib import Path

import torch


def ct2_rows(hf_dir: Path, out_dir: Path, texts: list[str]) -> dict[str, list[list[int]]]:
    import ctranslate2
    import transformers
    from ctranslate2.converters import TransformersConverter

    TransformersConverter(str(hf_dir)).convert(str(out_dir))
    translator = ctranslate2.Translator(str(out_dir), device="cpu", intra_threads=torch.get_num_threads())
    tokenizer = transformers.MarianTokenizer.from_pretrained(hf_dir)
    source = [tokenizer.convert_ids_to_tokens(ids) for ids in tokenizer(texts)["input_ids"]]
    matching = dict(min_decoding_length=0, return_end_token=True)
    calls = {
        "greedy": dict(beam_size=1, **matching),
        "beam4": dict(beam_size=4, length_penalty=1.0, **matching),
        "beam4-defaults": dict(beam_size=4),
    }
    out = {}
    for name, options in calls.items():
        results = translator.translate_batch(source, max_batch_size=64, **options)
        pieces = [[p for p in r.hypotheses[0] if p != tokenizer.eos_token] for r in results]
        out[name] = [tokenizer.convert_tokens_to_ids(p) for p in pieces]
    return out


def generate_rows(hf_dir: Path, texts: list[str]) -> dict[str, list[list[int]]]:
    import transformers

    tokenizer = transformers.MarianTokenizer.from_pretrained(hf_dir)
    model = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
    special = {tokenizer.pad_token_id, tokenizer.eos_token_id}
    out = {}
    for name, options in {"greedy": dict(num_beams=1), "beam4": dict()}.items():
        rows = []
        for i in range(0, len(texts), 32):
            batch = tokenizer(texts[i : i + 32], return_tensors="pt", padding=True)
            with torch.no_grad():
                generated = model.generate(**batch, **options)
            rows += [[t for t in row[1:] if t not in special] for row in generated.tolist()]
        out[name] = rows
    return out


def aiayn_rows(model_dir: Path, texts: list[str]) -> tuple[dict[str, list[list[int]]], dict[str, int]]:
    """aiayn's outputs as the export's ids, and how many reached the length cap, per setting."""
    from aiayn.decode.translator import Translator
    from aiayn.interop.opus_layout import OpusLayout

    translator = Translator.load(model_dir)
    to_export = torch.argsort(OpusLayout.of(translator.config).target)
    caps = [len(ids) + 1 + 50 for ids in translator.encode(texts)]  # |source| with EOS, + 50
    settings = {
        "greedy": dict(beam_size=1),
        "beam4-fairseq": dict(beam_size=4, alpha=1.0, length_penalty_style="fairseq"),
        "beam4-len": dict(beam_size=4, alpha=1.0, length_penalty_style="len"),
    }
    out, capped = {}, {}
    for name, options in settings.items():
        best = [t[0].tokens for t in translator.translate_batch(texts, **options)]
        out[name] = [to_export[tokens].tolist() for tokens in best]
        capped[name] = sum(len(tokens) >= cap for tokens, cap in zip(best, caps, strict=True))
    return out, capped


PAIRS = [  # (row, tool, tool's setting, aiayn's setting)
    ("greedy", "ctranslate2", "greedy", "greedy"),
    ("beam 4, length_penalty 1, return_end_token, min_length 0", "ctranslate2", "beam4", "beam4-fairseq"),
    ("beam 4, CTranslate2's defaults", "ctranslate2", "beam4-defaults", "beam4-fairseq"),
    ("greedy (num_beams=1)", "generate", "greedy", "greedy"),
    ("beam 4, generation_config.json's defaults", "generate", "beam4", "beam4-len"),
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, required=True, help="an aiayn model directory")
    parser.add_argument("--data", type=Path, required=True, help="its data directory (raw/test.src)")
    parser.add_argument("--limit", type=int, default=500, help="test lines (default 500)")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message=".*sacremoses")
    texts = (args.data / "raw" / "test.src").read_text().splitlines()[: args.limit]
    from aiayn.interop.hf_export import export_hf

    with tempfile.TemporaryDirectory() as tmp:
        hf_dir = export_hf(args.model, Path(tmp) / "hf")
        tools = {
            "ctranslate2": ct2_rows(hf_dir, Path(tmp) / "ct2", texts),
            "generate": generate_rows(hf_dir, texts),
        }
    ours, capped = aiayn_rows(args.model, texts)
    rows = []
    for label, tool, theirs, setting in PAIRS:
        same = sum(a == b for a, b in zip(tools[tool][theirs], ours[setting], strict=True))
        rows.append(dict(tool=tool, call=label, aiayn=setting, identical=same, lines=len(texts)))
        print(f"{tool:12} {label:58} aiayn {setting:14} identical {same}/{len(texts)}")
    print("aiayn outputs at its length cap: " + ", ".join(f"{k} {v}" for k, v in capped.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "capped": capped}, indent=2) + "\n")


if __name__ == "__main__":
    main()
