"""Mixed precision (aiayn.train.precision): what `auto` resolves to, fp16 only on GPUs (with a
gradient scaler), and autocast to the chosen type."""

import pytest
import torch

from aiayn.errors import AiaynError
from aiayn.train.precision import resolve

CPU = torch.device("cpu")


def test_auto_on_the_cpu_is_fp32_without_autocast():
    p = resolve("auto", CPU)
    assert (p.name, p.scaler) == ("fp32", None)
    with p.autocast():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32


def test_bf16_on_the_cpu_autocasts_matrix_products():
    p = resolve("bf16", CPU)
    assert p.scaler is None
    with p.autocast():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16


def test_fp16_needs_a_gpu():
    with pytest.raises(AiaynError, match=r"^precision=fp16 needs a GPU \(device is cpu\); use fp32 or bf16$"):
        resolve("fp16", CPU)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_auto_on_a_gpu_is_bf16_or_fp16_with_a_scaler():
    p = resolve("auto", torch.device("cuda"))
    assert p.name == ("bf16" if torch.cuda.is_bf16_supported() else "fp16")
    assert (p.scaler is not None) == (p.name == "fp16")
