"""The memory allocators `aiayn.runtime.malloc` chooses between, on PyTorch's pattern of allocation: each
round allocates a 64 MB tensor and a 4-32 MB one and frees them, while a few small tensors stay
alive (as a training step's parameters, gradients and logs do). Reports resident memory after
`--rounds` rounds, page faults and seconds, for glibc's malloc, glibc told to keep freed memory
(`mallopt`: no mmap, no trim), and tcmalloc (when installed), each in its own process.

    python benchmarks/allocator.py [--rounds 200]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import ctypes, json, random, resource, sys, time
import torch
if sys.argv[1] == "mallopt":
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(-4, 0)  # M_MMAP_MAX: never mmap
    libc.mallopt(-1, 1 << 40)  # M_TRIM_THRESHOLD: never give memory back
random.seed(0)
start, keep = time.perf_counter(), []
for _ in range(int(sys.argv[2])):
    big = torch.ones(16 << 20)  # 64 MB
    medium = torch.ones(random.randint(1, 8) << 20)  # 4-32 MB
    del big, medium
    keep.append(torch.ones(1000))
rss = int(open("/proc/self/statm").read().split()[1]) * 4096
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"rss_mb": rss >> 20, "faults": usage.ru_minflt, "s": time.perf_counter() - start}))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=200)
    args = p.parse_args()
    from aiayn.runtime import malloc

    tcmalloc = malloc.library()
    runs = [("glibc", "plain", ""), ("glibc, mallopt keep", "mallopt", "")]
    runs += [("tcmalloc", "plain", tcmalloc)] if tcmalloc else []
    print(f"{args.rounds} rounds of 64 MB + 4-32 MB allocated and freed")
    print(f"{'allocator':<22}{'resident MB':>12}{'page faults':>13}{'seconds':>9}")
    for label, mode, preload in runs:
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        env |= {"LD_PRELOAD": preload} if preload else {}
        command = [sys.executable, "-c", CHILD, mode, str(args.rounds)]
        out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
        r = json.loads(out)
        print(f"{label:<22}{r['rss_mb']:>12,}{r['faults']:>13,}{r['s']:>9.1f}")
    if not tcmalloc:
        print("tcmalloc is not installed (Debian: libtcmalloc-minimal4): skipped")


if __name__ == "__main__":
    main()
