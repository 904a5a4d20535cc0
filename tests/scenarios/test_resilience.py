"""Crashes and signals: a kill -9 in the middle of a checkpoint write, and SIGTERM during training."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from aiayn.config import RunConfig
from aiayn.model.transformer import Transformer
from aiayn.train.checkpoint import list_checkpoints, load_checkpoint
from aiayn.train.trainer import train
from toy_translation import tiny_config

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

KILLED_WRITER = """
import sys, time
import torch
torch.set_num_threads({threads})  # as in this process: the same float summation order
sys.path.insert(0, {tests!r})
from toy_translation import tiny_config
from aiayn.train import checkpoint
from aiayn.train.trainer import train

publish = checkpoint._publish

def stall(tmp, final):  # every file of step 4 is written; stop just before the rename
    if final.name == "step_000004":
        (final.parent.parent / "stalled").write_text(str(tmp))
        time.sleep(120)
    publish(tmp, final)

checkpoint._publish = stall
train({data!r}, {run!r}, tiny_config(max_steps=6, save_every=2), progress=False)
"""


def wait_for(path: Path, process: subprocess.Popen, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


@pytest.mark.slow
def test_kill_9_during_checkpoint_write_keeps_the_previous_one(data_dir, tmp_path):
    run = tmp_path / "run"
    script = KILLED_WRITER.format(
        threads=torch.get_num_threads(), tests=str(HERE.parent), data=str(data_dir), run=str(run)
    )
    process = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    wait_for(run / "stalled", process)
    process.send_signal(signal.SIGKILL)
    process.wait()
    partial = run / "checkpoints" / ".tmp-step_000004"
    assert (partial / "model.safetensors").is_file() and (partial / "trainer_state.pt").is_file()
    [previous] = list_checkpoints(run)
    assert previous.name == "step_000002"
    model = Transformer(RunConfig.from_yaml(run / "config.yaml").model)
    assert load_checkpoint(previous, model)["loop"]["step"] == 2

    resumed = train(data_dir, run, tiny_config(max_steps=4), progress=False)
    assert (resumed.start_step, resumed.step) == (2, 4)
    assert not partial.exists()
    straight = train(data_dir, tmp_path / "straight", tiny_config(max_steps=4), progress=False)
    a, b = (
        load_file(str(straight.checkpoint / "model.safetensors")),
        load_file(str(resumed.checkpoint / "model.safetensors")),
    )
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_sigterm_writes_a_checkpoint_and_exits(data_dir, tmp_path):
    config_file, run = tmp_path / "tiny.yaml", tmp_path / "run"
    tiny_config(max_steps=100000, log_every=1).to_yaml(config_file)
    command = [
        sys.executable,
        "-m",
        "aiayn",
        "train",
        str(data_dir),
        "--out",
        str(run),
        "--config",
        str(config_file),
        "--no-progress",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    wait_for(run / "metrics.jsonl", process)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, err
    [saved] = list_checkpoints(run)
    assert f"checkpoint written to {saved}" in out
    step = torch.load(saved / "trainer_state.pt", weights_only=True)["loop"]["step"]
    assert saved.name == f"step_{step:06d}" and step >= 1
