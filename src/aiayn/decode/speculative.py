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
One sentence at a time, on the CPU with the native step and its panel products for one row (what
`Translator.load` gives a float32 model), the pass computes each position's logits to the last
bit as the single steps of greedy search do (products whose rows' bits do not depend on the row
count, each position's attention over exactly its prefix as a single step computes it:
aiayn.runtime.native_step), so the output is the teacher's greedy output token for token, and its
scores are the teacher's. So too in a batch: loading a draft makes the teacher's decoder and output
products row-invariant (every row class takes the panels, `linear.row_invariant`: a row's bits do
not depend on how many rows a product has, so the teacher's own greedy search of the batch computes
what the passes compute), and the accepted tokens' log-probabilities are summed one by one, as
greedy search sums them. Not so with int8 products (their activations are quantised per call)
or in Python (rows of different lengths attend with a mask): there logits can differ in the last
bits, which can only change a choice where two tokens tie to float32 rounding.

Rows accept different numbers of tokens: every row keeps its own length in both models' caches
(aiayn.decode.ragged): a rejected proposal's keys are not rolled back by copying, the row's
length is just set back, and the next pass overwrites them. The draft's cache holds the proposals
it fed itself; when all k are accepted, the k-th and the teacher's bonus token are both new to
it, and its next pass feeds the two at once. With learned positions (3.5's alternative, a table of
max_positions) a pass near the end of either model's table proposes fewer tokens, and none while a
row sits at the last position (the teacher then reads its newest tokens alone, and the draft gets
them in its next pass), so that no position past a table is read.

What it costs: a draft step per proposal and a teacher pass over k + 1 positions per check. It
pays where that pass costs about one teacher step (products bound by reading the weights) and the
draft is much cheaper than the teacher and agrees with it often (`DraftStats`); BENCHMARKS.md
("Speculative greedy decoding") has the figures on a 2-core AVX2 CPU, where the tiny teacher's
pass over 5 positions costs about two of its steps and the draft loses
(`benchmarks/check_cost.py` times a pass against a step).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from aiayn.decode.ragged import RaggedDecoder
from aiayn.decode.rules import Hypothesis, SearchRules
from aiayn.decode.shortlist import Shortlist, read_shortlist
from aiayn.errors import AiaynError
from aiayn.model.io import load_model_dir
from aiayn.model.transformer import Transformer
from aiayn.runtime.blockwise import row_max
from aiayn.runtime.inference import prepare_for_inference
from aiayn.runtime.linear import row_invariant
from aiayn.runtime.native_step import attach_native_decoder, native_decoder
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

    def reads(self, src: Tensor) -> bool:
        """Whether its encoder takes sources src (n, src_len): a table of learned positions may not."""
        return _positions(self.model) >= src.size(1)

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
        # Proposals need not be exact (the teacher checks them): int8 on the CPU, where a student's
        # proposals cost about what float32's do since the panel products (docs/performance.md).
        prepare_for_inference(
            model, int8 or model.output_weight.device.type == "cpu", f"draft model {draft_dir}"
        )
        # the teacher's decoder rows get the same bits in any batch (its encoder reads the same
        # batch in both searches: its kernels stay the fastest)
        native = native_decoder(teacher) is not None
        if row_invariant(teacher.decoder, teacher.output_layer) and native:
            status = attach_native_decoder(teacher)
            if status != "native":  # it decodes in Python now: bits can differ at float32 near-ties
                warnings.warn(
                    f"{teacher_dir}: the native step could not be attached again ({status}); speculative "
                    "outputs may differ from its greedy search's where two tokens tie to float32 rounding",
                    RuntimeWarning,
                    stacklevel=2,
                )
        return cls(model, str(draft_dir), read_shortlist(draft_dir, model.config))


def check_same_vocabulary(
    draft_dir, teacher_dir, draft: Transformer, teacher: Transformer, ours, theirs
) -> None:
    """A one-line error unless the draft's target and source pieces (in id order) and special ids are
    the teacher's: it proposes the teacher's tokens after reading the teacher's source ids."""
    sizes = lambda c: (c.vocab_size, c.source_vocab_size, c.pad_id, c.bos_id, c.eos_id, c.start_id)  # noqa: E731
    why = f"vocabulary sizes and special ids {sizes(draft.config)}, not {sizes(teacher.config)}"
    if sizes(draft.config) == sizes(teacher.config):
        why = _first_difference(ours, theirs, teacher.config)
    if why:
        raise AiaynError(
            f"draft model {draft_dir} does not share the vocabularies of {teacher_dir} ({why}): "
            "a draft must read the teacher's sources and propose its tokens"
        )


def _first_difference(ours, theirs, config) -> str:
    """Where tokenizers `ours` and `theirs` first name an id differently, target side first; "" if nowhere."""
    for side, pieces, n in (
        ("target", "target_pieces", config.vocab_size),
        ("source", "pieces", config.source_vocab_size),
    ):
        mine, wanted = getattr(ours, pieces)(list(range(n))), getattr(theirs, pieces)(list(range(n)))
        diff = next((i for i, (a, b) in enumerate(zip(mine, wanted, strict=True)) if a != b), None)
        if diff is not None:
            return f"{side} id {diff} is {mine[diff]!r}, not {wanted[diff]!r}"
    return ""


@dataclass
class _Live:
    """The live rows (one per sentence still decoding) as Python lists: a pass's bookkeeping for a
    few rows then costs microseconds, where tensor operations cost ten each (one sentence at a time,
    the interactive case, is a single row)."""

    sentence: list[int]  # each row's sentence
    max_lens: list[int]  # its length cap
    outputs: list[list[int]]  # its tokens so far
    log_probs: list[np.float32]  # its log P, summed in float32 token by token as greedy search sums it
    last: list[int]  # its newest token, which the teacher has not read yet
    pending: list[list[int]]  # the tokens the draft has not read yet (1 or 2)

    def keep(self, index: list[int]) -> None:
        """Only rows `index` stay."""
        for name in ("sentence", "max_lens", "outputs", "log_probs", "last", "pending"):
            setattr(self, name, [getattr(self, name)[i] for i in index])


def _positions(model: Transformer) -> float:
    """The most target positions `model` can read: its learned table's, or any number (3.5's sinusoids)."""
    return model.config.max_positions if model.config.positions == "learned" else math.inf


def _propose(draft: RaggedDecoder, live: _Live, k: int, banned: Tensor) -> Tensor:
    """k tokens per row, each the draft's most probable after the ones before -> (rows, k); for k = 0
    (rows, 0), the draft not run."""
    if k == 0:
        return torch.zeros(len(live.pending), 0, dtype=torch.long, device=banned.device)
    width = max(map(len, live.pending))
    tokens = [p + p[-1:] * (width - len(p)) for p in live.pending]  # (rows, width): padding never read
    newest = torch.tensor([len(p) - 1 for p in live.pending])
    return draft.propose(torch.tensor(tokens, device=banned.device), newest, k, banned)


def _check(
    teacher: RaggedDecoder, live: _Live, proposals: Tensor, rules: SearchRules
) -> tuple[list[list[int]], list[list[float]]]:
    """The teacher's pass over each row's newest token and the proposals (rows, k) -> its most
    probable token after each and that token's log P (rows x (k + 1) lists), under the rules of
    greedy search (`SearchRules.mask`: no banned id; EOS alone past a row's length cap, position j
    of row r predicting its step lengths[r] + j + 1)."""
    last = torch.tensor(live.last, device=proposals.device)
    tokens = torch.cat([last[:, None], proposals], dim=1)  # (rows, k + 1)
    logp = torch.log_softmax(teacher.extend(tokens).float(), dim=-1)  # (rows, k + 1, vocab)
    rows, width, vocab = logp.shape
    steps = teacher.lengths[:, None] + torch.arange(1, width + 1)  # (rows, k + 1) CPU: the step predicted
    rules.mask(logp, steps, torch.tensor(live.max_lens))
    best, chosen = row_max(logp.view(rows * width, vocab))
    return chosen.view(rows, width).tolist(), best.view(rows, width).tolist()


def speculative_search(
    teacher: Transformer, draft: Draft, src: Tensor, max_lens: Tensor, k: int, rules: SearchRules
) -> list[list[Hypothesis]]:
    """The teacher's greedy search for sources src (n, src_len) (right-padded), k tokens proposed by
    `draft` per teacher pass. max_lens (n,) on the CPU. Returns one hypothesis per sentence, scored
    as greedy search scores it; `draft.stats` counts the proposals."""
    n = src.size(0)
    big, small = (
        RaggedDecoder(teacher, src, int(max_lens.max()) + k + 2),
        RaggedDecoder(draft.model, src, int(max_lens.max()) + k + 2, draft.shortlist),
    )
    start, limit = rules.start_id, min(_positions(teacher), _positions(draft.model))
    live = _Live(
        list(range(n)), max_lens.tolist(), [[] for _ in range(n)], [np.float32(0.0)] * n, [start] * n,
        [[start] for _ in range(n)],
    )  # fmt: skip
    results: list[list[Hypothesis]] = [[] for _ in range(n)]
    passes = 0
    while live.sentence:
        passes += 1
        rules.check_stop(passes)
        room = limit - 1 - int(big.lengths.max())  # the pass reads up to k positions past the longest row
        proposals = _propose(small, live, max(0, min(k, room)), rules.banned_ids)  # (rows, k or fewer)
        chosen, best = _check(big, live, proposals, rules)  # rows x (k + 1) each
        ended = _accept(big, small, live, proposals.tolist(), chosen, best, rules.eos_id, draft.stats)
        for r in [r for r, end in enumerate(ended) if end]:
            tokens, logp = live.outputs[r], float(live.log_probs[r])
            score = logp / rules.lp(float(len(tokens) + 1))
            results[live.sentence[r]].append(Hypothesis(tokens, score, logp))
        keep = [r for r, end in enumerate(ended) if not end]
        if not keep:
            break
        if len(keep) < len(ended):
            live.keep(keep)
            big.select(torch.tensor(keep))
            small.select(torch.tensor(keep))
    return results


def _accept(
    big: RaggedDecoder, small: RaggedDecoder, live: _Live, proposals: list[list[int]],
    chosen: list[list[int]], best: list[list[float]], eos_id: int, stats: DraftStats,
) -> list[bool]:  # fmt: skip
    """Each row takes the proposals the teacher agrees with and the teacher's next token (up to its
    first EOS); both caches keep what they read of them. Returns which rows ended."""
    k, ended, held, drafted = len(proposals[0]), [], big.lengths.tolist(), small.lengths.tolist()
    teacher_holds, draft_holds = [], []
    for r, (row, scores, proposed) in enumerate(zip(chosen, best, proposals, strict=True)):
        agreed = 0  # proposals kept: the run the teacher's own choices repeat
        while agreed < k and row[agreed] == proposed[agreed]:
            agreed += 1
        end = eos_id in row[: agreed + 1]
        take = row.index(eos_id) + 1 if end else agreed + 1  # tokens taken
        for score in scores[:take]:  # token by token, as greedy search sums them (float32, in its order)
            live.log_probs[r] = live.log_probs[r] + np.float32(score)
        live.outputs[r] += row[: take - 1 if end else take]
        live.last[r] = row[take - 1]
        # the draft has read its newest token and the proposals before the k-th; the k-th and the
        # teacher's token after it are new to it when all k were kept (without proposals, nothing read)
        unread = live.pending[r] if k == 0 else proposed[-1:] if agreed == k else []
        live.pending[r] = unread + [row[take - 1]]
        teacher_holds.append(held[r] + take)  # its newest token and the proposals before the one it takes
        draft_holds.append(held[r] + 1 + min(agreed, k - 1) if k else drafted[r])
        stats.accepted += min(agreed, take)
        stats.tokens += take
        ended.append(end)
    big.keep(torch.tensor(teacher_holds))
    small.keep(torch.tensor(draft_holds))
    stats.proposed += len(chosen) * k
    stats.checks += len(chosen)
    return ended
