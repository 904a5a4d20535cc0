"""Word alignments from cross-attention (section 3.2.3's encoder-decoder attention), as
fast_align and awesome-align print them: Pharaoh `i-j` pairs, source word i and target word j,
both counted from 0 over whitespace-separated words.

For each translation the decoder is run once more, teacher-forced, over the source and the
output; one layer's cross-attention weights, averaged over heads, say how much each target piece
looked at each source piece. Pieces are grouped into words (a SentencePiece piece starting with
"▁" begins a word), a word pair's weight is the sum over its pieces, and every target word is
aligned to the source word it attends to most (EOS on either side is not a word). Garg et al.
(2019) found the penultimate layer of a 6-layer decoder the best for models trained without
alignment supervision, so it is the default there; in shallower decoders the last layer is (on
the tests' 2-layer toy, trained with four seeds: AER 0.01-0.14 against 0.33-0.45 for the first).

`replace_unknown` copies, for a target word that holds `<unk>`, the source word it is aligned to
(Luong et al., 2015; fairseq's and OpenNMT's `--replace_unk`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from aiayn.model.transformer import Transformer

WORD_START = "\u2581"  # SentencePiece's word-boundary mark


def default_layer(n_layers: int) -> int:
    """The penultimate decoder layer (0-based) of a decoder of 6 or more layers, else the last."""
    return n_layers - 2 if n_layers >= 6 else n_layers - 1


def word_index(pieces: Sequence[str]) -> list[int]:
    """The word each piece belongs to: a new word at every piece starting with the boundary mark."""
    words, current = [], -1
    for i, piece in enumerate(pieces):
        if i == 0 or piece.startswith(WORD_START):
            current += 1
        words.append(current)
    return words


def align_words(weights: Tensor, src_words: list[int], tgt_words: list[int]) -> list[tuple[int, int]]:
    """weights (tgt_pieces, src_pieces), EOS rows and columns removed -> (source word, target word)
    for every target word, sorted by target word."""
    if not src_words or not tgt_words:
        return []
    n_src, n_tgt = src_words[-1] + 1, tgt_words[-1] + 1
    by_word = torch.zeros(n_tgt, n_src, dtype=torch.float64)
    rows = torch.tensor(tgt_words)[:, None].expand(-1, len(src_words))
    cols = torch.tensor(src_words)[None, :].expand(len(tgt_words), -1)
    by_word.index_put_((rows.reshape(-1), cols.reshape(-1)), weights.double().reshape(-1), accumulate=True)
    return [(int(i), j) for j, i in enumerate(by_word.argmax(dim=1).tolist())]


def pharaoh(pairs: Sequence[tuple[int, int]]) -> str:
    """'0-0 1-2 ...' (source-target), sorted by source then target word."""
    return " ".join(f"{i}-{j}" for i, j in sorted(pairs))


def _padded(seqs: list[list[int]], pad_id: int, device) -> Tensor:
    out = torch.full((len(seqs), max(map(len, seqs))), pad_id, dtype=torch.long)
    for r, s in enumerate(seqs):
        out[r, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out.to(device)


@torch.inference_mode()
def cross_attention(
    model: Transformer, sources: list[list[int]], outputs: list[list[int]], layer: int
) -> list[Tensor]:
    """Head-averaged cross-attention of decoder `layer` for each (source + EOS, output) pair:
    (len(output), len(source) - 1) float32 CPU tensors, EOS row and column left out."""
    c = model.config
    src = _padded(sources, c.pad_id, model.output_weight.device)  # (n, src_len)
    tgt_in = _padded([[c.start_id] + o for o in outputs], c.pad_id, src.device)  # (n, 1 + tgt_len)
    cross = model.attention_maps(src, tgt_in)["cross"][layer].float().mean(dim=1).cpu()  # (n, tgt, src)
    return [cross[r, : len(o), : len(s) - 1] for r, (s, o) in enumerate(zip(sources, outputs, strict=True))]


def replace_unknown(
    tokens: list[int], words: list[int], unk_id: int, pairs: list[tuple[int, int]], source_text: str, decode
) -> str:
    """The translation as whitespace-joined words, each target word whose ids hold `unk_id`
    replaced by its aligned source word. tokens: output ids; words: the word of each id
    (`word_index`); decode(ids) -> the text of one word."""
    src_words, aligned = source_text.split(), {j: i for i, j in pairs}
    out = []
    for j in range(words[-1] + 1 if words else 0):
        ids = [t for t, w in zip(tokens, words, strict=True) if w == j]
        if unk_id in ids and j in aligned and aligned[j] < len(src_words):
            out.append(src_words[aligned[j]])
        else:
            out.append(decode(ids).strip())
    return " ".join(w for w in out if w)
