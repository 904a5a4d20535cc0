"""`aiayn doctor` (aiayn.cli.doctor): --no-measure reaches the report, --json prints it as JSON, and
without it the human table is printed."""

import json

import pytest

import aiayn.apps.doctor
from aiayn.cli import main


@pytest.fixture
def seen(monkeypatch):
    calls = []

    def report(measure):
        calls.append(measure)
        return {"matmul": None if not measure else {"mkl": 1.0}, "cuda": None}

    monkeypatch.setattr(aiayn.apps.doctor, "report", report)
    monkeypatch.setattr(aiayn.apps.doctor, "format_report", lambda rep: f"TABLE {sorted(rep)}")
    return calls


@pytest.mark.parametrize("flags, measure", [([], True), (["--no-measure"], False)])
def test_json_is_the_report_itself(capsys, seen, flags, measure):
    assert main(["doctor", "--json", *flags]) == 0
    out = capsys.readouterr().out
    assert seen == [measure] and json.loads(out)["matmul"] == (None if not measure else {"mkl": 1.0})
    assert out.startswith("{\n  ")  # indented for reading


def test_without_json_the_table_is_printed(capsys, seen):
    assert main(["doctor", "--no-measure"]) == 0
    assert capsys.readouterr().out == "TABLE ['cuda', 'matmul']\n"
