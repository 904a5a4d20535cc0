"""Lexically constrained beam search: dynamic beam allocation (Post and Vilar, 2018), batched.

Each sentence has constraints: phrases (token sequences) that must appear in its output, for
terminology. A hypothesis tracks which phrases it has met and how far into one it is; leaving a
phrase half-way undoes that phrase's progress. It may end (EOS) only once it has met every phrase,
except at the length cap, where the search ends every hypothesis as plain beam search does (such
an output is ranked after every output that met its constraints).

One step, per sentence, from its k live hypotheses:
1. candidates: the 2k best extensions overall (as plain beam search), each hypothesis's best next
   token, and each hypothesis's allowed constraint tokens (the next token of the phrase it is in,
   or the first token of every phrase it has not met); EOS only for hypotheses that met everything;
2. the candidates are grouped into banks by the number of constraint tokens met, and k places are
   dealt round-robin from the bank with the most met to the one with the fewest, each bank giving
   its best remaining candidate: hypotheses that make progress on the constraints keep places
   even when their score is lower;
3. as in plain beam search, an EOS candidate dealt one of those k places ends its hypothesis (it
   joins the sentence's pool of finished outputs, which keeps the k best), and the k live places
   are dealt again from the other candidates.
So an output ends where ending is among the search's best choices, as in plain beam search, not
merely where it is allowed: letting every hypothesis that met its phrases end at every step fills
the pool with outputs cut short just after their last phrase (an EOS the model thought unlikely
but whose log P, summed over fewer tokens, outscores the full translation's).
A sentence without constraints has one bank, and its search is exactly `beam_search`.

Dynamic beam allocation is a policy of the one beam loop (aiayn.decode.beam), as fairseq's
`LexicallyConstrainedBeamSearch` is a strategy of its one generator: `ConstrainedBeams` is the
plain `Beams` with its own way of dealing a step's k places (`advance`) and of ranking the pools.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.decode.beam import Beams


@dataclass(frozen=True)
class Progress:
    """A hypothesis' constraint state: the phrases met, and (phrase, tokens of it so far) if in one."""

    met: tuple[bool, ...]
    inside: tuple[int, int] | None = None

    def tokens_met(self, phrases: Sequence[Sequence[int]]) -> int:
        done = sum(len(p) for p, m in zip(phrases, self.met, strict=True) if m)
        return done + (self.inside[1] if self.inside else 0)

    def complete(self) -> bool:
        return all(self.met)

    def allowed(self, phrases: Sequence[Sequence[int]]) -> set[int]:
        """Tokens that make progress: the next one of the current phrase, else every unmet first."""
        if self.inside is not None:
            c, p = self.inside
            return {phrases[c][p]}
        return {p[0] for p, m in zip(phrases, self.met, strict=True) if not m}

    def after(self, token: int, phrases: Sequence[Sequence[int]]) -> Progress:
        """The state once `token` is appended."""
        if self.inside is not None:
            c, p = self.inside
            if phrases[c][p] == token:
                return self._advance(c, p + 1, phrases)
        for c, (phrase, met) in enumerate(zip(phrases, self.met, strict=True)):
            if not met and phrase[0] == token:
                return Progress(self.met)._advance(c, 1, phrases)
        return Progress(self.met)

    def _advance(self, c: int, p: int, phrases: Sequence[Sequence[int]]) -> Progress:
        if p == len(phrases[c]):
            return Progress(self.met[:c] + (True,) + self.met[c + 1 :])
        return Progress(self.met, (c, p))


def _deal(
    banks: dict[int, list[tuple[float, int, int, Progress]]], k: int
) -> list[tuple[float, int, int, Progress]]:
    """k candidates dealt round-robin from the bank with most constraint tokens met down."""
    for bank in banks.values():
        bank.sort(key=lambda c: -c[0])
    chosen, order, depth = [], sorted(banks, reverse=True), 0
    while len(chosen) < k and any(depth < len(banks[b]) for b in order):
        for b in order:
            if depth < len(banks[b]) and len(chosen) < k:
                chosen.append(banks[b][depth])
        depth += 1
    return sorted(chosen, key=lambda c: -c[0])  # places sorted by score, as beam_search keeps them


class ConstrainedBeams(Beams):
    """`Beams` whose live hypotheses are chosen by dynamic beam allocation."""

    phrases: list[list[list[int]]]  # per live sentence
    progress: list[list[Progress]]  # per live sentence, per beam
    fin_met: Tensor  # (n, k) bool: the finished hypothesis met every phrase (pools rank these first)

    @classmethod
    def with_phrases(
        cls,
        max_lens: Tensor,
        k: int,
        device: torch.device | str,
        constraints: Sequence[Sequence[Sequence[int]]],
    ) -> ConstrainedBeams:
        """The beams of n sentences (max_lens (n,) on the CPU) and their phrases, none met yet."""
        beams = cls.start(max_lens, k, device)
        beams.fin_met = torch.zeros(max_lens.numel(), k, dtype=torch.bool, device=device)
        beams.phrases = [[list(p) for p in phrases] for phrases in constraints]
        beams.progress = [[Progress((False,) * len(phrases))] * k for phrases in constraints]
        return beams

    def keep(self, index: Tensor) -> None:
        super().keep(index)
        kept = index.tolist()
        self.fin_met = self.fin_met[index.to(self.fin_met.device)]
        self.phrases = [self.phrases[i] for i in kept]
        self.progress = [self.progress[i] for i in kept]

    def finish(
        self, seqs: Tensor, log_probs: Tensor, finishing: Tensor, step: int, lp: float, met: Tensor
    ) -> None:
        """`Beams.finish`, the pools ordered by (met every phrase, log P / lp). met (n, c) bool."""
        k, total = self.fin_scores.size(1), seqs.size(2)
        cand = (log_probs / lp).masked_fill(~finishing, -math.inf)
        scores, met = torch.cat([self.fin_scores, cand], dim=1), torch.cat([self.fin_met, met], dim=1)
        key = scores.double() - 1e12 * (~met & scores.isfinite()).double()  # (n, k + c)
        pos = key.topk(k, dim=1).indices  # (n, k)
        self.fin_scores, self.fin_met = scores.gather(1, pos), met.gather(1, pos)
        self.fin_log_probs = torch.cat([self.fin_log_probs, log_probs], dim=1).gather(1, pos)
        lens = torch.full_like(log_probs, step, dtype=torch.long)
        self.fin_lens = torch.cat([self.fin_lens, lens], 1).gather(1, pos)
        self.fin_seqs = torch.cat([self.fin_seqs, seqs], dim=1).gather(
            1, pos[:, :, None].expand(-1, -1, total)
        )

    def block_eos(self, logp: Tensor, step: int, eos_id: int) -> None:
        """Hypotheses that have not met every phrase may not end, except at the length cap."""
        for i, states in enumerate(self.progress):
            if step <= int(self.max_lens[i]):
                for b, state in enumerate(states):
                    if not state.complete():
                        logp[i, b, eos_id] = -math.inf

    def _candidates(self, cand: Tensor, top_index: Tensor) -> list[dict[tuple[int, int], float]]:
        """Per sentence {(beam, token): summed log P} from the 2k best, each beam's best token and
        its constraint tokens. cand (n, k, vocab)."""
        n, k, vocab = cand.shape
        best = cand.argmax(dim=-1).cpu()  # (n, k)
        wanted = [
            (i, b, t)
            for i in range(n)
            for b in range(k)
            for t in self.progress[i][b].allowed(self.phrases[i])
        ]
        wanted += [(i, b, int(best[i, b])) for i in range(n) for b in range(k)]
        wanted += [(i, int(x) // vocab, int(x) % vocab) for i in range(n) for x in top_index[i].tolist()]
        index = torch.tensor(wanted, dtype=torch.long).t().to(cand.device)  # (3, m)
        scores = cand[index[0], index[1], index[2]].tolist()
        out: list[dict[tuple[int, int], float]] = [{} for _ in range(n)]
        for (i, b, t), s in zip(wanted, scores, strict=True):
            if math.isfinite(s):
                out[i][(b, t)] = s
        return out

    def _ends(self, ends: Tensor, step: int, eos_id: int, lp: float) -> None:
        """Hypotheses whose EOS was dealt a place join the pools. ends (n, k): that EOS
        extension's summed log P, -inf where beam b does not end."""
        finishing = ends.isfinite()
        if bool(finishing.any()):
            met = torch.tensor([[state.complete() for state in states] for states in self.progress])
            seqs = self.live_seqs.clone()
            seqs[:, :, step - 1] = eos_id
            self.finish(seqs, ends, finishing, step, lp, met.to(ends.device))

    def _allocate(self, i: int, found: dict[tuple[int, int], float], eos_id: int) -> tuple[list, list]:
        """Sentence i's beams that end (those whose EOS is dealt one of the k places) and its k live
        places (dealt from the rest): lists of (summed log P, beam, token, Progress)."""
        phrases, states, k = self.phrases[i], self.progress[i], self.live_scores.size(1)
        banks: dict[int, list] = {}
        for (b, t), s in found.items():
            state = states[b] if t == eos_id else states[b].after(t, phrases)
            banks.setdefault(state.tokens_met(phrases), []).append((s, b, t, state))
        ending = [c for c in _deal(banks, k) if c[2] == eos_id]
        live = {met: [c for c in bank if c[2] != eos_id] for met, bank in banks.items()}
        return ending, _deal(live, k)

    def advance(
        self, logp: Tensor, step: int, eos_id: int, lp: float, lse: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """As `Beams.advance`, with the places dealt by dynamic beam allocation."""
        n, k, vocab = logp.shape
        if lse is not None:  # logits: log P = logits - lse
            logp = logp.sub_(lse.view(n, k, 1))
        self.block_eos(logp, step, eos_id)
        cand = self.live_scores[:, :, None] + logp  # (n, k, vocab)
        index = cand.view(n, k * vocab).topk(min(2 * k, k * vocab), dim=1).indices  # (n, c)
        chosen_beam = torch.zeros(n, k, dtype=torch.long)
        chosen_token = torch.full((n, k), eos_id, dtype=torch.long)
        scores, ends = torch.full((n, k), -math.inf), torch.full((n, k), -math.inf)
        progress = []
        for i, found in enumerate(self._candidates(cand, index)):
            ending, chosen = self._allocate(i, found, eos_id)
            for s, b, _, _ in ending:
                ends[i, b] = s
            for j, (s, b, t, _) in enumerate(chosen):
                scores[i, j], chosen_beam[i, j], chosen_token[i, j] = s, b, t
            fill = self.progress[i][0]  # empty places keep some state; their score is -inf
            progress.append([c[3] for c in chosen] + [fill] * (k - len(chosen)))
        device = self.live_seqs.device
        self._ends(ends.to(device), step, eos_id, lp)
        self.progress = progress
        self.live_scores = scores.to(device)
        chosen_beam, chosen_token = chosen_beam.to(device), chosen_token.to(device)
        self.live_seqs = self.live_seqs.gather(
            1, chosen_beam[:, :, None].expand(-1, -1, self.live_seqs.size(2))
        )
        self.live_seqs[:, :, step - 1] = chosen_token
        return chosen_beam, chosen_token


def __getattr__(name: str):
    """`constrained_beam_search` with the fields of `SearchRules` as keywords: deprecated (a
    DeprecationWarning), it is aiayn.decode.strategies.constrained_beam_search, given a `SearchRules`."""
    if name != "constrained_beam_search":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    search = importlib.import_module("aiayn.decode.search")  # the deprecated signatures (it imports this one)

    new = "aiayn.decode.strategies.constrained_beam_search"
    return search.deprecated(__name__, name, new, search.OLD_ENTRIES[name])
