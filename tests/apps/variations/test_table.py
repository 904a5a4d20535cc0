"""Table 3's outputs (aiayn.apps.variations.table) from hand-made rows: the paper's blank-is-base
convention in the Markdown, learned positions and an infinite perplexity shown, every value in the
CSV, and the caption's recipe."""

import csv
import io

from aiayn.apps.variations.table import COLUMNS, HEADER, SETTINGS, plot_bleu_vs_params, to_csv, to_markdown

TRAIN = {"update_tokens": 4096, "warmup_steps": 400, "lr_peak": None}
DECODE = {"beam_size": 4, "alpha": 0.6}


def row(name, **changes):
    settings = dict.fromkeys(SETTINGS, 1) | {"d_model": 256, "h": 4, "P_drop": 0.1, "train_steps": 600}
    result = {"row": name, **settings, "ppl_dev": 5.126, "bleu_dev": 12.346, "params_M": 9.876}
    result |= {"paper_ppl_dev": 4.92, "paper_bleu_dev": 25.8, "paper_params_M": 65}
    result |= {"config": {"train": TRAIN}, "dev_sentences": 1234, "decode": DECODE}
    result |= {"bleu_signature": "nrefs:1|tok:13a"}
    return result | changes


def cells(markdown, name):
    line = next(line for line in markdown.splitlines() if line.startswith(f"| `{name}`"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_a_setting_equal_to_base_is_left_blank_and_every_figure_printed():
    results = [row("base"), row("A-h8", h=8), row("E-learned", positions="learned", ppl_dev=None)]
    markdown = to_markdown(results, "tiny", "600 updates")
    base, a, e = (cells(markdown, name) for name in ("base", "A-h8", "E-learned"))
    assert len(base) == len(HEADER) and base[HEADER.index("h")] == "4"
    assert a[HEADER.index("h")] == "8" and a[HEADER.index("d_model")] == ""  # only the change shows
    assert a[-6:] == ["5.13", "12.35", "9.88", "4.92", "25.8", "65"]
    assert e[1] == "learned positions" and e[HEADER.index("PPL (dev)")] == "inf"


def test_a_windowed_row_shows_its_window_and_no_paper_figures(tmp_path):
    none = dict.fromkeys(("paper_ppl_dev", "paper_bleu_dev", "paper_params_M"))
    results = [row("base"), row("W-r8", attention_window=8, **none)]
    w = cells(to_markdown(results, "tiny", "600 updates"), "W-r8")
    assert w[1] == "attention window r=8" and w[-6:] == ["5.13", "12.35", "9.88", "", "", ""]
    assert plot_bleu_vs_params(results, tmp_path / "plot.png").stat().st_size > 0


def test_the_caption_says_how_the_figures_were_made():
    markdown = to_markdown([row("base", config={"train": TRAIN | {"lr_peak": 0.002}})], "tiny", "600 updates")
    assert markdown.startswith("# Table 3 (section 6.2), tiny scale\n")
    assert (
        "each trained for 600 updates" in markdown
        and "a 400-step warm-up to a peak learning rate" in markdown
    )
    assert (
        "1,234 sentences" in markdown and "beam 4, alpha 0.6" in markdown and "`nrefs:1|tok:13a`" in markdown
    )


def test_the_csv_has_every_column_and_value_of_every_row():
    results = [row("base"), row("A-h8", h=8)]
    read = list(csv.DictReader(io.StringIO(to_csv(results))))
    assert tuple(read[0]) == COLUMNS
    assert [(r["row"], r["h"], r["d_model"]) for r in read] == [("base", "4", "256"), ("A-h8", "8", "256")]
