"""int8 inference (aiayn.runtime.quantize), all in one place: what is quantised and how close its logits
stay to float32 on a small random model, then the toy translator loaded with Translator.load(int8=True)
and `--int8` on translate, evaluate and serve.

Logits: on a small random model the int8 logits differ from float32 by at most 5% in relative
(Frobenius) norm. Correct quantisation measures 1.5-2%; deliberately wrong ones measure 16% (weights
rounded to 4 bits) and 31% (biases dropped), and a test checks that the tolerance rejects them. Both
int8 paths (VNNI: 8-bit weights; no-VNNI: 7-bit weights) are tested wherever they can run: the
no-VNNI one everywhere, the VNNI one on CPUs that have it. An int8 product is also checked exactly
against a float64 re-computation of the same integer arithmetic, which is what an int16 saturation
(8-bit weights without VNNI) would break; on x86 that check also runs on FBGEMM's AVX2 kernels
(`FBGEMM_ENABLE_INSTRUCTIONS=AVX2`, in a child process), so a VNNI machine checks them too.

Translations: an int8 model does not translate exactly as its float32 original; on the toy task it
gives the same output for 94-97% of 200 sentences (greedy and beam 4). The tests ask for 90%; a
deliberately wrong quantisation (weights rounded to 4 bits before int8) gives 65% and fails that bar.

Scores: the int8 model's log-probability of each float32 translation (teacher-forced, so that no
change of hypothesis blurs the comparison) differs from float32's by 0.040 on average over 200
sentences on the VNNI path, 0.042 on the no-VNNI path (7-bit weights); the 7-bit inputs that
PyTorch uses without VNNI gave 0.059, and 6-bit weights 0.10. The bar is 0.05.
"""

from __future__ import annotations

import copy
import inspect
import json
import platform

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.cli import main
from aiayn.config import EOS_ID, DecodeConfig, ModelConfig
from aiayn.decode.generate import decode_batch
from aiayn.decode.texts import translate_texts
from aiayn.decode.translator import Translator
from aiayn.errors import AiaynError
from aiayn.model.transformer import Transformer
from aiayn.runtime.linear import PackedLinear
from aiayn.runtime.quantize import (
    FBGEMM_ENV,
    NO_VNNI,
    VNNI,
    Int8Linear,
    Int8Path,
    check_int8_device,
    choose_int8_path,
    has_vnni,
    int8_linear,
    is_int8,
    quantize_int8,
)
from toy_translation import toy_pairs

TOLERANCE = 0.05  # |int8 - fp32| / |fp32| over all logits of a batch
PATHS = [
    NO_VNNI,
    pytest.param(VNNI, marks=pytest.mark.skipif(not has_vnni(), reason="8-bit weights need VNNI")),
]


def random_model(seed: int, tie: str = "all") -> Transformer:
    """A small random model with non-zero biases (Transformer initialises them to zero)."""
    torch.manual_seed(seed)
    config = ModelConfig(
        vocab_size=96, d_model=64, d_ff=128, n_heads=4, n_layers=2, dropout=0.0, tie_embeddings=tie,
        final_logits_bias=True,
    )  # fmt: skip
    model = Transformer(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") and "norm" not in name:
                p.normal_(0, 0.1)
    return model


def inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, 96, (6, 12), generator=g), torch.randint(4, 96, (6, 10), generator=g)


def relative_error(model: nn.Module, reference: nn.Module, seed: int) -> float:
    src, tgt = inputs(seed)
    with torch.inference_mode():
        ours, theirs = model(src, tgt), reference(src, tgt)
    return float((ours - theirs).norm() / theirs.norm())


def test_every_linear_layer_and_the_output_layer_become_int8():
    model = random_model(0)
    n = model.num_parameters()
    assert quantize_int8(model) is model and is_int8(model)
    assert not any(type(m) is nn.Linear for m in model.modules())
    layers = [m for m in model.modules() if isinstance(m, Int8Linear)]
    assert len(layers) == 2 * 4 + 2 * 7 + 1  # encoder: qkv, out, 2 FFN; decoder: + cross q, kv, out; output
    assert model.output_layer in layers
    weight = model.output_layer.weight()
    assert weight.dtype == torch.qint8 and weight.q_per_channel_scales().shape == (96,)  # one scale a row
    assert not weight.q_per_channel_zero_points().any()  # symmetric
    assert model.num_parameters() == n  # counted as before quantisation
    assert quantize_int8(model) is model  # a second call changes nothing
    assert len([m for m in model.modules() if isinstance(m, Int8Linear)]) == len(layers)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("tie", ["all", "none"])
def test_int8_logits_are_close_to_float32(seed, tie, path):
    reference = random_model(seed, tie)
    model = quantize_int8(copy.deepcopy(reference), path=path)
    error = relative_error(model, reference, seed)
    assert 1e-4 < error <= TOLERANCE  # quantised (not equal), and close


def test_output_layer_can_stay_float32():
    reference = random_model(0)
    model = quantize_int8(copy.deepcopy(reference), output_layer=False)
    assert not isinstance(model.output_layer, Int8Linear)
    assert relative_error(model, reference, 0) <= TOLERANCE


def _wrongly_quantised(reference: Transformer, kind: str) -> Transformer:
    """quantize_int8 with a deliberate bug: weights rounded to 4 bits, or biases dropped."""
    model = copy.deepcopy(reference)
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                weight, bias = child.weight.detach(), child.bias
                if kind == "4-bit weights":
                    scale = weight.abs().amax(1, keepdim=True) / 7
                    weight = (weight / scale).round() * scale
                setattr(module, name, int8_linear(weight, None if kind == "no bias" else bias))
    model.output_layer = int8_linear(model.output_weight, model.output_bias)
    return model


@pytest.mark.parametrize("kind", ["4-bit weights", "no bias"])
def test_the_tolerance_rejects_a_wrong_quantisation(kind):
    reference = random_model(0)
    assert relative_error(_wrongly_quantised(reference, kind), reference, 0) > TOLERANCE


def test_int8_linear_against_float():
    torch.manual_seed(0)
    weight, bias, x = torch.randn(40, 24), torch.randn(40), torch.randn(3, 5, 24)
    expected = torch.nn.functional.linear(x, weight, bias)
    got = int8_linear(weight, bias)(x)
    assert got.shape == expected.shape and got.dtype == torch.float32
    assert float((got - expected).norm() / expected.norm()) < 0.02


@pytest.mark.parametrize("bias", [True, False])
def test_a_layer_of_some_rows_is_those_rows_quantised_again(bias):
    """`Int8Linear.rows` (a shortlist's output layer) takes the full layer's int8 rows and scales: the
    same layer as quantising the float rows, bit for bit, outputs included; twice, from the kept copy."""
    torch.manual_seed(1)
    weight, b, x = torch.randn(300, 24), torch.randn(300) if bias else None, torch.randn(5, 24)
    full, index = int8_linear(weight, b), torch.tensor([3, 7, 8, 150, 299])
    for _ in range(2):
        rows, again = full.rows(index), int8_linear(weight[index], None if b is None else b[index])
        assert torch.equal(rows.weight().int_repr(), again.weight().int_repr())
        assert torch.equal(rows.weight().q_per_channel_scales(), again.weight().q_per_channel_scales())
        assert torch.equal(rows(x), again(x)) and (rows.out_features, rows.in_features) == (5, 24)


def emulated(layer: Int8Linear, x: torch.Tensor) -> torch.Tensor:
    """The int8 product re-computed in float64: x to 8 bits (one scale, one zero point from its
    range including 0), the layer's own int8 weights, exact integer sums, then the scales."""
    qweight = layer.weight()
    q = qweight.int_repr().double()  # (out, in)
    w_scale = qweight.q_per_channel_scales().double()  # (out,)
    xd = x.double()
    lo, hi = min(float(xd.min()), 0.0), max(float(xd.max()), 0.0)
    scale = (hi - lo) / 255
    zero = round(-lo / scale)
    xq = (torch.round(xd / scale) + zero).clamp(0, 255)
    return (xq - zero) @ q.t() * scale * w_scale


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("rows", [1, 16, 128])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_extreme_inputs_and_weights_do_not_overflow(rows, sign, path):
    """Non-negative inputs (as after the FFN's ReLU) at the top of their range, times weights at
    the end of theirs: with 8-bit inputs and 8-bit weights pairs of products reach 2 x 255 x 127,
    which an int16 accumulation (x86 without VNNI) saturates to about half. Each path must give
    the exact integer result, checked against a float64 re-computation.
    """
    weight, x = torch.full((8, 256), sign), torch.ones(rows, 256)
    layer = int8_linear(weight, path=path)
    got = layer(x)
    torch.testing.assert_close(got, torch.full((rows, 8), 256.0 * sign), rtol=0.01, atol=0)
    torch.testing.assert_close(got.double(), emulated(layer, x), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("path", PATHS)
def test_int8_linear_is_exactly_the_integer_arithmetic(path):
    """Inputs on a grid of 1/8 from 0 to 255/8: the input scale is exactly 1/8 and no input sits near
    a rounding boundary, so any CPU's kernel must agree with the float64 re-computation."""
    g = torch.Generator().manual_seed(1)
    weight = torch.randn(64, 256, generator=g)
    x = torch.randint(0, 256, (32, 256), generator=g) / 8.0  # non-negative, as after the ReLU
    x[0, 0] = 255 / 8  # the top of the 8-bit range
    layer = int8_linear(weight, path=path)
    assert layer.weight().int_repr().abs().max() == path.weight_max  # the row maxima use the range
    torch.testing.assert_close(layer(x).double(), emulated(layer, x), rtol=1e-5, atol=1e-4)


def test_the_int8_path_follows_the_cpu_and_the_environment():
    assert choose_int8_path({}, vnni=True) is VNNI
    assert choose_int8_path({}, vnni=False) is NO_VNNI
    assert choose_int8_path({"AIAYN_INT8_PATH": "no-vnni"}, vnni=True) is NO_VNNI
    assert choose_int8_path({"AIAYN_INT8_PATH": "auto"}, vnni=False) is NO_VNNI
    assert choose_int8_path({"AIAYN_INT8_PATH": "vnni"}, vnni=True) is VNNI
    assert (VNNI.activation_bits, VNNI.weight_bits, NO_VNNI.activation_bits, NO_VNNI.weight_bits) == (
        8,
        8,
        8,
        7,
    )
    with pytest.raises(AiaynError, match=r"^AIAYN_INT8_PATH=vnni needs a CPU with VNNI"):
        choose_int8_path({"AIAYN_INT8_PATH": "vnni"}, vnni=False)
    with pytest.raises(AiaynError, match=r"^AIAYN_INT8_PATH='fast' is not one of auto, vnni, no-vnni"):
        choose_int8_path({"AIAYN_INT8_PATH": "fast"}, vnni=True)


@pytest.mark.parametrize("value", ["AVX2", "avx512", "AVX512_256"])
def test_fbgemm_held_to_kernels_without_vnni_takes_the_no_vnni_path(value):
    env = {FBGEMM_ENV: value}
    assert not has_vnni(env)
    assert choose_int8_path(env) is NO_VNNI
    with pytest.raises(AiaynError, match=rf"^AIAYN_INT8_PATH=vnni needs VNNI kernels, and {FBGEMM_ENV}="):
        choose_int8_path({**env, "AIAYN_INT8_PATH": "vnni"})


@pytest.mark.parametrize("value", ["AVX512_E1", "AVX512_E1_256", "fast", "", " AVX2"])
def test_other_fbgemm_settings_leave_the_choice_to_the_cpu(value):
    """FBGEMM's VNNI kernels run only where the CPU has them; a name it does not know (it does not
    trim spaces) it ignores."""
    assert has_vnni({FBGEMM_ENV: value}) == has_vnni({})


# Run in a fresh process: FBGEMM reads its switch once, when its first kernel runs. `emulated`'s
# source is added: the child checks the integer arithmetic itself.
CHILD_IMPORTS = """
import json, torch
from aiayn.runtime.quantize import VNNI, Int8Linear, choose_int8_path, int8_linear
"""
WITHOUT_VNNI_KERNELS = """
weight, x = torch.full((8, 256), 1.0), torch.ones(16, 256)  # pairs of products reach 2 x 255 x 127
auto = int8_linear(weight)  # the path chosen for the kernels FBGEMM runs here
eight_bit = int8_linear(weight, path=VNNI)  # 8-bit weights, which int16 pair sums saturate
g = torch.Generator().manual_seed(1)  # inputs on a grid of 1/8, as in the test above
layer = int8_linear(torch.randn(64, 256, generator=g))
grid = torch.randint(0, 256, (32, 256), generator=g) / 8
grid[0, 0] = 255 / 8
exact = torch.allclose(layer(grid).double(), emulated(layer, grid), rtol=1e-5, atol=1e-4)
out = {"path": choose_int8_path().name, "auto": auto(x).tolist(), "eight_bit": eight_bit(x).tolist()}
print(json.dumps({**out, "grid_exact": exact}))
"""


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="FBGEMM's x86 kernels")
def test_the_no_vnni_path_is_exact_on_the_kernels_of_a_cpu_without_vnni(run_python, monkeypatch):
    """With FBGEMM held to its AVX2 kernels (what a CPU without VNNI runs), the automatic path is the
    no-VNNI one and gives the exact integer results; 8-bit weights on the same kernels saturate to
    about half, which shows the kernels really were the int16 ones: a VNNI machine tests them here."""
    monkeypatch.setenv(FBGEMM_ENV, "AVX2")  # the child's; this process has no int8 work meanwhile
    monkeypatch.delenv("AIAYN_INT8_PATH", raising=False)
    got = json.loads(run_python(CHILD_IMPORTS + inspect.getsource(emulated) + WITHOUT_VNNI_KERNELS))
    assert got["path"] == NO_VNNI.name and got["grid_exact"]
    torch.testing.assert_close(torch.tensor(got["auto"]), torch.full((16, 8), 256.0), rtol=0.01, atol=0)
    assert max(max(row) for row in got["eight_bit"]) < 0.75 * 256  # saturated: the switch reached FBGEMM


def test_the_environment_switch_reaches_quantisation(monkeypatch):
    monkeypatch.setenv("AIAYN_INT8_PATH", "no-vnni")
    model = quantize_int8(random_model(0))
    layers = [m for m in model.modules() if isinstance(m, Int8Linear)]
    assert all(m.path is NO_VNNI and m.weight().int_repr().abs().max() <= 63 for m in layers)


def test_six_bit_weights_are_measurably_worse():
    """One bit less than the no-VNNI path (a wrong weight range) shows in the logits' error."""
    reference = random_model(0)
    six = Int8Path("six-bit", 8, 6, "a deliberately wrong range")
    good = relative_error(quantize_int8(copy.deepcopy(reference), path=NO_VNNI), reference, 0)
    bad = relative_error(quantize_int8(copy.deepcopy(reference), path=six), reference, 0)
    assert bad > 1.5 * good


@pytest.mark.parametrize("beam", [1, 4])
def test_int8_model_decodes_with_the_cache(beam):
    model = quantize_int8(random_model(0))
    src, _ = inputs(0)
    with torch.inference_mode():
        hyps = decode_batch(model, src, DecodeConfig(beam_size=beam, max_len_a=0.0, max_len_b=8))
    assert len(hyps) == src.size(0) and all(h and len(h[0].tokens) <= 8 for h in hyps)


@pytest.mark.parametrize("device", ["cuda", "cuda:1", torch.device("cuda", 0)])
def test_a_cuda_device_is_a_one_line_error(device):
    with pytest.raises(AiaynError, match=r"^int8 inference \(--int8\) runs on the CPU only, not on cuda"):
        check_int8_device(device)
    assert check_int8_device(None) == torch.device("cpu") == check_int8_device("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_a_model_on_the_gpu_is_refused():
    with pytest.raises(AiaynError, match="runs on the CPU only"):
        quantize_int8(random_model(0).cuda())


SAME_SHARE = 0.9  # the least share of sentences an int8 model must translate as float32 does
SCORE_ERROR = 0.05  # the largest mean |log P int8 - log P float32| of the float32 translations
TEXTS = [s for s, _ in toy_pairs(200, seed=21)]


@pytest.fixture(scope="module")
def fp32(toy_model_dir) -> Translator:
    return Translator.load(toy_model_dir, device="cpu")


@pytest.fixture(scope="module")
def int8(toy_model_dir) -> Translator:
    return Translator.load(toy_model_dir, int8=True)


def four_bit(toy_model_dir) -> Translator:
    """A wrongly quantised translator: every weight rounded to 4 bits (per row) before int8."""
    translator = Translator.load(toy_model_dir, device="cpu")
    model = translator.bundle.model
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) in (nn.Linear, PackedLinear):
                weight = child.weight.detach()
                scale = weight.abs().amax(1, keepdim=True) / 7
                setattr(module, name, int8_linear((weight / scale).round() * scale, child.bias))
    model.output_layer = int8_linear(model.output_weight, model.output_bias)
    return translator


def same_share(a: list[str], b: list[str]) -> float:
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


def test_load_int8(int8, fp32):
    assert int8.bundle.int8 and not fp32.bundle.int8
    assert int8.bundle.device == torch.device("cpu")
    assert isinstance(int8.bundle.model.output_layer, Int8Linear)
    assert int8.bundle.model.num_parameters() == fp32.bundle.model.num_parameters()


@pytest.mark.parametrize("beam", [1, 4])
def test_int8_translates_mostly_as_float32(int8, fp32, toy_model_dir, beam):
    reference = translate_texts(fp32, TEXTS, beam_size=beam)
    assert same_share(translate_texts(int8, TEXTS, beam_size=beam), reference) >= SAME_SHARE
    wrong = translate_texts(four_bit(toy_model_dir), TEXTS, beam_size=beam)
    assert same_share(wrong, reference) < SAME_SHARE  # the bar catches a broken quantisation


def forced_log_probs(translator: Translator, sources: list[list[int]], targets: list[list[int]]) -> Tensor:
    """log P(target | source) of each pair under `translator.bundle.model`, teacher-forced: (pairs,)."""
    out = []
    with torch.inference_mode():
        for src, tgt in zip(sources, targets, strict=True):
            start = translator.bundle.model.config.start_id
            tgt_in, tgt_out = torch.tensor([[start, *tgt]]), torch.tensor([[*tgt, EOS_ID]])
            logp = F.log_softmax(translator.bundle.model(torch.tensor([src]), tgt_in).float(), -1)
            out.append(logp.gather(-1, tgt_out[..., None]).sum())
    return torch.stack(out)


@pytest.mark.parametrize(
    "path", [NO_VNNI, pytest.param(VNNI, marks=pytest.mark.skipif(not has_vnni(), reason="needs VNNI"))]
)
def test_int8_scores_the_float32_translations_closely(fp32, toy_model_dir, path):
    sources = fp32.encode(TEXTS)
    targets = [hyps[0].tokens for hyps in fp32.translate_batch(TEXTS)]
    quantised = Translator.load(toy_model_dir, device="cpu")
    quantize_int8(quantised.bundle.model, path=path)
    layers = list(quantised.bundle.model.modules())
    assert not any(isinstance(m, nn.Linear | PackedLinear) for m in layers)  # packed float32 ones too
    error = (forced_log_probs(quantised, sources, targets) - forced_log_probs(fp32, sources, targets)).abs()
    assert 1e-4 < float(error.mean()) <= SCORE_ERROR


def test_load_int8_on_cuda_is_an_error(toy_model_dir):
    with pytest.raises(AiaynError, match="runs on the CPU only"):
        Translator.load(toy_model_dir, "cuda", int8=True)


def test_translate_cli_int8(toy_model_dir, int8, tmp_path):
    (tmp_path / "in.txt").write_text("\n".join(TEXTS[:30]) + "\n", encoding="utf-8")
    args = ["translate", str(toy_model_dir), "-i", str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt")]
    assert main([*args, "--int8"]) == 0
    assert (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines() == translate_texts(
        int8, TEXTS[:30]
    )


NAMES = ("fp32", "int8")


def test_evaluate_cli_int8(toy_model_dir, toy_data_dir, tmp_path, capsys):
    for name, flags in zip(NAMES, ([], ["--int8"]), strict=True):
        args = ["evaluate", str(toy_model_dir), str(toy_data_dir), "--out", str(tmp_path / name)]
        assert main([*args, "--no-progress", *flags]) == 0
    assert capsys.readouterr().out.count("BLEU|") == 2
    fp32_scores, int8_scores = (json.loads((tmp_path / n / "scores.json").read_text()) for n in NAMES)
    assert int8_scores["int8"] is True and "int8" not in fp32_scores
    assert abs(int8_scores["bleu"] - fp32_scores["bleu"]) < 5


@pytest.mark.parametrize("command", ["translate", "evaluate", "serve"])
def test_int8_with_cuda_is_a_one_line_error(toy_model_dir, toy_data_dir, command, capsys, monkeypatch):
    """Said on a machine with a GPU too (here one pretends to have one, as --device checks)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    extra = [str(toy_data_dir)] if command == "evaluate" else []
    assert main([command, str(toy_model_dir), *extra, "--int8", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    message = "int8 inference (--int8) runs on the CPU only, not on cuda: use --device cpu"
    assert err == f"aiayn {command}: error: {message}\n"


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_weights_that_are_not_finite_are_a_one_line_error_naming_the_model(value):
    model = random_model(0)
    with torch.no_grad():
        model.decoder.layers[0].ffn.linear1.weight[0, 0] = value
    message = r"^M: its weight decoder.layers.0.ffn.linear1.weight is not finite \(NaN or infinity\)"
    with pytest.raises(AiaynError, match=message):
        quantize_int8(model, name="M")


def test_a_model_or_draft_of_nan_weights_is_refused_at_load(toy_model_dir, tmp_path, capsys):
    """fp32 says "scores are not finite" per text; int8 (and a draft on the CPU, always int8) once, at
    load: translate, serve --int8 and serve --draft end there in one line."""
    import shutil

    from safetensors.torch import load_file, save_file

    nan = tmp_path / "nan"
    shutil.copytree(toy_model_dir, nan)
    weights = load_file(nan / "model.safetensors")
    weights["decoder.layers.0.ffn.linear1.weight"][0, 0] = float("nan")
    save_file(weights, nan / "model.safetensors")
    (tmp_path / "in.txt").write_text("el gato\n")
    given = ["-i", str(tmp_path / "in.txt")]
    for command, what in (
        (["translate", str(nan), "--int8", *given], f"{nan}:"),
        (["serve", str(nan), "--int8", "--port", "0"], f"{nan}:"),
        (["translate", str(toy_model_dir), "--draft", str(nan), *given], f"draft model {nan}:"),
        (["serve", str(toy_model_dir), "--draft", str(nan), "--port", "0"], f"draft model {nan}:"),
    ):  # fmt: skip
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"error: {what} its weight decoder.layers.0" in err
