"""A Transformer with an attention window: what each position sees, padding, and incremental decoding
with the ring-buffer cache against the teacher-forced pass (before and after the ring wraps)."""

import pytest
import torch

from aiayn.config import PAD_ID, ModelConfig
from aiayn.model import Transformer
from aiayn.model.cache import KVCache, WindowCache
from aiayn.runtime.native_step import attach_native_decoder

V = 40


def small(window, n_layers=2, **kw) -> Transformer:
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=V,
        d_model=32,
        d_ff=64,
        n_heads=4,
        n_layers=n_layers,
        dropout=0.0,
        attention_window=window,
        **kw,
    )
    return Transformer(config).eval()


def tokens(batch, length, seed=1):
    return torch.randint(4, V, (batch, length), generator=torch.Generator().manual_seed(seed))


def bump(t: torch.Tensor, at: int) -> torch.Tensor:
    changed = t.clone()
    changed[:, at] = (changed[:, at] - 3) % (V - 4) + 4
    return changed


@pytest.mark.parametrize("r", [1, 3])
def test_each_position_sees_exactly_its_window(r):
    """One layer: encoder output i reads sources i - r ... i + r; decoder output i reads target
    inputs i - r ... i (itself and the r before it) and every source through cross-attention."""
    model = small(r, n_layers=1)
    src, tgt = tokens(1, 12), tokens(1, 10, seed=2)
    memory, _ = model.encode(src)
    base = model(src, tgt)
    for at in (0, 5, 11):
        moved = (model.encode(bump(src, at))[0] - memory).abs().amax(-1)[0] > 1e-6  # (12,)
        assert moved.tolist() == [abs(i - at) <= r for i in range(12)]
    for at in (0, 4, 9):
        moved = (model(src, bump(tgt, at)) - base).abs().amax(-1)[0] > 1e-6  # (10,)
        assert moved.tolist() == [at <= i <= at + r for i in range(10)]


@pytest.mark.parametrize("r", [1, 2, 64])
def test_padding_changes_no_real_position(r):
    model = small(r)
    src, tgt = tokens(1, 5), tokens(1, 4, seed=2)
    alone = model(src, tgt)
    src_b, tgt_b = torch.full((2, 41), PAD_ID), torch.full((2, 37), PAD_ID)
    src_b[0, :5], tgt_b[0, :4] = src[0], tgt[0]
    src_b[1], tgt_b[1] = tokens(1, 41, seed=3)[0], tokens(1, 37, seed=4)[0]
    batched = model(src_b, tgt_b)
    torch.testing.assert_close(batched[0, :4], alone[0], rtol=1e-5, atol=1e-5)
    assert torch.isfinite(batched).all()


def test_a_window_wider_than_the_input_is_full_attention():
    windowed, full = small(50), small(None)
    full.load_state_dict(windowed.state_dict())
    src, tgt = tokens(2, 30), tokens(2, 20, seed=2)
    src[1, 17:] = PAD_ID
    torch.testing.assert_close(windowed(src, tgt), full(src, tgt), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("r", [1, 3, 40])
def test_step_by_step_decoding_equals_the_teacher_forced_pass(r):
    model = small(r)
    src = tokens(3, 45)
    src[0, 20:] = PAD_ID
    tgt = tokens(3, 41, seed=2)  # past r + 1 positions: the ring buffer wraps, for r = 40 once
    full = model(src, tgt)
    with torch.inference_mode():
        memory, mask = model.encode(src)
        state = model.start_decoding(memory, mask, max_len=60)
        steps = torch.stack([model.decode_step(tgt[:, t], state) for t in range(41)], 1)
    torch.testing.assert_close(steps, full, rtol=1e-4, atol=1e-5)
    assert all(isinstance(c, WindowCache) and c.k.size(2) == min(r + 1, 60) for c in state.self_kv)


def test_the_cache_holds_the_window_whatever_the_output_length():
    model = small(4)
    memory, mask = model.encode(tokens(2, 6))
    state = model.start_decoding(memory, mask, max_len=1000, beam=3)
    with torch.inference_mode():
        for t in range(30):
            model.decode_step(tokens(6, 1, seed=t)[:, 0], state)
    assert [tuple(c.k.shape) for c in state.self_kv] == [(6, 4, 5, 8)] * 2
    short = small(4).start_decoding(memory, mask, max_len=3)  # never more than the steps
    assert short.self_kv[0].k.size(2) == 3
    assert type(small(None).start_decoding(memory, mask, max_len=3).self_kv[0]) is KVCache


@pytest.mark.parametrize("steps_before", [2, 7])
def test_reorder_and_select_after_the_ring_wraps_equal_rerunning(steps_before):
    model = small(3)
    src = tokens(1, 5).expand(4, -1).contiguous()  # four beams of one sentence
    tgt = tokens(4, steps_before + 4, seed=2)
    index, keep = torch.tensor([1, 1, 3, 0]), torch.tensor([2, 0])
    with torch.inference_mode():
        memory, mask = model.encode(src)
        state = model.start_decoding(memory, mask, max_len=20)
        for t in range(steps_before):
            model.decode_step(tgt[:, t], state)
        state.reorder(index)  # row i continues the prefix of row index[i]
        model.decode_step(tgt[index, steps_before], state)
        state.select(keep)  # rows 2 and 0 alone go on
        after = [
            model.decode_step(tgt[index][keep, t], state) for t in range(steps_before + 1, steps_before + 4)
        ]
    full = model(src[keep], tgt[index][keep])
    torch.testing.assert_close(torch.stack(after, 1), full[:, steps_before + 1 :], rtol=1e-5, atol=1e-5)


def test_the_native_step_declines_a_windowed_model():
    model = small(4)
    assert "attention_window=4" in attach_native_decoder(model)


def test_the_window_cache_takes_one_position_per_step():
    cache = WindowCache(1, 2, 3, 10, 4, torch.float32, "cpu")
    with pytest.raises(RuntimeError, match="one position per step"):
        cache.append(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4))
