"""The matmul backend of training (aiayn.runtime.kernels): measured on a fresh run's first updates,
kept in the checkpoint for a resume, fixed by the config or the environment; and the line that says
how long the step budget will take (aiayn.train.eta)."""

import json

import pytest
import torch

from aiayn.config import ConfigError
from aiayn.errors import AiaynError
from aiayn.runtime import kernels
from aiayn.runtime.linear import linear_backend
from aiayn.train import eta
from aiayn.train import trainer as trainer_module
from aiayn.train.checkpoint import list_checkpoints
from aiayn.train.trainer import train
from toy_translation import tiny_config

needs_onednn = pytest.mark.skipif(
    not linear_backend.enabled or linear_backend.forced, reason="oneDNN routing unavailable or forced"
)


def run(data_dir, run_dir, **settings):
    return train(data_dir, run_dir, tiny_config(**settings), progress=False, device="cpu")


def rows(run_dir, kind):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def saved_choice(result):
    return torch.load(result.checkpoint / "trainer_state.pt", weights_only=True)["cpu_matmul"]


def seen_backends(monkeypatch) -> list[str]:
    """The backend each update ran with, recorded by wrapping Trainer._update."""
    seen, update = [], trainer_module.Trainer._update

    def recording(self):
        seen.append(linear_backend.name)
        return update(self)

    monkeypatch.setattr(trainer_module.Trainer, "_update", recording)
    return seen


class FakeClock:
    """perf_counter for aiayn.runtime.kernels: each reading advances by the current backend's cost."""

    def __init__(self, onednn: float, mkl: float):
        self.now, self.cost = 0.0, {"onednn": onednn, "mkl": mkl}

    def perf_counter(self) -> float:
        self.now += self.cost[linear_backend.name]
        return self.now


@needs_onednn
@pytest.mark.parametrize("faster", ["onednn", "mkl"])
def test_a_fresh_run_times_both_backends_and_keeps_the_faster(data_dir, tmp_path, monkeypatch, faster):
    slow, fast = 10.0, 1.0  # 10x apart: batches of different sizes cannot turn the comparison round
    costs = {"onednn": fast, "mkl": slow} if faster == "onednn" else {"onednn": slow, "mkl": fast}
    monkeypatch.setattr(kernels, "time", FakeClock(**costs))
    seen = seen_backends(monkeypatch)
    before = (linear_backend.enabled, linear_backend.reason)
    result = run(data_dir, tmp_path / "run", cpu_matmul="auto", max_steps=10)
    probe = len(kernels.ORDER)
    assert seen[:probe] == list(kernels.ORDER)  # alternated on the first updates
    [row] = rows(tmp_path / "run", "kernels")
    assert row == {"kind": "kernels", "step": probe, "cpu_matmul": faster}
    assert seen[probe:] == [faster] * (10 - probe)  # then the winner only
    assert saved_choice(result) == faster
    assert (linear_backend.enabled, linear_backend.reason) == before  # the process default is back


@needs_onednn
@pytest.mark.parametrize("choice", ["onednn", "mkl"])
def test_a_resumed_run_keeps_the_measured_choice(data_dir, tmp_path, monkeypatch, choice):
    first = run(data_dir, tmp_path / "run", cpu_matmul="auto", max_steps=7)
    [saved] = list_checkpoints(tmp_path / "run")
    state = torch.load(saved / "trainer_state.pt", weights_only=True)
    state["cpu_matmul"] = choice  # as if that one had won
    torch.save(state, saved / "trainer_state.pt")
    seen = seen_backends(monkeypatch)
    resumed = run(data_dir, tmp_path / "run", cpu_matmul="auto", max_steps=10)
    assert seen == [choice] * 3 and saved_choice(resumed) == choice  # no second probe
    assert len(rows(tmp_path / "run", "kernels")) == 1 and first.step == 7  # only the first run decided


@needs_onednn
@pytest.mark.parametrize("choice", ["onednn", "mkl"])
def test_the_config_fixes_the_backend(data_dir, tmp_path, monkeypatch, choice):
    seen = seen_backends(monkeypatch)
    result = run(data_dir, tmp_path / "run", cpu_matmul=choice, max_steps=8)
    assert seen == [choice] * 8 and not rows(tmp_path / "run", "kernels")
    assert saved_choice(result) == choice


def test_the_environment_overrides_the_measurement(data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(linear_backend, "forced", True)
    monkeypatch.setattr(linear_backend, "enabled", False)
    seen = seen_backends(monkeypatch)
    result = run(data_dir, tmp_path / "run", cpu_matmul="auto", max_steps=8)
    assert seen == ["mkl"] * 8 and saved_choice(result) is None  # nothing measured, nothing stored


def test_mixed_precision_does_not_probe(data_dir, tmp_path):
    result = run(data_dir, tmp_path / "run", cpu_matmul="auto", precision="bf16", max_steps=8)
    assert not rows(tmp_path / "run", "kernels") and saved_choice(result) is None


def test_an_error_in_the_run_gives_the_routing_back(data_dir, tmp_path, monkeypatch):
    before = (linear_backend.enabled, linear_backend.reason)

    def broken(self):
        raise RuntimeError("boom")

    monkeypatch.setattr(trainer_module.Trainer, "_update", broken)
    with pytest.raises(RuntimeError, match="boom"):
        run(data_dir, tmp_path / "run", cpu_matmul="mkl", max_steps=8)
    assert (linear_backend.enabled, linear_backend.reason) == before


def test_cpu_matmul_and_backend_names_are_validated():
    with pytest.raises(ConfigError, match="cpu_matmul"):
        tiny_config(cpu_matmul="blas")
    with pytest.raises(AiaynError, match="'blas' is not onednn or mkl"):
        linear_backend.choose("blas", "a test")


def test_the_step_budget_is_timed_after_the_first_updates(data_dir, tmp_path, capsys):
    steps = eta.SKIP + eta.SPAN + 4
    run(data_dir, tmp_path / "run", max_steps=steps)
    [row] = rows(tmp_path / "run", "eta")
    assert row["step"] == eta.SKIP + eta.SPAN
    assert row["s_per_update"] > 0 and row["tok_s"] > 0
    assert row["seconds_left"] == pytest.approx(4 * row["s_per_update"])
    assert "timing: " in capsys.readouterr().err


@pytest.mark.parametrize(
    ("seconds", "text"), [(-3, "0 s"), (45, "45 s"), (89.4, "89 s"), (720, "12 min"), (3900, "1 h 05 min")]
)
def test_durations_read_naturally(seconds, text):
    assert eta.duration(seconds) == text
