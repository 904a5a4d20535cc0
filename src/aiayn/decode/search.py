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

Both searches take `should_stop`, a callable asked once before every step: when it answers True
(a server whose client left or whose deadline passed) the search raises `SearchStopped` instead of
spending the rest of its steps on an answer nobody will read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from aiayn.config import LENGTH_PENALTY_STYLES, DecodeConfig
from aiayn.runtime.blockwise import row_max, row_topk

STYLES = LENGTH_PENALTY_STYLES
StopHook = Callable[[], bool]  # asked before every step; True: stop (raise SearchStopped)


class SearchStopped(Exception):
    """The caller's `should_stop()` answered True at a step boundary: the search gave up its work."""


def _check_stop(should_stop: StopHook | None, step: int) -> None:
    if should_stop is not None and should_stop():
        raise SearchStopped(f"stopped before step {step}")


class Stepper(Protocol):
    """What a search needs of a model: one decoding step and control of the cached rows."""

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


def length_penalty(length: float | Tensor, alpha: float, style: str = "gnmt") -> float | Tensor:
    """lp(Y): GNMT's ((5 + |Y|) / 6)^alpha, or |Y|^alpha for styles "len" and "fairseq"."""
    if style == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    if style in ("len", "fairseq"):
        return length**alpha
    raise ValueError(f"length_penalty_style={style!r} is not one of {STYLES}")


def _mask_step(logp: Tensor, step: int, max_lens: Tensor, eos_id: int, banned: Tensor) -> Tensor:
    """Never emit banned ids (pad, bos); force EOS where step > max_lens. logp (n, rows_per, vocab)."""
    logp[..., banned] = -math.inf
    force = step > max_lens  # (n,) on the CPU: no device sync
    if bool(force.any()):
        eos_lp = logp[..., eos_id].clone()
        rows = force.nonzero()[:, 0].to(logp.device)
        logp[rows] = -math.inf
        logp[rows, :, eos_id] = eos_lp[rows]
    return logp


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


def greedy_search(
    stepper: Stepper,
    max_lens: Tensor,
    *,
    start_id: int,
    eos_id: int,
    banned: Sequence[int] = (),
    alpha: float = DecodeConfig.alpha,
    style: str = "gnmt",
    prefixes: Prefixes | None = None,
    device: torch.device | str = "cpu",
    should_stop: StopHook | None = None,
) -> list[list[Hypothesis]]:
    """The most probable next token at every step. max_lens (n,) int on the CPU.

    Returns one hypothesis per sentence, scored as beam search would score it.
    """
    if prefixes is not None:
        max_lens = prefixes.room(max_lens)
    n = max_lens.numel()
    total = int(max_lens.max()) + 1 if n else 0
    banned_t = torch.tensor(sorted(banned), dtype=torch.long, device=device)
    ids = torch.arange(n)  # original index of each live row
    seqs = torch.zeros(n, total, dtype=torch.long, device=device)
    log_probs = torch.zeros(n, device=device)
    tokens = torch.full((n,), start_id, dtype=torch.long, device=device)
    results: list[list[Hypothesis]] = [[] for _ in range(n)]
    for step in range(1, total + 1):
        _check_stop(should_stop, step)
        logp = _mask_step(stepper.step(tokens)[:, None], step, max_lens, eos_id, banned_t)
        logp = (logp if prefixes is None else prefixes.force(logp, step, ids))[:, 0]  # (rows, vocab)
        best, tokens = row_max(logp)  # (rows,)
        seqs[:, step - 1] = tokens
        log_probs += best
        ended = tokens.eq(eos_id).cpu()
        if not bool(ended.any()):
            continue
        lp = length_penalty(float(step), alpha, style)
        for r in ended.nonzero()[:, 0].tolist():
            logp_r = log_probs[r].item()
            results[int(ids[r])] = [Hypothesis(seqs[r, : step - 1].tolist(), logp_r / lp, logp_r)]
        keep = (~ended).nonzero()[:, 0]
        if keep.numel() == 0:
            break
        ids, max_lens = ids[keep], max_lens[keep]
        keep = keep.to(device)
        seqs, log_probs, tokens = seqs[keep], log_probs[keep], tokens[keep]
        stepper.select(keep)
    return results


def _settled(parent: Tensor) -> Tensor:
    """Where each new live hypothesis goes: (n, k) -> (n, k), slot s takes survivor `out[i, s]`.

    parent (n, k): the beam (row within its sentence) each of the k survivors extends, best first.
    The best child of every surviving beam stays in its parent's slot, the others fill the slots of
    beams that died, in order; so the stepper's `reorder` moves only k - (surviving beams) rows per
    sentence, not every row whose rank changed (its cache copies are the largest memory traffic of
    a CPU beam step). The set of hypotheses is the one the scores chose; only the order differs.
    """
    n, k = parent.shape
    same = parent[:, :, None] == parent[:, None, :]  # (n, k, k): survivors j, j' share a parent
    first = ~(same & torch.ones(k, k, dtype=torch.bool, device=parent.device).tril(-1)).any(-1)  # (n, k)
    taken = torch.zeros(n, k, dtype=torch.long, device=parent.device).scatter_add_(1, parent, first.long())
    free = taken.sort(dim=1, stable=True).indices  # (n, k): the slots nobody keeps, ascending, first
    rank = (~first).long().cumsum(1) - 1  # (n, k): the j-th survivor without its parent's slot
    slot = torch.where(first, parent, free.gather(1, rank.clamp(min=0)))
    return torch.empty_like(slot).scatter_(1, slot, torch.arange(k, device=parent.device).expand(n, k))


@dataclass
class _Beams:
    """The state of beam search for n sentences with k hypotheses each.

    ids, max_lens: (n,) on the CPU. live_seqs, fin_seqs: (n, k, max_len + 1) token ids;
    live_scores: (n, k) summed log P, in row order (`_settled`), -inf = no hypothesis;
    fin_scores: (n, k) log P / lp, sorted, -inf = empty slot; fin_log_probs, fin_lens: (n, k) log P
    and length with EOS.
    """

    ids: Tensor
    max_lens: Tensor
    live_seqs: Tensor
    live_scores: Tensor
    fin_seqs: Tensor
    fin_scores: Tensor
    fin_log_probs: Tensor
    fin_lens: Tensor

    @classmethod
    def start(cls, max_lens: Tensor, k: int, device: torch.device | str) -> _Beams:
        n, total = max_lens.numel(), int(max_lens.max()) + 1
        seqs = torch.zeros(n, k, total, dtype=torch.long, device=device)
        live = torch.full((n, k), -math.inf, device=device)
        live[:, 0] = 0.0  # one hypothesis (the start token) until the first step fills the beam
        empty = torch.full((n, k), -math.inf, device=device)
        lens = torch.zeros(n, k, dtype=torch.long, device=device)
        return cls(torch.arange(n), max_lens, seqs, live, seqs.clone(), empty, empty.clone(), lens)

    def keep(self, index: Tensor) -> None:
        """Keep sentences `index` (n',) (CPU), dropping the others."""
        self.ids, self.max_lens = self.ids[index], self.max_lens[index]
        index = index.to(self.live_seqs.device)
        for name in ("live_seqs", "live_scores", "fin_seqs", "fin_scores", "fin_log_probs", "fin_lens"):
            setattr(self, name, getattr(self, name)[index])

    def finish(self, seqs: Tensor, log_probs: Tensor, finishing: Tensor, step: int, lp: float) -> None:
        """Merge the candidates `finishing` (n, c) into the pools, keeping the k best by log P / lp.

        seqs (n, c, T), log_probs (n, c): candidates of this step (length `step` with EOS).
        """
        k, total = self.fin_scores.size(1), seqs.size(2)
        cand = (log_probs / lp).masked_fill(~finishing, -math.inf)
        self.fin_scores, pos = torch.cat([self.fin_scores, cand], dim=1).topk(k, dim=1)  # (n, k)
        self.fin_log_probs = torch.cat([self.fin_log_probs, log_probs], dim=1).gather(1, pos)
        self.fin_lens = torch.cat(
            [self.fin_lens, torch.full_like(log_probs, step, dtype=torch.long)], 1
        ).gather(1, pos)
        self.fin_seqs = torch.cat([self.fin_seqs, seqs], dim=1).gather(
            1, pos[:, :, None].expand(-1, -1, total)
        )

    def advance(self, logp: Tensor, step: int, eos_id: int, lp: float) -> tuple[Tensor, Tensor]:
        """One step from log-probs (n, k, vocab): finish EOS candidates, keep the k best live ones.
        `logp` is used up: the prefixes' log P are added to it in place (a vocabulary-wide pass).

        Returns for each new live hypothesis (n, k) the beam it extends and its last token.
        """
        n, k, vocab = logp.shape
        cand = logp.add_(self.live_scores[:, :, None]).reshape(n, k * vocab)  # log P of every extension
        top, index = row_topk(cand, min(2 * k, k * vocab))  # (n, c), sorted
        beam, token = index // vocab, index % vocab
        total = self.live_seqs.size(2)
        seqs = self.live_seqs.gather(1, beam[:, :, None].expand(-1, -1, total))  # (n, c, T)
        seqs[:, :, step - 1] = token
        is_eos = token.eq(eos_id) & top.isfinite()
        finishing = is_eos.clone()
        finishing[:, k:] = False  # only the k best candidates may finish (fairseq, HF)
        if bool(finishing.any()):
            self.finish(seqs, top, finishing, step, lp)
        self.live_scores, pos = top.masked_fill(is_eos, -math.inf).topk(k, dim=1)  # (n, k)
        settle = _settled(beam.gather(1, pos))  # (n, k): keep each surviving beam's row in place
        self.live_scores, pos = self.live_scores.gather(1, settle), pos.gather(1, settle)
        self.live_seqs = seqs.gather(1, pos[:, :, None].expand(-1, -1, total))
        return beam.gather(1, pos), token.gather(1, pos)

    def _full(self) -> Tensor:
        """(n,) bool: the pool holds k finished hypotheses (gnmt: enough to stop, as fairseq)."""
        return self.fin_scores[:, -1].isfinite()

    def done(self, step: int, n_best: int, alpha: float, style: str) -> Tensor:
        """(n,) bool on the CPU: which sentences can stop after `step` (see the module docstring)."""
        best_live = self.live_scores.max(dim=1).values  # (n,) log P of the best live hypothesis
        k = self.fin_scores.size(1)
        full = self._full()
        if style in ("gnmt", "fairseq"):
            longest = self.max_lens.to(best_live.device, torch.float32) + 1.0
            bound = torch.maximum(
                best_live / length_penalty(float(step + 1), alpha, style),
                best_live / length_penalty(longest, alpha, style),
            )  # the best log P / lp any extension of a live hypothesis can reach
            done = full | (self.fin_scores[:, n_best - 1] >= bound)
        else:
            done = full & (best_live / length_penalty(float(step), alpha, style) <= self.fin_scores[:, k - 1])
        return (done | ~best_live.isfinite()).cpu()

    def results(self, i: int, n_best: int) -> list[Hypothesis]:
        """The n_best finished hypotheses of sentence i, best first."""
        scores, log_probs = self.fin_scores[i, :n_best].tolist(), self.fin_log_probs[i, :n_best].tolist()
        lens = self.fin_lens[i, :n_best].tolist()
        return [
            Hypothesis(self.fin_seqs[i, j, : lens[j] - 1].tolist(), scores[j], log_probs[j])
            for j in range(len(scores))
            if math.isfinite(scores[j])
        ]


def beam_search(
    stepper: Stepper,
    max_lens: Tensor,
    *,
    beam_size: int,
    start_id: int,
    eos_id: int,
    banned: Sequence[int] = (),
    alpha: float = DecodeConfig.alpha,
    style: str = "gnmt",
    n_best: int = 1,
    prefixes: Prefixes | None = None,
    device: torch.device | str = "cpu",
    should_stop: StopHook | None = None,
) -> list[list[Hypothesis]]:
    """Beam search for n sentences; the stepper holds n * beam_size rows. max_lens (n,) on the CPU.

    Returns for each sentence up to n_best hypotheses, best first.
    """
    if prefixes is not None:
        max_lens = prefixes.room(max_lens)
    if style not in STYLES:
        raise ValueError(f"length_penalty_style={style!r} is not one of {STYLES}")
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best={n_best} must be between 1 and beam_size={beam_size}")
    n, k = max_lens.numel(), beam_size
    results: list[list[Hypothesis]] = [[] for _ in range(n)]
    if n == 0:
        return results
    banned_t = torch.tensor(sorted(banned), dtype=torch.long, device=device)
    beams = _Beams.start(max_lens, k, device)
    tokens = torch.full((n * k,), start_id, dtype=torch.long, device=device)
    for step in range(1, int(max_lens.max()) + 2):
        _check_stop(should_stop, step)
        logp = stepper.step(tokens)  # (n * k, vocab)
        logp = _mask_step(logp.view(-1, k, logp.size(-1)), step, beams.max_lens, eos_id, banned_t)
        if prefixes is not None:
            logp = prefixes.force(logp, step, beams.ids)
        beam, last = beams.advance(logp, step, eos_id, length_penalty(float(step), alpha, style))  # (n, k)
        done = beams.done(step, n_best, alpha, style)
        rows = beam + torch.arange(0, beam.numel(), k, device=beam.device)[:, None]  # flat row index
        if not bool(done.any()):
            stepper.reorder(rows.view(-1))
            tokens = last.view(-1)
            continue
        for i in done.nonzero()[:, 0].tolist():
            results[int(beams.ids[i])] = beams.results(i, n_best)
        keep = (~done).nonzero()[:, 0]
        if keep.numel() == 0:
            break
        beams.keep(keep)
        keep = keep.to(rows.device)
        stepper.select(rows[keep].view(-1))
        tokens = last[keep].view(-1)
    return results
