"""The native panel product (aiayn/runtime/native_panels.h) for a few rows: y = x W^T + b (and
max(0, .)) equal to a float64 re-computation, and each row's bits the same whatever the number of
rows, how they are grouped and how many threads compute them (what speculative decoding's exactness
rests on). Skipped only where no C++ compiler is installed or AIAYN_NATIVE=0.
"""

import math
import os

import pytest
import torch
import torch.nn.functional as F

from aiayn.runtime import native_build
from aiayn.runtime.linear import ROW_PROBES, PackedLinear, panels_available, row_invariant

pytestmark = pytest.mark.skipif(
    native_build._compiler() is None or os.environ.get(native_build.ENV, "").strip() == "0",
    reason="no C++ compiler, or AIAYN_NATIVE=0",
)


def _product(x, weight, bias=None, relu=False):
    assert native_build.load(), native_build.reason()
    panels = torch.ops.aiayn.pack_panels(weight)
    return torch.ops.aiayn.panel_linear(x, panels, weight.size(0), bias, relu)


@pytest.mark.parametrize("out", [1, 16, 37, 64, 100, 1000])
@pytest.mark.parametrize("width", [1, 5, 64, 256])
@pytest.mark.parametrize("rows", [0, 1, 2, 3, 5, 6, 7, 13])
def test_equals_float64_products(out, width, rows):
    g = torch.Generator().manual_seed(out * 1000 + width * 10 + rows)
    x, w, b = (
        torch.randn(rows, width, generator=g),
        torch.randn(out, width, generator=g),
        torch.randn(out, generator=g),
    )
    expected = x.double() @ w.double().T + b.double()  # (rows, out)
    got = _product(x, w, b)
    assert got.shape == (rows, out) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5 * math.sqrt(width))
    torch.testing.assert_close(
        _product(x, w).double(), expected - b.double(), rtol=1e-5, atol=1e-5 * math.sqrt(width)
    )
    assert torch.equal(_product(x, w, b, relu=True), got.clamp_min(0))


@pytest.mark.parametrize("out", [37, 256, 8000])
def test_a_rows_bits_do_not_depend_on_the_row_count_or_threads(out):
    g = torch.Generator().manual_seed(out)
    x, w, b = (
        torch.randn(20, 256, generator=g),
        torch.randn(out, 256, generator=g),
        torch.randn(out, generator=g),
    )
    single = torch.cat([_product(x[i : i + 1], w, b) for i in range(20)])  # one row at a time
    threads = torch.get_num_threads()
    try:
        for n in (2, 5, 6, 7, 12, 20):
            assert torch.equal(_product(x[:n], w, b), single[:n]), n
        torch.set_num_threads(1)
        assert torch.equal(_product(x, w, b), single)
    finally:
        torch.set_num_threads(threads)


def test_relu_keeps_nan_and_bad_shapes_are_one_line_errors():
    w = torch.eye(16)
    x, b = torch.tensor([[-1.0, 0.0, 2.0] + [0.0] * 13]), torch.zeros(16)
    b[1] = float("nan")
    y = _product(x, w, b, relu=True)[0]
    assert y[0] == 0 and math.isnan(y[1]) and y[2] == 2
    panels = torch.ops.aiayn.pack_panels(w)
    with pytest.raises(RuntimeError, match="a panel product of width 8 for panels of width 16"):
        torch.ops.aiayn.panel_linear(torch.randn(2, 8), panels, 16, None, False)
    with pytest.raises(RuntimeError, match="a bias of 3 for 16 outputs"):
        torch.ops.aiayn.panel_linear(torch.randn(2, 16), panels, 16, torch.zeros(3), False)
    with pytest.raises(RuntimeError, match="pack_panels takes a 2-d float32 CPU weight"):
        torch.ops.aiayn.pack_panels(w.double())
    with pytest.raises(RuntimeError, match="contiguous panels"):
        torch.ops.aiayn.panel_linear(torch.randn(2, 16), panels.transpose(1, 2), 16, None, False)


def test_packed_linear_on_panels_and_row_invariant_layers():
    assert native_build.load(), native_build.reason()
    g = torch.Generator().manual_seed(0)
    w, b = torch.randn(300, 64, generator=g), torch.randn(300, generator=g)
    layer = PackedLinear(w, b, ("mkl", "packed", "mkl", "packed"))
    assert layer.panels is None
    assert row_invariant(layer) == 1
    if not panels_available():  # an x86 CPU without FMA: oneDNN's packed weight, also row-invariant
        assert layer.kernels == ("packed",) * len(ROW_PROBES) and layer.panels is None
        return
    assert layer.kernels == ("panels",) * len(ROW_PROBES) and layer.packed is None
    assert layer.panels is not None
    x = torch.randn(3, 5, 64, generator=g)
    torch.testing.assert_close(layer(x), F.linear(x, w, b), rtol=1e-5, atol=1e-4)
    assert torch.equal(layer(x)[1, 2], layer(x[1, 2][None])[0])
