"""The greedy loop: one loop for every search that extends each row by one chosen token per step and
never reorders rows (greedy search, section 6.1; sampling, aiayn.decode.sampling). A strategy is
its `Chooser`, the rule that picks each row's next token; the loop applies the `SearchRules`,
collects the rows that end (EOS) and drops them from the batch (`Stepper.select`). Where its
backend has native runs (chosen once when the search started: `aiayn.decode.stepper.Backend`),
greedy search takes its steps in runs, one native call up to the first step at which some row ends,
with the same kernels in the same order as its single steps, so the same tokens and scores to the
last bit.

Rows are laid out sentence-major, `per` of them for each sentence (1 for greedy search, the
number of samples for sampling).
"""

from __future__ import annotations

import warnings
from typing import Protocol

import torch
from torch import Tensor

from aiayn.decode.rules import Hypothesis, SearchRules, Stepper
from aiayn.decode.stepper import Backend, backend_of
from aiayn.runtime.blockwise import row_max


class Chooser(Protocol):
    """A strategy of the greedy loop: the next token of every live row."""

    def __call__(self, logp: Tensor, step: int, rows: Tensor) -> tuple[Tensor, Tensor]:
        """logp (rows, vocab), masked by the rules, of the live rows `rows` (rows,) (their index
        among all rows, on the CPU) at `step` -> each row's token (rows,) and its log P (rows,)."""


def most_probable(logp: Tensor, step: int, rows: Tensor) -> tuple[Tensor, Tensor]:
    """Greedy search's `Chooser`: the most probable next token."""
    best, tokens = row_max(logp)  # (rows,)
    return tokens, best


def run_greedy(
    stepper: Stepper, max_lens: Tensor, choose: Chooser, per: int, rules: SearchRules, backend: Backend
) -> list[list[Hypothesis]]:
    """`per` outputs for each of n sentences, the stepper holding n * per rows (sentence-major),
    each row's tokens chosen by `choose`, its steps run as `backend` says (native runs, given for
    greedy search only). max_lens (n,) on the CPU. Returns per sentence its `per` outputs, best
    score first (log P summed over tokens and EOS, score log P / lp)."""
    max_lens = rules.room(max_lens)
    n = max_lens.numel()
    rows_max = max_lens.repeat_interleave(per)  # (rows,)
    total = int(max_lens.max()) + 1 if n else 0
    sentence = torch.arange(n).repeat_interleave(per)  # (rows,) CPU: each live row's sentence
    rows = torch.arange(n * per)  # (rows,) CPU: each live row's index among all rows
    seqs = torch.zeros(n * per, total, dtype=torch.long, device=rules.device)
    log_probs = torch.zeros(n * per, device=rules.device)
    tokens = torch.full((n * per,), rules.start_id, dtype=torch.long, device=rules.device)
    results: list[list[Hypothesis]] = [[] for _ in range(n)]
    runs = backend.runs
    step = 0  # the steps taken
    while step < total:
        rules.check_stop(step + 1)
        steps = rules.run_length(step, total)
        found = None if runs is None else runs.greedy(tokens, log_probs, step + 1, steps, rows_max)
        if found is None:  # one step in Python
            logp = rules.mask(stepper.step(tokens)[:, None], step + 1, rows_max, sentence)  # (rows, 1, vocab)
            chosen, token_log_probs = choose(logp[:, 0], step + 1, rows)  # (rows,), (rows,)
            found = chosen[:, None], (log_probs + token_log_probs)[:, None]
        chosen, sums = found  # (rows, s): only the last step may hold an EOS
        seqs[:, step : step + chosen.size(1)] = chosen
        step += chosen.size(1)
        tokens, log_probs = chosen[:, -1], sums[:, -1]
        ended = tokens.eq(rules.eos_id).cpu()
        if not bool(ended.any()):
            continue
        lp = rules.lp(float(step))
        for r in ended.nonzero()[:, 0].tolist():
            logp_r = log_probs[r].item()
            results[int(sentence[r])].append(Hypothesis(seqs[r, : step - 1].tolist(), logp_r / lp, logp_r))
        keep = (~ended).nonzero()[:, 0]
        if keep.numel() == 0:
            break
        sentence, rows, rows_max = sentence[keep], rows[keep], rows_max[keep]
        keep = keep.to(rules.device)
        seqs, log_probs, tokens = seqs[keep], log_probs[keep], tokens[keep]
        stepper.select(keep)
    return [sorted(hyps, key=lambda h: -h.score) for hyps in results]


def __getattr__(name: str):
    """The loop's older name (run_rows, of the module aiayn.decode.rows), with a DeprecationWarning."""
    if name != "run_rows":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn("run_rows is deprecated: it is aiayn.decode.greedy.run_greedy now", DeprecationWarning, 2)
    return lambda stepper, max_lens, choose, per, rules: run_greedy(
        stepper, max_lens, choose, per, rules, backend_of(stepper, rules, runs=choose is most_probable)
    )
