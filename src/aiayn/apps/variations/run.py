"""`aiayn variations`: train and measure the rows of Table 3 (section 6.2), one run directory each.

Every row trains on the same data with the same seed for the same budget (`Budget`: steps, or
minutes of training), from the reference config (`reference_config`: the tiny preset with the
quickstart's CPU recipe, or the paper's base model and recipe) with its change (`rows.row_config`).
It is then measured as section 6.2 does: per-wordpiece perplexity of the dev split and dev BLEU
with beam search (beam 4, alpha 0.6 unless `--set` says otherwise), on the last checkpoint alone
("no checkpoint averaging"), and its parameter count.

OUT/ROW/ is an ordinary run directory of `aiayn train` (config.yaml, checkpoints/ with the newest
one kept, metrics.jsonl) plus model/ (that checkpoint as a model directory), eval/valid.hyp,
train_time.json (seconds trained, over every invocation) and result.json (the row's figures, its
budget and config). A re-run skips rows whose result.json has the same budget and resumes any other
from its newest checkpoint; with `--minutes` it trains for the time left. The time is recorded
whenever training stops (budget, Ctrl-C, kill -TERM); a row killed with -9 loses the record of
its last stretch and trains that long again.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from aiayn.apps.variations.variants import PaperRow, row_config, select_rows, settings
from aiayn.config import ModelConfig, RunConfig
from aiayn.configs import QUICKSTART
from aiayn.data.datadir import DataDir
from aiayn.errors import AiaynError
from aiayn.overrides import apply_overrides
from aiayn.safe_io import output_dir

RESULT_FILE, TIME_FILE = "result.json", "train_time.json"
BUDGET_FIELDS = ("max_steps", "minutes")


@dataclass(frozen=True)
class Budget:
    """What every row trains for: `steps` updates or `minutes` of training (exactly one)."""

    steps: int | None = None
    minutes: float | None = None

    def __post_init__(self) -> None:
        if (self.steps is None) == (self.minutes is None):
            raise AiaynError("give the budget per row: --steps N or --minutes M (one of them)")
        value = self.steps if self.steps is not None else self.minutes
        if not 0 < value < float("inf"):
            raise AiaynError(f"the budget must be a positive finite number, got {value}")

    def to_dict(self) -> dict[str, Any]:
        return {"steps": self.steps} if self.steps is not None else {"minutes": self.minutes}

    def __str__(self) -> str:
        return f"{self.steps:,} steps" if self.steps is not None else f"{self.minutes:g} minutes"


def _say(text: str) -> None:
    print(text, flush=True)


def reference_config(preset: str = "tiny", overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """The reference row: tiny with the quickstart's CPU recipe, or the paper's base model and
    recipe (section 5); then `key=value` overrides. One checkpoint is kept (no averaging)."""
    if preset == "tiny":
        config = RunConfig.named(QUICKSTART)
        config = config.replace(train=config.train.replace(max_steps=None))
    elif preset == "base":
        config = RunConfig(model=ModelConfig.preset("base"))
    else:
        raise AiaynError(f"--preset {preset!r}: choose tiny or base")
    train = config.train.replace(keep_last=1, average_last=1)
    model, train, decode = apply_overrides([config.model, train, config.decode], list(overrides))
    return RunConfig(model=model, train=train, decode=decode)


UNUSED_DECODE_FIELDS = ("draft_tokens",)  # no row decodes with a draft


def _without_budget(config: RunConfig) -> dict[str, Any]:
    """The settings a row's figures depend on: not its budget, nor decoding settings a row never
    uses (a speculative draft's), so a new default of those does not orphan finished rows."""
    data = config.to_dict()
    data["train"] = {k: v for k, v in data["train"].items() if k not in BUDGET_FIELDS}
    data["decode"] = {k: v for k, v in data["decode"].items() if k not in UNUSED_DECODE_FIELDS}
    return data


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise AiaynError(f"{path}: invalid JSON ({err.msg}); delete it to measure the row again") from None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def finished(row_dir: Path, config: RunConfig, budget: Budget) -> dict[str, Any] | None:
    """The row's result if it was measured for this budget; an error if with other settings."""
    result = _read_json(row_dir / RESULT_FILE)
    if result is None or result.get("budget") != budget.to_dict():
        return None
    saved = RunConfig.from_dict(result["config"])
    if _without_budget(saved) != _without_budget(config):
        raise AiaynError(
            f"{row_dir} was trained with other settings than this command's (another --preset or "
            "--set); use a new --out directory"
        )
    return result


def _check_same_data(row_dir: Path, data_dir: Path) -> None:
    """Every row is trained and measured on one data directory: a row begun on another (its run.json
    says which) is an error, neither reused nor resumed."""
    from aiayn.train.checkpoint import RUN_INFO

    info = _read_json(row_dir / RUN_INFO)
    trained_on = info.get("data_dir") if isinstance(info, dict) else None
    if trained_on is not None and Path(trained_on) != data_dir.resolve():
        raise AiaynError(
            f"{row_dir} was trained on {trained_on}, not {data_dir.resolve()}; use a new --out directory"
        )


def _newest_step(row_dir: Path) -> int:
    from aiayn.train.checkpoint import list_checkpoints

    found = list_checkpoints(row_dir)
    return int(found[-1].name.removeprefix("step_")) if found else 0


def _trained_seconds(row_dir: Path) -> float:
    data = _read_json(row_dir / TIME_FILE)
    return float(data["seconds"]) if data else 0.0


def train_row(row_dir: Path, data_dir: Path, config: RunConfig, budget: Budget, device, progress: bool):
    """Train (or resume) one row until its budget is spent; Ctrl-C saves and stops the command."""
    from aiayn.train.trainer import train

    done = _newest_step(row_dir)
    if budget.steps is not None and done > budget.steps:
        raise AiaynError(f"{row_dir} holds {done} steps, more than --steps {budget.steps}; use a new --out")
    minutes = None
    if budget.minutes is not None:
        minutes = budget.minutes - _trained_seconds(row_dir) / 60
        if minutes <= 0 and done > 0:
            return  # the time is spent; only the measurement was missing
    train_config = RunConfig(
        config.model, config.train.replace(max_steps=budget.steps, minutes=minutes), config.decode
    )
    began = time.monotonic()
    try:
        result = train(data_dir, row_dir, train_config, progress=progress, device=device)
    finally:
        if (row_dir / "checkpoints").is_dir():
            seconds = _trained_seconds(row_dir) + time.monotonic() - began
            _write_json(row_dir / TIME_FILE, {"seconds": seconds})
    if result.stop_reason.startswith("signal"):
        raise KeyboardInterrupt


@torch.no_grad()
def dev_perplexity(model, data_dir: Path, config: RunConfig, device: torch.device) -> float:
    """The paper's PPL (dev): exp of the mean negative log-likelihood per target wordpiece (EOS
    included) of the dev split under teacher forcing, in float32, without label smoothing."""
    from aiayn.data.batching import TokenBatchSampler
    from aiayn.train import precision
    from aiayn.train.distributed import DistEnv
    from aiayn.train.evaluation import dev_loss

    dev = DataDir(data_dir).tokens("valid")
    batches = TokenBatchSampler(dev.src_lengths, dev.tgt_lengths, config.train.max_tokens, seed=1)
    env, fp32 = DistEnv(0, 1, device), precision.resolve("fp32", device)
    m = config.model
    return dev_loss(model, dev, batches.global_batches(0), env, fp32, 0.0, m.pad_id, m.start_id)["ppl"]


def measure_row(
    row: PaperRow, row_dir: Path, data_dir: Path, config: RunConfig, budget: Budget, device, progress
):
    """Score the newest checkpoint (no averaging) on the dev split; write and return result.json."""
    from aiayn.evaluate import evaluate_model
    from aiayn.model.io import load_model_dir
    from aiayn.runtime.linear import route_linears
    from aiayn.train.checkpoint import average_run

    model_dir = average_run(row_dir, last=1, out_dir=row_dir / "model")
    model, _ = load_model_dir(model_dir, device)
    route_linears(model)  # its products through oneDNN, as in training
    ppl, params = dev_perplexity(model, data_dir, config, device), model.num_parameters()
    del model
    began = time.monotonic()
    scores = evaluate_model(
        model_dir,
        data_dir,
        "valid",
        config.decode,
        out_dir=row_dir / "eval",
        device=device,
        progress=progress,
    )
    result = {
        "row": row.name,
        **settings(config),
        "train_steps": _newest_step(row_dir),
        "ppl_dev": round(ppl, 4) if math.isfinite(ppl) else None,
        "bleu_dev": scores["bleu"],
        "params_M": round(params / 1e6, 4),
        "paper_ppl_dev": row.ppl_dev,
        "paper_bleu_dev": row.bleu_dev,
        "paper_params_M": row.params_m,
        "positions": config.model.positions,
        "attention_window": config.model.attention_window,
        "budget": budget.to_dict(),
        "train_minutes": round(_trained_seconds(row_dir) / 60, 2),
        "decode_minutes": round((time.monotonic() - began) / 60, 2),
        "dev_sentences": scores["n_sentences"],
        "bleu_signature": scores["bleu_signature"],
        "decode": config.decode.to_dict(),
        "config": _without_budget(config),
    }
    _write_json(row_dir / RESULT_FILE, result)
    return result


def _describe(config: RunConfig) -> str:
    s = settings(config)
    text = ", ".join(f"{k} {v}" for k, v in s.items())
    text += ", learned positions" if config.model.positions == "learned" else ""
    return text + (
        f", attention window r={config.model.attention_window}" if config.model.attention_window else ""
    )


def _check_out(out: Path) -> None:
    """Make OUT, unless it is a file or holds a table.md, table.csv or bleu_vs_params.png that no
    earlier run wrote (a run's OUT has base/, the reference row it trains first): those are replaced."""
    from aiayn.apps.variations.table import OUTPUT_FILES

    output_dir(out, "--out")
    if not (out / "base").is_dir():
        for name in OUTPUT_FILES:
            if (out / name).exists():
                raise AiaynError(
                    f"{out / name} is not from `aiayn variations` (no base/ beside it); choose another --out"
                )


def run_variations(
    data_dir: str | Path,
    out: str | Path,
    budget: Budget,
    rows: str | None = None,
    preset: str = "tiny",
    overrides: list[str] | tuple[str, ...] = (),
    device: str | None = None,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Train and measure the selected rows (base first); write OUT/table.md, table.csv and
    bleu_vs_params.png after each row. Returns the rows' results."""
    from aiayn.apps.variations.table import write_outputs
    from aiayn.train.distributed import pick_device

    data, out = DataDir(data_dir), Path(out)
    for needed in (data.spm_path, data.raw("valid", "src"), data.raw("valid", "tgt")):
        if not needed.is_file():
            name = needed.relative_to(data.path)
            raise AiaynError(f"{data.path}: no {name}; Table 3 is measured on a prepared dev split")
    if data.raw("valid", "src").stat().st_size == 0:
        raise AiaynError(f"{data.raw('valid', 'src')}: no dev pairs; Table 3 is measured on the dev split")
    reference = reference_config(preset, overrides)
    selected = [(row, row_config(row, reference)) for row in select_rows(rows)]  # bad rows fail now
    dev = torch.device(device) if device else pick_device()
    _check_out(out)
    for row, _ in selected:
        _check_same_data(out / row.name, data.path)
    results = []
    for i, (row, config) in enumerate(selected, start=1):
        row_dir = out / row.name
        _say(f"== [{i}/{len(selected)}] {row.name}: {_describe(config)}; {budget}")
        result = finished(row_dir, config, budget)
        if result is None:
            train_row(row_dir, data.path, config, budget, device, progress)
            result = measure_row(row, row_dir, data.path, config, budget, dev, progress)
        else:
            _say(f"   finished before: reusing {row_dir / RESULT_FILE}")
        figures = f"dev PPL {result['ppl_dev']}, dev BLEU {result['bleu_dev']:.2f}"
        _say(
            f"   {figures}, {result['params_M']:.2f}M parameters, {result['train_minutes']:.1f} min training"
        )
        results.append(result)
        write_outputs(out, results, preset, budget)
    return results
