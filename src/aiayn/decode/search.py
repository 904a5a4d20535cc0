"""Greedy and beam search (section 6.1), batched over sentences and beams.

The search knows nothing of the Transformer: it drives a `Stepper`, anything that turns the last
token of every row into next-token log-probabilities and can reorder or drop rows of its cached
state (`aiayn.decode.stepper.TransformerStepper` binds the model). Rows are laid out sentence-major:
row `i * beam_size + j` is hypothesis j of sentence i.

Beam search as the paper (6.1, after GNMT and tensor2tensor): beam size 4, hypotheses ranked by
log P(Y|X) / lp(Y) with lp(Y) = ((5 + |Y|) / 6)^alpha, alpha = 0.6 (`style="gnmt"`), or
lp(Y) = |Y|^alpha (`style="len"`: HF transformers; `style="fairseq"`: fairseq and CTranslate2,
which stop earlier). |Y| counts the generated tokens including the final EOS (as tensor2tensor,
GNMT, HF `generate` and fairseq; CTranslate2 only with return_end_token=True).

One step: the 2k best continuations (log P summed over the prefix) of each sentence's k live
hypotheses come from one top-k over (k * vocab); those among the first k that end in EOS join the
sentence's pool of (at most k) finished hypotheses; the k best that do not end in EOS live on,
each in its parent's row where it can (`_settled`: the cache then moves few rows).
A sentence stops when
- "gnmt": its pool holds k hypotheses (fairseq), or the n-best-th finished score is at least the
  best score any live hypothesis could still reach (its log P can only fall; its length penalty is
  largest at the maximum length): no live hypothesis can beat the finished ones. With k = 1 this
  is exactly greedy search.
- "len": its pool holds k hypotheses and best live log P / (current length)^alpha does not beat
  the worst finished one: HF `generate(num_beams=k, length_penalty=alpha)` (early_stopping=False).
- "fairseq": as "gnmt" with lp = |Y|^alpha: fairseq's beam search, CTranslate2's (patience 1),
  and HF's with early_stopping=True.
Finished sentences leave the batch (`Stepper.select`). A sentence whose hypotheses reach
`max_lens[i]` tokens gets EOS forced at the next step, so every output has at most max_lens[i]
tokens before its EOS (fairseq's convention; HF's max_length = this + 2, start token and EOS).

Both searches take `should_stop`, a callable asked once before every step (before every native run
of at most `STOP_EVERY` steps, where the steps run natively): when it answers True
(a server whose client left or whose deadline passed) the search raises `SearchStopped` instead of
spending the rest of its steps on an answer nobody will read.

Greedy search is the row loop (aiayn.decode.rows) with the most probable token as its chooser,
beam search the beam loop (aiayn.decode.beam) with the plain `Beams` as its policy; what they
share with every other strategy (the rules of a step, the hypotheses) is in aiayn.decode.common.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from aiayn.decode.beam import Beams, run_beams
from aiayn.decode.common import (
    STYLES,
    Hypothesis,
    Prefixes,
    SearchRules,
    SearchStopped,
    Stepper,
    StopHook,
    length_penalty,
)
from aiayn.decode.rows import most_probable, run_rows

__all__ = [
    "STYLES",
    "Hypothesis",
    "Prefixes",
    "SearchStopped",
    "Stepper",
    "StopHook",
    "beam_search",
    "greedy_search",
    "length_penalty",
]


def greedy_search(stepper: Stepper, max_lens: Tensor, **rules: Any) -> list[list[Hypothesis]]:
    """The most probable next token at every step. max_lens (n,) int on the CPU; `rules`: the
    fields of `SearchRules` (start_id, eos_id, banned, alpha, style, prefixes, device, should_stop).

    Returns one hypothesis per sentence, scored as beam search would score it.
    """
    return run_rows(stepper, max_lens, most_probable, 1, SearchRules(**rules))


def beam_search(
    stepper: Stepper, max_lens: Tensor, *, beam_size: int, n_best: int = 1, **rules: Any
) -> list[list[Hypothesis]]:
    """Beam search for n sentences; the stepper holds n * beam_size rows. max_lens (n,) on the CPU;
    `rules`: the fields of `SearchRules` (start_id, eos_id, banned, alpha, style, prefixes, ...).

    Returns for each sentence up to n_best hypotheses (1 <= n_best <= beam_size), best first.
    """
    search = SearchRules(**rules)
    return run_beams(stepper, Beams.start(search.room(max_lens), beam_size, search.device), n_best, search)
