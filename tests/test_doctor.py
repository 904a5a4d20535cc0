"""`aiayn doctor`: the report's keys and types, the matmul timing, optional modules that are missing
or broken, the /proc/cpuinfo flag parser, and the human table."""

import importlib.abc
import importlib.machinery
import json
import sys

import pytest

from aiayn import doctor
from aiayn.cli import main
from aiayn.runtime.malloc import REPLACEMENTS

AVX2_ONLY = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B12
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2
"""
AVX512_VNNI = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx fma avx2 avx512f avx512bw avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8
processor\t: 1
flags\t\t: fpu sse2
"""
AARCH64 = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp
CPU implementer\t: 0x41
"""


class _BrokenFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `aiayn_broken_module`, whose import raises a RuntimeError (not an ImportError)."""

    def find_spec(self, name, path=None, target=None):
        return importlib.machinery.ModuleSpec(name, self) if name == "aiayn_broken_module" else None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        raise RuntimeError("boom at import time")


@pytest.fixture
def broken_module(monkeypatch):
    monkeypatch.setattr(sys, "meta_path", [_BrokenFinder(), *sys.meta_path])
    names = ("sentencepiece", "aiayn_no_such_module", "aiayn_broken_module")
    monkeypatch.setattr(doctor, "OPTIONAL", names)


def test_json_report_has_every_key_with_its_type(capsys):
    assert main(["doctor", "--json", "--no-measure"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert set(rep) >= {"versions", "cpu", "threads", "matmul", "kernels", "int8", "gpus", "cuda", "mps"}
    assert all(isinstance(rep["versions"][k], str) for k in ("aiayn", "torch", "python", "os", "numpy"))
    cpu = rep["cpu"]
    assert isinstance(cpu["model"], str) and isinstance(cpu["cores"], int)
    assert set(cpu["flags"]) == {"avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx", "neon"}
    assert all(isinstance(v, bool) for v in cpu["flags"].values())
    assert isinstance(cpu["torch_capability"], str)
    threads = rep["threads"]
    assert isinstance(threads["intra_op"], int) and isinstance(threads["inter_op"], int)
    assert set(threads["env"]) == set(doctor.THREAD_ENV)
    assert all(v is None or isinstance(v, str) for v in threads["env"].values())
    assert rep["matmul"] is None
    assert isinstance(rep["kernels"]["enabled"], bool) and "reason" in rep["kernels"]
    assert rep["int8"]["name"] in ("vnni", "no-vnni") and isinstance(rep["int8"]["engine"], str)
    assert isinstance(rep["native"]["available"], bool) and rep["native"]["reason"]
    assert isinstance(rep["gpus"], list) and isinstance(rep["mps"], bool)
    assert rep["cuda"] is None or isinstance(rep["cuda"], str)
    assert set(rep["optional"]) == set(doctor.OPTIONAL)
    for dep in rep["optional"].values():
        assert isinstance(dep["ok"], bool)
        assert (dep["error"] is None) == dep["ok"]
        assert dep["version"] is None or isinstance(dep["version"], str)
    assert isinstance(rep["allocator"]["name"], str) and rep["allocator"]["name"]


def test_allocator_found_in_the_process_maps():
    libc_only = "7f00-7f10 r-xp 00000000 08:01 42 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
    tcmalloc = "/usr/lib/libtcmalloc_minimal.so.4.5.10"
    preloaded = libc_only + f"7f20-7f30 r-xp 00000000 08:01 43 {tcmalloc}\n"
    assert doctor.allocator(preloaded) == {"name": "tcmalloc", "library": tcmalloc}
    jemalloc = libc_only + "7f20-7f30 r-xp 00000000 08:01 44 /usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n"
    assert doctor.allocator(jemalloc)["name"] == "jemalloc"
    plain = doctor.allocator(libc_only + "7f40-7f50 rw-p 00000000 00:00 0\n")  # an anonymous mapping too
    assert plain["library"] is None and plain["name"] not in REPLACEMENTS


def test_matmul_figures_are_positive_floats():
    result = doctor.matmul_gflops()
    assert isinstance(result["mkl"], float) and result["mkl"] > 0
    assert result["onednn"] is None or (isinstance(result["onednn"], float) and result["onednn"] > 0)


def test_missing_and_broken_optional_modules_are_reported_not_raised(broken_module):
    deps = doctor.report(measure=False)["optional"]
    assert deps["sentencepiece"]["ok"] and deps["sentencepiece"]["version"]
    missing, broken = deps["aiayn_no_such_module"], deps["aiayn_broken_module"]
    assert missing == {"ok": False, "version": None, "error": missing["error"]}
    assert "aiayn_no_such_module" in missing["error"]
    assert broken["ok"] is False and broken["version"] is None
    assert broken["error"] == "RuntimeError: boom at import time"


def test_cpu_flags_from_cpuinfo_text():
    assert doctor.cpu_flags(AVX2_ONLY, "x86_64") == {
        "avx2": True,
        "fma": True,
        "avx512f": False,
        "avx512_vnni": False,
        "avx_vnni": False,
        "amx": False,
        "neon": False,
    }
    assert doctor.cpu_flags(AVX512_VNNI, "x86_64") == dict.fromkeys(
        ("avx2", "fma", "avx512f", "avx512_vnni", "amx"), True
    ) | {"avx_vnni": False, "neon": False}
    arm = doctor.cpu_flags(AARCH64, "aarch64")
    assert arm["neon"] and not any(
        arm[k] for k in ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx")
    )
    assert doctor.cpu_flags(AARCH64, "")["neon"]  # from the asimd flag alone
    assert doctor.cpu_flags("", "arm64")["neon"]  # from the machine alone (macOS)
    assert not any(doctor.cpu_flags("", "x86_64").values())
    alder = doctor.cpu_flags("flags : avx_vnni avx2", "x86_64")
    assert alder["avx_vnni"] and not alder["avx512_vnni"]


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
    assert max(map(len, wrapped)) <= doctor.LINE_WIDTH


def test_human_report_formats_gpus_and_int8_path():
    rep = doctor.report(measure=False) | {
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
    text = doctor.format_report(rep)
    assert "0: NVIDIA H100 79.1 GiB sm 9.0 bf16, cuda 12.8" in text
    assert "mkl 64.1 GFLOP/s, onednn 66.0 GFLOP/s" in text or "blas 64.1 GFLOP/s" in text
    assert "no-vnni: 8-bit inputs x 7-bit weights, engine x86 (no VNNI)" in text
