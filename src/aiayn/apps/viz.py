"""Pictures of a model and its training, as PNG files (matplotlib, no display needed).

Training curves (`plot_training_curves`) read a run directory's metrics.jsonl. Attention heatmaps
(`plot_attention`, `save_attention_png`) draw what `Translator.attention` returns: the paper's
section 7 figures, one panel per head.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

from aiayn.errors import AiaynError
from aiayn.safe_io import output_dir

# -- training curves --------------------------------------------------------------------------------

PLOTTED_KEYS = ("step", "loss", "lr", "dev_loss", "dev_loss_shuffled", "dev_bleu")  # numbers or null


def read_metrics(path: str | Path, warn: Callable[[str], None] | None = None) -> dict[str, list[dict]]:
    """metrics.jsonl -> rows grouped by kind ("train", "dev"), in file order.

    A bad line is an error naming file:line, except a torn last line (no newline at its end: the run
    is still writing, or was killed mid-write), which is skipped after a one-line `warn` (default: to
    stderr).
    """
    path = Path(path)
    if not path.is_file():
        raise AiaynError(f"{path}: no such metrics file (has the run logged anything yet?)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise AiaynError(f"{path}: not UTF-8 text") from None
    lines = text.splitlines()
    rows: dict[str, list[dict]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        torn = number == len(lines) and not text.endswith("\n")
        row = _metrics_row(path, number, line, torn, warn or _warn_stderr)
        if row is not None:
            rows.setdefault(row.get("kind", "train"), []).append(row)
    return rows


def _metrics_row(path: Path, number: int, line: str, torn: bool, warn: Callable[[str], None]) -> dict | None:
    """One line of metrics.jsonl -> its row; None for a torn last line (after a warning)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as err:
        if torn:
            warn(f"{path}:{number}: skipped an incomplete last line (is the run still writing?)")
            return None
        raise AiaynError(f"{path}:{number}: invalid JSON: {err.msg}") from None
    if not isinstance(row, dict):
        raise AiaynError(f"{path}:{number}: not a JSON object")
    for key in PLOTTED_KEYS:
        value = row.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise AiaynError(f"{path}:{number}: {key} is {json.dumps(value)[:40]}, not a number")
    return row


def _warn_stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def plot_curve(
    out: Path, title: str, ylabel: str, series: dict[str, tuple[str, list[dict]]], log_y: bool = False
) -> Path:
    """One PNG: `series` maps a label to (key, rows), plotted as row[key] against row['step']."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    for label, (key, rows) in series.items():
        points = [(r["step"], r[key]) for r in rows if r.get(key) is not None and r.get("step") is not None]
        if points:
            steps, values = zip(*points, strict=True)
            ax.plot(steps, values, label=label, marker="o" if len(points) < 30 else None, markersize=3)
    ax.set(title=title, xlabel="step", ylabel=ylabel)
    if log_y:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    if len(series) > 1:
        ax.legend()
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def plot_training_curves(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """loss.png (train and dev loss), dev_loss.png (true vs shuffled sources), lr.png, and
    dev_bleu.png when dev BLEU was logged; written to `out_dir` (default RUN_DIR/plots)."""
    run_dir = Path(run_dir)
    rows = read_metrics(run_dir / "metrics.jsonl")
    train, dev = rows.get("train", []), rows.get("dev", [])
    if not train and not dev:
        raise AiaynError(f"{run_dir / 'metrics.jsonl'}: no train or dev rows yet, nothing to plot")
    out = output_dir(out_dir if out_dir is not None else run_dir / "plots", "--out")
    written = [
        plot_curve(
            out / "loss.png",
            "Label-smoothed loss per target token",
            "loss",
            {"train": ("loss", train), "dev": ("dev_loss", dev)},
        ),
        plot_curve(out / "lr.png", "Learning rate (Eq. 3)", "lr", {"lr": ("lr", train)}),
    ]
    if dev:
        written.append(
            plot_curve(
                out / "dev_loss.png",
                "Dev loss: true vs shuffled sources",
                "loss",
                {"true sources": ("dev_loss", dev), "shuffled sources": ("dev_loss_shuffled", dev)},
            )
        )
    if any(r.get("dev_bleu") is not None for r in dev):
        written.append(plot_curve(out / "dev_bleu.png", "Dev BLEU", "BLEU", {"dev": ("dev_bleu", dev)}))
    return written


# -- attention heatmaps (section 7) -----------------------------------------------------------------

ATTENTION_KINDS = {  # kind: (title, query axis, key axis)
    "cross": ("Encoder-decoder attention", "target", "source"),
    "encoder": ("Encoder self-attention", "source", "source"),
    "decoder": ("Decoder self-attention", "decoder input", "decoder input"),
}


def attention_axes(attn: dict, kind: str) -> tuple[list[str], list[str]]:
    """(query tokens, key tokens) of one kind of map from `Translator.attention`.

    Cross attention: target pieces (what each decoder position predicts) x source pieces. The
    decoder's self-attention is over its inputs: the start token and the target pieces before EOS.
    """
    if kind not in ATTENTION_KINDS:
        raise AiaynError(f"attention kind {kind!r} is not one of {', '.join(ATTENTION_KINDS)}")
    decoder_inputs = ["<s>"] + list(attn["tgt_tokens"][:-1])
    return {
        "cross": (list(attn["tgt_tokens"]), list(attn["src_tokens"])),
        "encoder": (list(attn["src_tokens"]), list(attn["src_tokens"])),
        "decoder": (decoder_inputs, decoder_inputs),
    }[kind]


def _pick(count: int, value: int | None, what: str, where: str) -> int:
    """A 1-based layer or head number -> 0-based index; None -> the last."""
    if value is None:
        return count - 1
    if not 1 <= value <= count:
        raise AiaynError(f"{what} {value} is out of range: {where} has {count} (1..{count})")
    return value - 1


def plot_attention(attn: dict, kind: str = "cross", layer: int | None = None, head: int | None = None):
    """A matplotlib Figure: every head of `layer` in a grid (or only `head`), tokens on both axes.

    `attn` is `Translator.attention(...)`'s dict; layer and head are 1-based (None: the last layer,
    all heads). Weights are drawn on a fixed 0..1 scale with one colorbar.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    queries, keys = attention_axes(attn, kind)
    layers = attn[kind]
    index = _pick(len(layers), layer, "layer", f"the {kind} attention")
    weights = np.asarray(layers[index], dtype=np.float32)  # (heads, queries, keys)
    n_heads = weights.shape[0]
    heads = list(range(n_heads)) if head is None else [_pick(n_heads, head, "head", "a layer")]
    cols = math.ceil(math.sqrt(len(heads)))
    rows = math.ceil(len(heads) / cols)
    panel = max(2.8, 0.22 * max(len(queries), len(keys)))
    size = (panel * cols + 1.2, panel * rows + 1.0)
    fig, axes = plt.subplots(rows, cols, figsize=size, squeeze=False, layout="constrained")
    font = 8 if max(len(queries), len(keys)) <= 30 else 6
    for ax, h in zip(axes.flat, heads, strict=False):
        image = ax.imshow(weights[h], cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_title(f"head {h + 1}", fontsize=9)
        ax.set_xticks(range(len(keys)), keys, rotation=90, fontsize=font)
        ax.set_yticks(range(len(queries)), queries, fontsize=font)
    for ax in list(axes.flat)[len(heads) :]:
        ax.axis("off")
    title, query_axis, key_axis = ATTENTION_KINDS[kind]
    fig.suptitle(f"{title}, layer {index + 1} of {len(layers)}\n{attn['translation']}", fontsize=10)
    fig.supylabel(f"{query_axis} (query)", fontsize=9)
    fig.supxlabel(f"{key_axis} (key)", fontsize=9)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="attention weight")
    return fig


def png_path(out: str | Path) -> Path:
    """Check that `out` can take a PNG: a .png name, not a folder, in a folder that exists."""
    out = Path(out)
    if out.suffix.lower() != ".png":
        raise AiaynError(f"--out {out}: the file name must end in .png (the picture is a PNG)")
    if out.is_dir():
        raise AiaynError(f"--out {out}: is a folder, not a file")
    if not out.parent.is_dir():
        raise AiaynError(f"--out {out}: the folder {out.parent} does not exist")
    return out


def save_attention_png(
    attn: dict, out: str | Path, kind: str = "cross", layer: int | None = None, head: int | None = None
) -> Path:
    """Write `plot_attention(attn, kind, layer, head)` to the PNG file `out` and return its path."""
    import matplotlib.pyplot as plt

    out = png_path(out)
    fig = plot_attention(attn, kind, layer, head)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
