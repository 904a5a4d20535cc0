"""Eq. 1 and multi-head attention against independent float64 computations."""

import math

import pytest
import torch

from aiayn.model.attention import (
    KVCache,
    MultiHeadAttention,
    attention_backends,
    causal_mask,
    scaled_dot_product_attention,
)


def eq1_float64(q, k, v, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V in float64, written out from the paper."""
    q, k, v = q.double(), k.double(), v.double()
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(-math.inf, dtype=torch.float64))
    weights = torch.exp(scores - scores.amax(-1, keepdim=True))
    weights = weights / weights.sum(-1, keepdim=True)
    return torch.einsum("bhqk,bhkd->bhqd", weights, v), weights


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_attention_equals_float64_eq1(need_weights, masked):
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 8)
    mask = None
    if masked:
        mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
        mask[0, ..., 4:] = False
    out, weights = scaled_dot_product_attention(q, k, v, mask, need_weights=need_weights)
    ref, ref_w = eq1_float64(q, k, v, mask)
    torch.testing.assert_close(out.double(), ref, rtol=1e-6, atol=1e-6)
    if need_weights:
        torch.testing.assert_close(weights.double(), ref_w.expand_as(weights), rtol=1e-6, atol=1e-7)
        if masked:
            assert weights[0, ..., 4:].abs().max() == 0


def test_fused_and_explicit_paths_agree_with_causal_and_padding_masks():
    q, k, v = (torch.randn(2, 4, 6, 16) for _ in range(3))
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[1, ..., 3:] = False
    for kwargs in ({"mask": mask}, {"is_causal": True}):
        fused, _ = scaled_dot_product_attention(q, k, v, **kwargs)
        explicit, w = scaled_dot_product_attention(q, k, v, need_weights=True, **kwargs)
        torch.testing.assert_close(fused, explicit, rtol=1e-6, atol=1e-6)
    assert torch.equal(w[0, 0] > 0, causal_mask(6, 6))


@pytest.mark.parametrize("d_k, d_v", [(None, None), (2, 6)])
def test_multi_head_equals_per_head_float64_computation(d_k, d_v):
    """3.2.2 head by head; with d_k != d_v (Table 3 row B) as with the paper's d_model / h."""
    d_model, heads = 16, 4
    mha = MultiHeadAttention(d_model, heads, d_k=d_k, d_v=d_v).double()
    d_k, d_v = d_k or d_model // heads, d_v or d_model // heads
    assert mha.qkv_proj.weight.shape == (heads * (2 * d_k + d_v), d_model)
    assert mha.out_proj.weight.shape == (d_model, heads * d_v)
    x = torch.randn(2, 5, d_model, dtype=torch.float64)
    out, weights = mha(x, need_weights=True)
    fused, _ = mha(x)
    w_q, w_k, w_v = mha.qkv_proj.weight.split([heads * d_k, heads * d_k, heads * d_v])
    b_q, b_k, b_v = mha.qkv_proj.bias.split([heads * d_k, heads * d_k, heads * d_v])
    heads_out = []
    for h in range(heads):  # 3.2.2: head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)
        qk, v = slice(h * d_k, (h + 1) * d_k), slice(h * d_v, (h + 1) * d_v)
        qh = x @ w_q[qk].T + b_q[qk]
        kh = x @ w_k[qk].T + b_k[qk]
        vh = x @ w_v[v].T + b_v[v]
        heads_out.append(torch.softmax(qh @ kh.transpose(1, 2) / math.sqrt(d_k), -1) @ vh)
    ref = mha.out_proj(torch.cat(heads_out, -1))  # Concat(head_1..h) W^O
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(fused, ref, rtol=1e-10, atol=1e-10)
    assert weights.shape == (2, heads, 5, 5)


def test_cross_attention_with_unequal_key_and_value_sizes_equals_float64():
    d_model, heads, d_k, d_v = 12, 3, 2, 5
    mha = MultiHeadAttention(d_model, heads, cross=True, d_k=d_k, d_v=d_v).double()
    x = torch.randn(2, 4, d_model, dtype=torch.float64)
    memory = torch.randn(2, 6, d_model, dtype=torch.float64)
    out, _ = mha(x, memory)
    q = (x @ mha.q_proj.weight.T + mha.q_proj.bias).view(2, 4, heads, d_k).transpose(1, 2)
    kv = memory @ mha.kv_proj.weight.T + mha.kv_proj.bias  # (2, 6, heads * (d_k + d_v))
    k = kv[..., : heads * d_k].reshape(2, 6, heads, d_k).transpose(1, 2)
    v = kv[..., heads * d_k :].reshape(2, 6, heads, d_v).transpose(1, 2)
    ref, _ = eq1_float64(q, k, v)  # (2, heads, 4, d_v)
    ref = mha.out_proj(ref.transpose(1, 2).reshape(2, 4, heads * d_v))
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)


def test_kv_cache_appends_and_reorders():
    cache = KVCache(3, 2, 10, 4, torch.float32, "cpu")
    k1, v1 = torch.randn(3, 2, 2, 4), torch.randn(3, 2, 2, 4)
    k2, v2 = torch.randn(3, 2, 1, 4), torch.randn(3, 2, 1, 4)
    cache.append(k1, v1)
    k, v = cache.append(k2, v2)
    assert torch.equal(k, torch.cat([k1, k2], 2)) and torch.equal(v, torch.cat([v1, v2], 2))
    index = torch.tensor([2, 2, 0])
    cache.reorder(index)
    assert torch.equal(cache.k[:, :, :3], torch.cat([k1, k2], 2)[index])
    cache.reorder(torch.tensor([1]))  # shrink to one row: row 1 now holds the old row 2
    assert cache.k.shape[0] == 1 and torch.equal(cache.v[0, :, :3], torch.cat([v1, v2], 2)[2])
    assert cache.k.shape[2] == cache.v.shape[2] == 10  # the capacity stays, only 3 positions copied
    assert KVCache(3, 2, 10, 4, torch.float32, "cpu", d_v=7).v.shape == (3, 2, 10, 7)
    with pytest.raises(RuntimeError, match="does not fit"):
        cache.append(torch.randn(1, 2, 8, 4), torch.randn(1, 2, 8, 4))


def test_kv_cache_reorder_in_place_equals_a_gather():
    cache = KVCache(5, 2, 8, 3, torch.float32, "cpu")
    k, v = torch.randn(5, 2, 4, 3), torch.randn(5, 2, 4, 3)
    cache.append(k, v)
    index = torch.tensor([0, 0, 3, 2, 4])  # rows 1, 2, 3 move, one of them onto a row read later
    cache.reorder(index)
    assert torch.equal(cache.k[:, :, :4], k[index]) and torch.equal(cache.v[:, :, :4], v[index])


def test_kv_cache_dropping_rows_compacts_its_own_buffer():
    """Finished sentences leave: the kept rows move to the front of the same storage (no buffer of
    the whole capacity allocated anew, whose fresh pages cost the CPU), equal to a gather, the
    later appends and reorders writing where they read."""
    cache = KVCache(5, 2, 8, 3, torch.float32, "cpu")
    k, v = torch.randn(5, 2, 3, 3), torch.randn(5, 2, 3, 3)
    cache.append(k, v)
    storage = cache.k.untyped_storage().data_ptr(), cache.v.untyped_storage().data_ptr()
    index = torch.tensor([4, 0, 2])  # row 4 onto row 0, which row 1 of the result still reads
    cache.reorder(index)
    assert (cache.k.untyped_storage().data_ptr(), cache.v.untyped_storage().data_ptr()) == storage
    assert cache.k.shape == (3, 2, 8, 3) and cache.k.is_contiguous()
    assert torch.equal(cache.k[:, :, :3], k[index]) and torch.equal(cache.v[:, :, :3], v[index])
    k2, v2 = torch.randn(3, 2, 1, 3), torch.randn(3, 2, 1, 3)
    got_k, got_v = cache.append(k2, v2)
    assert torch.equal(got_k, torch.cat([k[index], k2], 2))
    assert torch.equal(got_v, torch.cat([v[index], v2], 2))
    cache.reorder(torch.tensor([2, 2, 1]))  # same rows: moved in place
    assert torch.equal(cache.k[:, :, :4], torch.cat([k[index], k2], 2)[torch.tensor([2, 2, 1])])


def test_gpu_attention_leaves_out_cudnn_and_cpu_attention_is_left_alone():
    # cuDNN's attention builds a plan per new shape (0.13 s on an H100): never on token-bucketed batches
    flags = torch.backends.cuda
    state = lambda: (flags.cudnn_sdp_enabled(), flags.flash_sdp_enabled(), flags.mem_efficient_sdp_enabled())  # noqa: E731
    before = state()
    with attention_backends(torch.device("cuda", 0)):
        assert state() == (False, *before[1:])  # cuDNN's off, the others as the user left them
        with attention_backends(torch.device("cuda", 0)):
            assert state() == (False, *before[1:])
        assert state() == (False, *before[1:])
    with attention_backends(torch.device("cpu")):
        assert state() == before
    assert state() == before


def test_gpu_attention_compiles_without_a_graph_break():
    # under torch.compile the context is sdpa_kernel, which the compiler traces (here on CPU tensors)
    def attend(q):
        with attention_backends(torch.device("cuda")):
            return torch.nn.functional.scaled_dot_product_attention(q, q, q) * 2

    q = torch.randn(2, 4, 8, 16)
    explained = torch._dynamo.explain(attend)(q)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
