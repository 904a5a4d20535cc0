"""DDP under torchrun: 2 CPU processes (gloo) end with the weights of 1 process with accumulation 2."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from aiayn.train.trainer import train
from toy_translation import tiny_config

ROOT = Path(__file__).parent.parent.parent


@pytest.mark.slow
def test_two_ranks_equal_one_rank_with_accumulation_two(data_dir, tmp_path):
    # Dropout off: the ranks draw different masks. adam_eps 1e-6: the key projections' biases have a
    # true gradient of exactly 0 (softmax ignores a constant shift), and with eps 1e-9 Adam would
    # turn the ~1e-11 float noise of a different summation order into full-size steps.
    config = tiny_config(max_steps=5, accumulation=1, eval_every=2, adam_eps=1e-6)
    config = config.replace(model=config.model.replace(dropout=0.0))
    config_file = tmp_path / "ddp.yaml"
    config.to_yaml(config_file)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "aiayn",
        "train",
        str(data_dir),
        "--out",
        str(tmp_path / "ddp"),
        "--config",
        str(config_file),
        "--no-progress",
        "--device",
        "cpu",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

    single = train(
        data_dir, tmp_path / "one", config.replace(train=config.train.replace(accumulation=2)), progress=False
    )
    ddp = load_file(str(tmp_path / "ddp" / "checkpoints" / "step_000005" / "model.safetensors"))
    one = load_file(str(single.checkpoint / "model.safetensors"))
    assert ddp.keys() == one.keys()
    for name in one:
        torch.testing.assert_close(ddp[name], one[name], rtol=0, atol=1e-5)
    dev = lambda run: [line for line in (run / "metrics.jsonl").read_text().splitlines() if '"dev"' in line]  # noqa: E731
    assert len(dev(tmp_path / "ddp")) == len(dev(tmp_path / "one")) == 2


AGREE = """
import pathlib, sys
from aiayn.train import distributed
env = distributed.setup("cpu")
answers = f"{distributed.all_ranks(env.rank == 0, env)} {distributed.all_ranks(True, env)}"
pathlib.Path(sys.argv[1], f"rank{env.rank}.txt").write_text(answers)
distributed.teardown(env)
"""


@pytest.mark.slow
def test_ranks_agree_on_a_flag_only_one_of_them_holds(tmp_path):
    # the trainer's "was the loss finite?" must be the same on every rank, or one rank stops alone
    (tmp_path / "agree.py").write_text(AGREE)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [*command, str(tmp_path / "agree.py"), str(tmp_path)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answers = [(tmp_path / f"rank{rank}.txt").read_text() for rank in (0, 1)]
    assert answers == ["False True", "False True"]


@pytest.mark.parametrize(
    ("device", "local_rank", "want"), [("cuda", 1, "cuda:1"), ("cuda:0", 1, "cuda:0"), (None, 1, "cuda:1")]
)
def test_device_cuda_is_this_ranks_own_gpu(monkeypatch, device, local_rank, want):
    # `--device cuda` (no index) names the rank's own GPU: torch.cuda.set_device refuses a bare "cuda"
    from aiayn.train import distributed

    chosen = []
    monkeypatch.setenv("LOCAL_RANK", str(local_rank))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    env = distributed.setup(device)
    assert env.device == torch.device(want) and chosen == [torch.device(want)]


@pytest.mark.parametrize(("gpus", "message"), [(0, "but no CUDA GPU here"), (2, "but this machine has 2")])
def test_device_cuda_without_a_gpu_for_the_rank_is_a_one_line_error(monkeypatch, gpus, message):
    # never the CPU instead, never two ranks on one GPU (nccl refuses that later, less clearly)
    from aiayn.errors import AiaynError
    from aiayn.train import distributed

    local = 3 if gpus else 0
    monkeypatch.setenv("LOCAL_RANK", str(local))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    with pytest.raises(AiaynError, match=f"^device cuda: local rank {local} needs GPU {local}, {message}$"):
        distributed.setup("cuda")
    if gpus:  # no --device on a machine with GPUs: the same, not a GPU shared with rank 1
        with pytest.raises(AiaynError, match=f"needs GPU {local}, {message}$"):
            distributed.setup()


LOST = """
import os, pathlib, sys
from aiayn.train import distributed
env = distributed.setup("cpu", timeout_minutes=0.25)
if env.rank == 1:
    os._exit(0)  # a peer gone without a word (killed, its machine lost)
try:
    distributed.all_ranks(True, env)
    message = "no error"
except RuntimeError as err:
    message = str(distributed.peer_lost(err, env, 0.25))
pathlib.Path(sys.argv[1], "rank0.txt").write_text(message)
"""


@pytest.mark.slow
def test_a_peer_that_dies_ends_the_others_with_one_line(tmp_path):
    (tmp_path / "lost.py").write_text(LOST)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(
        [*command, str(tmp_path / "lost.py"), str(tmp_path)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        timeout=120,
    )
    message = (tmp_path / "rank0.txt").read_text()
    assert message.startswith("rank 0 of 2: another rank died or did not answer within 0.25 minutes (")
    assert "\n" not in message and message.endswith(
        "start every rank again to resume from the last checkpoint"
    )


def test_the_timeout_reaches_the_process_group_and_must_be_positive(monkeypatch):
    from datetime import timedelta

    from aiayn.errors import AiaynError
    from aiayn.train import distributed

    seen = {}
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(distributed.dist, "init_process_group", lambda **kw: seen.update(kw))
    monkeypatch.setenv("WORLD_SIZE", "2")
    distributed.setup("cpu", timeout_minutes=1.5)
    assert seen == {"backend": "gloo", "timeout": timedelta(minutes=1.5)}
    with pytest.raises(AiaynError, match="--dist-timeout must be a positive number"):
        distributed.setup("cpu", timeout_minutes=0)
    alone = distributed.DistEnv(0, 1, torch.device("cpu"))
    assert distributed.peer_lost(RuntimeError("Connection closed by peer"), alone, 5) is None  # one process
    two = distributed.DistEnv(1, 2, torch.device("cpu"))
    assert distributed.peer_lost(ValueError("bad shape"), two, 5) is None
    assert (
        distributed.peer_lost(RuntimeError("NCCL error: unhandled cuda error"), two, 5) is None
    )  # not a peer
    assert "rank 1 of 2" in str(distributed.peer_lost(RuntimeError("[gloo] Timed out"), two, 5))


@pytest.mark.slow
def test_a_run_resumed_on_two_ranks_keeps_its_update_and_its_batches(data_dir, tmp_path):
    """Two updates of one rank with accumulation 2, then two more on two ranks (torchrun, gloo):
    rank 0 alone says so in one line, each rank takes one batch an update (2 x 1 = 1 x 2), and the
    weights are those of four updates on one rank (the same batches in the same updates)."""
    config = tiny_config(max_steps=4, accumulation=2, adam_eps=1e-6)  # dropout off, eps: as above
    config = config.replace(model=config.model.replace(dropout=0.0))
    config_file = tmp_path / "run.yaml"
    config.to_yaml(config_file)
    run = tmp_path / "run"
    train(data_dir, run, config.replace(train=config.train.replace(max_steps=2)), progress=False)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    command += ["-m", "aiayn", "train", str(data_dir), "--out", str(run), "--config", str(config_file)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [*command, "--no-progress", "--device", "cpu"], env=env, cwd=ROOT, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    line = (
        "resuming on 2 ranks, saved on 1 rank: accumulation 2 -> 1 keeps 2 batches of up to 200 tokens "
        "an update; the batches go on in the same order, dropout draws afresh"
    )
    assert done.stdout.count(line) == 1, done.stdout
    straight = train(data_dir, tmp_path / "straight", config, progress=False)
    resumed = load_file(str(run / "checkpoints" / "step_000004" / "model.safetensors"))
    one = load_file(str(straight.checkpoint / "model.safetensors"))
    for name in one:
        torch.testing.assert_close(resumed[name], one[name], rtol=0, atol=1e-5)
