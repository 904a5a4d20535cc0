"""A vocabulary shortlist: the output layer (3.4's pre-softmax linear transformation) restricted, per
batch, to the target pieces the batch's sources can plausibly produce.

As Marian's lexical shortlists (Junczys-Dowmunt et al., 2018, "Marian: Cost-effective High-Quality
Neural Machine Translation in C++", section 4.1): each source piece has candidates, its k most
probable translations p(t | s) (here IBM Model 1's, aiayn.data.lexicon; Marian's from fast_align),
and the n most frequent target pieces and the special ids are always kept. A batch decodes over
the union of its sources' candidates: the rows of the output matrix for those ids are gathered once
per batch (`KeptOutput`), each step computes logits for the kept columns only, the softmax is over
them, and the search runs on column numbers (`Columns` maps ids to columns and the outputs back).
With every id kept the search is the unrestricted one, token for token.

The file `shortlist.safetensors` in a model directory (`aiayn shortlist MODEL DATA` writes it):
    candidates     (source_vocab, k) int32   target ids per source piece, best first; -1: none
    probabilities  (source_vocab, k) float32 their p(t | s)
    frequent       (n,) int32                the most frequent target pieces of the training data
    always         (a,) int32                special ids (pad, unk, bos, eos, the decoder's start)
and as metadata (strings) how it was built: method, iterations, k, n, data. It is read when a search
asks for it and checked whole (a one-line error names the file); whatever it keeps, a search also
keeps EOS and the decoder's start id, which it needs. `write_vmap` writes the
same shortlist as CTranslate2's vocabulary map (`vmap.txt`: "source piece<TAB>target pieces", the
line with an empty source holding the pieces always kept), which `ct2-transformers-converter
--vocab_mapping` stores with a model and `translate_batch(use_vmap=True)` uses.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import Tensor

from aiayn.config import ModelConfig
from aiayn.decode.rules import Hypothesis
from aiayn.errors import AiaynError
from aiayn.model.embedding import OutputLayer
from aiayn.model.transformer import DecoderState, Transformer
from aiayn.runtime.native_step import fallback, restricted_native
from aiayn.runtime.quantize import Int8Linear
from aiayn.safe_io import atomic_path

SHORTLIST_FILE, VMAP_FILE = "shortlist.safetensors", "vmap.txt"
TENSORS = ("candidates", "probabilities", "frequent", "always")
INTEGERS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
NO_SHORTLIST = "has no shortlist ({file}): build one with `aiayn shortlist MODEL DATA`"


@dataclass
class Shortlist:
    """A model's shortlist: candidates (source_vocab, k), probabilities (source_vocab, k),
    frequent (n,), always (a,), and `info` (how it was built)."""

    candidates: Tensor
    probabilities: Tensor
    frequent: Tensor
    always: Tensor
    info: dict[str, str] = field(default_factory=dict)

    def kept(self, src: Tensor, extra: Sequence[int] = ()) -> Tensor:
        """The target ids a batch of sources src (n, src_len) may produce, sorted (kept,) long on
        the CPU: its pieces' candidates, the frequent ones, the special ids and `extra`."""
        ids = self.candidates[src.flatten().cpu()].flatten()  # (n * src_len * k,)
        extra_ids = torch.tensor(list(extra), dtype=torch.long)
        return torch.unique(
            torch.cat([ids[ids >= 0].long(), self.frequent.long(), self.always.long(), extra_ids])
        )

    def save(self, model_dir: str | Path) -> Path:
        """model_dir/shortlist.safetensors, written atomically."""
        path = Path(model_dir) / SHORTLIST_FILE
        tensors = {name: getattr(self, name).clone() for name in TENSORS}  # no shared storage
        with atomic_path(path) as tmp:
            save_file(tensors, str(tmp), metadata={k: str(v) for k, v in self.info.items()})
        return path


def read_shortlist(model_dir: str | Path, config: ModelConfig) -> Shortlist | None:
    """model_dir's shortlist, checked whole against the model's vocabularies; None when there is
    none, a one-line AiaynError naming the file when it is damaged or made for another vocabulary."""
    path = Path(model_dir) / SHORTLIST_FILE
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as f:
            tensors = {name: f.get_tensor(name) for name in TENSORS}
            info = dict(f.metadata() or {})
    except (SafetensorError, OSError, KeyError) as err:
        raise AiaynError(f"{path}: not a shortlist ({err}); build it again with `aiayn shortlist`") from None
    why = _malformed(tensors, config)
    if why is not None:
        raise AiaynError(f"{path}: {why}; build it again with `aiayn shortlist`")
    return Shortlist(**tensors, info=info)


def _malformed(tensors: dict[str, Tensor], config: ModelConfig) -> str | None:
    """What makes a shortlist's tensors unfit for a model of `config`, or None: the shapes and
    dtypes of the file's format, and target ids of the model's (-1, none, in candidates only)."""
    candidates, probabilities = tensors["candidates"], tensors["probabilities"]
    if any(tensors[name].dtype not in INTEGERS for name in ("candidates", "frequent", "always")):
        return "candidates, frequent and always must hold integers"
    if not (
        candidates.dim() == 2
        and probabilities.is_floating_point()
        and probabilities.shape == candidates.shape
        and tensors["frequent"].dim() == tensors["always"].dim() == 1
    ):
        return "candidates and probabilities must be (source_vocab, k), frequent and always 1-d"
    if candidates.size(0) != config.source_vocab_size:
        return (
            f"made for another vocabulary ({len(candidates)} source pieces, not {config.source_vocab_size})"
        )
    for name, least in (("candidates", -1), ("frequent", 0), ("always", 0)):
        ids = tensors[name]
        if ids.numel() and not (int(ids.min()) >= least and int(ids.max()) < config.vocab_size):
            return (
                f"{name} holds ids outside {least} .. {config.vocab_size - 1} (made for another vocabulary?)"
            )
    return None


class Columns:
    """Target ids <-> columns of the restricted output layer (`kept` (kept,) sorted ids; None: the
    whole vocabulary, every id its own column)."""

    def __init__(self, kept: Tensor | None) -> None:
        self.kept = kept
        self._column = None if kept is None else {int(t): c for c, t in enumerate(kept.tolist())}

    def __call__(self, token: int) -> int:
        return token if self._column is None else self._column[token]

    def banned(self, ids: Sequence[int]) -> list[int]:
        """The columns of the banned ids that are kept (the others cannot be chosen anyway)."""
        return [self(t) for t in ids if self._column is None or t in self._column]

    def lists(self, seqs: Sequence[Sequence[int]] | None) -> list[list[int]] | None:
        return None if seqs is None else [[self(t) for t in s] for s in seqs]

    def back(self, found: list[list[Hypothesis]]) -> list[list[Hypothesis]]:
        """The search's hypotheses with their columns turned back into target ids."""
        if self.kept is None:
            return found
        ids = self.kept.tolist()
        return [[Hypothesis([ids[c] for c in h.tokens], h.score, h.log_prob) for h in hyps] for hyps in found]


class KeptOutput:
    """One model's decoding step with its output layer restricted to the `kept` ids (kept,): the
    rows of the output matrix (and bias) gathered once, int8 again where the model's output layer
    is int8 (per-row scales: the same rows as the full layer's). The decoder runs natively where the
    model has a native step (aiayn.runtime.native_step), with the gathered rows as its output layer."""

    def __init__(self, model: Transformer, kept: Tensor, native: bool = True) -> None:
        self.model = model
        self.kept = kept.to(model.output_weight.device)  # (kept,)
        self.weight = model.output_weight.detach()[self.kept]  # (kept, d_model)
        self.bias = None if model.output_bias is None else model.output_bias.detach()[self.kept]
        full = model.output_layer
        self.layer = full.rows(self.kept) if isinstance(full, Int8Linear) else None
        self.native = (
            restricted_native(model, self.layer or OutputLayer(), self.weight, self.bias) if native else None
        )

    def logits(self, h: Tensor) -> Tensor:
        """h (rows, d_model) -> logits of the kept ids (rows, kept)."""
        return self.layer(h) if self.layer is not None else F.linear(h, self.weight, self.bias)

    def step(self, columns: Tensor, state: DecoderState) -> Tensor:
        """columns (rows,) of the previous tokens -> logits (rows, kept); advances the state."""
        native, model = self.native, self.model
        if native is None or native.stale or model.training or torch.is_grad_enabled():
            return self.python_step(columns, state)
        return self._native_step(columns, state)

    @fallback(python=lambda self, *args: self.python_step(*args), lose=lambda self, *_: self.lose())
    def _native_step(self, columns: Tensor, state: DecoderState) -> Tensor:
        """The step as one native call, on the kept rows of the output layer (checks before writing)."""
        logits = self.native.step(self.model.embed_step(self.kept[columns], state), state)
        state.step += 1
        return logits

    def python_step(self, columns: Tensor, state: DecoderState) -> Tensor:
        """The step in Python, its output layer the kept rows."""
        x = self.model.embed_step(self.kept[columns], state)[:, None]  # (rows, 1, d_model)
        h = self.model.decoder(x, None, state.memory_mask, state=state)  # (rows, 1, d_model)
        state.step += 1
        return self.logits(h[:, 0])

    def lose(self) -> None:
        """Its native decoder failed: the kept rows are computed in Python from now on."""
        self.native.lose()
        self.native = None


def forced_ids(prefixes: Sequence[Sequence[int]] | None, constraints) -> list[int]:
    """Ids a batch's prefixes and constraints force into its outputs: kept whatever the shortlist says."""
    ids = [t for p in prefixes or [] for t in p]
    return ids + [t for phrases in constraints or [] for phrase in phrases for t in phrase]


def chosen_shortlist(translator, options) -> Shortlist | None:
    """Deprecated: `ModelBundle.chosen_shortlist(options)` (aiayn.decode.bundle)."""
    warnings.warn(
        "chosen_shortlist(translator, options) is deprecated: use bundle.chosen_shortlist(options)",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(translator, "bundle", translator).chosen_shortlist(options)


def require_shortlist(translator) -> None:
    """Deprecated: `load_bundle(..., shortlist=True)` (aiayn.decode.bundle). Makes `translator`
    decode every batch with its model's shortlist; a one-line AiaynError when the model has none."""
    warnings.warn(
        "require_shortlist(translator) is deprecated: use load_bundle(model_dir, shortlist=True)",
        DeprecationWarning,
        stacklevel=2,
    )
    bundle = translator.bundle
    bundle.always_shortlist = True
    bundle.chosen_shortlist(None)


def write_vmap(shortlist: Shortlist, tokenizer, path: str | Path, banned: Sequence[int] = ()) -> Path:
    """`shortlist` as CTranslate2's vocabulary map at `path`: pieces by name (`tokenizer`'s source and
    target pieces), so it holds for any numbering of the vocabulary (export-hf renumbers it). The
    `banned` ids (pad, bos: no output holds them) are left out of the ids always kept; CTranslate2
    adds its own (unk, bos, eos)."""
    target = lambda ids: " ".join(tokenizer.target_pieces([int(t) for t in ids]))  # noqa: E731
    always = [t for t in torch.cat([shortlist.frequent, shortlist.always]).tolist() if t not in banned]
    lines = [f"\t{target(always)}"]
    sources = tokenizer.pieces(list(range(len(shortlist.candidates))))
    for piece, row in zip(sources, shortlist.candidates.tolist(), strict=True):
        kept = [t for t in row if t >= 0]
        if kept and piece.strip() == piece and piece:  # CTranslate2 splits its keys at spaces
            lines.append(f"{piece}\t{target(kept)}")
    with atomic_path(path) as tmp:
        Path(tmp).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return Path(path)
