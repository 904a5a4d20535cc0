"""Scoring translations as section 6.1 reports them: corpus BLEU, here sacreBLEU (with its signature,
so that a number can be reproduced) and chrF.

    evaluate_model("runs/quickstart/model", "data/bible-es-en", split="test")   # translate + score
    evaluate_files("hyp.txt", "ref.txt")                                       # score existing text

Each returns a dict with "bleu", "chrf", their signatures and sacreBLEU's own score lines
("bleu_text", "chrf_text"), which is what `aiayn evaluate` prints and writes to scores.json.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from sacrebleu.metrics import BLEU, CHRF

from aiayn.config import DecodeConfig
from aiayn.data.datadir import DataDir
from aiayn.decode.bundle import ModelBundle, load_bundle
from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translator
from aiayn.errors import AiaynError
from aiayn.evaluate.split import Split, evaluate_split
from aiayn.model.transformer import Transformer
from aiayn.safe_io import capped_lines, input_file


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
        return Translator(ModelBundle([model], data.tokenizer()))
    return Translator(load_bundle(model, device, int8=int8))


def _warn_split(src_path: Path, index: int, length: int, limit: int, parts: int) -> None:
    message = (
        f"{src_path}:{index + 1}: {length} tokens, over the limit of {limit}: translated in {parts} parts"
    )
    warnings.warn(message, stacklevel=4)


class TranslationTask:
    """Section 6.1's evaluation: raw/{split}.src translated with beam search, scored against
    raw/{split}.tgt (corpus BLEU and chrF)."""

    verb = "translating"

    def default_decode(self) -> DecodeConfig:
        return DecodeConfig()

    def read(self, data: DataDir, split: str, limit: int | None) -> Split:
        src_path, ref_path = data.raw(split, "src"), data.raw(split, "tgt")
        sources, references = read_lines(src_path)[:limit], read_lines(ref_path)[:limit]
        if len(sources) != len(references):
            raise AiaynError(f"{src_path} has {len(sources)} lines but {ref_path} has {len(references)}")
        return Split(sources, references, src_path)

    def load(self, model: Translator | Transformer | str | Path, data: DataDir, device: Any, int8: bool):
        return _translator(model, data, device, int8)

    def decode(
        self, decoder: Translator, split: Split, options: DecodeConfig, progress: Callable[[int], object]
    ) -> list[str]:
        """The best translation of each source, in eval mode (the trainer's model goes back to training)."""
        model = decoder.bundle.model
        was_training = model.training
        model.eval()
        on_split = functools.partial(_warn_split, split.path)
        hypotheses = translate_texts(
            decoder, split.inputs, options.replace(n_best=1), on_split=on_split, progress=progress
        )
        model.train(was_training)
        return hypotheses

    def score(self, hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, Any]:
        return score_texts(list(hypotheses), list(references))


TRANSLATION = TranslationTask()


def evaluate_model(
    model: Translator | Transformer | str | Path,
    data_dir: str | Path,
    split: str = "test",
    decode_config: DecodeConfig | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Translate DATA_DIR/raw/{split}.src with beam search and score it against raw/{split}.tgt.

    `model`: a Translator, a model directory, or a Transformer (its tokenizer is the data
    directory's spm.model; the trainer's dev BLEU). `options`: out_dir, device, limit, progress and
    int8, as aiayn.evaluate.split.evaluate_split takes them (with `out_dir`, the hypotheses go to
    out_dir/{split}.hyp and the scores to out_dir/scores.json).
    """
    return evaluate_split(TRANSLATION, model, data_dir, split, decode_config, **options)
