"""The row loop: one loop for every search that extends each row by one chosen token per step and
never reorders rows (greedy search, section 6.1; sampling, aiayn.decode.sampling). A strategy is
its `Chooser`, the rule that picks each row's next token; the loop applies the `SearchRules`,
collects the rows that end (EOS) and drops them from the batch (`Stepper.select`). Greedy search
takes its steps in runs where the stepper can (`greedy_steps`: one native call up to the first
step at which some row ends), with the same kernels in the same order as its single steps, so the
same tokens and scores to the last bit.

Rows are laid out sentence-major, `per` of them for each sentence (1 for greedy search, the
number of samples for sampling).
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from aiayn.decode.common import Hypothesis, SearchRules, Stepper
from aiayn.runtime.blockwise import row_max


class Chooser(Protocol):
    """A strategy of the row loop: the next token of every live row."""

    def __call__(self, logp: Tensor, step: int, rows: Tensor) -> tuple[Tensor, Tensor]:
        """logp (rows, vocab), masked by the rules, of the live rows `rows` (rows,) (their index
        among all rows, on the CPU) at `step` -> each row's token (rows,) and its log P (rows,)."""


def most_probable(logp: Tensor, step: int, rows: Tensor) -> tuple[Tensor, Tensor]:
    """Greedy search's `Chooser`: the most probable next token."""
    best, tokens = row_max(logp)  # (rows,)
    return tokens, best


def run_rows(
    stepper: Stepper, max_lens: Tensor, choose: Chooser, per: int, rules: SearchRules
) -> list[list[Hypothesis]]:
    """`per` outputs for each of n sentences, the stepper holding n * per rows (sentence-major),
    each row's tokens chosen by `choose`. max_lens (n,) on the CPU. Returns per sentence its `per`
    outputs, best score first (log P summed over tokens and EOS, score log P / lp)."""
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
    plain = choose is most_probable and rules.prefixes is None  # greedy search, nothing forced
    runs = getattr(stepper, "greedy_steps", None) if plain else None  # (aiayn.decode.stepper)
    special = rules.eos_id, rules.banned_ids
    step = 0  # the steps taken
    while step < total:
        rules.check_stop(step + 1)
        steps = rules.run_length(step, total)
        found = None if runs is None else runs(tokens, log_probs, step + 1, steps, rows_max, *special)
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
