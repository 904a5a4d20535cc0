"""Speculative greedy decoding: the paper's "making generation less sequential" (section 7) with
an exact guarantee (Leviathan et al., 2023, "Fast Inference from Transformers via Speculative
Decoding"; Chen et al., 2023; greedy acceptance as in Stern et al., 2018, "Blockwise Parallel
Decoding").

A small draft model (a distilled student with a shallow decoder, say) proposes k tokens greedily,
one incremental step each, with its own cache (one native call for all k where it has the native
step, `NativeDecoder.propose`; int8 products on the CPU and its output layer restricted to the
batch's shortlist where its model directory has one: proposals need not be exact). The teacher
then reads its newest token and the k proposals in one pass over its cached prefix (k + 1
positions: `NativeDecoder.extend`, each product reading its weights once for all of them;
`Transformer.decode_tokens` in Python), and
each row keeps the longest run of proposals that equal the teacher's own most probable tokens,
plus the teacher's token at the first disagreement (or, when all k agree, its token after them):
1 to k + 1 tokens per teacher pass, each the one the teacher's greedy search would have chosen.
One sentence at a time, on the CPU with the native step and oneDNN's packed products (what
`Translator.load` gives a float32 model), the pass computes each position's logits to the last
bit as the single steps of greedy search do (products whose rows' bits do not depend on the row
count, attention one position at a time with the single step's calls: aiayn.runtime.native_step),
so the output is the teacher's greedy output token for token, and its scores are the teacher's.
So too in a batch: loading a draft makes the teacher's decoder and output products row-invariant
(every row class takes the packed weight, `linear.row_invariant`: a row's bits do not depend on
how many rows a product has, so the teacher's own greedy search of the batch computes what the
passes compute), the rows at one length attend together over exactly their prefix
(`NativeDecoder.extend`), and the accepted tokens' log-probabilities are summed one by one, as
greedy search sums them. Not so with int8 products (their activations are quantised per call)
or in Python (rows of different lengths attend with a mask): there logits can differ in the last
bits, which can only change a choice where two tokens tie to float32 rounding.

Rows accept different numbers of tokens: every row keeps its own length in both models' caches
(aiayn.decode.row_decoder): a rejected proposal's keys are not rolled back by copying, the row's
length is just set back, and the next pass overwrites them. The draft's cache holds the proposals
it fed itself; when all k are accepted, the k-th and the teacher's bonus token are both new to
it, and its next pass feeds the two at once.

What it costs: a draft step per proposal and a teacher pass over k + 1 positions per check. It
pays where that pass costs about one teacher step (products bound by reading the weights) and the
draft is much cheaper than the teacher and agrees with it often (`DraftStats`); BENCHMARKS.md
("Speculative greedy decoding") has the figures on a 2-core AVX2 CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from aiayn.decode.common import Hypothesis, SearchRules
from aiayn.decode.row_decoder import RowDecoder
from aiayn.decode.shortlist import Shortlist, read_shortlist
from aiayn.errors import AiaynError
from aiayn.model.io import load_model_dir
from aiayn.model.transformer import Transformer
from aiayn.runtime.blockwise import row_max
from aiayn.runtime.inference import prepare_for_inference
from aiayn.runtime.linear import row_invariant
from aiayn.runtime.native_step import attach_native_decoder
from aiayn.tokenizers import load_tokenizer


@dataclass
class DraftStats:
    """What the draft achieved so far: tokens it proposed and the teacher accepted, teacher passes
    (one per live sentence and check) and the tokens they produced."""

    proposed: int = 0
    accepted: int = 0
    checks: int = 0
    tokens: int = 0

    @property
    def acceptance(self) -> float:
        """The share of proposed tokens the teacher kept."""
        return self.accepted / self.proposed if self.proposed else 0.0

    @property
    def tokens_per_check(self) -> float:
        """Output tokens per sentence and teacher pass (1 to k + 1; greedy search makes 1)."""
        return self.tokens / self.checks if self.checks else 0.0

    def summary(self, k: int) -> str:
        return (
            f"draft: {self.acceptance:.1%} of {self.proposed:,} proposed tokens accepted (k={k}), "
            f"{self.tokens_per_check:.2f} tokens per teacher pass"
        )


class Draft:
    """A draft model for speculative greedy decoding, and its running `stats`."""

    def __init__(self, model: Transformer, name: str = "draft", shortlist: Shortlist | None = None):
        self.model, self.name, self.stats, self.shortlist = model, name, DraftStats(), shortlist

    @classmethod
    def load(
        cls,
        draft_dir: str | Path,
        teacher_dir: str | Path,
        teacher: Transformer,
        tokenizer,
        int8: bool = False,
    ) -> Draft:
        """The draft model of `draft_dir` on the teacher's device, prepared for inference (int8
        products on the CPU whatever `int8` says, the native step) with its directory's shortlist
        if it has one; one line when its target vocabulary is not the teacher's (`tokenizer`).
        The teacher's decoder and output products become row-invariant (`linear.row_invariant`),
        its native step re-attached: batches then decode to its greedy outputs bit for bit, and
        every other search of the teacher takes those kernels too."""
        model, info = load_model_dir(draft_dir, teacher.output_weight.device)
        for name, config in ((teacher_dir, teacher.config), (draft_dir, model.config)):
            if config.attention_window is not None:  # its ring buffer takes one position a step
                raise AiaynError(
                    f"{name}: speculative decoding takes no model with attention_window="
                    f"{config.attention_window} (restricted self-attention); translate without --draft"
                )
        check_same_vocabulary(
            draft_dir, teacher_dir, model, teacher, load_tokenizer(draft_dir, info), tokenizer
        )
        # Proposals need not be exact (the teacher checks them): int8 on the CPU, where three
        # proposals of the student in BENCHMARKS.md cost 0.84 ms against 1.78 ms in float32.
        prepare_for_inference(model, int8 or model.output_weight.device.type == "cpu")
        # the teacher's decoder rows get the same bits in any batch (its encoder reads the same
        # batch in both searches: its kernels stay the fastest)
        if row_invariant(teacher.decoder, teacher.output_layer):
            attach_native_decoder(teacher)
        return cls(model, str(draft_dir), read_shortlist(draft_dir, model.config))


def check_same_vocabulary(
    draft_dir, teacher_dir, draft: Transformer, teacher: Transformer, ours, theirs
) -> None:
    """A one-line error unless the draft's target pieces (in id order) and special ids are the teacher's."""
    special = lambda c: (c.vocab_size, c.pad_id, c.bos_id, c.eos_id, c.start_id)  # noqa: E731
    why = ""
    if special(draft.config) != special(teacher.config):
        why = f"vocabulary size and special ids {special(draft.config)}, not {special(teacher.config)}"
    else:
        ids = list(range(teacher.config.vocab_size))
        mine, wanted = ours.target_pieces(ids), theirs.target_pieces(ids)
        diff = next((i for i, (a, b) in enumerate(zip(mine, wanted, strict=True)) if a != b), None)
        why = "" if diff is None else f"target id {diff} is {mine[diff]!r}, not {wanted[diff]!r}"
    if why:
        raise AiaynError(
            f"draft model {draft_dir} does not share the target vocabulary of {teacher_dir} ({why}): "
            "a draft must propose the teacher's tokens"
        )


@dataclass
class _Live:
    """The live rows (one per sentence still decoding), on the CPU unless said otherwise."""

    sentence: Tensor  # (rows,) each row's sentence
    max_lens: Tensor  # (rows,) its length cap
    outputs: list[list[int]]  # its tokens so far
    log_probs: Tensor  # (rows,) on the device: their log P
    last: Tensor  # (rows,) on the device: its newest token, which the teacher has not read yet
    pending: Tensor  # (rows, 2) on the device: the tokens the draft has not read yet, `counts` of them
    counts: Tensor  # (rows,) 1 or 2

    def keep(self, index: Tensor) -> None:
        """Only rows `index` (rows',) (CPU) stay."""
        on = index.to(self.last.device)
        self.sentence, self.max_lens, self.counts = (
            self.sentence[index],
            self.max_lens[index],
            self.counts[index],
        )
        self.outputs = [self.outputs[i] for i in index.tolist()]
        self.log_probs, self.last, self.pending = self.log_probs[on], self.last[on], self.pending[on]


def _propose(draft: RowDecoder, live: _Live, k: int, banned: Tensor) -> Tensor:
    """k tokens per row, each the draft's most probable after the ones before -> (rows, k)."""
    return draft.propose(live.pending[:, : int(live.counts.max())], live.counts - 1, k, banned)


def _check(teacher: RowDecoder, live: _Live, proposals: Tensor, rules: SearchRules) -> tuple[Tensor, Tensor]:
    """The teacher's pass over each row's newest token and the proposals (rows, k) -> its most
    probable token after each (rows, k + 1) and that token's log P (rows, k + 1), under the rules
    of greedy search (no banned id; EOS alone past a row's length cap)."""
    tokens = torch.cat([live.last[:, None], proposals], dim=1)  # (rows, k + 1)
    logp = torch.log_softmax(teacher.extend(tokens).float(), dim=-1)  # (rows, k + 1, vocab)
    rows, width, vocab = logp.shape
    logp[..., rules.banned_ids] = -math.inf
    steps = teacher.lengths[:, None] + torch.arange(1, width + 1)  # (rows, k + 1) CPU: the step predicted
    force = steps > live.max_lens[:, None]
    if bool(force.any()):
        at = force.to(logp.device)
        eos = logp[..., rules.eos_id].clone()
        logp[at] = -math.inf
        logp[..., rules.eos_id] = torch.where(at, eos, logp[..., rules.eos_id])
    best, chosen = row_max(logp.view(rows * width, vocab))
    return chosen.view(rows, width), best.view(rows, width)


def speculative_search(
    teacher: Transformer, draft: Draft, src: Tensor, max_lens: Tensor, k: int, rules: SearchRules
) -> list[list[Hypothesis]]:
    """The teacher's greedy search for sources src (n, src_len) (right-padded), k tokens proposed by
    `draft` per teacher pass. max_lens (n,) on the CPU. Returns one hypothesis per sentence, scored
    as greedy search scores it; `draft.stats` counts the proposals."""
    n, device = src.size(0), src.device
    big, small = (
        RowDecoder(teacher, src, int(max_lens.max()) + k + 2),
        RowDecoder(draft.model, src, int(max_lens.max()) + k + 2, draft.shortlist),
    )
    start = torch.full((n,), rules.start_id, dtype=torch.long, device=device)
    live = _Live(
        torch.arange(n), max_lens.clone(), [[] for _ in range(n)], torch.zeros(n, device=device),
        start, torch.stack([start, start], 1), torch.ones(n, dtype=torch.long),
    )  # fmt: skip
    results: list[list[Hypothesis]] = [[] for _ in range(n)]
    passes = 0
    while live.counts.numel():
        passes += 1
        rules.check_stop(passes)
        proposals = _propose(small, live, k, rules.banned_ids)  # (rows, k)
        chosen, best = _check(big, live, proposals, rules)  # (rows, k + 1), (rows, k + 1)
        ended = _accept(big, small, live, proposals, chosen, best, rules.eos_id, draft.stats)
        for r in ended.nonzero()[:, 0].tolist():
            tokens, logp = live.outputs[r], float(live.log_probs[r])
            results[int(live.sentence[r])].append(
                Hypothesis(tokens, logp / rules.lp(float(len(tokens) + 1)), logp)
            )
        if bool(ended.any()):
            keep = (~ended).nonzero()[:, 0]
            live.keep(keep)
            big.select(keep)
            small.select(keep)
    return results


def _accept(
    big: RowDecoder, small: RowDecoder, live: _Live, proposals: Tensor, chosen: Tensor, best: Tensor,
    eos_id: int, stats: DraftStats,
) -> Tensor:  # fmt: skip
    """Each row takes the proposals the teacher agrees with and the teacher's next token (up to its
    first EOS); both caches keep what they read of them. Returns which rows ended (rows,) (CPU)."""
    rows, k = proposals.shape
    agreed = chosen[:, :k].eq(proposals).long().cumprod(dim=1).sum(dim=1)  # (rows,) proposals kept
    within = torch.arange(k + 1, device=chosen.device)[None, :] < (agreed + 1)[:, None]  # (rows, k + 1)
    eos = chosen.eq(eos_id) & within
    ended = eos.any(dim=1)
    take = torch.where(ended, eos.long().argmax(dim=1) + 1, agreed + 1)  # (rows,) tokens taken
    taken = torch.arange(k + 1, device=chosen.device)[None, :] < take[:, None]
    for j in range(k + 1):  # token by token, as greedy search sums them (float sums in its order)
        live.log_probs += torch.where(taken[:, j], best[:, j], torch.zeros_like(best[:, j]))
    every = agreed.eq(k)  # the draft has not read its k-th proposal yet
    rows_on = torch.arange(rows, device=chosen.device)
    live.last = chosen[rows_on, take - 1]
    live.pending = torch.stack([torch.where(every, proposals[:, -1], live.last), chosen[:, -1]], dim=1)
    agreed, take, ended, every = agreed.cpu(), take.cpu(), ended.cpu(), every.cpu()
    for r, (row, count) in enumerate(zip(chosen.cpu().tolist(), take.tolist(), strict=True)):
        live.outputs[r] += row[: count - 1 if ended[r] else count]
    length = big.lengths
    big.keep(length + take)  # its newest token and the proposals before the one it takes
    small.keep(length + 1 + agreed.clamp(max=k - 1))
    live.counts = 1 + every.long()
    stats.proposed += rows * k
    stats.accepted += int(torch.minimum(agreed, take).sum())
    stats.checks += rows
    stats.tokens += int(take.sum())
    return ended
