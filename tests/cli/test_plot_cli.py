"""`aiayn plot RUN_DIR` on bad metrics.jsonl files and a bad --out: one-line errors, or a warning for a
torn last line (the run is still writing it)."""

from __future__ import annotations

import json

import pytest

from aiayn.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ROWS = [{"kind": "train", "step": s, "loss": 9.0 - s, "lr": 1e-4 * s} for s in range(1, 5)]


def write_run(tmp_path, lines: list[str], end: str = "\n"):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("\n".join(lines) + end)
    return run


def good_lines() -> list[str]:
    return [json.dumps(row) for row in ROWS]


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_a_row_that_is_not_an_object_is_named_by_file_and_line(tmp_path, capsys):
    run = write_run(tmp_path, good_lines() + ["", "[1,2,3]"])
    assert main(["plot", str(run)]) == 2
    assert one_line_error(capsys).endswith(f"{run / 'metrics.jsonl'}:6: not a JSON object")


def test_a_torn_last_line_is_skipped_with_a_warning(tmp_path, capsys):
    run = write_run(tmp_path, good_lines() + ['{"kind": "train", "st'], end="")
    assert main(["plot", str(run)]) == 0
    out, err = capsys.readouterr()
    assert (
        err.strip()
        == f"warning: {run / 'metrics.jsonl'}:5: skipped an incomplete last line (is the run still writing?)"
    )
    assert (run / "plots" / "loss.png").read_bytes()[:8] == PNG_MAGIC
    assert f"wrote {run / 'plots' / 'loss.png'}" in out.splitlines()


@pytest.mark.parametrize(
    ("lines", "end", "line"),
    [
        (["{oops"], "\n", 5),  # a bad last line that was fully written
        (["{oops", '{"kind": "tr'], "", 5),  # a bad line in the middle, even when the last line is torn
    ],
)
def test_a_bad_complete_line_stays_an_error(tmp_path, capsys, lines, end, line):
    run = write_run(tmp_path, good_lines() + lines, end=end)
    assert main(["plot", str(run)]) == 2
    assert f"{run / 'metrics.jsonl'}:{line}: invalid JSON" in one_line_error(capsys)
    assert not (run / "plots").exists()


@pytest.mark.parametrize("lines", [[], [json.dumps({"kind": "kernels", "step": 6})]])
def test_nothing_to_plot_is_an_error(tmp_path, capsys, lines):
    run = write_run(tmp_path, lines, end="")
    assert main(["plot", str(run)]) == 2
    assert "no train or dev rows yet, nothing to plot" in one_line_error(capsys)
    assert not (run / "plots").exists()


def test_out_that_is_a_file_is_an_error(tmp_path, capsys):
    run = write_run(tmp_path, good_lines())
    (tmp_path / "taken").write_text("keep me")
    assert main(["plot", str(run), "--out", str(tmp_path / "taken")]) == 2
    assert f"--out {tmp_path / 'taken'}: a file is there, not a directory" in one_line_error(capsys)
    assert main(["plot", str(run), "--out", str(tmp_path / "taken" / "plots")]) == 2
    assert "plots: a file is there, not a directory" in one_line_error(capsys)
    assert (tmp_path / "taken").read_text() == "keep me"


def test_rows_without_a_step_are_left_out(tmp_path, capsys):
    run = write_run(tmp_path, good_lines() + [json.dumps({"kind": "train", "loss": 1.0})])
    assert main(["plot", str(run)]) == 0
    assert (run / "plots" / "lr.png").read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize(("key", "value"), [("loss", "abc"), ("step", [3]), ("dev_bleu", True)])
def test_a_value_that_is_not_a_number_is_named_by_file_and_line(tmp_path, capsys, key, value):
    row = {"kind": "dev" if key == "dev_bleu" else "train", "step": 5, "loss": 4.0, key: value}
    run = write_run(tmp_path, good_lines() + [json.dumps(row)])
    assert main(["plot", str(run)]) == 2
    expected = f"{run / 'metrics.jsonl'}:5: {key} is {json.dumps(value)}, not a number"
    assert one_line_error(capsys).endswith(expected)
    assert not (run / "plots").exists()
