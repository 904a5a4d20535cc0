"""Search driving a real (tiny, random) Transformer: cache, batching, exhaustive optimum, lengths."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.config import DecodeConfig, ModelConfig
from aiayn.decode.generate import decode_batch, max_lengths
from aiayn.decode.rules import SearchRules, length_penalty
from aiayn.decode.stepper import TransformerStepper
from aiayn.decode.strategies import beam_search, greedy_search
from aiayn.model.transformer import Transformer

PAD, BOS, EOS = 0, 2, 3


def tiny_model(vocab: int = 16, seed: int = 0, **kw) -> Transformer:
    torch.manual_seed(seed)
    config = ModelConfig.preset(
        "tiny", vocab_size=vocab, d_model=32, d_ff=64, n_heads=4, n_layers=2, dropout=0.0
    )
    return Transformer(config.replace(**kw) if kw else config).eval()


def sources(lengths: list[int], vocab: int = 16, seed: int = 1) -> Tensor:
    """Random sources (n, max_len): pieces in [4, vocab) + EOS, right-padded."""
    g = torch.Generator().manual_seed(seed)
    src = torch.full((len(lengths), max(lengths)), PAD)
    for i, n in enumerate(lengths):
        src[i, : n - 1] = torch.randint(4, vocab, (n - 1,), generator=g)
        src[i, n - 1] = EOS
    return src


class UncachedStepper:
    """Reference Stepper: re-runs the whole decoder over each row's prefix at every step."""

    def __init__(self, model: Transformer, src: Tensor, beam: int):
        self.model = model
        self.memory, self.mask = model.encode(src.repeat_interleave(beam, dim=0))
        self.prefix = torch.empty(self.memory.size(0), 0, dtype=torch.long)

    def step(self, tokens: Tensor) -> Tensor:
        self.prefix = torch.cat([self.prefix, tokens[:, None]], dim=1)
        h = self.model.decode(self.prefix, self.memory, self.mask)  # (rows, t, d_model)
        return F.log_softmax(self.model.logits(h[:, -1]).float(), dim=-1)

    def reorder(self, index: Tensor) -> None:
        self.prefix = self.prefix[index]

    def select(self, index: Tensor) -> None:
        self.prefix, self.memory = self.prefix[index], self.memory[index]
        self.mask = self.mask[index] if self.mask is not None else None


def run(stepper_cls, model, src, k, max_len=12, n_best=1, **rules):
    max_lens = torch.full((src.size(0),), max_len)
    c = model.config
    with torch.inference_mode():
        stepper = (
            stepper_cls(model, src, k)
            if stepper_cls is UncachedStepper
            else stepper_cls(model, src, k, max_len + 1)
        )
        return beam_search(
            stepper,
            max_lens,
            SearchRules(start_id=c.start_id, eos_id=c.eos_id, banned=c.banned_ids, **rules),
            beam_size=k,
            n_best=n_best,
        )


@pytest.mark.parametrize("style", ["gnmt", "len"])
def test_cached_equals_uncached(style):
    model, src = tiny_model(), sources([7, 3, 9, 5])
    cached = run(TransformerStepper, model, src, 4, n_best=4, style=style)
    uncached = run(UncachedStepper, model, src, 4, n_best=4, style=style)
    for a, b in zip(cached, uncached, strict=True):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


def test_beam_search_on_a_windowed_model_equals_the_uncached_search():
    """Restricted self-attention (r = 2): the ring-buffer cache, reordered by the beams as it wraps,
    against the decoder re-run over each whole prefix, and through `decode_batch` (Python steps)."""
    model, src = tiny_model(attention_window=2), sources([7, 3, 9, 5])
    cached = run(TransformerStepper, model, src, 4, n_best=4, max_len=14)
    uncached = run(UncachedStepper, model, src, 4, n_best=4, max_len=14)
    for a, b in zip(cached, uncached, strict=True):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)
    assert max(len(h.tokens) for hyps in cached for h in hyps) > 3  # past the window's 3 slots
    best = decode_batch(model, src, DecodeConfig(beam_size=4, n_best=1, max_len_a=0, max_len_b=14))
    assert [hyps[0].tokens for hyps in best] == [hyps[0].tokens for hyps in cached]


def test_wide_beam_equals_exhaustive_search_scored_by_the_full_forward_pass():
    """vocab 8: tokens 1, 4..7 and EOS; every output of <= 3 tokens scored by model(src, tgt_in)."""
    model, src = tiny_model(vocab=8), sources([5], vocab=8)
    max_len, alpha = 3, 0.6
    hyps = run(TransformerStepper, model, src, 200, max_len=max_len, n_best=40, alpha=alpha)[0]
    allowed = [t for t in range(8) if t not in (PAD, BOS, EOS)]
    outputs = [list(s) for n in range(max_len + 1) for s in itertools.product(allowed, repeat=n)]
    tgt_in = torch.full((len(outputs), max_len + 1), PAD)  # (outputs, max_len + 1): start + output
    tgt_out = torch.full((len(outputs), max_len + 1), PAD)  # output + EOS
    for i, out in enumerate(outputs):
        tgt_in[i, : len(out) + 1] = torch.tensor([model.config.start_id] + out)
        tgt_out[i, : len(out) + 1] = torch.tensor(out + [EOS])
    with torch.no_grad():
        logits = model(src.expand(len(outputs), -1), tgt_in).double()  # (outputs, max_len + 1, vocab)
    token_logp = F.log_softmax(logits, dim=-1).gather(2, tgt_out[:, :, None])[:, :, 0]
    totals = token_logp.masked_fill(tgt_out.eq(PAD), 0.0).sum(1)
    scored = [(float(t) / length_penalty(len(o) + 1, alpha), o) for t, o in zip(totals, outputs, strict=True)]
    scored.sort(key=lambda x: -x[0])
    assert [h.tokens for h in hyps] == [out for _, out in scored[:40]]  # outputs of every length
    assert [h.score for h in hyps] == pytest.approx([s for s, _ in scored[:40]], abs=1e-4)


def test_beam_one_equals_greedy_on_the_model():
    model, src = tiny_model(), sources([7, 3, 9, 5, 2])
    c = model.config
    max_lens = max_lengths(src.ne(PAD).sum(1), c, 1.0, 6)
    with torch.inference_mode():
        greedy = greedy_search(
            TransformerStepper(model, src, 1, 20),
            max_lens,
            SearchRules(start_id=c.start_id, eos_id=EOS, banned=c.banned_ids),
        )
        beam = beam_search(
            TransformerStepper(model, src, 1, 20),
            max_lens,
            SearchRules(start_id=c.start_id, eos_id=EOS, banned=c.banned_ids),
            beam_size=1,
        )
    assert [g[0].tokens for g in greedy] == [b[0].tokens for b in beam]
    assert [g[0].score for g in greedy] == pytest.approx([b[0].score for b in beam], abs=1e-5)


@pytest.mark.parametrize("beam", [1, 4])
def test_batch_equals_one_sentence_at_a_time(beam):
    model, src = tiny_model(), sources([7, 3, 11, 5, 2, 8])
    options = DecodeConfig(beam_size=beam, n_best=beam, max_len_b=8)
    batched = decode_batch(model, src, options)
    for i in range(src.size(0)):
        alone = decode_batch(model, src[i : i + 1, : int(src[i].ne(PAD).sum())], options)[0]
        assert [h.tokens for h in batched[i]] == [h.tokens for h in alone]
        assert [h.score for h in batched[i]] == pytest.approx([h.score for h in alone], abs=1e-4)


@pytest.mark.parametrize("beam", [1, 3])
def test_outputs_respect_the_maximum_length(beam):
    """A model whose EOS logit is pushed far down: every output is exactly a * |src| + b long."""
    model = tiny_model(final_logits_bias=True)
    with torch.no_grad():
        model.output_bias[EOS] = -1e4
    src = sources([4, 9, 2])
    results = decode_batch(model, src, DecodeConfig(beam_size=beam, n_best=1, max_len_a=0.5, max_len_b=2))
    assert [len(r[0].tokens) for r in results] == [4, 6, 3]  # floor(0.5 * |src| + 2)


def test_marian_style_start_token_is_never_emitted():
    """A model that starts decoding from pad (Marian) never emits pad or bos."""
    model = tiny_model(decoder_start_id=PAD)
    results = decode_batch(model, sources([6, 4, 9]), DecodeConfig(beam_size=4, n_best=4, max_len_b=10))
    assert all(t not in (PAD, BOS, EOS) for r in results for h in r for t in h.tokens)


def test_empty_batch():
    assert decode_batch(tiny_model(), torch.empty(0, 3, dtype=torch.long), DecodeConfig()) == []


def test_a_step_gives_the_model_s_log_probabilities_with_or_without_autograd():
    """The step writes log-probabilities over its own logits, except where autograd records."""
    model, src = tiny_model(), sources([5, 3])
    tokens = torch.full((2,), model.config.start_id)
    expected = F.log_softmax(model(src, tokens[:, None])[:, -1].detach(), dim=-1)
    with torch.inference_mode():
        fast = TransformerStepper(model, src, 1, 4).step(tokens)
    recorded = TransformerStepper(model, src, 1, 4).step(tokens)  # parameters require grad
    assert recorded.requires_grad
    torch.testing.assert_close(fast, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(recorded.detach(), expected, rtol=1e-5, atol=1e-5)
