"""The students table: a distilled student beside its teacher, and both beside CTranslate2, on the
test books of the quickstart's data (938 verses of the Bible).

Rows (one process each, built and warmed up on the first sentences, then timed translating every
test sentence once, never two at once; `--rounds` rounds of every system in turn, each row's fastest
round kept, so that a minute in which the shared machine ran slow does not decide a ratio): aiayn
running the teacher (fp32, int8), the student (fp32, int8, each without and with its shortlist),
greedy search with the teacher alone and with the student as its speculative draft; CTranslate2
running the teacher (fp32, int8) and the student (fp32, int8, each without and with the same
shortlist as its vmap), exported with `export-hf`.
Beam 4 (alpha 0.6) unless the row says greedy; batches of `--batch-tokens` source tokens in both
systems. Tokens/s counts output pieces (the teacher's SentencePiece model, the same for every row),
BLEU and chrF are sacreBLEU's against the references.

By default it reads the quickstart's run (`make demo`: runs/quickstart/model, runs/quickstart/data)
and the student `aiayn distill runs/quickstart/model runs/quickstart/data --out runs/student`
writes (runs/student/model, with `aiayn shortlist runs/student/model runs/student/data`), and exits
quietly when either is not there.

    python benchmarks/students.py [--teacher DIR] [--student DIR] [--data DIR] [--limit N]
        [--threads 2] [--rounds 2] [--batch-tokens 4096] [--json F]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from aiayn.config import DecodeConfig
from aiayn.data.datadir import DataDir
from aiayn.decode.texts import translate_texts
from aiayn.evaluate.bleu import score_texts

WARM_UP = 16  # sentences translated before timing
TARGET_OVER_CT2_TEACHER = 3.0  # the student, int8 and shortlisted, vs CTranslate2 fp32 running the teacher
MAX_BLEU_DROP = 1.0  # of that student below the teacher (aiayn fp32, beam 4)


@dataclass(frozen=True)
class System:
    name: str
    engine: str  # "aiayn" or "ct2"
    model: str  # "teacher" or "student"
    int8: bool = False
    shortlist: bool = False  # aiayn's shortlist, or the same one as CTranslate2's vmap
    beam: int = 4
    draft: bool = False  # greedy search with the student as the teacher's speculative draft


SYSTEMS = [
    System("aiayn teacher", "aiayn", "teacher"),
    System("aiayn teacher int8", "aiayn", "teacher", int8=True),
    System("aiayn student", "aiayn", "student"),
    System("aiayn student + shortlist", "aiayn", "student", shortlist=True),
    System("aiayn student int8", "aiayn", "student", int8=True),
    System("aiayn student int8 + shortlist", "aiayn", "student", int8=True, shortlist=True),
    System("CTranslate2 teacher", "ct2", "teacher"),
    System("CTranslate2 teacher int8", "ct2", "teacher", int8=True),
    System("CTranslate2 student", "ct2", "student"),
    System("CTranslate2 student + vmap", "ct2", "student", shortlist=True),
    System("CTranslate2 student int8", "ct2", "student", int8=True),
    System("CTranslate2 student int8 + vmap", "ct2", "student", int8=True, shortlist=True),
    System("aiayn teacher greedy", "aiayn", "teacher", beam=1),
    System("aiayn speculative greedy", "aiayn", "teacher", beam=1, draft=True),
    System("CTranslate2 teacher greedy", "ct2", "teacher", beam=1),
]
# (measure, aiayn row, peer row, target): the rows run_all.py's table shows (tokens/s, higher is better)
VERSUS = [
    ("student int8+shortlist vs CT2 teacher", "aiayn student int8 + shortlist", "CTranslate2 teacher", 3.0),
    ("student fp32 vs CT2 student", "aiayn student", "CTranslate2 student", 1.0),
    ("student fp32+shortlist vs CT2 +vmap", "aiayn student + shortlist", "CTranslate2 student + vmap", 1.0),
    ("student int8 vs CT2 student int8", "aiayn student int8", "CTranslate2 student int8", 1.0),
    ("student int8+shortl. vs CT2 int8+vmap", "aiayn student int8 + shortlist",
     "CTranslate2 student int8 + vmap", 1.0),
]  # fmt: skip


def aiayn_system(system: System, args: argparse.Namespace):
    """translate(texts) -> texts for an aiayn row."""
    from aiayn.decode.translator import Translator

    model = args.teacher if system.model == "teacher" else args.student
    draft = args.student if system.draft else None
    translator = Translator.load(model, device="cpu", int8=system.int8, draft=draft)
    options = DecodeConfig(beam_size=system.beam, batch_tokens=args.batch_tokens, shortlist=system.shortlist)
    return lambda texts: translate_texts(translator, texts, options)


def ct2_system(system: System, args: argparse.Namespace, work: Path):
    """translate(texts) -> texts for a CTranslate2 row: the model exported with export-hf and
    converted with CTranslate2's converter (its shortlist as the vmap)."""
    import ctranslate2
    import transformers
    from ctranslate2.converters import TransformersConverter

    from aiayn.interop.hf_export import export_hf

    model = args.teacher if system.model == "teacher" else args.student
    hf = export_hf(model, work / "hf", warn=lambda message: None)
    vmap = hf / "vmap.txt"
    TransformersConverter(str(hf)).convert(str(work / "ct2"), vmap=str(vmap) if vmap.is_file() else None)
    tokenizer = transformers.MarianTokenizer.from_pretrained(hf)
    compute = "int8" if system.int8 else "float32"
    ct2 = ctranslate2.Translator(str(work / "ct2"), compute_type=compute, intra_threads=args.threads)

    def translate(texts: list[str]) -> list[str]:
        pieces = [tokenizer.convert_ids_to_tokens(ids) for ids in tokenizer(texts)["input_ids"]]
        results = ct2.translate_batch(
            pieces, beam_size=system.beam, use_vmap=system.shortlist, max_batch_size=args.batch_tokens,
            batch_type="tokens", length_penalty=0.6,
        )  # fmt: skip
        return [tokenizer.convert_tokens_to_string(r.hypotheses[0]) for r in results]

    return translate


def worker(conn, system: System, args: argparse.Namespace, sources: list[str]) -> None:
    """Build one system, warm it up, translate `sources` once; send (seconds, outputs)."""
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        if system.engine == "aiayn":
            translate = aiayn_system(system, args)
        else:
            translate = ct2_system(system, args, Path(tmp))
        translate(sources[:WARM_UP])
        start = time.perf_counter()
        out = translate(sources)
        conn.send((time.perf_counter() - start, out))


def run_system(system: System, args: argparse.Namespace, sources: list[str]) -> tuple[float, list[str]]:
    parent, child = mp.get_context("spawn").Pipe()
    proc = mp.get_context("spawn").Process(target=worker, args=(child, system, args, sources))
    proc.start()
    child.close()  # if the worker dies, recv() raises EOFError instead of hanging
    try:
        return parent.recv()
    finally:
        proc.join()


def measure(args: argparse.Namespace, sources: list[str], refs: list[str]) -> dict[str, dict]:
    """{row name: {tokens_per_s, bleu, chrf, seconds}} for every system that can run here."""
    from aiayn.decode.translator import Translator

    tokenizer = Translator.load(args.teacher, device="cpu").tokenizer
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        print("CTranslate2 is not installed (pip install -e '.[bench]'): its rows are skipped")
        args.no_ct2 = True
    results: dict[str, dict] = {}
    for round_ in range(1, args.rounds + 1):
        for system in SYSTEMS:
            if system.engine == "ct2" and args.no_ct2:
                continue
            seconds, out = run_system(system, args, sources)
            tokens = sum(len(ids) for ids in tokenizer.encode_target(out))
            print(f"round {round_}: {system.name:34s} {tokens / seconds:8,.0f} tok/s", flush=True)
            if system.name in results and results[system.name]["seconds"] <= seconds:
                continue  # the fastest round is kept: the one the shared machine disturbed least
            scores = score_texts(out, refs)
            results[system.name] = dict(
                tokens_per_s=tokens / seconds, bleu=scores["bleu"], chrf=scores["chrf"], seconds=seconds
            )
    return results


def report(results: dict[str, dict], args: argparse.Namespace, n: int) -> list[dict]:
    """Print the table; return run_all.py's rows."""
    base = results.get("CTranslate2 teacher") or results["aiayn teacher"]
    base_name = "CTranslate2 teacher" if "CTranslate2 teacher" in results else "aiayn teacher"
    print(f"\n{n} test sentences, {args.threads} threads, {args.batch_tokens} source tokens a batch")
    print(f"| system | tokens/s | vs {base_name} | BLEU | chrF |\n|---|---:|---:|---:|---:|")
    for name, r in results.items():
        ratio = r["tokens_per_s"] / base["tokens_per_s"]
        print(f"| {name} | {r['tokens_per_s']:,.0f} | {ratio:.2f}x | {r['bleu']:.2f} | {r['chrf']:.2f} |")
    drop = results["aiayn teacher"]["bleu"] - results["aiayn student int8 + shortlist"]["bleu"]
    print(f"student int8 + shortlist: {drop:.2f} BLEU below the teacher (target <= {MAX_BLEU_DROP})")
    rows = [
        dict(
            measure=measure_name, aiayn=results[ours]["tokens_per_s"],
            peer=peer.replace("CTranslate2", "CT2"), peer_value=results[peer]["tokens_per_s"],
            ratio=results[ours]["tokens_per_s"] / results[peer]["tokens_per_s"], target=target,
            higher_is_better=True,
        )
        for measure_name, ours, peer, target in VERSUS
        if ours in results and peer in results
    ]  # fmt: skip
    rows.append(
        dict(
            measure="student BLEU drop vs teacher", aiayn=drop, peer="target", peer_value=MAX_BLEU_DROP,
            ratio=drop / MAX_BLEU_DROP, target=1.0, higher_is_better=False,
        )
    )  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--teacher", type=Path, default=Path("runs/quickstart/model"))
    p.add_argument("--student", type=Path, default=Path("runs/student/model"))
    p.add_argument("--data", type=Path, default=Path("runs/quickstart/data"), help="its test split is read")
    p.add_argument("--limit", type=int, help="only the first N test sentences")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2, help="every system in turn; each one's fastest is kept")
    p.add_argument("--batch-tokens", type=int, default=4096, help="source tokens per batch (every system)")
    p.add_argument("--no-ct2", action="store_true", help="aiayn's rows only")
    p.add_argument("--json", type=Path, help="write the rows here (for run_all.py)")
    args = p.parse_args(argv)
    for model in (args.teacher, args.student):
        if not (model / "config.json").is_file():
            print(f"no model at {model} (`make demo`, then `aiayn distill`; see the docstring): skipped")
            return 0
    torch.set_num_threads(args.threads)
    data = DataDir(args.data)
    sources = data.raw("test", "src").read_text(encoding="utf-8").splitlines()[: args.limit]
    refs = data.raw("test", "tgt").read_text(encoding="utf-8").splitlines()[: args.limit]
    results = measure(args, sources, refs)
    rows = report(results, args, len(sources))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
