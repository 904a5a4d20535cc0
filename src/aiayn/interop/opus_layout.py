"""OPUS-MT's vocabulary layout, which `aiayn export-hf` writes: </s> = 0, <unk> = 1, <pad> last.

An OPUS-MT directory holds Marian's vocabulary (</s> 0, <unk> 1, then the pieces) with <pad>
appended as the last id: Hugging Face's Marian conversion script (convert_marian_to_pytorch.py)
adds it as a zero row of every embedding, the output layer and its bias, and makes it the
decoder start, pad and only banned token. Tools built for OPUS-MT rely on that: CTranslate2's
Marian loader drops the last row of the embeddings and the output layer and pops <pad> from the
vocabulary only when it is the last token (it starts the decoder from a zero vector instead).

aiayn's own ids put <pad> first (<pad> 0, <unk> 1, <s> 2, </s> 3). The export renumbers them:
one permutation of the ids per vocabulary, applied to vocab.json, to the rows of the embeddings,
the output layer and final_logits_bias, and to every special id in the config. Renaming the
classes changes nothing that is computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from aiayn.config import ModelConfig
from aiayn.decode.stepper import banned_ids
from aiayn.errors import AiaynError

_SOURCE_ROWS = ("src_embed.weight",)
_TARGET_ROWS = ("tgt_embed.weight", "output_weight", "output_bias")


def opus_order(size: int, eos: int, unk: int, pad: int, pad_at: int) -> Tensor:
    """(size,) exported id -> aiayn id: </s>, <unk>, the other ids in their order, <pad> at `pad_at`."""
    if len({eos, unk, pad}) < 3:
        raise AiaynError(f"eos_id={eos}, unk_id={unk} and pad_id={pad} must differ to export as OPUS-MT")
    order = [eos, unk, *(i for i in range(size) if i not in (eos, unk, pad))]
    order.insert(pad_at, pad)
    return torch.tensor(order)


@dataclass(frozen=True)
class OpusLayout:
    """The renumbering of one model's source and target vocabularies (exported id -> aiayn id)."""

    source: Tensor  # (source_vocab_size,)
    target: Tensor  # (vocab_size,)

    @classmethod
    def of(cls, config: ModelConfig) -> OpusLayout:
        """<pad> last; with separate vocabularies of two sizes, last in the smaller one and at the
        same id in the other, since MarianConfig (like ModelConfig) has one pad id for both."""
        ids = config.eos_id, config.unk_id, config.pad_id
        pad_at = min(config.source_vocab_size, config.vocab_size) - 1
        return cls(
            opus_order(config.source_vocab_size, *ids, pad_at), opus_order(config.vocab_size, *ids, pad_at)
        )

    def target_id(self, aiayn_id: int) -> int:
        """The exported id of an aiayn target id."""
        return int(self.target.eq(aiayn_id).nonzero()[0, 0])

    def permute_rows(self, state: dict[str, Tensor]) -> dict[str, Tensor]:
        """Re-order the vocabulary rows of an aiayn state dict; every other tensor is kept as is."""
        out = dict(state)
        for keys, order in ((_SOURCE_ROWS, self.source), (_TARGET_ROWS, self.target)):
            for key in keys:
                if key in state:
                    out[key] = state[key][order]
        return out

    def renumber(self, vocab: dict[str, int], side: str) -> dict[str, int]:
        """A {piece: aiayn id} table (a vocab.json) -> {piece: exported id}, sorted by id."""
        order = self.source if side == "source" else self.target
        new_id = {int(old): new for new, old in enumerate(order.tolist())}
        outside = [piece for piece, i in vocab.items() if i not in new_id]
        if outside:
            raise AiaynError(f"{side} vocabulary: {outside[0]!r} has an id outside the model's vocabulary")
        return dict(sorted(((piece, new_id[i]) for piece, i in vocab.items()), key=lambda item: item[1]))

    def special_ids(self, config: ModelConfig) -> dict[str, Any]:
        """config.json / generation_config.json ids as Marian's conversion script writes them.

        A zero-start model is an OPUS-MT model: it starts from <pad>, and bos_token_id is 0 (Marian
        has no BOS). A model that starts from a learned <s> keeps it as decoder start and BOS.
        """
        start = self.target_id(config.start_id)
        eos = self.target_id(config.eos_id)
        return {
            "pad_token_id": self.target_id(config.pad_id),
            "eos_token_id": eos,
            "forced_eos_token_id": eos,
            "bos_token_id": eos if config.zero_start else start,
            "decoder_start_token_id": start,
            "bad_words_ids": [[self.target_id(i)] for i in banned_ids(config)],
        }
