"""`aiayn doctor`'s human table: one line an idea, wrapped under LINE_WIDTH, GPUs and the int8 path."""

from aiayn.apps.doctor import probes, table
from aiayn.cli import main


def test_human_report_has_one_line_per_idea(capsys, broken_module):
    assert main(["doctor", "--no-measure"]) == 0
    lines = capsys.readouterr().out.splitlines()
    labels = [line.split()[0] for line in lines if line[:1].strip()]
    labels_wanted = ("versions", "cpu", "threads", "malloc", "matmul", "kernels", "int8", "decoding", "gpus")
    for label in labels_wanted + ("optional",):
        assert label in labels
    text = "\n".join(lines)
    assert "aiayn_no_such_module missing (No module named" in text
    assert "aiayn_broken_module broken (RuntimeError: boom at import time)" in text
    assert "not measured" in text
    assert len(lines) <= 40
    first = next(i for i, line in enumerate(lines) if line.startswith("kernels"))
    wrapped = lines[first:]  # kernels, int8, gpus, optional: wrapped to fit
    assert max(map(len, wrapped)) <= table.LINE_WIDTH


def test_human_report_formats_gpus_and_int8_path():
    rep = probes.report(measure=False) | {
        "gpus": [{"index": 0, "name": "NVIDIA H100", "memory_gib": 79.1, "capability": "9.0", "bf16": True}],
        "cuda": "12.8",
        "matmul": {"mkl": 64.1, "onednn": 66.0},
        "int8": {
            "name": "no-vnni",
            "activation_bits": 8,
            "weight_bits": 7,
            "why": "no VNNI",
            "engine": "x86",
        },
    }
    text = table.format_report(rep)
    assert "0: NVIDIA H100 79.1 GiB sm 9.0 bf16, cuda 12.8" in text
    assert "mkl 64.1 GFLOP/s, onednn 66.0 GFLOP/s" in text or "blas 64.1 GFLOP/s" in text
    assert "no-vnni: 8-bit inputs x 7-bit weights, engine x86 (no VNNI)" in text
