"""Translator: text in, text out with the beam search of section 6.1.

    translator = Translator.load("runs/quickstart/model")
    translator = Translator.load("runs/quickstart/model", int8=True)   # int8 linear layers, CPU
    translator.translate(["En el principio era el Verbo."])           # ['In the beginning ...']
    translator.translate(texts, beam_size=4, n_best=4)                 # [[Translation, ...], ...]

Sources are cut into pieces and closed with EOS (as in training), sorted by length into batches
of at most `batch_tokens` source tokens (padding counted) and translated together; results come
back in input order. An empty text translates to an empty text without running the model; a text
longer than the model's source limit is truncated, with a warning.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.config import DecodeConfig
from aiayn.decode.search import Hypothesis
from aiayn.decode.stepper import Constrain, decode_batch, source_limit
from aiayn.errors import AiaynError
from aiayn.model.io import load_model_dir
from aiayn.model.linear import pack_for_inference
from aiayn.model.quantize import check_int8_device, is_int8, quantize_int8
from aiayn.model.transformer import Transformer

TruncationHook = Callable[[int, int, int], None]  # (index in the input, its length, the limit)
ProgressHook = Callable[[int], None]  # called with the number of sentences just translated


@dataclass
class Translation:
    """One hypothesis: its text, ranking score log P / lp, log P and target ids (without EOS)."""

    text: str
    score: float
    log_prob: float
    tokens: list[int]


def load_tokenizer(model_dir: str | Path, info: dict[str, Any]) -> Any:
    """The tokenizer that config.json's "tokenizer" entry names (SentencePiece, or Marian's)."""
    settings = info.get("tokenizer") or {"type": "sentencepiece", "model": "spm.model"}
    kind = settings.get("type")
    if kind == "sentencepiece":
        from aiayn.data.tokenizer import Tokenizer

        return Tokenizer.load(Path(model_dir) / settings.get("model", "spm.model"))
    if kind == "marian":
        from aiayn.interop.marian_tokenizer import MarianVocabTokenizer

        return MarianVocabTokenizer.from_settings(Path(model_dir), settings)
    raise AiaynError(f"{Path(model_dir) / 'config.json'}: unknown tokenizer type {kind!r}")


def _warn_truncated(index: int, length: int, limit: int) -> None:
    message = f"source {index + 1} has {length} tokens; only its first {limit} are translated"
    warnings.warn(message, stacklevel=3)


def token_batches(lengths: list[int], batch_tokens: int) -> list[list[int]]:
    """Indices sorted by length (longest first) and cut into batches of <= batch_tokens, padding counted.

    A single sentence longer than batch_tokens gets a batch of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= batch_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


class Translator:
    """A model with its tokenizer. `.model` (Transformer, eval mode), `.tokenizer`, `.config`, `.info`."""

    def __init__(self, model: Transformer, tokenizer: Any, info: dict[str, Any] | None = None):
        self.model, self.tokenizer, self.info = model, tokenizer, info or {}
        self.config = model.config

    @classmethod
    def load(
        cls, model_dir: str | Path, device: str | torch.device | None = None, int8: bool = False
    ) -> Translator:
        """Read a model directory (config.json, model.safetensors, tokenizer); GPU when there is one.

        `int8`: quantise the linear layers for int8 inference (aiayn.model.quantize; CPU only, and
        the CPU by default).
        """
        if int8:
            device = check_int8_device(device)
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        model, info = load_model_dir(model_dir, device)
        if int8:
            quantize_int8(model)
        else:
            pack_for_inference(model)  # weights reordered once for oneDNN, where that measures faster
        return cls(model, load_tokenizer(model_dir, info), info)

    @property
    def int8(self) -> bool:
        """Whether the model runs in int8 (Translator.load(..., int8=True))."""
        return is_int8(self.model)

    @property
    def device(self) -> torch.device:
        return self.model.output_weight.device

    def encode(self, texts: list[str], on_truncate: TruncationHook | None = None) -> list[list[int]]:
        """Source ids of each text: pieces + EOS, cut to the model's source limit; [] for an empty text."""
        limit, eos = source_limit(self.config), self.config.eos_id
        out = []
        for i, ids in enumerate(self.tokenizer.encode(list(texts))):
            if ids and len(ids) + 1 > limit:
                (on_truncate or _warn_truncated)(i, len(ids) + 1, limit)
                ids = ids[: limit - 1]
            out.append(ids + [eos] if ids else [])
        return out

    def _src_tensor(self, sources: list[list[int]]) -> Tensor:
        """Right-padded (n, max_len) long tensor on the model's device."""
        src = torch.full((len(sources), max(map(len, sources))), self.config.pad_id, dtype=torch.long)
        for row, ids in enumerate(sources):
            src[row, : len(ids)] = torch.tensor(ids)
        return src.to(self.device)

    def translate_ids(
        self,
        sources: list[list[int]],
        options: DecodeConfig,
        progress: ProgressHook | None = None,
        constrain: Callable[[list[int]], Constrain] | None = None,
    ) -> list[list[Hypothesis]]:
        """Source ids (pieces + EOS) -> up to n_best hypotheses each, in input order.

        An empty source gives one empty hypothesis with score 0 without running the model.
        `constrain(index)`, given the input indices of a batch's sentences, wraps the search's
        stepper for that batch (see `decode_batch`).
        """
        results: list[list[Hypothesis]] = [[] for _ in sources]
        nonempty = [i for i, ids in enumerate(sources) if ids]
        lengths = [len(sources[i]) for i in nonempty]
        for batch in token_batches(lengths, options.batch_tokens):
            index = [nonempty[b] for b in batch]
            src = self._src_tensor([sources[i] for i in index])  # (batch, src_len)
            wrap = constrain(index) if constrain is not None else None
            for i, hyps in zip(index, decode_batch(self.model, src, options, wrap), strict=True):
                if not hyps or not math.isfinite(hyps[0].score):  # NaN or -inf everywhere
                    raise AiaynError(f"text {i + 1}: the model's scores are not finite (are its weights?)")
                results[i] = hyps
            if progress is not None:
                progress(len(index))
        for i, ids in enumerate(sources):
            if not ids:
                results[i] = [Hypothesis([], 0.0, 0.0)]
        if progress is not None:
            progress(len(sources) - len(nonempty))
        return results

    def translate(
        self,
        texts: list[str],
        beam_size: int = 4,
        alpha: float = 0.6,
        n_best: int = 1,
        max_len_a: float = 1.0,
        max_len_b: int = 50,
        length_penalty_style: str = "gnmt",
        batch_tokens: int = 4096,
        return_scores: bool = False,
        on_truncate: TruncationHook | None = None,
        progress: ProgressHook | None = None,
    ) -> list[str] | list[list[Translation]]:
        """Translate `texts` with beam search (greedy when beam_size is 1).

        Returns a list of strings, or, with n_best > 1 or return_scores, for each text a list of up
        to n_best `Translation`s, best first. `on_truncate(index, length, limit)` is called for
        each over-long source (default: a `warnings.warn`); `progress(n)` after each batch.
        """
        options = DecodeConfig(
            beam_size, alpha, length_penalty_style, max_len_a, max_len_b, n_best, batch_tokens
        )
        if isinstance(texts, str):
            raise AiaynError("translate() takes a list of texts, not one string")
        hyps = self.translate_ids(self.encode(texts, on_truncate), options, progress)
        flat = [h for hs in hyps for h in hs]
        decoded = iter(self.tokenizer.decode([h.tokens for h in flat]) if flat else [])
        out = [[Translation(next(decoded), h.score, h.log_prob, h.tokens) for h in hs] for hs in hyps]
        if n_best == 1 and not return_scores:
            return [t[0].text for t in out]
        return out

    @torch.inference_mode()
    def attention(self, text: str, beam_size: int = 4, alpha: float = 0.6) -> dict[str, Any]:
        """Translate one text and return the attention of every layer on that translation.

        Keys: translation (str); src_tokens (source pieces + "</s>"); tgt_tokens (output pieces +
        "</s>": the tokens each decoder position predicts); encoder, decoder, cross: lists with one
        float32 CPU tensor per layer, shaped (heads, src, src), (heads, tgt, tgt) and (heads, tgt, src).
        """
        (src_ids,) = self.encode([text])
        if not src_ids:
            raise AiaynError("attention() needs a non-empty text")
        hyp = self.translate_ids([src_ids], DecodeConfig(beam_size=beam_size, alpha=alpha))[0][0]
        tgt_in = [self.config.start_id] + hyp.tokens  # the decoder's inputs; it predicts tokens + EOS
        src = torch.tensor([src_ids], device=self.device)
        maps = self.model.attention_maps(src, torch.tensor([tgt_in], device=self.device))
        target_pieces = getattr(self.tokenizer, "target_pieces", self.tokenizer.pieces)
        result: dict[str, Any] = {
            "translation": self.tokenizer.decode([hyp.tokens])[0],
            "src_tokens": self.tokenizer.pieces(src_ids[:-1]) + ["</s>"],
            "tgt_tokens": target_pieces(hyp.tokens) + ["</s>"],
        }
        for kind in ("encoder", "decoder", "cross"):
            result[kind] = [w[0].float().cpu() for w in maps[kind]]
        return result
