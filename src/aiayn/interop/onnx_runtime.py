"""An `export-onnx` directory run by ONNX Runtime, searched by aiayn's greedy and beam search (6.1).

`OnnxStepper` is a `Stepper` (aiayn.decode.rules) over the two ONNX sessions: encoder_model.onnx
once per batch, then decoder_model_merged.onnx once per step, first with use_cache_branch false
and empty past tensors (the cross-attention keys and values are projected and returned), then with
the previous step's present tensors as its past, as transformers.js and Optimum run it. The search
itself is aiayn's, so outputs equal aiayn's whenever the two networks agree on every choice: the
tests' check of the export, and the benchmark's ONNX Runtime rows (benchmarks/decode.py --onnx).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
from torch import Tensor

from aiayn.config import DecodeConfig
from aiayn.decode.rules import Hypothesis, SearchRules
from aiayn.decode.strategies import beam_search, greedy_search
from aiayn.errors import AiaynError


def sessions(onnx_dir: Path, int8: bool = False, threads: int | None = None) -> tuple:
    """(encoder, merged decoder) InferenceSessions on the CPU; int8: the *_quantized.onnx files."""
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    suffix = "_quantized" if int8 else ""
    found = []
    for name in ("encoder_model", "decoder_model_merged"):
        path = onnx_dir / f"{name}{suffix}.onnx"
        if not path.is_file():
            raise AiaynError(f"{path}: not found (export with aiayn export-onnx{' --int8' * int8})")
        found.append(ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]))
    return tuple(found)


class OnnxStepper:
    """A `Stepper` for n sentences x `beam` rows (sentence-major) on the two sessions."""

    def __init__(self, encoder, decoder, src: np.ndarray, pad_id: int, beam: int):
        """src (n, S) int64 right-padded with pad_id."""
        mask = (src != pad_id).astype(np.int64)  # (n, S)
        (memory,) = encoder.run(None, {"input_ids": src, "attention_mask": mask})  # (n, S, d_model)
        self.decoder = decoder
        self.names = [i.name for i in decoder.get_inputs() if i.name.startswith("past_key_values.")]
        self.rows = {
            "encoder_attention_mask": np.repeat(mask, beam, axis=0),
            "encoder_hidden_states": np.repeat(memory, beam, axis=0),
        }  # every row-indexed input; the past joins after the first step
        shape = next(
            i.shape for i in decoder.get_inputs() if i.name in self.names
        )  # (batch, heads, length, d_k)
        heads, width = shape[1], shape[3]
        empty = np.zeros((src.shape[0] * beam, heads, 0, width), np.float32)
        self.past = dict.fromkeys(self.names, empty)

    def step(self, tokens: Tensor) -> Tensor:
        """tokens (rows,) -> log-probabilities (rows, vocab) float32."""
        return torch.log_softmax(self.logits(tokens), dim=-1)

    def logits(self, tokens: Tensor) -> Tensor:
        """tokens (rows,) -> this step's logits (rows, vocab) float32; the cache moves on a step."""
        first = self.past[self.names[0]].shape[2] == 0
        feeds = {**self.rows, **self.past, "input_ids": tokens.numpy().astype(np.int64)[:, None]}
        feeds["use_cache_branch"] = np.array([not first])
        logits, *presents = self.decoder.run(None, feeds)  # (rows, 1, vocab), 4 per layer
        for name, value in zip(self.names, presents, strict=True):
            if first or ".decoder." in name:  # a later step's encoder ones are its inputs again
                self.past[name] = value
        return torch.from_numpy(logits[:, -1])

    def reorder(self, index: Tensor) -> None:
        rows = index.numpy()
        self.rows = {k: v[rows] for k, v in self.rows.items()}
        self.past = {k: v[rows] for k, v in self.past.items()}

    select = reorder  # dropping finished sentences' rows is indexing too


@dataclass
class OnnxModel:
    """The sessions of an export and the ids its search needs (the export's, OPUS-MT's layout)."""

    encoder: ort.InferenceSession
    decoder: ort.InferenceSession
    start_id: int
    eos_id: int
    pad_id: int
    banned: tuple[int, ...]
    max_positions: int

    @classmethod
    def load(cls, path: str | Path, int8: bool = False, threads: int | None = None) -> OnnxModel:
        """An export-onnx directory (config.json, generation_config.json, onnx/)."""
        path = Path(path)
        config = json.loads((path / "config.json").read_text())
        generation = json.loads((path / "generation_config.json").read_text())
        encoder, decoder = sessions(path / "onnx", int8, threads)
        banned = tuple(i for ids in generation.get("bad_words_ids", []) for i in ids)
        return cls(
            encoder, decoder, config["decoder_start_token_id"], config["eos_token_id"],
            config["pad_token_id"], banned, config["max_position_embeddings"],
        )  # fmt: skip

    def search(self, src: Tensor, options: DecodeConfig) -> list[list[Hypothesis]]:
        """src (n, S) the export's ids (EOS included) right-padded with pad_id -> n-best per sentence,
        aiayn's greedy search for beam_size 1, beam search otherwise; outputs capped at
        floor(max_len_a * |source| + max_len_b) tokens as aiayn caps them."""
        lens = src.ne(self.pad_id).sum(dim=1)
        max_lens = torch.floor(lens.double() * options.max_len_a + options.max_len_b).long()
        max_lens = max_lens.clamp(0, self.max_positions - 1)
        stepper = OnnxStepper(self.encoder, self.decoder, src.numpy(), self.pad_id, options.beam_size)
        rules = SearchRules(
            start_id=self.start_id, eos_id=self.eos_id, banned=self.banned, alpha=options.alpha,
            style=options.length_penalty_style, prefixes=None, device=torch.device("cpu"), should_stop=None,
        )  # fmt: skip
        if options.beam_size == 1:
            return greedy_search(stepper, max_lens, rules)
        return beam_search(stepper, max_lens, rules, beam_size=options.beam_size, n_best=options.n_best)
