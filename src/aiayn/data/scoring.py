"""The score rule of cleaning: dual conditional cross-entropy (Junczys-Dowmunt, 2018, "Dual Conditional
Cross-Entropy Filtering of Noisy Parallel Corpora"; Mozilla's translations pipeline filters with it).

A forward model (source -> target) and a reverse one (target -> source) read each pair under teacher
forcing; H_f(y|x) and H_r(x|y) are their cross-entropies per target token (EOS included, in nats),
and the pair's score is

    |H_f(y|x) - H_r(x|y)| + (H_f(y|x) + H_r(x|y)) / 2

low for a pair both models find likely and agree on, high for a misaligned pair (its target is not
a translation of its source: both models are surprised), whatever the languages of its lines. The
rule (`aiayn.data.cleaning`) removes the `drop` share of the pairs the other rules kept with the
highest scores.

The pairs are read in chunks, sorted by length into batches of at most BATCH_TOKENS padded tokens
and scored without gradients; one float32 a pair is all that is kept (DATA/cleaning/scores.npy, NaN
for the pairs the other rules removed). The models run on the GPU when there is one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from itertools import compress, islice
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F
from tqdm import tqdm

from aiayn.errors import AiaynError
from aiayn.model.io import load_model_dir
from aiayn.tokenizers import load_tokenizer

CHUNK = 4096  # pairs encoded and sorted at a time
BATCH_TOKENS = 4096  # padded target tokens a batch (the logits: this times the vocabulary, float32)
MAX_UNK = 0.05  # a model whose vocabulary leaves more of the data's pieces <unk> is not of this data
_TAG = re.compile(r"^>>[A-Za-z0-9_-]+<< ")  # a target-language tag (aiayn.data.recipe)


class Direction:
    """One of the two models with its tokenizer: the cross-entropy of targets given sources."""

    def __init__(self, role: str, model_dir: Path, languages: tuple[str, str], device: torch.device) -> None:
        """`languages`: (source, target) the model must translate, when the data names them."""
        self.name = f"the score rule's {role} model {model_dir}"
        try:
            self.model, info = load_model_dir(model_dir, device)
            self.tokenizer = load_tokenizer(model_dir, info)
        except AiaynError as err:
            raise AiaynError(f"the score rule's {role} model: {err}") from None
        self.tagged = bool(info.get("target_languages"))  # it reads a leading >>lang<< tag
        has = (info.get("src_lang"), info.get("tgt_lang"))
        if all(isinstance(x, str) for x in (*has, *languages)) and _base(has) != _base(languages):
            wanted = "->".join(languages)
            raise AiaynError(f"{self.name} translates {has[0]}->{has[1]}, but the data needs {wanted}")
        self.checked = False

    @torch.inference_mode()
    def cross_entropy(self, sources: list[str], targets: list[str]) -> np.ndarray:
        """(len(sources),) float32: each target's mean negative log-likelihood per token (EOS
        included) given its source, teacher-forced, in batches of similar lengths."""
        config, device = self.model.config, self.model.output_weight.device
        limit = config.max_positions - 1  # a longer side is cut (prepare's max_len drops it later)
        src = [ids[:limit] + [config.eos_id] for ids in self.tokenizer.encode(sources)]
        tgt = [ids[:limit] + [config.eos_id] for ids in self.tokenizer.encode_target(targets)]
        self._check_vocabulary(src, tgt)
        out = np.empty(len(src), dtype=np.float32)
        order = sorted(range(len(src)), key=lambda i: (len(tgt[i]), len(src[i])))
        for rows in _batches(order, [len(t) for t in tgt]):
            s = _padded([src[i] for i in rows], config.pad_id, device)  # (b, src_len)
            t_out = _padded([tgt[i] for i in rows], config.pad_id, device)  # (b, tgt_len)
            start = torch.full_like(t_out[:, :1], config.start_id)
            t_in = torch.cat([start, t_out[:, :-1]], dim=1)  # (b, tgt_len): shifted right (3.1)
            logits = self.model(s, t_in).float()  # (b, tgt_len, vocab)
            nll = F.cross_entropy(logits.transpose(1, 2), t_out, ignore_index=config.pad_id, reduction="none")
            real = t_out.ne(config.pad_id)  # (b, tgt_len)
            out[rows] = (nll.sum(1) / real.sum(1)).cpu().numpy()
        return out

    def _check_vocabulary(self, src: list[list[int]], tgt: list[list[int]]) -> None:
        """On the first chunk: a model whose vocabulary leaves much of the data <unk> was trained on
        other text (another language or script), and its cross-entropies would say nothing."""
        if self.checked:
            return
        unk = self.model.config.unk_id
        for side, rows in (("source", src), ("target", tgt)):
            share = sum(r.count(unk) for r in rows) / max(1, sum(map(len, rows)))
            if share > MAX_UNK:
                raise AiaynError(
                    f"{self.name}: its vocabulary does not match the data's: {share:.0%} of the {side} "
                    f"pieces are <unk> (at most {MAX_UNK:.0%}); give models trained on this language pair"
                )
        self.checked = True


def _base(languages: tuple[str, str]) -> tuple[str, ...]:
    """('pt-BR', 'en_US') -> ('pt', 'en')."""
    return tuple(code.replace("_", "-").split("-")[0].lower() for code in languages)


def _padded(rows: list[list[int]], pad: int, device: torch.device) -> torch.Tensor:
    out = torch.full((len(rows), max(map(len, rows))), pad, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r)
    return out.to(device)


def _batches(order: list[int], lengths: list[int]) -> Iterator[list[int]]:
    """Runs of `order` (sorted by length) of at most BATCH_TOKENS padded tokens each."""
    batch: list[int] = []
    for i in order:
        if batch and (len(batch) + 1) * lengths[i] > BATCH_TOKENS:
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


class Scorer:
    """The forward and the reverse model (model directories), loaded and checked before any work;
    `src_lang`, `tgt_lang`: the data's languages, which the models must translate when both name them."""

    def __init__(self, forward: Path, reverse: Path, src_lang: str | None, tgt_lang: str | None) -> None:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.forward = Direction("forward", forward, (src_lang, tgt_lang), device)
        self.reverse = Direction("reverse", reverse, (tgt_lang, src_lang), device)

    def pair_scores(self, sources: list[str], targets: list[str]) -> np.ndarray:
        """(len(sources),) float32: each pair's dual conditional cross-entropy score (lower is better)."""
        plain = [_TAG.sub("", s, count=1) for s in sources]  # the tag is no text of the source
        h_f = self.forward.cross_entropy(sources if self.forward.tagged else plain, targets)
        h_r = self.reverse.cross_entropy(targets, plain)
        return np.abs(h_f - h_r) + (h_f + h_r) / 2

    def scores(
        self, pairs: Iterator[tuple[str, str]], wanted: np.ndarray, progress: bool = False
    ) -> np.ndarray:
        """(n,) float32: the score of every pair where `wanted` (n,) is True, NaN elsewhere; the
        pairs streamed CHUNK at a time."""
        found = np.empty(int(wanted.sum()), dtype=np.float32)  # (wanted pairs,)
        chosen = compress(pairs, wanted)
        with tqdm(total=len(found), desc="score", unit=" pairs", disable=not progress) as bar:
            done = 0
            while chunk := list(islice(chosen, CHUNK)):
                sources, targets = [s for s, _ in chunk], [t for _, t in chunk]
                found[done : done + len(chunk)] = self.pair_scores(sources, targets)
                done += len(chunk)
                bar.update(len(chunk))
        out = np.full(len(wanted), math.nan, dtype=np.float32)
        out[wanted] = found
        return out
