"""The search's entry (aiayn.decode.generate): source and target length limits, the
shortlist a search asks for."""

from __future__ import annotations

import pytest
import torch

from aiayn.config import DecodeConfig, ModelConfig
from aiayn.decode.generate import decode_batch, max_lengths, source_limit
from aiayn.errors import AiaynError


def test_max_lengths_and_their_cap():
    config = ModelConfig.preset("tiny", vocab_size=16)
    lens = max_lengths(torch.tensor([1, 10, 5000]), config, 1.5, 3)
    assert lens.tolist() == [4, 18, 1024]  # floor(1.5 * n + 3), capped
    learned = config.replace(positions="learned", max_positions=64)
    assert max_lengths(torch.tensor([100]), learned, 1.0, 50).tolist() == [63]


@pytest.mark.parametrize(
    ("positions", "longest", "limit"),
    [("sinusoidal", None, 1024), ("sinusoidal", 100, 200), ("sinusoidal", 600, 1024),
     ("sinusoidal", True, 1024), ("sinusoidal", "100", 1024), ("sinusoidal", 0, 1024),
     ("learned", 100, 64), ("learned", 20, 40)],
)  # fmt: skip
def test_the_source_limit_is_the_models_and_twice_the_longest_training_source(positions, longest, limit):
    config = ModelConfig(vocab_size=40, positions=positions, max_positions=64)
    assert source_limit(config, longest) == limit


def test_decode_batch_without_a_shortlist_to_use_is_an_error(translator):
    src = translator._src_tensor(translator.encode(["el gato"]))
    with pytest.raises(AiaynError, match="no shortlist was given"):
        decode_batch(translator.bundle.model, src, DecodeConfig(shortlist=True))
