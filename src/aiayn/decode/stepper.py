"""Binding the Transformer to the search (section 6.1): encode once, then decode one step at a time.

`TransformerStepper` is the `Stepper` of `aiayn.decode.search` for a batch of padded sources: the
encoder runs once, the decoder's cross-attention keys/values are projected once per sentence and
repeated for its hypotheses (`Transformer.start_decoding`), and every step feeds only the newest
token through the decoder's self-attention cache. `decode_batch` picks greedy or
beam search and the per-sentence maximum output length a * |source| + b; a caller may wrap the
stepper (`constrain`) to mask the log-probabilities, as the parser does (aiayn.parse.constraint).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.config import DecodeConfig, ModelConfig
from aiayn.decode.search import Hypothesis, Stepper, beam_search, greedy_search
from aiayn.model.transformer import Transformer

# Sinusoidal positions have no table, but attention cost and cache memory grow with length:
# longer sources are truncated (with a warning, by the translator) and outputs capped.
SOURCE_LIMIT = 1024

# (the model's stepper, max_lens (n,) on the CPU, beam size) -> the stepper the search drives
Constrain = Callable[[Stepper, Tensor, int], Stepper]


def source_limit(config: ModelConfig) -> int:
    """The most source tokens (EOS included) the model is given: its learned table, or SOURCE_LIMIT."""
    return config.max_positions if config.positions == "learned" else SOURCE_LIMIT


def target_limit(config: ModelConfig) -> int:
    """The most output tokens before EOS: the decoder reads the start token plus that many."""
    return config.max_positions - 1 if config.positions == "learned" else SOURCE_LIMIT


def max_lengths(src_lens: Tensor, config: ModelConfig, max_len_a: float, max_len_b: int) -> Tensor:
    """floor(a * |source| + b) per sentence, |source| counting its EOS, capped at target_limit."""
    lens = torch.floor(src_lens.double() * max_len_a + max_len_b).long()
    return lens.clamp(min=0, max=target_limit(config))


class TransformerStepper:
    """A `Stepper` over `Transformer.decode_step` for n sentences x `beam` hypotheses (sentence-major)."""

    def __init__(self, model: Transformer, src: Tensor, beam: int, max_steps: int):
        """src (n, src_len) right-padded; max_steps: the most decoding steps (cache capacity)."""
        memory, mask = model.encode(src)  # (n, src_len, d_model), (n, 1, 1, src_len) | None
        self.model = model
        self.state = model.start_decoding(memory, mask, max_steps, beam)  # n * beam rows

    def step(self, tokens: Tensor) -> Tensor:
        """tokens (rows,) -> log-probabilities (rows, vocab) in float32."""
        return F.log_softmax(self.model.decode_step(tokens, self.state).float(), dim=-1)

    def reorder(self, index: Tensor) -> None:
        self.state.reorder(index)

    def select(self, index: Tensor) -> None:
        self.state.select(index)


def banned_ids(config: ModelConfig) -> list[int]:
    """Ids a hypothesis never contains: padding, BOS and the decoder start token (not EOS)."""
    return sorted({config.pad_id, config.bos_id, config.start_id} - {config.eos_id})


@torch.inference_mode()
def decode_batch(
    model: Transformer, src: Tensor, options: DecodeConfig, constrain: Constrain | None = None
) -> list[list[Hypothesis]]:
    """Translate a batch of sources src (n, src_len) (pieces + EOS, right-padded with pad_id).

    Greedy search when beam_size is 1 (the same result as beam search with one beam, faster),
    beam search otherwise. Returns up to n_best hypotheses per sentence, best first. `constrain`
    wraps the model's stepper (e.g. to allow only well-formed trees).
    """
    config = model.config
    if src.size(0) == 0:
        return []
    src_lens = src.ne(config.pad_id).sum(dim=1).cpu()  # (n,)
    max_lens = max_lengths(src_lens, config, options.max_len_a, options.max_len_b)
    beam = options.beam_size
    stepper: Stepper = TransformerStepper(model, src, beam, int(max_lens.max()) + 1)
    if constrain is not None:
        stepper = constrain(stepper, max_lens, beam)
    common = dict(
        start_id=config.start_id,
        eos_id=config.eos_id,
        banned=banned_ids(config),
        alpha=options.alpha,
        style=options.length_penalty_style,
        device=src.device,
    )
    if beam == 1:
        return greedy_search(stepper, max_lens, **common)
    return beam_search(stepper, max_lens, beam_size=beam, n_best=options.n_best, **common)
