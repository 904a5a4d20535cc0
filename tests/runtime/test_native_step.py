"""The native decoding step (aiayn.runtime.native_step) computes what the Python step computes.

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

from aiayn.config import DecodeConfig, SamplingConfig
from aiayn.decode.generate import Controls, decode_batch
from aiayn.model.transformer import Transformer
from aiayn.runtime import native_step
from aiayn.runtime.linear import PackedLinear, pack_for_inference
from aiayn.runtime.native_step import attach_native_decoder, native_decoder
from aiayn.runtime.quantize import quantize_int8
from native_models import VARIANTS, model_of, needs_native, sources

pytestmark = needs_native


def step_logits(model: Transformer, src: torch.Tensor, prefix: torch.Tensor, beam: int) -> list[torch.Tensor]:
    """Logits of every step of teacher-forced incremental decoding of `prefix` (rows, T), the
    caches exactly T positions long."""
    memory, mask = model.encode(src)
    state = model.start_decoding(memory, mask, prefix.size(1), beam)
    return [native_step.decode_step(model, prefix[:, t], state) for t in range(prefix.size(1))]


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
    assert native_decoder(python_model) is None  # a copy computes in Python
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
    kernels = ("mkl", "packed", "mkl", "packed")
    monkeypatch.setattr("aiayn.runtime.linear._kernels", lambda layer: kernels)
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
    native_step.decode_step(model, torch.tensor([4, 5]), state)
    with pytest.raises(RuntimeError, match="KV cache holds 1 positions; step 2 does not fit"):
        native_step.decode_step(model, torch.tensor([4, 5]), state)
    assert state.step == 1 and state.self_kv[0].length == 1
    assert native_decoder(model) is not None  # the caller's error, not the native step's


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
    assert native_decoder(model) is None


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
        assert native_decoder(model) is None
        after = step_logits(model, src, prefix, 1)[-1]
        assert not torch.allclose(before, after, atol=1e-3)
        torch.testing.assert_close(after, step_logits(copy.deepcopy(model), src, prefix, 1)[-1])


@torch.inference_mode()
def test_the_weights_are_compared_once_a_search_and_a_replaced_layer_still_counts(monkeypatch):
    """`valid_during`: one search's steps compare the weights once (its first step); a new search
    compares them again; a layer replaced in the middle of a search sends its next step to Python."""
    model = model_of()
    attach_native_decoder(model)
    native = native_step.native_decoder(model)
    compared = []
    monkeypatch.setattr(native, "valid_for", lambda m: compared.append(m) or True)
    src, prefix = sources(2, model.config.pad_id), torch.randint(4, 90, (2, 4))
    step_logits(model, src, prefix, 1)
    assert len(compared) == 1  # four steps, one comparison
    memory, mask = model.encode(src)
    state = model.start_decoding(memory, mask, 4)
    native_step.decode_step(model, prefix[:, 0], state)
    assert len(compared) == 2  # a new search (state) compares again
    python_steps = []
    original = model.decode_step
    monkeypatch.setattr(model, "decode_step", lambda *a: python_steps.append(1) or original(*a))
    native_step.decode_step(model, prefix[:, 1], state)
    assert not python_steps  # still native
    ffn = model.decoder.layers[0].ffn
    ffn.linear2 = torch.nn.Linear(ffn.linear2.in_features, ffn.linear2.out_features)  # mid-search
    native_step.decode_step(model, prefix[:, 2], state)
    assert python_steps == [1]  # the replaced layer is computed: in Python


def test_a_moved_or_cast_model_decodes_in_python():
    model = model_of()
    attach_native_decoder(model)
    assert native_decoder(model) is not None
    model.decoder.layers[0].ffn.linear1.weight.data = torch.zeros(80, 48)
    assert native_decoder(model) is None
    attach_native_decoder(model)
    del model.decoder.layers[1]
    assert native_decoder(model) is None
    model = model_of()
    attach_native_decoder(model)
    model.double()
    assert native_decoder(model) is None
    assert attach_native_decoder(model) == "not a float32 CPU model"
    assert native_decoder(model) is None


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
        "import torch; from aiayn.runtime.native_build import native_status;"
        "from aiayn.runtime.native_step import attach_native_decoder, native_decoder;"
        "from aiayn.config import ModelConfig; from aiayn.model.transformer import Transformer;"
        "s = native_status(); assert not s['available'], s; print(s['reason']);"
        "m = Transformer(ModelConfig(vocab_size=50, d_model=16, d_ff=32, n_heads=2, n_layers=1)).eval();"
        "why = attach_native_decoder(m); assert native_decoder(m) is None and why == s['reason']"
    )
    env = {**os.environ, **env}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert reason in done.stdout
    assert "decoding steps run in Python" in done.stdout


@torch.inference_mode()
def test_a_decoder_that_fails_to_build_after_loading_leaves_decoding_in_python():
    """The library's own checks (here: one layer with kernels for 3 row classes, the others for 4)
    fail while the decoder is built: a reason, not a traceback, and Python decodes."""
    model = model_of()
    ffn = model.decoder.layers[1].ffn
    ffn.linear1 = PackedLinear(ffn.linear1.weight, ffn.linear1.bias, ("mkl",) * 3)
    why = attach_native_decoder(model)
    assert why.startswith("the native decoder failed (") and "row class" in why, why
    assert why.endswith("decoding steps run in Python") and native_decoder(model) is None
    src, prefix = sources(2, model.config.pad_id), torch.randint(4, 90, (2, 3))
    python = step_logits(copy.deepcopy(model), src, prefix, 1)
    for n, p in zip(step_logits(model, src, prefix, 1), python, strict=True):
        torch.testing.assert_close(n, p)


@torch.inference_mode()
def test_a_native_step_that_fails_runs_in_python_from_then_on(monkeypatch):
    model = model_of()
    attach_native_decoder(model)
    src, prefix = sources(2, model.config.pad_id), torch.randint(4, 90, (2, 3))
    python = step_logits(copy.deepcopy(model), src, prefix, 1)

    def fail(self, x, state):
        raise RuntimeError("boom\nException raised from somewhere")

    monkeypatch.setattr(native_step.NativeDecoder, "step", fail)
    with pytest.warns(
        RuntimeWarning, match=r"^the native step failed \(boom\): decoding steps run in Python$"
    ):
        native = step_logits(model, src, prefix, 1)
    assert native_decoder(model) is None
    for n, p in zip(native, python, strict=True):
        torch.testing.assert_close(n, p)


def _decoder(layers: int = 1, norms: int = 3, d: int = 8, vocab: int = 11) -> torch.ScriptObject:
    """A native decoder of `layers` layers (2 heads, d_k = d_v = 4, d_ff 16) with `norms` norms."""
    native = torch.classes.aiayn.NativeDecoder(2, 4, 4, False, "relu", 1e-5)
    shapes = [(3 * d, d), (d, d), (d, d), (d, d), (16, d), (d, 16)] * layers + [(vocab, d)]
    for out, inp in shapes:
        native.add_float(torch.randn(out, inp), torch.randn(out), None, None, [0] * 4)
    for _ in range(norms):
        native.add_norm(torch.ones(d), torch.zeros(d))
    return native


def _inputs(layers: int = 1, rows: int = 2, capacity: int = 3, length: int = 0, dtype=torch.float32) -> dict:
    """What a step of `_decoder(layers)` is given: x, caches, encoder keys/values, mask, rows, length."""
    k = [torch.zeros(rows, 2, capacity, 4, dtype=dtype) for _ in range(layers)]
    v = [torch.zeros(rows, 2, capacity, 4, dtype=dtype) for _ in range(layers)]
    k_t, cross_v = [torch.randn(rows, 2, 4, 5)] * layers, [torch.randn(rows, 2, 5, 4)] * layers
    return dict(
        x=torch.randn(rows, 8), keys=k, values=v, cross_k_t=k_t, cross_v=cross_v, mask=None, row_class=1
    )


def _step(
    native: torch.ScriptObject, x, keys, values, cross_k_t, cross_v, mask, row_class, padded=2, length=0
):
    """A native step, its caches made as `NativeDecoder.caches` makes them."""
    caches = torch.classes.aiayn.Caches(keys, values, cross_k_t, cross_v, mask, row_class, padded)
    return native.step(x, caches, length)


@pytest.mark.parametrize(
    ("layers", "norms", "change", "error"),
    [
        (0, 0, {}, "the decoder has 0 linear layers"),  # nothing added: an empty decoder
        (1, 0, {}, "the decoder has 0 norms for 1 layers"),
        (1, 5, {}, "the decoder has 5 norms for 1 layers"),
        (1, 3, {"length": -1}, "the caches' length must be >= 0, got -1"),
        (1, 3, {"length": 3}, "KV cache holds 3 positions; step 4 does not fit"),
        (1, 3, {"dtype": torch.float64}, "layer 0: a cache is Double, not float32"),
        (1, 3, {"keys": []}, r"one cache per decoder layer \(1\) expected"),
        (1, 3, {"row_class": 4}, "row class 4 of 4"),
        (1, 3, {"row_class": -1}, "row class -1 of 4"),
        (1, 3, {"padded": 1}, "rows padded to 1, fewer than the 2 rows"),
        (1, 3, {"mask": torch.ones(2, 1, 1, 5)}, r"the source mask is not \(n, 1, 1, src\) bool"),
        (1, 3, {"x": torch.randn(2, 7)}, "x has 7 features, the model's norms 8"),
    ],
)
def test_every_index_the_native_step_takes_is_checked(layers, norms, change, error):
    native = (
        _decoder(layers, norms)
        if layers or norms
        else torch.classes.aiayn.NativeDecoder(2, 4, 4, False, "relu", 1e-5)
    )
    args = _inputs(max(layers, 1), dtype=change.get("dtype", torch.float32))
    args |= {name: value for name, value in change.items() if name != "dtype"}
    with pytest.raises(RuntimeError, match=error):
        _step(native, **args)


def test_a_decoder_of_no_layers_is_its_output_layer():
    native = _decoder(layers=0, norms=0)
    x = torch.randn(2, 8)
    assert _step(native, x, [], [], [], [], None, 1).shape == (2, 11)
    with pytest.raises(RuntimeError, match="the caches' length must be >= 0"):
        _step(native, x, [], [], [], [], None, 1, length=-1)


def test_what_the_library_is_given_is_checked():
    with pytest.raises(RuntimeError, match="activation 'tanh' is not relu, gelu or swish"):
        torch.classes.aiayn.NativeDecoder(2, 4, 4, False, "tanh", 1e-5)
    with pytest.raises(RuntimeError, match="heads, d_k and d_v must be positive"):
        torch.classes.aiayn.NativeDecoder(0, 4, 4, False, "relu", 1e-5)
    native = torch.classes.aiayn.NativeDecoder(2, 4, 4, False, "relu", 1e-5)
    with pytest.raises(RuntimeError, match="a row class takes the packed weight, and there is none"):
        native.add_float(torch.randn(3, 8), None, None, None, [1] * 4)
    with pytest.raises(RuntimeError, match="a row class takes the panels, and there are none"):
        native.add_float(torch.randn(3, 8), None, None, None, [2] * 4)
    with pytest.raises(RuntimeError, match="kernel 3 is not 0"):
        native.add_float(torch.randn(3, 8), None, None, None, [3] * 4)
    with pytest.raises(RuntimeError, match="panels are not pack_panels of the weight's shape"):
        native.add_float(torch.randn(3, 8), None, None, torch.zeros(1, 8, 8), [2] * 4)
    with pytest.raises(RuntimeError, match="a bias of 2 for 3 outputs"):
        native.add_float(torch.randn(3, 8), torch.randn(2), None, None, [0] * 4)
    with pytest.raises(RuntimeError, match="a weight must be a 2-d float32 tensor"):
        native.add_float(torch.randn(3, 8).double(), None, None, None, [0] * 4)
    with pytest.raises(RuntimeError, match="a norm's weight and bias differ in size"):
        native.add_norm(torch.ones(8), torch.zeros(7))


def test_the_stepper_takes_the_native_step_where_one_is_attached(monkeypatch):
    model = model_of()
    calls = []

    def spy(method):
        def call(self, *args):
            calls.append(1)
            return method(self, *args)

        return call

    for owner, name in ((native_step.NativeDecoder, "step"), (native_step.NativeSearch, "beam")):
        monkeypatch.setattr(owner, name, spy(getattr(owner, name)))  # a single step, or steps in runs
    options = DecodeConfig(beam_size=2, n_best=1, max_len_a=0.0, max_len_b=3)
    decode_batch(model, sources(2, model.config.pad_id), options)
    assert not calls  # nothing attached: Python
    attach_native_decoder(model)
    calls.clear()  # the one-row step of attaching
    decode_batch(model, sources(2, model.config.pad_id), options)
    assert calls
