"""The OPUS-MT renumbering of a vocabulary (aiayn.interop.opus_layout): </s>, <unk>, the other ids
in order, <pad> last; rows, vocab.json tables and special ids renumbered alike."""

from __future__ import annotations

import pytest
import torch

from aiayn.config import ModelConfig
from aiayn.errors import AiaynError
from aiayn.interop.opus_layout import OpusLayout, opus_order


def test_the_order_is_eos_unk_the_rest_and_pad_where_asked():
    assert opus_order(6, eos=3, unk=1, pad=0, pad_at=5).tolist() == [3, 1, 2, 4, 5, 0]
    assert opus_order(6, eos=3, unk=1, pad=0, pad_at=2).tolist() == [3, 1, 0, 2, 4, 5]
    with pytest.raises(AiaynError, match=r"^eos_id=2, unk_id=2 and pad_id=0 must differ"):
        opus_order(6, eos=2, unk=2, pad=0, pad_at=5)


def test_a_model_s_layout_renumbers_rows_tables_and_special_ids():
    config = ModelConfig(vocab_size=6, d_model=8, d_ff=16, n_heads=2, n_layers=1)
    c = config
    layout = OpusLayout.of(config)
    order = opus_order(6, c.eos_id, c.unk_id, c.pad_id, 5)
    assert torch.equal(layout.source, order) and torch.equal(layout.target, order)
    assert [layout.target_id(int(i)) for i in order] == list(range(6))  # exported id of each aiayn id
    rows = torch.arange(6.0)[:, None].repeat(1, 2)  # (vocab, 2): row i holds i
    state = {"tgt_embed.weight": rows, "output_bias": torch.arange(6.0), "encoder.x": torch.ones(1)}
    permuted = layout.permute_rows(state)
    assert permuted["tgt_embed.weight"][:, 0].tolist() == order.tolist() == permuted["output_bias"].tolist()
    assert permuted["encoder.x"] is state["encoder.x"]
    vocab = {f"p{i}": i for i in range(6)}
    assert layout.renumber(vocab, "target") == {f"p{int(old)}": new for new, old in enumerate(order)}
    with pytest.raises(AiaynError, match=r"^source vocabulary: 'far' has an id outside"):
        layout.renumber({"far": 9}, "source")
    ids = layout.special_ids(config)
    assert ids["pad_token_id"] == 5 and ids["eos_token_id"] == ids["forced_eos_token_id"] == 0
    assert ids["decoder_start_token_id"] == layout.target_id(c.start_id)
