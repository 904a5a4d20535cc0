"""`aiayn train / average / plot` on the command line: a tiny end-to-end run on the CPU, `--init-from`,
one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from aiayn.cli import main
from aiayn.model.io import load_model_dir
from aiayn.train.checkpoint import average_run
from aiayn.train.trainer import train
from toy import word_for_word
from toy_translation import tiny_config, write_parallel

CONFIGS = Path(__file__).parent.parent.parent / "configs"


SPANISH = {
    "sol": "sun", "luna": "moon", "mar": "sea", "rio": "river", "casa": "house", "perro": "dog",
    "gato": "cat", "libro": "book", "agua": "water", "pan": "bread",
}  # fmt: skip


def write_corpus(directory: Path, n: int = 400) -> tuple[Path, Path]:
    pairs = word_for_word(n, 5, SPANISH, (3, 10))
    return write_parallel(pairs, directory / "corpus.es", directory / "corpus.en")


@pytest.mark.slow
def test_end_to_end_prepare_train_average_load_plot(tmp_path, capsys):
    from aiayn.data.prepare import prepare
    from aiayn.data.sources import PairFiles, SplitFiles

    src, tgt = write_corpus(tmp_path)
    data = prepare(tmp_path / "data", SplitFiles(PairFiles(src, tgt)), vocab_size=120, progress=False)
    run = tmp_path / "run"
    overrides = [
        "d_model=64",
        "d_ff=128",
        "n_layers=2",
        "n_heads=4",
        "max_tokens=600",
        "update_tokens=600",
        "warmup_steps=20",
        "lr_peak=3e-3",
        "eval_every=20",
        "save_every=10",
        "log_every=5",
        "eval_bleu=true",
    ]
    args = [
        "train",
        str(data),
        "--out",
        str(run),
        "--config",
        str(CONFIGS / "tiny.yaml"),
        "--max-steps",
        "40",
        "--no-progress",
    ] + [a for o in overrides for a in ("--set", o)]
    assert main(args) == 0
    assert "stopped at step 40 (max_steps)" in capsys.readouterr().out
    assert main(["average", str(run), "--last", "3"]) == 0
    assert "the mean of 3 checkpoint(s), step_000020 to step_000040\n" in capsys.readouterr().out
    assert main(["average", str(run), "--last", "50", "--out", str(tmp_path / "all")]) == 0
    assert "(the run has only 4, not --last 50)" in capsys.readouterr().out
    model, info = load_model_dir(run / "model")
    assert info["averaged"] == ["step_000020", "step_000030", "step_000040"]
    assert (info["src_lang"], info["tgt_lang"]) == ("es", "en")
    with torch.no_grad():
        logits = model(torch.tensor([[5, 6, 7, 3]]), torch.tensor([[2, 8]]))
    assert logits.shape == (1, 2, model.config.vocab_size)

    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if r["kind"] == "train"]
    dev_rows = [r for r in rows if r["kind"] == "dev"]
    assert train_rows[-1]["loss"] < train_rows[0]["loss"] - 0.5  # it learns
    assert [r["step"] for r in dev_rows] == [20, 40]
    assert dev_rows[-1]["dev_loss"] < dev_rows[-1]["dev_loss_shuffled"]  # and it reads the source
    assert all(0.0 <= r["dev_bleu"] <= 100.0 for r in dev_rows)
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))

    assert main(["plot", str(run)]) == 0
    for name in ("loss.png", "lr.png", "dev_loss.png", "dev_bleu.png"):
        assert (run / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_errors_are_one_line(tmp_path, capsys):
    assert main(["average", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err
    assert main(["train", str(tmp_path), "--out", str(tmp_path / "run"), "--preset", "tiny"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "aiayn prepare" in err


@pytest.mark.slow
def test_init_from_starts_training_from_the_given_weights(data_dir, tmp_path):
    """`aiayn train --init-from`: the first update's loss is the trained model's, far below a fresh start."""
    trained = train(data_dir, tmp_path / "trained", tiny_config(max_steps=25, log_every=5), progress=False)
    model_dir = average_run(tmp_path / "trained", last=1)
    config_file = tmp_path / "one_step.yaml"
    tiny_config(max_steps=1, log_every=1).to_yaml(config_file)

    def first_loss(run: Path, *extra: str) -> float:
        args = ["train", str(data_dir), "--out", str(run), "--config", str(config_file), "--no-progress"]
        assert main([*args, *extra]) == 0
        return next(
            r["loss"] for r in map(json.loads, (run / "metrics.jsonl").open()) if r["kind"] == "train"
        )

    scratch = first_loss(tmp_path / "scratch")
    fine = first_loss(tmp_path / "fine", "--init-from", str(model_dir))
    trained_loss = [
        r["loss"] for r in map(json.loads, (trained.checkpoint.parent.parent / "metrics.jsonl").open())
    ]
    assert fine < scratch - 1.0, (fine, scratch)
    assert fine < trained_loss[-1] + 0.5, (fine, trained_loss)
    info = json.loads((tmp_path / "fine" / "run.json").read_text())
    assert info["init_from"] == str(model_dir.resolve())


def test_quickstart_seed_reaches_the_trainer(monkeypatch, tmp_path):
    import aiayn.apps.quickstart as qs

    calls = []
    monkeypatch.setattr(qs, "quickstart", lambda *args: calls.append(args))
    assert main(["quickstart", "--seed", "7", "--out", str(tmp_path)]) == 0
    assert main(["quickstart", "--out", str(tmp_path)]) == 0
    assert [c[-1] for c in calls] == [7, None]  # the seed, then the recipe's
    assert qs.quickstart_config(seed=None).train.seed == qs.quickstart_config(seed=1).train.seed

    seen = []
    monkeypatch.setattr("aiayn.train.trainer.train", lambda data, out, config: seen.append(config) or 1 / 0)
    with pytest.raises(ZeroDivisionError):  # stops right after the trainer got its config
        qs._train_and_average(tmp_path / "data", tmp_path / "run", qs.quickstart_config(seed=7))
    assert seen[0].train.seed == 7 and seen[0].train.max_steps == qs.QUICKSTART_STEPS


@pytest.mark.parametrize("minutes", ["0", "-1", "nan", "inf"])
def test_a_bad_quickstart_budget_is_refused_before_any_work(monkeypatch, tmp_path, capsys, minutes):
    import aiayn.apps.quickstart as qs

    monkeypatch.setattr(qs, "quickstart", lambda *args: pytest.fail("quickstart ran"))
    assert main(["quickstart", "--minutes", minutes, "--out", str(tmp_path / "qs")]) == 2
    err = capsys.readouterr().err
    assert err == f"aiayn quickstart: error: --minutes must be a finite number > 0, got {float(minutes)}\n"
    assert not (tmp_path / "qs").exists()
