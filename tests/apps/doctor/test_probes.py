"""`aiayn doctor`'s probes: the report's keys and types, the matmul timing, optional modules that are
missing or broken, and the /proc/cpuinfo flag parser."""

import json

from aiayn.apps.doctor import probes
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
    assert set(threads["env"]) == set(probes.THREAD_ENV)
    assert all(v is None or isinstance(v, str) for v in threads["env"].values())
    assert rep["matmul"] is None
    assert isinstance(rep["kernels"]["enabled"], bool) and "reason" in rep["kernels"]
    assert rep["int8"]["name"] in ("vnni", "no-vnni") and isinstance(rep["int8"]["engine"], str)
    assert isinstance(rep["native"]["available"], bool) and rep["native"]["reason"]
    assert isinstance(rep["gpus"], list) and isinstance(rep["mps"], bool)
    assert rep["cuda"] is None or isinstance(rep["cuda"], str)
    assert set(rep["optional"]) == set(probes.OPTIONAL)
    for dep in rep["optional"].values():
        assert isinstance(dep["ok"], bool)
        assert (dep["error"] is None) == dep["ok"]
        assert dep["version"] is None or isinstance(dep["version"], str)
    assert isinstance(rep["allocator"]["name"], str) and rep["allocator"]["name"]


def test_allocator_found_in_the_process_maps():
    libc_only = "7f00-7f10 r-xp 00000000 08:01 42 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
    tcmalloc = "/usr/lib/libtcmalloc_minimal.so.4.5.10"
    preloaded = libc_only + f"7f20-7f30 r-xp 00000000 08:01 43 {tcmalloc}\n"
    assert probes.allocator(preloaded) == {"name": "tcmalloc", "library": tcmalloc}
    jemalloc = libc_only + "7f20-7f30 r-xp 00000000 08:01 44 /usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n"
    assert probes.allocator(jemalloc)["name"] == "jemalloc"
    plain = probes.allocator(libc_only + "7f40-7f50 rw-p 00000000 00:00 0\n")  # an anonymous mapping too
    assert plain["library"] is None and plain["name"] not in REPLACEMENTS


def test_matmul_figures_are_positive_floats():
    result = probes.matmul_gflops()
    assert isinstance(result["mkl"], float) and result["mkl"] > 0
    assert result["onednn"] is None or (isinstance(result["onednn"], float) and result["onednn"] > 0)


def test_missing_and_broken_optional_modules_are_reported_not_raised(broken_module):
    deps = probes.report(measure=False)["optional"]
    assert deps["sentencepiece"]["ok"] and deps["sentencepiece"]["version"]
    missing, broken = deps["aiayn_no_such_module"], deps["aiayn_broken_module"]
    assert missing == {"ok": False, "version": None, "error": missing["error"]}
    assert "aiayn_no_such_module" in missing["error"]
    assert broken["ok"] is False and broken["version"] is None
    assert broken["error"] == "RuntimeError: boom at import time"


def test_cpu_flags_from_cpuinfo_text():
    assert probes.cpu_flags(AVX2_ONLY, "x86_64") == {
        "avx2": True,
        "fma": True,
        "avx512f": False,
        "avx512_vnni": False,
        "avx_vnni": False,
        "amx": False,
        "neon": False,
    }
    assert probes.cpu_flags(AVX512_VNNI, "x86_64") == dict.fromkeys(
        ("avx2", "fma", "avx512f", "avx512_vnni", "amx"), True
    ) | {"avx_vnni": False, "neon": False}
    arm = probes.cpu_flags(AARCH64, "aarch64")
    assert arm["neon"] and not any(
        arm[k] for k in ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "amx")
    )
    assert probes.cpu_flags(AARCH64, "")["neon"]  # from the asimd flag alone
    assert probes.cpu_flags("", "arm64")["neon"]  # from the machine alone (macOS)
    assert not any(probes.cpu_flags("", "x86_64").values())
    alder = probes.cpu_flags("flags : avx_vnni avx2", "x86_64")
    assert alder["avx_vnni"] and not alder["avx512_vnni"]
