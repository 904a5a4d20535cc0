"""Two machines as torchrun meets them: two agents (`--nnodes 2`, c10d rendezvous, gloo) on one host,
one lost with its worker (kill -9 of both: the machine gone) after a checkpoint, both started again:
the last weights are bitwise those of a run never interrupted."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

from toy_translation import tiny_config

ROOT = Path(__file__).parent.parent.parent
SECONDS = 90  # the most any one start of the two nodes may take

NODE = """
import os, pathlib, sys, time
from aiayn.train import checkpoint
from aiayn.cli import main

publish, stalled = checkpoint._publish, os.environ["STALLED"]
pathlib.Path(os.environ["WORKERS"], str(os.getppid())).write_text(str(os.getpid()))  # agent: worker

def stall(tmp, final):  # once: rank 0 waits after step 10's checkpoint until the test says go
    publish(tmp, final)
    if stalled and final.name == "step_000010" and not pathlib.Path(stalled).exists():
        pathlib.Path(stalled).write_text("")
        deadline = time.monotonic() + 60
        while not pathlib.Path(stalled + ".go").exists() and time.monotonic() < deadline:
            time.sleep(0.05)

checkpoint._publish = stall
sys.exit(main(sys.argv[1:]))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nodes:
    """Two torchrun agents of one worker each, the first hosting the rendezvous. torchrun starts each
    worker in a session of its own; a worker writes its pid to `tmp_path / its agent's pid`."""

    def __init__(self, tmp_path: Path, data: Path, run: Path, stalled: Path | None = None) -> None:
        self.tmp_path, port = tmp_path, free_port()
        command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1"]
        command += ["--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", "--local_addr=127.0.0.1"]
        command += [
            "--rdzv_id=elastic",
            "--max_restarts=0",
            "--monitor_interval=0.1",
            str(tmp_path / "node.py"),
        ]
        command += ["train", str(data), "--out", str(run), "--config", str(tmp_path / "tiny.yaml")]
        command += ["--no-progress", "--device", "cpu", "--dist-timeout", "0.5"]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
        env.update(STALLED=str(stalled or ""), WORKERS=str(tmp_path))
        self.agents = [
            subprocess.Popen(
                [*command[:5], f"--rdzv_conf=is_host={host}", *command[5:]],
                env=env,
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )  # fmt: skip
            for host in (1, 0)
        ]

    def kill(self, agent: subprocess.Popen) -> None:
        """kill -9 of the agent and its worker (if it has started one)."""
        worker = self.tmp_path / str(agent.pid)
        for pid in [agent.pid, *([int(worker.read_text())] if worker.exists() else [])]:
            with contextlib.suppress(ProcessLookupError):  # gone already
                os.kill(pid, signal.SIGKILL)
        agent.wait()

    def finish(self, agents: list[subprocess.Popen] | None = None, seconds: float = SECONDS) -> list[tuple]:
        """(exit code, output) of each agent; any still running after `seconds` is killed (the test fails)."""
        deadline, done = time.monotonic() + seconds, []
        try:
            for agent in agents or self.agents:
                out, _ = agent.communicate(timeout=max(deadline - time.monotonic(), 1))
                done.append((agent.returncode, out))
        finally:
            for agent in self.agents:
                if agent.poll() is None:
                    self.kill(agent)
        return done


@pytest.mark.slow
def test_a_node_killed_and_both_started_again_end_bitwise_where_an_unbroken_run_does(data_dir, tmp_path):
    (tmp_path / "node.py").write_text(NODE)
    tiny_config(max_steps=20, save_every=10).to_yaml(tmp_path / "tiny.yaml")  # dropout on: rng restored
    unbroken, run, stalled = tmp_path / "unbroken", tmp_path / "run", tmp_path / "stalled"
    assert [code for code, _ in Nodes(tmp_path, data_dir, unbroken).finish()] == [0, 0]

    nodes = Nodes(tmp_path, data_dir, run, stalled)
    deadline = time.monotonic() + SECONDS
    while not stalled.exists():  # rank 0 has written step 10 and waits; the other rank waits on it
        running = all(agent.poll() is None for agent in nodes.agents)
        assert running and time.monotonic() < deadline, nodes.finish(seconds=1)
        time.sleep(0.05)
    nodes.kill(nodes.agents[1])  # the second machine is lost
    Path(f"{stalled}.go").write_text("")
    [(code, out)] = nodes.finish(nodes.agents[:1])
    assert code != 0, out  # the survivor's worker fails on the lost peer, in one line; its agent with it
    assert "of 2: another rank died or did not answer within 0.5 minutes (" in out, out
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_000010"]

    assert [code for code, _ in Nodes(tmp_path, data_dir, run).finish()] == [0, 0]
    resumed = load_file(str(run / "checkpoints" / "step_000020" / "model.safetensors"))
    straight = load_file(str(unbroken / "checkpoints" / "step_000020" / "model.safetensors"))
    assert resumed.keys() == straight.keys()
    assert all(resumed[k].equal(straight[k]) for k in straight)
