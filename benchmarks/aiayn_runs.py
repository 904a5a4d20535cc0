"""What the data benchmarks (cleaning.py, backtranslation.py, multilingual.py) do through aiayn's
command line, as a user would: train a recipe for a number of updates and average its last
checkpoints into a model directory, and score a model's test translations (beam 4, sacreBLEU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

AIAYN = [sys.executable, "-m", "aiayn"]
QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml"


def train_model(data: Path, run: Path, steps: int, config: Path = QUICKSTART) -> Path:
    """`aiayn train` of `config` for `steps` updates, the last 5 checkpoints averaged -> RUN/model."""
    subprocess.run([*AIAYN, "train", str(data), "--out", str(run), "--config", str(config)]
                   + ["--max-steps", str(steps), "--no-progress"], check=True)  # fmt: skip
    subprocess.run([*AIAYN, "average", str(run), "--last", "5"], check=True)
    return run / "model"


def bleu_on_test(model: Path, data: Path, out: Path, limit: int | None = None) -> tuple[float, Path]:
    """`aiayn evaluate` on the data directory's test split (the first `limit` pairs) -> (BLEU, the
    file of its translations, one a line)."""
    limited = ["--limit", str(limit)] if limit else []
    subprocess.run([*AIAYN, "evaluate", str(model), str(data), "--split", "test", "--no-progress"]
                   + ["--out", str(out), *limited], check=True)  # fmt: skip
    return json.loads((out / "scores.json").read_text())["bleu"], out / "test.hyp"


def command_line() -> str:
    """How this run was started, to print beside its table."""
    return " ".join(["python", *sys.argv])
