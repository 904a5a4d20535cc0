"""The native pass over several new positions per row (`NativeDecoder.extend`, what speculative
decoding's check runs) computes what Python's `Transformer.decode_tokens` computes, and where the
rows share one length exactly what single native steps compute, bit for bit.

References: the Python pass of a copy of the model (the same kernels: equal up to summation order)
with rows of their own lengths and padded sources, and the single native steps of the same model
(the panel products give a row the same bits whatever the row count: `linear.ONE_ROW`).
"""

import copy
import os

import pytest
import torch

from aiayn.decode.ragged import RaggedDecoder
from aiayn.runtime import native_build
from aiayn.runtime.linear import pack_for_inference
from aiayn.runtime.native_step import attach_native_decoder, decode_step, native_decoder
from native_models import VARIANTS, model_of, sources

pytestmark = pytest.mark.skipif(
    native_build._compiler() is None or os.environ.get(native_build.ENV, "").strip() == "0",
    reason="no C++ compiler, or AIAYN_NATIVE=0",
)


def chunked(model, src, tgt, sizes) -> torch.Tensor:
    """Logits of tgt (rows, T) fed through a RaggedDecoder in chunks: sizes[i] (rows,) new positions per
    row at pass i, rows of their own lengths -> (rows, T, vocab), each row's positions in order."""
    rows, total = tgt.shape
    decoder = RaggedDecoder(model, src, total + max(map(max, sizes)))
    got = torch.zeros(rows, total, model.config.vocab_size)
    done = torch.zeros(rows, dtype=torch.long)
    for size in sizes:
        q = max(size)
        index = (done[:, None] + torch.arange(q)).clamp(max=total - 1)  # (rows, q)
        logits = decoder.extend(tgt.gather(1, index))  # (rows, q, vocab)
        for r, s in enumerate(size):
            s = min(s, total - int(done[r]))
            got[r, done[r] : done[r] + s] = logits[r, :s]
        done = (done + torch.tensor(size)).clamp(max=total)
        decoder.keep(done.clone())
    assert bool(done.eq(total).all())
    return got


SIZES = [[1, 3, 2], [3, 1, 1], [2, 3, 2], [4, 4, 1], [1, 2, 4], [3, 3, 3]]  # rows at their own lengths


@pytest.mark.parametrize("variant", VARIANTS)
@torch.inference_mode()
def test_rows_of_their_own_lengths_match_python(variant):
    model = model_of(**VARIANTS[variant])
    python_model = copy.deepcopy(model)  # a copy decodes in Python
    assert attach_native_decoder(model) == "native" and native_decoder(python_model) is None
    src = sources(3, model.config.pad_id)  # the last source padded
    tgt = torch.randint(4, 90, (3, 11))
    native, python = chunked(model, src, tgt, SIZES), chunked(python_model, src, tgt, SIZES)
    torch.testing.assert_close(native, python, rtol=1e-5, atol=2e-5)


@torch.inference_mode()
def test_one_length_gives_the_single_steps_bits():
    """One row (a sentence at a time), the products on the panels: a pass over m
    positions is m single native steps, to the last bit, whatever m."""
    model = model_of()
    pack_for_inference(model)
    assert attach_native_decoder(model) == "native"
    src, tgt = sources(1, model.config.pad_id), torch.randint(4, 90, (1, 24))
    memory, mask = model.encode(src)
    state = model.start_decoding(memory, mask, 24)
    steps = torch.stack([decode_step(model, tgt[:, t], state) for t in range(24)], dim=1)
    sizes = [[1], [3], [5], [2], [4], [1], [8]]
    assert torch.equal(chunked(model, src, tgt, sizes), steps)


@torch.inference_mode()
def test_bad_input_is_a_one_line_error_and_the_caches_stay():
    model = model_of()
    attach_native_decoder(model)
    native = native_decoder(model)
    src = sources(2, model.config.pad_id)
    state = model.start_decoding(*model.encode(src), 4)
    x = torch.zeros(2, 3, model.config.d_model)
    before = [c.k.clone() for c in state.self_kv]
    for lengths, x_, message in (
        (torch.tensor([1, 2]), x, r"KV cache holds 4 positions; step 5 does not fit"),
        (torch.tensor([0]), x, r"lengths must be \(rows,\) int64 on the CPU, one per row of x"),
        (torch.tensor([0.0, 1.0]), x, r"lengths must be \(rows,\) int64"),
        (torch.tensor([-1, 0]), x, r"a row's length must be >= 0, got -1"),
        (torch.tensor([0, 0]), x[:, :0], r"at least one row and one new position, got \(2, 0\)"),
        (torch.tensor([0, 0]), x[..., :5], r"x has 5 features, the model's norms 48"),
        (torch.tensor([0, 0]), x[0], r"x \(rows, new positions, d_model\) must be a 3-d float32 tensor"),
    ):
        with pytest.raises(RuntimeError, match=message):
            native.extend(x_, lengths, state)
    bits = lambda t: t.view(torch.int32)  # noqa: E731 (bitwise: the caches may hold uninitialised NaNs)
    assert all(torch.equal(bits(c.k), bits(b)) for c, b in zip(state.self_kv, before, strict=True))
