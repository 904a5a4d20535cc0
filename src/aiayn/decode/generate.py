"""Generation (section 6.1): the one entry from a batch of sources to its hypotheses, as fairseq's
`sequence_generator`: `decode_batch` takes the settings (`DecodeConfig`) and a batch's `Controls`,
makes the search's rules once (`SearchRules`: special ids in the columns of the output layer, the
length penalty, the prefixes, the stop hook) and the per-sentence maximum output length
a * |source| + b (`max_lengths`, capped by the model's reach: `source_limit`, `target_limit`), binds
the model (aiayn.decode.stepper: one model or an ensemble, a shortlist's columns) and picks the
strategy (aiayn.decode.strategies): greedy, beam, sampling, constrained beams, or speculative
greedy decoding with a draft. A `StepMask` among the controls wraps the stepper to mask its
log-probabilities (well-formed trees only: aiayn.parse), a `Shortlist` restricts its output layer
to the batch's candidates (aiayn.decode.shortlist).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from aiayn.config import DecodeConfig, ModelConfig, SamplingConfig
from aiayn.decode.ensemble import EnsembleStepper
from aiayn.decode.rules import Hypothesis, Prefixes, SearchRules, Stepper, StopHook
from aiayn.decode.sampling import row_keys
from aiayn.decode.shortlist import Columns, Shortlist, forced_ids
from aiayn.decode.speculative import Draft, speculative_search
from aiayn.decode.stepper import TransformerStepper
from aiayn.decode.strategies import beam_search, constrained_beam_search, greedy_search, sample_search
from aiayn.errors import AiaynError
from aiayn.model.transformer import Transformer

# Sinusoidal positions have no table, but attention cost and cache memory grow with length:
# longer texts are translated in parts (sentences; by the translator) and outputs capped.
SOURCE_LIMIT = 1024


TRAINED_REACH = 2  # a source up to this many times the longest training source is translated whole


def source_limit(config: ModelConfig, longest_source: Any = None) -> int:
    """The most source tokens (EOS included) the model is given: its learned table, or SOURCE_LIMIT;
    and for a model whose config.json records its longest training source (`longest_source`, which
    `aiayn average` writes), at most TRAINED_REACH times that: a decoder given far more than it ever
    saw stops short, so a longer text is split (aiayn.decode.inputs) rather than cut short."""
    limit = config.max_positions if config.positions == "learned" else SOURCE_LIMIT
    if isinstance(longest_source, int) and not isinstance(longest_source, bool) and longest_source > 0:
        limit = max(2, min(limit, TRAINED_REACH * longest_source))
    return limit


def target_limit(config: ModelConfig) -> int:
    """The most output tokens before EOS: the decoder reads the start token plus that many."""
    return config.max_positions - 1 if config.positions == "learned" else SOURCE_LIMIT


def max_lengths(src_lens: Tensor, config: ModelConfig, max_len_a: float, max_len_b: int) -> Tensor:
    """floor(a * |source| + b) per sentence, |source| counting its EOS, capped at target_limit."""
    lens = torch.floor(src_lens.double() * max_len_a + max_len_b).long()
    return lens.clamp(min=0, max=target_limit(config))


class StepMask(Protocol):
    """A per-sentence mask on the next-token log-probabilities that depends on each hypothesis's
    tokens so far (aiayn.parse.constraint: only well-formed trees). It wraps the batch's stepper, so
    its state follows the rows through the search's `reorder` and `select`, whichever search runs."""

    def subset(self, index: list[int]) -> StepMask:
        """The mask of sentences `index` only (a batch of the caller's sentences)."""

    def wrap(self, stepper: Stepper, max_lens: Tensor, rows: int, device: torch.device) -> Stepper:
        """`stepper` with its log-probabilities (on `device`) masked; max_lens (n,) CPU, `rows`
        hypotheses per sentence."""


@dataclass
class Controls:
    """What steers the search of one batch besides `DecodeConfig`, per sentence of the batch:
    prefixes and constraints as target ids (None: none), for sampling the texts' keys, and a mask."""

    prefixes: list[list[int]] | None = None
    constraints: list[list[list[int]]] | None = None
    sample: SamplingConfig | None = None
    keys: list[int] | None = None  # a text's index in the caller's input: its samples' seed
    should_stop: StopHook | None = None  # asked before every step or run (SearchStopped when it says so)
    mask: StepMask | None = None
    shortlist: Shortlist | None = None  # restrict the output layer to each batch's candidates

    def subset(self, index: list[int]) -> Controls:
        pick = lambda xs: None if xs is None else [xs[i] for i in index]  # noqa: E731
        mask = None if self.mask is None else self.mask.subset(index)
        return Controls(
            pick(self.prefixes),
            pick(self.constraints),
            self.sample,
            pick(self.keys),
            self.should_stop,
            mask,
            self.shortlist,
        )

    def needed(self, n: int) -> Tensor:
        """(n,) the fewest output tokens each sentence needs for its prefix or constraints."""
        need = torch.zeros(n, dtype=torch.long)
        for i in range(n):
            if self.prefixes is not None:
                need[i] = max(int(need[i]), len(self.prefixes[i]))
            if self.constraints is not None:
                need[i] = max(int(need[i]), sum(map(len, self.constraints[i])))
        return need


def _columns(config: ModelConfig, controls: Controls, src: Tensor, options: DecodeConfig) -> Columns:
    """The output layer's columns for a batch src (n, src_len): its shortlist's ids with those the
    search needs (EOS, the decoder's start, the prefixes' and constraints'), or all."""
    if controls.shortlist is None:
        if options.shortlist:  # a Translator passes its model's (or says it has none)
            raise AiaynError("shortlist=True but no shortlist was given (parse models take none)")
        return Columns(None)
    if controls.mask is not None:
        raise AiaynError("a shortlist cannot restrict a masked search (parse models)")
    needed = [config.eos_id, config.start_id, *forced_ids(controls.prefixes, controls.constraints)]
    return Columns(controls.shortlist.kept(src, needed))


def _rules(
    config: ModelConfig, options: DecodeConfig, controls: Controls, columns: Columns, device
) -> SearchRules:
    """The search's rules, in the columns of the output layer it runs on."""
    eos, banned = columns(config.eos_id), columns.banned(config.banned_ids)
    prefixes = None if controls.prefixes is None else Prefixes(columns.lists(controls.prefixes), eos, banned)
    return SearchRules(
        start_id=columns(config.start_id),
        eos_id=eos,
        banned=banned,
        alpha=options.alpha,
        style=options.length_penalty_style,
        prefixes=prefixes,
        device=device,
        should_stop=controls.should_stop,
    )


@torch.inference_mode()
def decode_batch(
    model: Transformer | Sequence[Transformer],
    src: Tensor,
    options: DecodeConfig,
    controls: Controls | None = None,
    draft: Draft | None = None,
) -> list[list[Hypothesis]]:
    """Translate a batch of sources src (n, src_len) (pieces + EOS, right-padded with pad_id).

    `model` is one model or an ensemble (models sharing a vocabulary). Greedy search when beam_size
    is 1 (the same result as beam search with one beam, faster), beam search otherwise; sampling
    (n_best samples) when `options.sampling` or `controls.sample` ask for it, dynamically allocated
    beams when `controls` hold constraints; `controls.mask` masks every step's log-probabilities,
    under any of these searches; `controls.shortlist` restricts the output layer to the batch's
    candidates (aiayn.decode.shortlist); a `draft` makes an unsteered greedy search of one model
    speculative (aiayn.decode.speculative: the same outputs; not with a shortlist). Returns up to
    n_best hypotheses per sentence, best first.
    """
    models = [model] if isinstance(model, Transformer) else list(model)
    config, controls = models[0].config, controls or Controls()
    if src.size(0) == 0:
        return []
    src_lens = src.ne(config.pad_id).sum(dim=1).cpu()  # (n,)
    max_lens = torch.maximum(
        max_lengths(src_lens, config, options.max_len_a, options.max_len_b), controls.needed(src.size(0))
    )
    sample = controls.sample or (SamplingConfig() if options.sampling else None)
    rows = options.n_best if sample is not None else options.beam_size
    if sample is None and rows > config.vocab_size:  # its (n, beam, beam) scores outgrow memory first
        raise AiaynError(
            f"beam_size {rows} is over the model's {config.vocab_size} tokens: no wider beam helps"
        )
    columns = _columns(config, controls, src, options)  # the search runs on the output layer's columns
    rules = _rules(config, options, controls, columns, src.device)
    plain = rules.prefixes is None and not controls.constraints and controls.mask is None and len(models) == 1
    if draft is not None and sample is None and rows == 1 and plain:
        if columns.kept is not None:
            raise AiaynError("a draft model speeds up greedy search without a shortlist: use one of the two")
        if draft.reads(src):  # else its learned positions are fewer than the sources': greedy search
            return speculative_search(models[0], draft, src, max_lens, options.draft_tokens, rules)
    steppers = [TransformerStepper(m, src, rows, int(max_lens.max()) + 1, columns.kept) for m in models]
    stepper = steppers[0] if len(steppers) == 1 else EnsembleStepper(steppers)
    if controls.mask is not None:
        stepper = controls.mask.wrap(stepper, max_lens, rows, src.device)
    if sample is not None:
        keys = row_keys(sample.seed, torch.tensor(controls.keys or range(src.size(0))), rows)
        return columns.back(sample_search(stepper, max_lens, rules, keys, samples=rows, sampling=sample))
    if controls.constraints is not None and any(controls.constraints):
        phrases = [columns.lists(c) for c in controls.constraints]
        found = constrained_beam_search(
            stepper, max_lens, rules, phrases, beam_size=rows, n_best=options.n_best
        )
        return columns.back(found)
    if rows == 1:
        return columns.back(greedy_search(stepper, max_lens, rules))
    return columns.back(beam_search(stepper, max_lens, rules, beam_size=rows, n_best=options.n_best))
