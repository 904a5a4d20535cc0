"""Scoring translations as section 6.1 reports them: corpus BLEU, here sacreBLEU (with its signature,
so that a number can be reproduced) and chrF.

    evaluate_model("runs/quickstart/model", "data/bible-es-en", split="test")   # translate + score
    evaluate_files("hyp.txt", "ref.txt")                                       # score existing text

Each returns a dict with "bleu", "chrf", their signatures and sacreBLEU's own score lines
("bleu_text", "chrf_text"), which is what `aiayn evaluate` prints and writes to scores.json.
"""

from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path
from typing import Any

import torch
from sacrebleu.metrics import BLEU, CHRF
from tqdm import tqdm

from aiayn.config import DecodeConfig
from aiayn.data.datadir import DataDir
from aiayn.decode.translator import Translator
from aiayn.errors import AiaynError
from aiayn.model.transformer import Transformer
from aiayn.safe_io import atomic_write_text, capped_lines, input_file, output_dir

SCORES_FILE = "scores.json"


def score_texts(hypotheses: list[str], references: list[str]) -> dict[str, Any]:
    """Corpus BLEU and chrF of hypotheses against one reference each (sacreBLEU defaults)."""
    if len(hypotheses) != len(references):
        raise AiaynError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        raise AiaynError("nothing to score: 0 sentences")
    scores: dict[str, Any] = {"n_sentences": len(hypotheses)}
    for name, metric in (("bleu", BLEU()), ("chrf", CHRF())):
        result = metric.corpus_score(hypotheses, [references])
        signature = str(metric.get_signature())
        scores[name] = round(float(result.score), 4)
        scores[f"{name}_signature"] = signature
        scores[f"{name}_text"] = result.format(signature=signature)
    return scores


def read_lines(path: str | Path) -> list[str]:
    """The lines of a UTF-8 text file, without line ends; a clear error for a missing or bad file."""
    path = input_file(path, stream=True)  # read once: a pipe (-i /dev/stdin) will do
    lines = []
    with path.open("rb") as f:
        for number, raw in enumerate(capped_lines(f, str(path)), start=1):
            try:
                lines.append(raw.decode("utf-8").rstrip("\r\n"))
            except UnicodeDecodeError:
                raise AiaynError(f"{path}:{number}: invalid UTF-8") from None
    return lines


def evaluate_files(hyp_path: str | Path, ref_path: str | Path) -> dict[str, Any]:
    """Score an existing hypothesis file against a reference file (same number of lines)."""
    hyps, refs = read_lines(hyp_path), read_lines(ref_path)
    if len(hyps) != len(refs):
        raise AiaynError(f"{hyp_path} has {len(hyps)} lines but {ref_path} has {len(refs)}")
    return {**score_texts(hyps, refs), "hypotheses": str(hyp_path), "references": str(ref_path)}


def _translator(
    model: Translator | Transformer | str | Path, data: DataDir, device: Any, int8: bool = False
) -> Translator:
    """A Translator from a Translator, a model directory, or a Transformer (+ the data's spm.model)."""
    if int8 and not isinstance(model, (str, Path)):
        raise AiaynError("int8 applies to a model directory (or quantise with aiayn.runtime.quantize)")
    if isinstance(model, Translator):
        return model
    if isinstance(model, torch.nn.Module):
        model = getattr(model, "module", model)  # DistributedDataParallel
        model = getattr(model, "_orig_mod", model)  # torch.compile
        if not isinstance(model, Transformer):
            raise AiaynError(f"evaluate_model needs a Transformer, got {type(model).__name__}")
        return Translator(model, data.tokenizer())
    return Translator.load(model, device, int8=int8)


def _warn_split(src_path: Path, index: int, length: int, limit: int, parts: int) -> None:
    message = (
        f"{src_path}:{index + 1}: {length} tokens, over the limit of {limit}: translated in {parts} parts"
    )
    warnings.warn(message, stacklevel=4)


def write_scores(scores: dict[str, Any], out_dir: str | Path) -> Path:
    """Write scores.json into out_dir (atomically) and return its path."""
    out = output_dir(out_dir, "--out")
    return atomic_write_text(out / SCORES_FILE, json.dumps(scores, indent=2, ensure_ascii=False) + "\n")


def evaluate_model(
    model: Translator | Transformer | str | Path,
    data_dir: str | Path,
    split: str = "test",
    decode_config: DecodeConfig | None = None,
    out_dir: str | Path | None = None,
    device: Any = None,
    limit: int | None = None,
    progress: bool = False,
    int8: bool = False,
) -> dict[str, Any]:
    """Translate DATA_DIR/raw/{split}.src with beam search and score it against raw/{split}.tgt.

    `model`: a Translator, a model directory, or a Transformer (its tokenizer is the data
    directory's spm.model; the trainer's dev BLEU). With `out_dir`, the hypotheses go to
    out_dir/{split}.hyp and the scores to out_dir/scores.json. `limit`: the first N sentences only.
    `int8`: load the model directory for int8 inference (CPU; aiayn.runtime.quantize).
    """
    if limit is not None and limit <= 0:
        raise AiaynError(f"limit must be a positive number of sentences, got {limit}")
    data = DataDir(data_dir)
    src_path, ref_path = data.raw(split, "src"), data.raw(split, "tgt")
    sources, references = read_lines(src_path)[:limit], read_lines(ref_path)[:limit]
    out = None if out_dir is None else output_dir(out_dir, "--out")  # after the inputs, before the work
    if len(sources) != len(references):
        raise AiaynError(f"{src_path} has {len(sources)} lines but {ref_path} has {len(references)}")
    translator = _translator(model, data, device, int8)
    d = decode_config or DecodeConfig()
    was_training = translator.model.training
    translator.model.eval()
    with tqdm(total=len(sources), desc=f"translating {split}", unit="sent", disable=not progress) as bar:
        hypotheses = translator.translate(
            sources,
            d.replace(n_best=1),
            on_split=functools.partial(_warn_split, src_path),
            progress=bar.update,
        )
    translator.model.train(was_training)
    scores = {"split": split, **score_texts(hypotheses, references), "decode": d.to_dict()}
    if translator.int8:
        scores["int8"] = True
    if out is not None:
        hyp_path = out / f"{split}.hyp"
        atomic_write_text(hyp_path, "".join(h + "\n" for h in hypotheses))
        scores["hypotheses"] = str(hyp_path)
        write_scores(scores, out)
    return scores
