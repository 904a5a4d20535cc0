"""The outputs of `aiayn variations`: Table 3 in the paper's layout as Markdown and CSV, and one
plot of dev BLEU against parameters beside the paper's.

The Markdown follows the paper's convention that a blank cell is the base row's value (the
settings columns only; every measured figure is printed), with the paper's own figures in the
last three columns. The CSV has every value, one line per row.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

COLUMNS = (
    "row", "N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls", "train_steps",
    "ppl_dev", "bleu_dev", "params_M", "paper_ppl_dev", "paper_bleu_dev", "paper_params_M",
)  # fmt: skip
SETTINGS = ("N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls", "train_steps")
HEADER = (
    "", "N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls", "train steps", "PPL (dev)",
    "BLEU (dev)", "params ×10^6", "paper PPL", "paper BLEU", "paper params",
)  # fmt: skip


def _write(path: Path, text: str) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def to_csv(results: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(results)
    return out.getvalue()


def _cells(result: dict[str, Any], base: dict[str, Any] | None) -> list[str]:
    """One Markdown row: settings blank where they equal base's (the paper's convention)."""
    same = base is not None and result is not base
    cells = [f"`{result['row']}`"]
    cells += ["" if same and result[k] == base[k] else str(result[k]) for k in SETTINGS]
    if result.get("positions") == "learned":  # row (E): "positional embedding instead of sinusoids"
        cells[1] = " ".join(filter(None, [cells[1], "learned positions"]))
    if result.get("attention_window"):  # group W: restricted self-attention (Table 1)
        cells[1] = " ".join(filter(None, [cells[1], f"attention window r={result['attention_window']}"]))
    ppl = f"{result['ppl_dev']:.2f}" if result["ppl_dev"] is not None else "inf"
    cells += [ppl, f"{result['bleu_dev']:.2f}", f"{result['params_M']:.2f}"]
    paper = result["paper_ppl_dev"], result["paper_bleu_dev"], result["paper_params_M"]
    if paper[0] is None:  # a row the paper did not train
        return cells + ["", "", ""]
    return cells + [f"{paper[0]:.2f}", f"{paper[1]:.1f}", f"{paper[2]:g}"]


def _recipe(train: dict[str, Any]) -> str:
    """The reference's training recipe in words, so that a `--set` change shows in the caption."""
    peak = f" to a peak learning rate of {train['lr_peak']:g} (base's)" if train.get("lr_peak") else ""
    return (
        f"updates of about {train['update_tokens']:,} tokens, a {train['warmup_steps']:,}-step "
        f"warm-up{peak}, then Eq. 3's 1/sqrt(step) decay."
    )


def to_markdown(results: list[dict[str, Any]], preset: str, budget: Any) -> str:
    """Table 3's layout, with a caption that says how the figures were made."""
    base = next((r for r in results if r["row"] == "base"), None)
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(_cells(r, base)) + " |" for r in results]
    first = results[0]
    caption = (
        f"Variations of the {preset} reference (`base`), each trained for {budget} with the same data "
        f"and seed; {_recipe((base or first)['config']['train'])} Dev: {first['dev_sentences']:,} sentences; "
        "PPL per wordpiece; BLEU with beam "
        f"{first['decode']['beam_size']}, alpha {first['decode']['alpha']}, the last checkpoint (no "
        f"averaging), sacreBLEU `{first['bleu_signature']}`. A blank setting is base's. The paper's "
        "figures: Vaswani et al. 2017, Table 3 (newstest2013, base 100K steps, big 300K)."
    )
    return "\n".join([f"# Table 3 (section 6.2), {preset} scale", "", caption, "", *lines]) + "\n"


def plot_bleu_vs_params(results: list[dict[str, Any]], out: Path) -> Path:
    """Dev BLEU against parameters (x10^6): this run on the left, the paper's rows on the right."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), dpi=120)
    panels = (
        ("this run", "params_M", "bleu_dev"),
        ("the paper, Table 3", "paper_params_M", "paper_bleu_dev"),
    )
    for ax, (title, x_key, y_key) in zip(axes, panels, strict=True):
        for r in results:
            if r[y_key] is None:  # group W on the paper's side
                continue
            marker = "s" if r["row"] == "base" else "*" if r["row"] == "big" else "o"
            ax.scatter(r[x_key], r[y_key], marker=marker, s=30)
            ax.annotate(r["row"], (r[x_key], r[y_key]), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set(title=title, xlabel="parameters (×10^6)", ylabel="dev BLEU")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


OUTPUT_FILES = ("table.md", "table.csv", "bleu_vs_params.png")


def write_outputs(out: Path, results: list[dict[str, Any]], preset: str, budget: Any) -> list[Path]:
    """OUT/table.md, OUT/table.csv and OUT/bleu_vs_params.png (OUTPUT_FILES) of the rows measured so far."""
    md, csv_file, png = (out / name for name in OUTPUT_FILES)
    return [
        _write(md, to_markdown(results, preset, budget)),
        _write(csv_file, to_csv(results)),
        plot_bleu_vs_params(results, png),
    ]
