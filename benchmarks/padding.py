"""The fraction of padding in token-bucketed batches of the Bible corpus (paper 5.1).

Padding costs training time in every model alike: a batch of n pairs is computed at
n x (longest source) on the encoder side and n x (longest target) on the decoder side. This
script builds one epoch of `aiayn.data.batching.TokenBatchSampler` batches over a prepared data
directory (bible-es-en unless `--data` names another) and reports, for each `max_tokens`,
padded source and target positions as a fraction of all positions, and how full the batches are
(n x max(width) / max_tokens). It cross-checks its arithmetic against `collate` on a few batches.

    python benchmarks/padding.py [--data DATA_DIR] [--max-tokens 4096,4000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from aiayn.config import RunConfig
from aiayn.configs import QUICKSTART
from aiayn.data.batching import TokenBatchSampler, collate
from aiayn.data.dataset import TokenDataset

TARGET = 0.05  # under 5% padding
DEFAULT_DATA = Path(tempfile.gettempdir()) / "aiayn-bench" / "bible-es-en"


def padding_stats(src_len: np.ndarray, tgt_len: np.ndarray, batches: list[list[int]], max_tokens: int):
    """Padded fraction of source and target positions over `batches`, and the mean batch fill."""
    real = {"src": 0, "tgt": 0}
    slots = {"src": 0, "tgt": 0}
    fill = []
    for batch in batches:
        idx = np.asarray(batch)
        for side, lengths in (("src", src_len[idx]), ("tgt", tgt_len[idx])):
            real[side] += int(lengths.sum())
            slots[side] += len(idx) * int(lengths.max())
        fill.append(len(idx) * int(max(src_len[idx].max(), tgt_len[idx].max())) / max_tokens)
    return {
        "max_tokens": max_tokens,
        "batches": len(batches),
        "src_padding": 1 - real["src"] / slots["src"],
        "tgt_padding": 1 - real["tgt"] / slots["tgt"],
        "fill": float(np.mean(fill)),
        "sentences_per_batch": float(np.mean([len(b) for b in batches])),
    }


def cross_check(dataset: TokenDataset, batches: list[list[int]], n: int = 20) -> None:
    """The collated tensors have exactly the widths and pad counts the lengths predict."""
    for batch in batches[:n]:
        b = collate(dataset, batch)
        assert b.src.shape[1] == dataset.src_lengths[batch].max()
        assert b.tgt_out.shape[1] == dataset.tgt_lengths[batch].max()
        assert int(b.src.ne(0).sum()) == b.n_src_tokens == dataset.src_lengths[batch].sum()


def ensure_data(data: Path | None) -> Path:
    if data is not None:
        return data
    from aiayn.data.datadir import DataDir

    if not DataDir(DEFAULT_DATA).prepared:
        from aiayn.data.prepare import prepare

        print(f"preparing bible-es-en into {DEFAULT_DATA} (once)", flush=True)
        prepare(DEFAULT_DATA, "bible-es-en", progress=False)
    return DEFAULT_DATA


def main(argv: list[str] | None = None) -> int:
    recipes = [RunConfig.named(name).train.max_tokens for name in ("base", QUICKSTART, "tiny")]
    default = sorted(set(recipes))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, help=f"a prepared data directory (default: {DEFAULT_DATA})")
    parser.add_argument("--split", default="train")
    parser.add_argument("--max-tokens", default=",".join(map(str, default)))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="write the result rows here (for run_all.py)")
    args = parser.parse_args(argv)
    data = ensure_data(args.data)
    dataset = TokenDataset(data, args.split)
    print(f"padding in token-bucketed batches: {data} ({args.split}, {len(dataset):,} pairs, epoch 0)")
    print(f"{'max_tokens':>10}{'batches':>9}{'pairs/batch':>13}{'src pad':>9}{'tgt pad':>9}{'fill':>7}")
    rows, results = [], []
    for max_tokens in (int(m) for m in args.max_tokens.split(",")):
        sampler = TokenBatchSampler(dataset.src_lengths, dataset.tgt_lengths, max_tokens, seed=args.seed)
        batches = sampler.batches(0)
        cross_check(dataset, batches)
        s = padding_stats(dataset.src_lengths, dataset.tgt_lengths, batches, max_tokens)
        results.append(s)
        print(
            f"{max_tokens:>10}{s['batches']:>9}{s['sentences_per_batch']:>13.1f}"
            f"{100 * s['src_padding']:>8.2f}%{100 * s['tgt_padding']:>8.2f}%{100 * s['fill']:>6.1f}%"
        )
        for side in ("src", "tgt"):
            rows.append(
                dict(
                    measure=f"padding {side}, max_tokens {max_tokens}, %", aiayn=100 * s[f"{side}_padding"],
                    peer="target", peer_value=100 * TARGET, ratio=s[f"{side}_padding"] / TARGET,
                    target=1.0, higher_is_better=False,
                )
            )  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
