"""What every search strategy obeys and returns (section 6.1): the `Stepper` it drives, the
`Hypothesis` it returns and its ranking score (the length penalty), and the `SearchRules` every step
obeys whatever chooses the tokens: never a banned id (pad, bos), EOS forced at a sentence's length
cap, a sentence's prefix forced first, and a stop hook asked before every step (or run of steps).

The masking rules are written here once for Python (`SearchRules.mask`: the loops' single steps and
speculative decoding's check) and once in C++ (aiayn/runtime/native_rules.h: the native runs), which
take them as one object made once per search (`SearchRules.native`).

The strategies (aiayn.decode.strategies) plug into two loops: the beam loop (aiayn.decode.beam: beam
search, and the constrained beams of aiayn.decode.constrained as its policy) and the greedy loop
(aiayn.decode.greedy: greedy search, and sampling's token chooser of aiayn.decode.sampling).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import Tensor

from aiayn.config import LENGTH_PENALTY_STYLES, DecodeConfig
from aiayn.runtime.native_step import native_rules

STYLES = LENGTH_PENALTY_STYLES
STOP_EVERY = 8  # with a stop hook, the most steps one native call takes before it is asked again
StopHook = Callable[[], bool]  # asked before every step or run; True: stop (raise SearchStopped)


class SearchStopped(Exception):
    """The caller's `should_stop()` answered True at a step boundary: the search gave up its work."""


class Stepper(Protocol):
    """What a search needs of a model: one decoding step and control of the cached rows. A stepper
    may also give a step's logits and their log-normalisers (`logits_and_normalizers(tokens)`, as
    `TransformerStepper`): beam search then never writes the log-probabilities out; and greedy
    search's steps, or beam search's, in runs of one native call each (`runs(rules)`, as
    `TransformerStepper`): `aiayn.decode.stepper.backend_of` decides which, once a search."""

    def step(self, tokens: Tensor) -> Tensor:
        """tokens (rows,) -> next-token log-probabilities (rows, vocab), float32."""

    def reorder(self, index: Tensor) -> None:
        """Row r continues the prefix of row index[r] (rows stay within their sentence)."""

    def select(self, index: Tensor) -> None:
        """Keep only rows `index` (rows',) in that order (drops finished sentences)."""


@dataclass
class Hypothesis:
    """One output: tokens without EOS, its ranking score (log P / lp) and its log P."""

    tokens: list[int]
    score: float
    log_prob: float


def length_penalty(
    length: float | Tensor, alpha: float, style: str = DecodeConfig.length_penalty_style
) -> float | Tensor:
    """lp(Y): GNMT's ((5 + |Y|) / 6)^alpha, or |Y|^alpha for styles "len" and "fairseq"."""
    if style == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    if style in ("len", "fairseq"):
        return length**alpha
    raise ValueError(f"length_penalty_style={style!r} is not one of {STYLES}")


class Prefixes:
    """Target prefixes: the first tokens of sentence i's output are forced to `prefixes[i]`
    (interactive translation, post-editing; fairseq's `prefix_tokens`, CTranslate2's
    `target_prefix`). Every hypothesis continues the prefix, however improbable the model finds
    it; its log P counts the prefix's tokens, as the model scores them."""

    def __init__(self, prefixes: Sequence[Sequence[int]], eos_id: int, banned: Sequence[int]):
        bad = set(banned) | {eos_id}
        for i, p in enumerate(prefixes):
            if bad & set(p):
                raise ValueError(
                    f"prefix {i + 1} holds a token a hypothesis may not contain: {sorted(bad & set(p))}"
                )
        self.lens = torch.tensor([len(p) for p in prefixes], dtype=torch.long)  # (n,) CPU
        self.length = int(self.lens.max()) if len(prefixes) else 0
        self.tokens = torch.full((len(prefixes), max(self.length, 1)), -1, dtype=torch.long)  # (n, P)
        for i, p in enumerate(prefixes):
            self.tokens[i, : len(p)] = torch.tensor(list(p), dtype=torch.long)

    def room(self, max_lens: Tensor) -> Tensor:
        """max_lens (n,) raised where a prefix is longer: the output holds at least the prefix."""
        return torch.maximum(max_lens, self.lens)

    def force(self, logp: Tensor, step: int, ids: Tensor) -> Tensor:
        """logp (n', rows_per, vocab) of the live sentences `ids` (n',) (CPU): at `step` (from 1),
        a sentence whose prefix is that long may only take its prefix token."""
        if step > self.length:
            return logp
        token = self.tokens[ids, step - 1]  # (n',), -1 where the prefix has ended
        rows = (token >= 0).nonzero()[:, 0]
        if rows.numel() == 0:
            return logp
        rows, token = rows.to(logp.device), token[token >= 0].to(logp.device)
        kept = logp[rows, :, token]  # (m, rows_per)
        logp[rows] = -math.inf
        logp[rows, :, token] = kept
        return logp


@dataclass
class SearchRules:
    """What every step of a search obeys, whichever strategy chooses its tokens: the special ids,
    the ranking score's length penalty, the prefixes, where the search runs, and the stop hook.
    Settings come checked (aiayn.config.DecodeConfig); nothing here checks them again."""

    start_id: int
    eos_id: int
    banned: Sequence[int] = ()
    alpha: float = DecodeConfig.alpha
    style: str = DecodeConfig.length_penalty_style
    prefixes: Prefixes | None = None
    device: torch.device | str = "cpu"
    should_stop: StopHook | None = None
    banned_ids: Tensor = field(init=False)  # (b,) `banned` on the device
    _native: torch.ScriptObject | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        self.banned_ids = torch.tensor(sorted(self.banned), dtype=torch.long, device=self.device)

    @property
    def native(self) -> torch.ScriptObject:
        """These rules as the native runs read them (aiayn/runtime/native_rules.h), made once."""
        if self._native is None:
            self._native = native_rules(self.eos_id, self.banned_ids, self.style, self.alpha)
        return self._native

    def room(self, max_lens: Tensor) -> Tensor:
        """max_lens (n,) on the CPU, raised to hold each sentence's prefix."""
        return max_lens if self.prefixes is None else self.prefixes.room(max_lens)

    def lp(self, length: float | Tensor) -> float | Tensor:
        """The length penalty lp(length) of these rules."""
        return length_penalty(length, self.alpha, self.style)

    def run_length(self, taken: int, total: int) -> int:
        """How many of the `total - taken` steps left one native call may take (a stepper's
        `NativeSearch.greedy`, `.beam`): all, or STOP_EVERY where a stop hook waits to be asked."""
        return total - taken if self.should_stop is None else min(STOP_EVERY, total - taken)

    def check_stop(self, step: int) -> None:
        """SearchStopped when the stop hook says so (asked before every step, or every native run of at
        most STOP_EVERY steps)."""
        if self.should_stop is not None and self.should_stop():
            raise SearchStopped(f"stopped before step {step}")

    def mask(self, logp: Tensor, step: int | Tensor, max_lens: Tensor, ids: Tensor | None = None) -> Tensor:
        """logp (n, rows_per, vocab) of the live sentences `ids` (n,) (CPU), masked in place: never
        a banned id; EOS alone where the step is past max_lens (n,) (CPU); the prefix's token while in
        it. `step` (from 1) is every row's, or a tensor (n, rows_per) on the CPU of each row's own
        (speculative decoding's check: each position predicts its own step; no prefixes there)."""
        logp[..., self.banned_ids] = -math.inf
        force = step > (max_lens if isinstance(step, int) else max_lens[:, None])  # (n,) | (n, rows_per)
        if bool(force.any()):  # on the CPU: no device sync
            at = tuple(i.to(logp.device) for i in force.nonzero(as_tuple=True))
            eos_lp = logp[(*at, ..., self.eos_id)].clone()
            logp[at] = -math.inf
            logp[(*at, ..., self.eos_id)] = eos_lp
        return logp if self.prefixes is None else self.prefixes.force(logp, step, ids)
