"""aiayn's decoding time in two checkouts, alternately: did a change of the search move its speed?

Each round runs each tree's `benchmarks/decode.py` models and search (its `aiayn_system`) in a process
of its own, importing that tree's `src/`, and prints the best of `--repeats` times per beam size. The
trees take turns, so a machine whose speed drifts (shared virtual machines do) treats both alike.

    python benchmarks/decode_ab.py OLD_TREE NEW_TREE [--size tiny|base] [--sentences 32] \
        [--rounds 2] [--repeats 5]

`--sentences 1` times one sentence a call (interactive latency: a step of 1 or 4 rows).

(`git worktree add /tmp/old REV` makes an old tree.) Run it alone: two torch jobs at once on two
cores time nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = """
import argparse, importlib.util, json, sys, time
tree, size, repeats, sentences = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, tree + "/benchmarks")
spec = importlib.util.spec_from_file_location("tree_decode", tree + "/benchmarks/decode.py")
decode = importlib.util.module_from_spec(spec)
spec.loader.exec_module(decode)
_, model = decode.build_models(size, "cpu")
src = decode.sources(sentences, 30, decode.SIZES[size]["vocab_size"], "cpu")
args = argparse.Namespace(device="cpu", native=True, new_tokens=50, alpha=1.0)
translate = decode.aiayn_system(model, src, args, int8=False)
best = {}
for beam in (1, 4):
    translate(beam)
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        translate(beam)
        times.append(time.perf_counter() - began)
    best[beam] = min(times) * 1000
print(json.dumps(best))
"""


def run(tree: str, size: str, repeats: int, sentences: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.path.join(tree, "src")}
    argv = [sys.executable, "-c", CHILD, tree, size, str(repeats), str(sentences)]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--size", choices=("tiny", "base"), default="tiny")
    p.add_argument("--sentences", type=int, default=32, help="sentences per call (one batch)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    for round_ in range(1, args.rounds + 1):
        for name, tree in (("old", args.old), ("new", args.new)):
            ms = run(tree, args.size, args.repeats, args.sentences)
            print(f"round {round_} {name}: greedy {ms['1']:.1f} ms, beam 4 {ms['4']:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
