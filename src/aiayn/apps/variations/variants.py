"""The rows of Table 3 (section 6.2), the paper's own figures, and each row built from a reference.

Table 3 varies the base model one setting at a time: (A) the number of heads h with
d_k = d_v = d_model / h, so the computation stays that of base; (B) the key size d_k alone;
(C) the depth N, the width d_model (d_k = d_v = d_model / h) and the inner size d_ff; (D) dropout
P_drop and label smoothing eps_ls; (E) learned positional embeddings instead of sinusoids; and the
big model. `PAPER_ROWS` holds the paper's settings and its dev figures (Vaswani et al. 2017,
Table 3: newstest2013, English-German, per-wordpiece perplexity, BLEU with beam search and no
checkpoint averaging; the base rows after 100K steps, big after 300K). The caption's rule
"unlisted values are identical to those of the base model" fills the blank parameter counts of
rows (A), (D) and (E) with base's 65M.

A row is a change relative to a reference model, by default the tiny preset, scaled so that it
keeps its meaning at that size. With the paper's base as reference the rows are exactly the
paper's; with another reference (`row_config`):

- N, d_model, d_ff and h are multiplied by the paper's ratio to base (N = 2 is 2/6 of base's 6),
  rounded, at least 1: tiny (N 3, d_model 256, d_ff 1024, h 4) gets N 1/2/4 in (C), d_model
  128/512, d_ff 512/2048, heads 1/2/8/16 in (A) (single-head stays single-head; h = 32 becomes 16,
  and d_k = 256 / 16 = 16 as at base) and big = (N 3, 512, 2048, h 8, P_drop 0.3).
- Rows (A) and (C)'s width rows keep d_k = d_v = d_model / h, as the paper does; (B) scales d_k by
  16/64 and 32/64 of the reference's and leaves d_v alone (tiny: d_k 16 and 32, d_v 64).
- P_drop, eps_ls and the positions are the paper's values as they are.
- When the recipe fixes the peak learning rate (`lr_peak`, the CPU recipe), a row that changes
  d_model gets it times (d_model_ref / d_model)^0.5, the factor d_model^-0.5 of Eq. 3 that the
  paper's rows had; without `lr_peak` Eq. 3 applies it by itself.

Every row is trained for the same budget; the paper gave big three times base's steps.

Group W is not in Table 3: self-attention restricted to r = 4, 8 and 16 positions (Table 1's fourth
row, section 7's plan; `ModelConfig.attention_window`), r as it is at any scale, beside full
attention. Its rows have no paper figures (None) and run only when asked for (`--rows W`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiayn.config import ModelConfig, RunConfig
from aiayn.errors import AiaynError

# The paper's base model in Table 3's terms; scaled settings are ratios to these.
PAPER_BASE: dict[str, Any] = dict(n_layers=6, d_model=512, d_ff=2048, n_heads=8, d_k=64)
SCALED = ("n_layers", "d_model", "d_ff", "n_heads", "d_k")
PAPER_BASE_PARAMS = 65  # x10^6, Table 3's base row
PAPER_VOCAB = 37000  # 5.1: a shared source-target vocabulary of about 37000 tokens
HEAD_SIZES_FROM_WIDTH = dict(d_k=None, d_v=None)  # d_k = d_v = d_model / h


@dataclass(frozen=True)
class PaperRow:
    """One line of Table 3: its name here, its group, what it changes at paper scale, the figures."""

    name: str
    group: str  # base, A, B, C, D, E, big; W (not the paper's)
    changes: dict[str, Any] = field(default_factory=dict)  # ModelConfig / TrainConfig field -> value
    ppl_dev: float | None = 0.0  # None: a row the paper did not train (group W)
    bleu_dev: float | None = 0.0
    params_m: float | None = PAPER_BASE_PARAMS  # x10^6; the caption's rule where the paper leaves it blank


def _heads(h: int) -> dict[str, Any]:
    return dict(n_heads=h, **HEAD_SIZES_FROM_WIDTH)


def _width(d_model: int) -> dict[str, Any]:
    return dict(d_model=d_model, **HEAD_SIZES_FROM_WIDTH)


PAPER_ROWS: tuple[PaperRow, ...] = (
    PaperRow("base", "base", {}, 4.92, 25.8, 65),
    PaperRow("A-h1", "A", _heads(1), 5.29, 24.9),
    PaperRow("A-h4", "A", _heads(4), 5.00, 25.5),
    PaperRow("A-h16", "A", _heads(16), 4.91, 25.8),
    PaperRow("A-h32", "A", _heads(32), 5.01, 25.4),
    PaperRow("B-dk16", "B", dict(d_k=16), 5.16, 25.1, 58),
    PaperRow("B-dk32", "B", dict(d_k=32), 5.01, 25.4, 60),
    PaperRow("C-N2", "C", dict(n_layers=2), 6.11, 23.7, 36),
    PaperRow("C-N4", "C", dict(n_layers=4), 5.19, 25.3, 50),
    PaperRow("C-N8", "C", dict(n_layers=8), 4.88, 25.5, 80),
    PaperRow("C-dmodel256", "C", _width(256), 5.75, 24.5, 28),
    PaperRow("C-dmodel1024", "C", _width(1024), 4.66, 26.0, 168),
    PaperRow("C-dff1024", "C", dict(d_ff=1024), 5.12, 25.4, 53),
    PaperRow("C-dff4096", "C", dict(d_ff=4096), 4.75, 26.2, 90),
    PaperRow("D-drop0", "D", dict(dropout=0.0), 5.77, 24.6),
    PaperRow("D-drop0.2", "D", dict(dropout=0.2), 4.95, 25.5),
    PaperRow("D-ls0", "D", dict(label_smoothing=0.0), 4.67, 25.3),
    PaperRow("D-ls0.2", "D", dict(label_smoothing=0.2), 5.47, 25.7),
    PaperRow("E-learned", "E", dict(positions="learned"), 4.92, 25.7),
    PaperRow("big", "big", dict(d_ff=4096, n_heads=16, dropout=0.3, **_width(1024)), 4.33, 26.4, 213),
)  # fmt: skip
GROUPS = ("A", "B", "C", "D", "E", "big")
WINDOW_ROWS: tuple[PaperRow, ...] = tuple(
    PaperRow(f"W-r{r}", "W", dict(attention_window=r), None, None, None) for r in (4, 8, 16)
)
ALL_GROUPS = (*GROUPS, "W")


def select_rows(spec: str | None) -> list[PaperRow]:
    """`--rows A,C` -> base and the rows of those groups, in the paper's order.

    Items are group letters (A-E, and W: restricted self-attention, never by default), `big`,
    `base` or single row names (`C-N2`, `W-r4`); base, the reference every row is compared with, is
    always included.
    """
    items = [item.strip() for item in (",".join(GROUPS) if spec is None else spec).split(",") if item.strip()]
    if not items:
        raise AiaynError(f"--rows {spec!r} names no row; give groups A, B, C, D, E, big, W or row names")
    rows = PAPER_ROWS + WINDOW_ROWS
    by_name = {row.name.lower(): row for row in rows}
    wanted = {"base"}
    for item in items:
        if item.upper() in ALL_GROUPS or item.lower() == "big":
            group = item.upper() if len(item) == 1 else "big"
            wanted |= {row.name for row in rows if row.group == group}
        elif item.lower() in by_name:
            wanted.add(by_name[item.lower()].name)
        else:
            names = ", ".join(row.name for row in rows)
            raise AiaynError(
                f"--rows: unknown row {item!r}; give groups A, B, C, D, E, big, W or rows: {names}"
            )
    return [row for row in rows if row.name in wanted]


def _scaled(key: str, paper_value: int, reference: ModelConfig) -> int:
    ref = reference.key_dim if key == "d_k" else getattr(reference, key)
    return max(1, round(ref * paper_value / PAPER_BASE[key]))


def row_config(row: PaperRow, reference: RunConfig) -> RunConfig:
    """The reference run config with `row`'s change, scaled to the reference (module docstring)."""
    model_fields = set(ModelConfig.__dataclass_fields__)
    model, train = {}, {}
    for key, value in row.changes.items():
        if key in SCALED and value is not None:
            value = _scaled(key, value, reference.model)
        (model if key in model_fields else train)[key] = value
    lr_peak = reference.train.lr_peak
    if lr_peak is not None and "d_model" in model:
        train["lr_peak"] = lr_peak * (reference.model.d_model / model["d_model"]) ** 0.5
    try:
        return RunConfig(reference.model.replace(**model), reference.train.replace(**train), reference.decode)
    except AiaynError as err:
        raise AiaynError(f"row {row.name} does not fit the reference model: {err}") from None


def settings(config: RunConfig) -> dict[str, Any]:
    """Table 3's columns of a row's config: N, d_model, d_ff, h, d_k, d_v, P_drop, eps_ls."""
    m = config.model
    return {
        "N": m.n_layers,
        "d_model": m.d_model,
        "d_ff": m.d_ff,
        "h": m.n_heads,
        "d_k": m.key_dim,
        "d_v": m.value_dim,
        "P_drop": m.dropout,
        "eps_ls": config.train.label_smoothing,
    }
