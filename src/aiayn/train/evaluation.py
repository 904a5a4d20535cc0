"""Validation during training: dev loss and perplexity on the valid split, a "shuffled-source"
dev loss, and (optionally) dev BLEU with the paper's beam search.

The shuffled-source probe pairs every dev target with another sentence's source. A model that
reads its input scores far worse on it than on the true pairs; a model that has only learned a
target-side language model scores about the same (see the last section of DATA.md). Batches are
sharded over ranks and the sums all-reduced, so every rank gets the same numbers.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from torch import nn

from aiayn.train import distributed
from aiayn.train.loss import label_smoothed_nll


class ShuffledSources:
    """A dataset view whose example i keeps target i but takes the source of another example.

    The pairing is one fixed cycle of a seeded permutation, so no example keeps its own source.
    """

    def __init__(self, dataset, seed: int = 1):
        self.dataset = dataset
        n = len(dataset)
        order = np.random.default_rng(seed).permutation(n)
        self.source_of = np.empty(n, dtype=np.int64)
        self.source_of[order] = np.roll(order, -1)
        self.src_lengths = np.asarray(dataset.src_lengths)[self.source_of]
        self.tgt_lengths = dataset.tgt_lengths

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int):
        return self.dataset[int(self.source_of[i])][0], self.dataset[i][1]


@torch.no_grad()
def dev_loss(model: nn.Module, dataset, batches, env, precision, epsilon: float, pad_id: int, bos_id: int):
    """-> {"loss": smoothed loss / token, "nll": nll / token, "ppl": exp(nll)} over all ranks."""
    from aiayn.data.batching import collate

    was_training = model.training
    model.eval()
    sums = torch.zeros(3, dtype=torch.float64, device=env.device)  # loss, nll, tokens
    for indices in batches:
        batch = collate(dataset, indices, pad_id, bos_id).to(env.device)
        with precision.autocast():
            logits = model(batch.src, batch.tgt_in)  # (batch, tgt_len, vocab)
        loss, nll = label_smoothed_nll(logits, batch.tgt_out, epsilon, pad_id)
        sums[0] += loss.double()
        sums[1] += nll.double()
        sums[2] += batch.n_tgt_tokens
    model.train(was_training)
    loss, nll, tokens = distributed.all_reduce(sums, env).tolist()
    if tokens == 0:
        return {"loss": float("nan"), "nll": float("nan"), "ppl": float("nan")}
    return {"loss": loss / tokens, "nll": nll / tokens, "ppl": math.exp(min(nll / tokens, 50.0))}


def dev_bleu(model: nn.Module, data_dir: Path, decode_config, device) -> float:
    """Dev BLEU (sacreBLEU) of the current weights on raw/valid.*, beam search as in section 6.1."""
    from aiayn.evaluate import evaluate_model

    return float(
        evaluate_model(model, data_dir, split="valid", decode_config=decode_config, device=device)["bleu"]
    )
