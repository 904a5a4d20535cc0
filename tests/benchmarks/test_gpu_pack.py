"""benchmarks/gpu_pack.py: a model directory through int8 parts and back (what a lent GPU returns)."""

import importlib.util
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_pack.py"


@pytest.fixture(scope="module")
def gpu_pack():
    spec = importlib.util.spec_from_file_location("gpu_pack", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def model(tmp_path):
    torch.manual_seed(0)
    d = tmp_path / "model"
    d.mkdir()
    weights = {
        "embed.weight": torch.randn(300, 64) * 0.05,
        "layer.weight": torch.randn(64, 64) * torch.logspace(-3, 1, 64)[:, None],  # rows of every size
        "zero.weight": torch.zeros(8, 64),
        "layer.bias": torch.randn(64),
    }
    save_file(weights, str(d / "model.safetensors"))
    (d / "config.json").write_text('{"model": {}}\n')
    (d / "spm.model").write_bytes(bytes(range(256)) * 3)
    return d, weights


def test_round_then_pack_comes_back_bit_for_bit(gpu_pack, model, tmp_path):
    d, weights = model
    assert gpu_pack.round_model(d) == 3
    rounded = load_file(str(d / "model.safetensors"))
    assert torch.equal(rounded["layer.bias"], weights["layer.bias"])  # vectors untouched
    scale = weights["layer.weight"].abs().amax(1, keepdim=True) / 127
    assert ((rounded["layer.weight"] - weights["layer.weight"]).abs() <= scale / 2 * 1.0001).all()
    parts = gpu_pack.pack(d, tmp_path / "out" / "m", part_mib=0.01)
    assert len(parts) > 1 and all(p.stat().st_size < 0.01 * 2**20 + 4096 for p in parts[1:])
    back = gpu_pack.unpack(tmp_path / "out" / "m", tmp_path / "back")
    again = load_file(str(back / "model.safetensors"))
    assert again.keys() == rounded.keys()
    for name, w in rounded.items():
        assert torch.equal(again[name], w), name
    for name in ("config.json", "spm.model"):
        assert (back / name).read_bytes() == (d / name).read_bytes()


def test_int8_rows_take_a_quarter_of_the_bytes(gpu_pack, model, tmp_path):
    d, _ = model
    parts = gpu_pack.pack(d, tmp_path / "m", part_mib=15)
    assert len(parts) == 1
    tensors = load_file(str(parts[0]))
    assert tensors["embed.weight"].dtype == torch.int8 and tensors["layer.bias"].dtype == torch.float32
    assert torch.equal(tensors["zero.weight"], torch.zeros(8, 64, dtype=torch.int8))
