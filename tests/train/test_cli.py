"""`aiayn train / average / plot`: config resolution and a tiny end-to-end run on the CPU."""

import json
import random
from pathlib import Path

import pytest
import torch
from toy_data import tiny_config, write_data_dir

from aiayn.cli import main
from aiayn.config import ModelConfig, RunConfig
from aiayn.errors import AiaynError
from aiayn.model.io import load_model_dir
from aiayn.train.checkpoint import average_run
from aiayn.train.run import build_run_config
from aiayn.train.trainer import train

CONFIGS = Path(__file__).parent.parent.parent / "configs"


@pytest.mark.parametrize("name", ["tiny", "base", "big"])
def test_presets_in_configs_match_the_model_presets(name):
    config = RunConfig.from_yaml(CONFIGS / f"{name}.yaml")
    preset = ModelConfig.preset(name)
    assert (config.model.n_layers, config.model.d_model, config.model.d_ff, config.model.n_heads) == (
        preset.n_layers,
        preset.d_model,
        preset.d_ff,
        preset.n_heads,
    )
    if name != "tiny":  # the paper's recipe (5.3, 5.4)
        t = config.train
        assert (t.warmup_steps, t.label_smoothing, t.adam_beta2, t.adam_eps, t.lr_peak) == (
            4000,
            0.1,
            0.98,
            1e-9,
            None,
        )


def test_build_run_config_order_and_overrides(tmp_path):
    config = build_run_config(
        tmp_path, preset="tiny", overrides=["d_model=64", "warmup_steps=300"], max_steps=7
    )
    assert (config.model.d_model, config.model.n_layers, config.train.warmup_steps) == (64, 3, 300)
    assert (config.train.max_steps, config.train.seed) == (7, 1)
    assert build_run_config(tmp_path).model.d_model == 512  # the paper's base model by default
    config.to_yaml(tmp_path / "config.yaml")  # a run directory's own config wins over the default
    assert build_run_config(tmp_path, minutes=2.5, seed=3).model.d_model == 64
    assert build_run_config(tmp_path, config_file=CONFIGS / "big.yaml").model.d_model == 1024
    with pytest.raises(AiaynError, match="no such setting"):
        build_run_config(tmp_path, overrides=["d_moddel=3"])
    with pytest.raises(AiaynError, match="no such config file"):
        build_run_config(tmp_path, config_file=tmp_path / "missing.yaml")


def write_corpus(directory: Path, n: int = 400) -> tuple[Path, Path]:
    rng = random.Random(5)
    words = ["sol", "luna", "mar", "rio", "casa", "perro", "gato", "libro", "agua", "pan"]
    english = dict(
        zip(
            words,
            ["sun", "moon", "sea", "river", "house", "dog", "cat", "book", "water", "bread"],
            strict=True,
        )
    )
    src, tgt = [], []
    for _ in range(n):
        sentence = [rng.choice(words) for _ in range(rng.randint(3, 10))]
        src.append(" ".join(sentence))
        tgt.append(" ".join(english[w] for w in sentence))
    (directory / "corpus.es").write_text("\n".join(src) + "\n")
    (directory / "corpus.en").write_text("\n".join(tgt) + "\n")
    return directory / "corpus.es", directory / "corpus.en"


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


def test_an_interrupted_config_rewrite_keeps_the_old_file(tmp_path, run_python):
    """config.yaml is rewritten at every start: a crash (here: a full disk) mid-write keeps the old one."""
    path = tmp_path / "config.yaml"
    tiny_config().to_yaml(path)
    before = path.read_text()
    printed = run_python(
        "from aiayn.config import RunConfig\nconfig = RunConfig()\nlimit_files(100)\n"
        f"try:\n    config.to_yaml({str(path)!r})\nexcept OSError as err:\n    print('failed', err.errno)\n"
    )
    assert printed.startswith("failed")
    assert path.read_text() == before and [p.name for p in tmp_path.iterdir()] == ["config.yaml"]


def test_an_empty_run_config_is_an_error_not_the_defaults(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text("")
    with pytest.raises(AiaynError, match=r"config.yaml: expected a YAML mapping of settings, found NoneType"):
        build_run_config(tmp_path / "run")


def test_learned_positions_shorter_than_a_dev_pair_fail_at_the_start(tmp_path):
    """Not `eval_every` steps into the run, when the first dev batch overflows the position table."""
    from aiayn.data.dataset import ShardWriter, TokenDataset

    data = write_data_dir(tmp_path / "data")
    train_set = TokenDataset(data, "train")
    widest = int(max(train_set.src_lengths.max(), train_set.tgt_lengths.max()))
    writer = ShardWriter(data, "valid", 80)
    writer.add([[5] * (widest + 4)], [[6] * 3])  # one dev pair longer than any train pair
    writer.close()
    config = tiny_config(max_steps=2, eval_every=1)
    config = config.replace(model=config.model.replace(positions="learned", max_positions=widest))
    message = rf"valid split has pairs of up to {widest + 5} tokens but the model has max_positions={widest}"
    with pytest.raises(AiaynError, match=message):
        train(data, tmp_path / "run", config, progress=False)
    assert not (tmp_path / "run").exists()
