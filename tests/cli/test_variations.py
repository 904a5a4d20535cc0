"""`aiayn variations` (aiayn.cli.variations): one budget, steps or minutes, required; a budget that is
no positive number is a one-line error before any training."""

from __future__ import annotations

import pytest

from aiayn.cli import main


@pytest.mark.parametrize(
    "budget, message",
    [([], "one of the arguments --steps --minutes is required"),
     (["--steps", "2", "--minutes", "1"], "not allowed with argument"),
     (["--steps", "two"], "argument --steps: invalid int value: 'two'")],
)  # fmt: skip
def test_the_budget_is_one_of_steps_or_minutes(tmp_path, capsys, budget, message):
    with pytest.raises(SystemExit) as stop:
        main(["variations", str(tmp_path), "--out", str(tmp_path / "o"), *budget])
    assert stop.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags, message",
    [(["--steps", "0"], "must be a positive finite number, got 0"),
     (["--minutes", "nan"], "must be a positive finite number, got nan")],
)  # fmt: skip
def test_a_budget_of_no_positive_number_is_one_line(tmp_path, capsys, flags, message):
    assert main(["variations", str(tmp_path), "--out", str(tmp_path / "o"), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()
