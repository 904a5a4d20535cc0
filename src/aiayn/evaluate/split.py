"""Decode a split of a data directory and score it: the one routine behind `aiayn evaluate`, for
translations (corpus BLEU and chrF, section 6.1: aiayn.evaluate.bleu) and for parse trees (parseval,
section 6.3: aiayn.parse.evaluate).

A task says what differs (`SplitTask`): what it reads from the data directory, how it loads the
model, how it decodes and how it scores. `evaluate_split` does the rest the same way for every task:
the `limit`, the output directory checked before any model work, the progress bar, and
out_dir/{split}.hyp (one hypothesis a line) with out_dir/scores.json.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from tqdm import tqdm

from aiayn.config import DecodeConfig
from aiayn.data.datadir import DataDir
from aiayn.errors import AiaynError
from aiayn.safe_io import atomic_write_text, output_dir

SCORES_FILE = "scores.json"


class Split(NamedTuple):
    """What a task reads of a split: the inputs to decode, one reference each, and the inputs' file."""

    inputs: Sequence[Any]
    references: Sequence[Any]
    path: Path


class SplitTask(Protocol):
    """One kind of evaluation: `verb` names it on the progress bar ("translating", "parsing")."""

    verb: str

    def default_decode(self) -> DecodeConfig: ...

    def read(self, data: DataDir, split: str, limit: int | None) -> Split: ...

    def load(self, model: Any, data: DataDir, device: Any, int8: bool) -> Any: ...

    def decode(
        self, decoder: Any, split: Split, options: DecodeConfig, progress: Callable[[int], object]
    ) -> list[Any]: ...

    def score(self, hypotheses: Sequence[Any], references: Sequence[Any]) -> dict[str, Any]: ...


def write_scores(scores: dict[str, Any], out_dir: str | Path) -> Path:
    """Write scores.json into out_dir (atomically) and return its path."""
    out = output_dir(out_dir, "--out")
    return atomic_write_text(out / SCORES_FILE, json.dumps(scores, indent=2, ensure_ascii=False) + "\n")


def write_outputs(hypotheses: Sequence[Any], scores: dict[str, Any], out_dir: str | Path, split: str) -> None:
    """out_dir/{split}.hyp (a hypothesis a line), then out_dir/scores.json with its path as "hypotheses"."""
    out = output_dir(out_dir, "--out")
    hyp_path = atomic_write_text(out / f"{split}.hyp", "".join(f"{h}\n" for h in hypotheses))
    scores["hypotheses"] = str(hyp_path)
    write_scores(scores, out)


def evaluate_split(
    task: SplitTask,
    model: Any,
    data_dir: str | Path,
    split: str = "test",
    decode_config: DecodeConfig | None = None,
    out_dir: str | Path | None = None,
    device: Any = None,
    limit: int | None = None,
    progress: bool = False,
    int8: bool = False,
) -> dict[str, Any]:
    """Decode DATA_DIR's `split` with `model` as `task` says and score the output against its references.

    `decode_config` defaults to the task's search. With `out_dir`, the hypotheses go to
    out_dir/{split}.hyp and the scores to out_dir/scores.json. `limit`: the first N sentences only.
    `int8`: load a model directory for int8 inference (CPU; recorded in the scores).
    Returns the task's scores with "split" and "decode" (the search, as a dict).
    """
    if limit is not None and limit <= 0:
        raise AiaynError(f"limit must be a positive number of sentences, got {limit}")
    data = DataDir(data_dir)
    inputs = task.read(data, split, limit)
    out = None if out_dir is None else output_dir(out_dir, "--out")  # after the inputs, before the work
    decoder = task.load(model, data, device, int8)
    options = decode_config or task.default_decode()
    total = len(inputs.inputs)
    with tqdm(total=total, desc=f"{task.verb} {split}", unit="sent", disable=not progress) as bar:
        hypotheses = task.decode(decoder, inputs, options, bar.update)
    scores = {"split": split, **task.score(hypotheses, inputs.references), "decode": options.to_dict()}
    if int8:
        scores["int8"] = True
    if out is not None:
        write_outputs(hypotheses, scores, out, split)
    return scores
