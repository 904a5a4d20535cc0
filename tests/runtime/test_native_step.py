"""The native decoding step (aiayn.model.native_step) computes what the Python step computes.

References: the Python step of the same model (the same kernels: equal up to summation order) and
a float64 teacher-forced forward pass of a copy of the model (independent of the cache and of every
kernel choice). Skipped only where no C++ compiler is installed (`make test` installs g++) or
AIAYN_NATIVE=0 says not to use one: a library that fails to build or load fails these tests.
"""

import copy
import os
import subprocess
import sys

import pytest
import torch

from aiayn.config import DecodeConfig, ModelConfig, SamplingConfig
from aiayn.decode.stepper import Controls, decode_batch
from aiayn.model import native_step
from aiayn.model.linear import PackedLinear, pack_for_inference
from aiayn.model.native_step import attach_native_decoder, native_status
from aiayn.model.quantize import quantize_int8
from aiayn.model.transformer import Transformer

pytestmark = pytest.mark.skipif(
    native_step._compiler() is None or os.environ.get(native_step.ENV, "").strip() == "0",
    reason="no C++ compiler, or AIAYN_NATIVE=0",
)

VARIANTS = {
    "paper": dict(),
    "pre-norm, gelu, d_k != d_v": dict(norm_first=True, activation="gelu", d_k=12, d_v=20),
    "post-norm with a final norm": dict(final_norm=True),
    "pre-norm without one": dict(norm_first=True, final_norm=False),
    "swish, own output matrix and bias": dict(
        activation="swish", tie_embeddings="none", final_logits_bias=True
    ),
}


def model_of(**overrides) -> Transformer:
    config = ModelConfig(vocab_size=96, d_model=48, d_ff=80, n_heads=4, n_layers=2, **overrides)
    model = Transformer(config).eval()
    with torch.no_grad():  # biases and norms away from their initial 0 and 1, so they are tested
        for name, p in model.named_parameters():
            if "bias" in name or "norm" in name:
                p.add_(torch.randn_like(p) * 0.3)
    return model


def sources(n: int, pad_id: int) -> torch.Tensor:
    src = torch.randint(4, 90, (n, 9))
    src[-1, 5:] = pad_id  # padding: the cross-attention mask
    return src


def step_logits(model: Transformer, src: torch.Tensor, prefix: torch.Tensor, beam: int) -> list[torch.Tensor]:
    """Logits of every step of teacher-forced incremental decoding of `prefix` (rows, T), the
    caches exactly T positions long."""
    memory, mask = model.encode(src)
    state = model.start_decoding(memory, mask, prefix.size(1), beam)
    return [model.decode_step(prefix[:, t], state) for t in range(prefix.size(1))]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("beam", [1, 3])
@torch.inference_mode()
def test_native_logits_match_python_and_float64(variant, beam):
    model = model_of(**VARIANTS[variant])
    reference = copy.deepcopy(model).double()  # its own weights: decodes in Python, in float64
    assert attach_native_decoder(model) == "native"
    src = sources(2, model.config.pad_id)
    prefix = torch.randint(4, 90, (2 * beam, 6))
    prefix[:, 0] = model.config.start_id
    native = step_logits(model, src, prefix, beam)
    python_model = copy.deepcopy(model)
    assert python_model.native_decoder is None  # a copy computes in Python
    python = step_logits(python_model, src, prefix, beam)
    exact = reference(src.repeat_interleave(beam, 0), prefix)  # (rows, T, vocab)
    for t, (n, p) in enumerate(zip(native, python, strict=True)):
        torch.testing.assert_close(n, p, rtol=1e-5, atol=2e-5)
        torch.testing.assert_close(n.double(), exact[:, t], rtol=1e-5, atol=5e-5)


def _mark_packed(model: Transformer) -> None:
    """Pack 1.5 x each weight for oneDNN: which kernel a product took shows in the logits."""
    for layer in model.modules():
        if isinstance(layer, PackedLinear) and layer.packed is not None:
            layer.packed = torch.ops.mkldnn._reorder_linear_weight(layer.weight.detach() * 1.5, 64)


@torch.inference_mode()
def test_packed_kernels_and_padded_rows_match_python(monkeypatch):
    """Both kernels of PackedLinear, taken at the same row counts (the boundaries of the row
    classes), and more rows than EXACT_ROWS (padded for oneDNN)."""
    model = model_of()
    python_model = copy.deepcopy(model)
    monkeypatch.setattr("aiayn.model.linear._kernels", lambda layer: ("mkl", "packed", "mkl", "packed"))
    for m in (model, python_model):  # the same kernels; python_model decodes in Python
        pack_for_inference(m)
        _mark_packed(m)
    assert attach_native_decoder(model) == "native"
    for rows in (1, 2, 11, 12, 63, 64, 65, 70):  # 65 and 70 rows are padded to 66 and 72
        src = sources(rows, model.config.pad_id)
        prefix = torch.randint(4, 90, (rows, 3))
        native, python = step_logits(model, src, prefix, 1), step_logits(python_model, src, prefix, 1)
        for n, p in zip(native, python, strict=True):
            torch.testing.assert_close(n, p, rtol=1e-5, atol=2e-5)


@torch.inference_mode()
def test_int8_native_matches_int8_python():
    model = model_of()
    python_model = quantize_int8(copy.deepcopy(model))  # the same weights, quantised alike
    quantize_int8(model)
    assert attach_native_decoder(model) == "native"
    src, prefix = sources(3, model.config.pad_id), torch.randint(4, 90, (3, 4))
    native, python = step_logits(model, src, prefix, 1), step_logits(python_model, src, prefix, 1)
    for n, p in zip(native, python, strict=True):
        torch.testing.assert_close(n, p, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("beam", [1, 4])
def test_searches_find_the_same_translations(beam):
    """Beam search reorders and drops finished sentences (the caches shrink): same outputs as Python."""
    model = model_of()
    src = sources(5, model.config.pad_id)
    options = DecodeConfig(beam_size=beam, n_best=2 if beam > 1 else 1, max_len_a=1.0, max_len_b=3)
    python = decode_batch(model, src, options)
    assert attach_native_decoder(model) == "native"
    native = decode_batch(model, src, options)
    for got, want in zip(native, python, strict=True):
        assert [h.tokens for h in got] == [h.tokens for h in want]
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-4)


@torch.inference_mode()
def test_native_decoding_leaves_the_weights_as_they_were():
    """Every row count, one row too (where a broadcast bias is already contiguous)."""
    model = model_of(final_logits_bias=True)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    attach_native_decoder(model)
    for rows in (1, 3):
        step_logits(model, sources(rows, model.config.pad_id), torch.randint(4, 90, (rows, 3)), 1)
    for name, value in model.state_dict().items():
        assert torch.equal(value, before[name]), name


@torch.inference_mode()
def test_a_step_past_the_cache_is_an_error_and_the_state_stays():
    model = model_of()
    attach_native_decoder(model)
    memory, mask = model.encode(sources(2, model.config.pad_id))
    state = model.start_decoding(memory, mask, 1)
    model.decode_step(torch.tensor([4, 5]), state)
    with pytest.raises(RuntimeError, match="KV cache holds 1 positions; step 2 does not fit"):
        model.decode_step(torch.tensor([4, 5]), state)
    assert state.step == 1 and state.self_kv[0].length == 1


def test_sampling_draws_the_same_tokens():
    """Samples end one by one: rows are dropped singly and the encoder's keys go one per row."""
    model = model_of()
    src = sources(3, model.config.pad_id)
    options = DecodeConfig(beam_size=3, n_best=3, max_len_a=1.0, max_len_b=3)
    controls = Controls(sample=SamplingConfig(seed=3, temperature=0.7))
    python = decode_batch(model, src, options, controls)
    attach_native_decoder(model)
    native = decode_batch(model, src, options, controls)
    assert [[h.tokens for h in hs] for hs in native] == [[h.tokens for h in hs] for hs in python]


def test_python_step_in_training_mode_without_gradients():
    model = model_of()
    attach_native_decoder(model)
    model.train()
    src, prefix = sources(2, model.config.pad_id), torch.randint(4, 90, (2, 2))
    with torch.no_grad():
        first, second = step_logits(model, src, prefix, 1)[-1], step_logits(model, src, prefix, 1)[-1]
    assert not torch.equal(first, second)  # dropout: Python computed it, in training mode


def test_python_step_with_gradients_or_in_training():
    model = model_of()
    attach_native_decoder(model)
    src, prefix = sources(2, model.config.pad_id), torch.randint(4, 90, (2, 2))
    logits = step_logits(model, src, prefix, 1)[-1]
    assert logits.requires_grad  # the native step has no gradients: Python computed it


def test_quantising_detaches_the_float_native_decoder():
    model = model_of()
    attach_native_decoder(model)
    quantize_int8(model)
    assert model.native_decoder is None


@torch.inference_mode()
def test_a_layer_or_parameter_replaced_after_attaching_is_computed():
    """The native decoder goes stale, so the replacement is what decodes (in Python)."""
    for replace in ("layer", "parameter"):
        model = model_of()
        attach_native_decoder(model)
        src, prefix = sources(2, model.config.pad_id), torch.randint(4, 90, (2, 2))
        before = step_logits(model, src, prefix, 1)[-1]
        ffn = model.decoder.layers[1].ffn
        if replace == "layer":
            ffn.linear2 = torch.nn.Linear(ffn.linear2.in_features, ffn.linear2.out_features)
        else:
            ffn.linear2.weight = torch.nn.Parameter(torch.zeros_like(ffn.linear2.weight))
        assert not model.native_decoder.valid_for(model)
        after = step_logits(model, src, prefix, 1)[-1]
        assert not torch.allclose(before, after, atol=1e-3)
        torch.testing.assert_close(after, step_logits(copy.deepcopy(model), src, prefix, 1)[-1])


def test_a_moved_or_cast_model_decodes_in_python():
    model = model_of()
    attach_native_decoder(model)
    assert model.native_decoder.valid_for(model)
    model.decoder.layers[0].ffn.linear1.weight.data = torch.zeros(80, 48)
    assert not model.native_decoder.valid_for(model)
    attach_native_decoder(model)
    del model.decoder.layers[1]
    assert not model.native_decoder.valid_for(model)
    model = model_of()
    attach_native_decoder(model)
    model.double()
    assert not model.native_decoder.valid_for(model)
    assert attach_native_decoder(model) == "not a float32 CPU model"
    assert model.native_decoder is None


@pytest.mark.parametrize(
    ("env", "reason"),
    [
        ({"AIAYN_NATIVE": "0"}, "AIAYN_NATIVE=0"),
        ({"CXX": "/no/such/compiler", "XDG_CACHE_HOME": "{tmp}"}, "/no/such/compiler"),
    ],
)
def test_unavailable_native_step_is_reported_and_decoding_stays_in_python(env, reason, tmp_path):
    """Off by the environment, or no compiler (and nothing cached): a reason, and decoding works."""
    env = {k: v.format(tmp=tmp_path) for k, v in env.items()}
    code = (
        "import torch; from aiayn.model.native_step import native_status, attach_native_decoder;"
        "from aiayn.config import ModelConfig; from aiayn.model.transformer import Transformer;"
        "s = native_status(); assert not s['available'], s; print(s['reason']);"
        "m = Transformer(ModelConfig(vocab_size=50, d_model=16, d_ff=32, n_heads=2, n_layers=1)).eval();"
        "why = attach_native_decoder(m); assert m.native_decoder is None and why == s['reason']"
    )
    env = {**os.environ, **env}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert reason in done.stdout
    assert "decoding steps run in Python" in done.stdout


def test_the_native_step_builds_and_loads_here():
    assert native_status()["available"], native_status()["reason"]


def test_a_failed_build_names_the_first_error():
    stderr = "x.cpp: In function 'f':\nx.cpp:3:1: error: 'y' was not declared\ncompilation terminated.\n"
    assert native_step._first_error(stderr) == "x.cpp:3:1: error: 'y' was not declared"


def test_the_library_is_cached_by_source_and_compiler():
    compiler = native_step._compiler()
    path = native_step._library_path(compiler)
    assert path.exists() and native_step.build() == path  # built once, then found
    assert native_status()["library"] == str(path)
