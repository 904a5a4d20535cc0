"""Greedy and beam search (section 6.1), batched over sentences and beams.

The strategies, each a loop and its policy, and what they rank by. The search knows nothing of the
Transformer: it drives a `Stepper`, anything that turns the last token of every row into next-token
log-probabilities and can reorder or drop rows of its cached state
(`aiayn.decode.stepper.TransformerStepper` binds the model). Each strategy takes the search's
`SearchRules` (aiayn.decode.rules) as one object; aiayn.decode.generate picks which one runs.
Rows are laid out sentence-major: row `i * beam_size + j` is hypothesis j of sentence i.

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

Greedy search is the greedy loop (aiayn.decode.greedy) with the most probable token as its chooser,
sampling the same loop with a `Sampler` (aiayn.decode.sampling); beam search is the beam loop
(aiayn.decode.beam) with the plain `Beams` as its policy, constrained beam search the same loop
with `ConstrainedBeams` (aiayn.decode.constrained). Where their steps run (native runs for plain
greedy and beam search on a native stepper, else Python) is chosen once, as each starts
(`aiayn.decode.stepper.backend_of`). What they share with every other strategy (the rules of a
step, the length penalty, the hypotheses) is in aiayn.decode.rules.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from aiayn.config import SamplingConfig
from aiayn.decode.beam import Beams, run_beams
from aiayn.decode.constrained import ConstrainedBeams
from aiayn.decode.greedy import most_probable, run_greedy
from aiayn.decode.rules import STYLES, Hypothesis, SearchRules, Stepper, length_penalty
from aiayn.decode.sampling import Sampler
from aiayn.decode.stepper import backend_of

__all__ = [
    "STYLES",
    "beam_search",
    "constrained_beam_search",
    "greedy_search",
    "length_penalty",
    "sample_search",
]


def greedy_search(stepper: Stepper, max_lens: Tensor, rules: SearchRules) -> list[list[Hypothesis]]:
    """The most probable next token at every step. max_lens (n,) int on the CPU. Returns one
    hypothesis per sentence, scored as beam search would score it."""
    return run_greedy(stepper, max_lens, most_probable, 1, rules, backend_of(stepper, rules, runs=True))


def beam_search(
    stepper: Stepper, max_lens: Tensor, rules: SearchRules, *, beam_size: int, n_best: int = 1
) -> list[list[Hypothesis]]:
    """Beam search for n sentences; the stepper holds n * beam_size rows. max_lens (n,) on the CPU.
    Returns for each sentence up to n_best hypotheses (1 <= n_best <= beam_size), best first."""
    beams = Beams.start(rules.room(max_lens), beam_size, rules.device)
    return run_beams(stepper, beams, n_best, rules, backend_of(stepper, rules, runs=True))


def sample_search(
    stepper: Stepper,
    max_lens: Tensor,
    rules: SearchRules,
    keys: Tensor,
    *,
    samples: int,
    sampling: SamplingConfig,
) -> list[list[Hypothesis]]:
    """`samples` outputs for each of n texts; the stepper holds n * samples rows (text-major).
    max_lens (n,) on the CPU; keys (n * samples,) from `aiayn.decode.sampling.row_keys`. Returns per
    text its samples, best score first."""
    chooser = Sampler(keys, sampling)
    return run_greedy(stepper, max_lens, chooser, samples, rules, backend_of(stepper, rules, runs=False))


def constrained_beam_search(
    stepper: Stepper,
    max_lens: Tensor,
    rules: SearchRules,
    constraints: Sequence[Sequence[Sequence[int]]],
    *,
    beam_size: int,
    n_best: int = 1,
) -> list[list[Hypothesis]]:
    """`beam_search` in which sentence i's output must contain every phrase of constraints[i]
    (lists of token ids; aiayn.decode.constrained). The length cap of a sentence is raised to hold
    its phrases. The rules' prefixes serve the batch's sentences without constraints (a sentence
    has one or the other)."""
    needed = torch.tensor([sum(len(p) for p in phrases) for phrases in constraints], dtype=torch.long)
    max_lens = rules.room(torch.maximum(max_lens, needed))
    beams = ConstrainedBeams.with_phrases(max_lens, beam_size, rules.device, constraints)
    return run_beams(stepper, beams, n_best, rules, backend_of(stepper, rules, runs=False))
