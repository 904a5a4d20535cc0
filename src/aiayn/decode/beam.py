"""The beam loop (section 6.1): one loop for every beam search, the plain one and the constrained
one (aiayn.decode.constrained), which differ only in their `Beams` policy: how a step's candidates
become the k live hypotheses and join the pools of finished ones (`Beams.advance`), as fairseq's
one generator calls `search.step` on interchangeable strategies. The search's rules and stopping
criteria are those of aiayn.decode.strategies' docstring.

Where its steps run was chosen once, when the search started (`aiayn.decode.stepper.Backend`): the
plain search on a native stepper takes its steps in runs of one native call each, up to the first
step at which some sentence is done (the same operations in the same order as `Beams`, so the same
bits); every other search, and a run that failed, takes them one at a time in Python.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.decode.rules import Hypothesis, SearchRules, Stepper
from aiayn.decode.stepper import Backend
from aiayn.runtime.scores import beam_top


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
class Beams:
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
    def start(cls, max_lens: Tensor, k: int, device: torch.device | str) -> Beams:
        n, total = max_lens.numel(), int(max_lens.max()) + 1 if max_lens.numel() else 1
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

    def advance(
        self, scores: Tensor, step: int, eos_id: int, lp: float, lse: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """One step from log-probs (n, k, vocab), or from logits and their log-normalisers lse (n * k,)
        (log P = logits - lse): finish EOS candidates, keep the k best live ones. `scores` may be
        used up (the prefixes' log P added in place, off the native kernels).

        Returns for each new live hypothesis (n, k) the beam it extends and its last token.
        """
        n, k, vocab = scores.shape
        offsets = self.live_scores if lse is None else self.live_scores - lse.view(n, k)  # (n, k)
        top, index = beam_top(scores, offsets, min(2 * k, k * vocab))  # (n, c) log P, sorted
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

    def done(self, step: int, n_best: int, rules: SearchRules) -> Tensor:
        """(n,) bool on the CPU: which sentences can stop after `step` (aiayn.decode.strategies'
        docstring says when)."""
        best_live = self.live_scores.max(dim=1).values  # (n,) log P of the best live hypothesis
        k = self.fin_scores.size(1)
        full = self._full()
        if rules.style in ("gnmt", "fairseq"):
            longest = self.max_lens.to(best_live.device, torch.float32) + 1.0
            bound = torch.maximum(
                best_live / rules.lp(float(step + 1)), best_live / rules.lp(longest)
            )  # the best log P / lp any extension of a live hypothesis can reach
            done = full | (self.fin_scores[:, n_best - 1] >= bound)
        else:
            done = full & (best_live / rules.lp(float(step)) <= self.fin_scores[:, k - 1])
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


def run_beams(
    stepper: Stepper, beams: Beams, n_best: int, rules: SearchRules, backend: Backend
) -> list[list[Hypothesis]]:
    """Beam search of the sentences `beams` starts with (n, k hypotheses each; the stepper holds
    n * k rows, sentence-major). Returns for each sentence up to n_best hypotheses, best first.
    Its steps run as `backend` says: in native runs where it has them (`backend.runs`), else one at
    a time in Python, the same operations in the same order."""
    n, k = beams.live_scores.shape
    results: list[list[Hypothesis]] = [[] for _ in range(n)]
    tokens = torch.full((n * k,), rules.start_id, dtype=torch.long, device=beams.live_scores.device)
    runs = backend.runs
    step, total = 0, int(beams.max_lens.max()) + 1 if n else 0
    while step < total:
        rules.check_stop(step + 1)
        found = (
            None
            if runs is None
            else runs.beam(beams, tokens, step + 1, rules.run_length(step, total), n_best)
        )
        if found is None:
            step, (rows, last, done) = step + 1, _step(backend, beams, tokens, step + 1, n_best, rules)
            if not bool(done.any()):
                stepper.reorder(rows)
        else:
            taken, rows, last, done = found  # reordered already where no sentence is done
            step += taken
        if not bool(done.any()):
            tokens = last
            continue
        for i in done.nonzero()[:, 0].tolist():
            results[int(beams.ids[i])] = beams.results(i, n_best)
        keep = (~done).nonzero()[:, 0]
        if keep.numel() == 0:
            break
        beams.keep(keep)
        keep = keep.to(rows.device)
        stepper.select(rows.view(-1, k)[keep].view(-1))
        tokens = last.view(-1, k)[keep].view(-1)
    return results


def _step(backend: Backend, beams: Beams, tokens: Tensor, step: int, n_best: int, rules: SearchRules):
    """One step in Python: tokens (n * k,) -> each survivor's row (n * k,), its token (n * k,), and
    which sentences are done (n,) on the CPU."""
    k = beams.live_scores.size(1)
    scores, lse = backend.scores(tokens)  # (n * k, vocab), (n * k,) | None
    scores = rules.mask(scores.view(-1, k, scores.size(-1)), step, beams.max_lens, beams.ids)
    beam, last = beams.advance(scores, step, rules.eos_id, rules.lp(float(step)), lse)  # (n, k)
    rows = beam + torch.arange(0, beam.numel(), k, device=beam.device)[:, None]  # flat row index
    return rows.view(-1), last.view(-1), beams.done(step, n_best, rules)
