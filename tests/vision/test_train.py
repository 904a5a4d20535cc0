"""The ViT training loop: it learns, resumes exactly, and the two CLI commands work end to end."""

import json
import math
import re
import shutil

import pytest
import torch
from safetensors.torch import load_file

from aiayn.cli import main
from aiayn.config import ConfigError
from aiayn.errors import AiaynError
from aiayn.train import checkpoint, eta
from aiayn.vision import train as vision_train
from aiayn.vision.data import FASHION_MNIST_DIR
from aiayn.vision.model import VisionConfig, VisionTransformer
from aiayn.vision.train import VisionTrainConfig, build_optimizer, train_vision, vision_lr

HAVE_FASHION_MNIST = (FASHION_MNIST_DIR / "t10k-images-idx3-ubyte.gz").is_file()

TINY = VisionConfig(image_size=8, patch_size=4, n_classes=4, d_model=32, d_ff=64, n_heads=2, n_layers=2)


def quick_recipe(**changes) -> VisionTrainConfig:
    base = dict(batch_size=32, epochs=4, warmup_steps=10, lr=1e-2, log_every=8, crop_pad=0, flip=False)
    return VisionTrainConfig(**{**base, "save_minutes": None, **changes})


def test_a_tiny_vit_learns_which_quadrant_is_bright(tmp_path, quadrant_splits, one_thread, capsys):
    result = train_vision(tmp_path / "run", quadrant_splits, TINY, quick_recipe(), progress=False)
    assert result.stop_reason == "epochs" and result.step == 4 * 32
    assert result.test_accuracy >= 0.95  # chance is 0.25
    info = json.loads((result.model_dir / "config.json").read_text())
    assert info["test_accuracy"] == result.test_accuracy and info["classes"] == ["NW", "NE", "SW", "SE"]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert {r["kind"] for r in rows} == {"train", "dev", "test", "eta"}
    assert [r for r in rows if r["kind"] == "train"][-1]["accuracy"] >= 0.8  # the logits, not the gradient
    (timing,) = [r for r in rows if r["kind"] == "eta"]  # said once, after the timed span
    assert timing["step"] == eta.SKIP + eta.SPAN
    updates_left = 4 * 32 - timing["step"]
    assert timing["seconds_left"] > updates_left * timing["s_per_update"]  # + the evaluations to come
    assert timing["img_s"] == pytest.approx(32 / timing["s_per_update"], rel=0.01)
    assert "the rest takes about" in capsys.readouterr().err
    assert sum(r["kind"] == "dev" for r in rows) == 4  # one dev evaluation per epoch
    assert sorted(p.name for p in (tmp_path / "run" / "plots").iterdir()) == [
        "accuracy.png",
        "loss.png",
        "lr.png",
    ]


class StopAfter:
    """Stands in for StopSignals: reports SIGTERM once the loop has asked `after` times."""

    def __init__(self, after: int):
        self.after = after

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @property
    def received(self):
        self.after -= 1
        return "SIGTERM" if self.after < 0 else None


def test_an_interrupted_run_resumes_exactly(tmp_path, quadrant_splits, one_thread, monkeypatch):
    recipe = quick_recipe(epochs=2, crop_pad=1, flip=True, log_every=5)  # augmentation draws random numbers
    straight = train_vision(tmp_path / "straight", quadrant_splits, TINY, recipe, progress=False)

    monkeypatch.setattr(vision_train, "StopSignals", lambda: StopAfter(45))  # mid-way through epoch 2
    stopped = train_vision(tmp_path / "resumed", quadrant_splits, TINY, recipe, progress=False)
    assert stopped.stop_reason == "signal:SIGTERM" and stopped.step == 46 and stopped.test_accuracy is None
    monkeypatch.undo()
    resumed = train_vision(tmp_path / "resumed", quadrant_splits, TINY, recipe, progress=False)

    assert resumed.step == straight.step == 64
    a = load_file(straight.model_dir / "model.safetensors")
    b = load_file(resumed.model_dir / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.test_accuracy == straight.test_accuracy
    steps = [json.loads(x)["step"] for x in (tmp_path / "resumed" / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(steps)  # rows after the checkpoint were not logged twice


def test_a_checkpoint_from_before_the_shared_loop_resumes_exactly(
    tmp_path, quadrant_splits, one_thread, monkeypatch
):
    """The shared checkpointer (aiayn.train.checkpointer) saves one RNG state per rank and the world
    size; the vision trainer's own checkpoints had one state and no world size, and still resume exactly."""
    recipe = quick_recipe(epochs=2, crop_pad=1, flip=True)  # augmentation draws random numbers
    straight = train_vision(tmp_path / "straight", quadrant_splits, TINY, recipe, progress=False)
    monkeypatch.setattr(vision_train, "StopSignals", lambda: StopAfter(40))
    train_vision(tmp_path / "resumed", quadrant_splits, TINY, recipe, progress=False)
    monkeypatch.undo()
    [saved] = checkpoint.list_checkpoints(tmp_path / "resumed")
    state = torch.load(saved / "trainer_state.pt", weights_only=True)
    assert state["world_size"] == 1 and len(state["rng"]) == 1
    state["rng"] = state["rng"][0]
    del state["world_size"]
    state["loop"] = {k: state["loop"][k] for k in ("step", "epoch", "index", "seconds")}
    torch.save(state, saved / "trainer_state.pt")  # as the vision trainer wrote it before
    resumed = train_vision(tmp_path / "resumed", quadrant_splits, TINY, recipe, progress=False)
    a = load_file(straight.model_dir / "model.safetensors")
    b = load_file(resumed.model_dir / "model.safetensors")
    assert resumed.step == straight.step == 64 and all(torch.equal(a[k], b[k]) for k in a)


def test_another_state_version_is_refused_in_one_line(tmp_path, quadrant_splits, one_thread):
    train_vision(tmp_path, quadrant_splits, TINY, quick_recipe(epochs=1), progress=False)
    [saved] = checkpoint.list_checkpoints(tmp_path)
    state = torch.load(saved / "trainer_state.pt", weights_only=True)
    torch.save({**state, "version": 99}, saved / "trainer_state.pt")
    with pytest.raises(AiaynError, match=r"step_000032: trainer state version 99 is not 1$"):
        train_vision(tmp_path, quadrant_splits, TINY, quick_recipe(epochs=2), progress=False)


def test_the_last_steps_are_logged_when_the_run_stops_between_logs(tmp_path, quadrant_splits, one_thread):
    """The shared loop's rule, which the translation trainer had alone: a run that ends between two
    `log_every` steps still writes the train row of its last steps."""
    train_vision(tmp_path, quadrant_splits, TINY, quick_recipe(epochs=1, log_every=5), progress=False)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["kind"] == "train"] == [5, 10, 15, 20, 25, 30, 32]


def test_resuming_with_another_model_is_refused(tmp_path, quadrant_splits, one_thread):
    train_vision(tmp_path, quadrant_splits, TINY, quick_recipe(epochs=1), progress=False)
    with pytest.raises(AiaynError, match="another model config"):
        train_vision(tmp_path, quadrant_splits, TINY.replace(d_ff=32), quick_recipe(epochs=1), progress=False)


def test_a_damaged_run_config_is_a_one_line_error(tmp_path, quadrant_splits, one_thread):
    """A hand-edited config.yaml that is no longer YAML: the file, line and column, no traceback."""
    train_vision(tmp_path, quadrant_splits, TINY, quick_recipe(epochs=1), progress=False)
    (tmp_path / "config.yaml").write_text("vision:\n  d_model: [32\n")
    where = re.escape(str(tmp_path / "config.yaml"))
    with pytest.raises(AiaynError, match=rf"^{where}:3:1: invalid YAML: expected ','"):
        train_vision(tmp_path, quadrant_splits, TINY, quick_recipe(epochs=2), progress=False)


def test_another_programs_config_yaml_is_never_overwritten(tmp_path, quadrant_splits, one_thread):
    (tmp_path / "config.yaml").write_text("model: resnet\n")
    with pytest.raises(AiaynError, match=r"config.yaml is not a vision run's config"):
        train_vision(tmp_path, quadrant_splits, TINY, quick_recipe(epochs=1), progress=False)
    assert [p.name for p in tmp_path.iterdir()] == ["config.yaml"]
    assert (tmp_path / "config.yaml").read_text() == "model: resnet\n"


def test_time_budget_stops_the_run_and_still_evaluates(tmp_path, quadrant_splits, one_thread):
    result = train_vision(
        tmp_path, quadrant_splits, TINY, quick_recipe(epochs=None, minutes=0.02), progress=False
    )
    assert result.stop_reason == "minutes"
    assert result.test_accuracy is not None and checkpoint.list_checkpoints(tmp_path)


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(minutes=float("nan")), "minutes must be a finite number > 0, or null, got nan"),
        (dict(minutes=0.0), "minutes must be a finite number > 0, or null, got 0.0"),
        (dict(lr=float("nan")), "lr must be a finite number > 0, got nan"),
        (dict(clip_norm=-1.0), "clip_norm must be a finite number > 0, or null, got -1.0"),
        (dict(weight_decay=-1.0), "weight_decay must be a finite number >= 0, got -1.0"),
        (dict(adam_beta2=1.0), r"adam_beta2 must be in \[0, 1\), got 1.0"),
        (dict(crop_pad=-1), "crop_pad must be 0 \\(no crop\\) or more, got -1"),
        (dict(seed=-1), r"seed must be an integer from 0 to 2\*\*63 - 1, got -1"),
    ],
)
def test_bad_recipes_are_refused(changes, message):
    with pytest.raises(ConfigError, match=f"^{message}$"):
        VisionTrainConfig(**changes)


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(image_size=16), r"the images are 1 x 8 x 8 but the model takes 1 x 16 x 16"),
        (dict(channels=3), r"the images are 1 x 8 x 8 but the model takes 3 x 8 x 8"),
        (dict(n_classes=3), r"the labels go up to 3 but the model has n_classes=3"),
    ],
)
def test_a_model_that_does_not_take_the_images_is_refused_before_training(
    tmp_path, quadrant_splits, changes, message
):
    model = VisionConfig(**{**TINY.to_dict(), **changes})
    with pytest.raises(ConfigError, match=message):
        train_vision(tmp_path / "run", quadrant_splits, model, quick_recipe(epochs=1), progress=False)
    assert not (tmp_path / "run" / "model").exists()


def test_a_text_model_in_the_run_directory_is_never_overwritten(tmp_path, quadrant_splits, toy_model_dir):
    shutil.copytree(toy_model_dir, tmp_path / "run" / "model")
    files = [p for p in (tmp_path / "run" / "model").iterdir() if p.is_file()]
    before = {p.name: p.read_bytes() for p in files}
    with pytest.raises(AiaynError, match=r"run/model exists and is not an image model directory"):
        train_vision(tmp_path / "run", quadrant_splits, TINY, quick_recipe(epochs=1), progress=False)
    assert {p.name: p.read_bytes() for p in files} == before and "config.json" in before
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["model"]


def test_warm_up_then_cosine_and_the_papers_schedule():
    t = VisionTrainConfig(lr=1e-3, warmup_steps=100)
    assert vision_lr(50, 0.0, t, 128) == pytest.approx(0.5e-3)
    assert vision_lr(100, 0.0, t, 128) == pytest.approx(1e-3)
    assert vision_lr(500, 0.5, t, 128) == pytest.approx(0.5e-3)
    assert vision_lr(900, 0.75, t, 128) == pytest.approx(1e-3 * (1 + math.cos(0.75 * math.pi)) / 2)
    assert vision_lr(1000, 1.0, t, 128) == pytest.approx(0.0, abs=1e-12)
    noam = t.replace(schedule="noam")
    assert vision_lr(100, 0.3, noam, 128) == pytest.approx(1e-3)  # Eq. 3 peaks at warm-up's end
    assert vision_lr(400, 0.9, noam, 128) == pytest.approx(0.5e-3)  # then falls as step^-0.5


def test_weight_decay_spares_biases_norms_the_class_token_and_positions():
    model = VisionTransformer(TINY)
    decay, other = build_optimizer(model, VisionTrainConfig(weight_decay=0.1)).param_groups
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    assert decay["weight_decay"] == 0.1 and other["weight_decay"] == 0.0
    assert decayed == {n for n, p in model.named_parameters() if n.endswith("weight") and p.dim() == 2}
    assert len(decay["params"]) + len(other["params"]) == len(list(model.parameters()))


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_FASHION_MNIST, reason="Debian package dataset-fashion-mnist is not installed")
def test_cli_vision_train_and_vision_attention(tmp_path, capsys, one_thread):
    run = tmp_path / "run"
    small = ["--set", "d_model=32", "--set", "d_ff=64", "--set", "n_layers=1", "--set", "batch_size=50"]
    argv = ["vision-train", "--out", str(run), "--limit", "200", "--epochs", "1", "--no-progress", *small]
    assert main(argv) == 0
    assert "test accuracy" in capsys.readouterr().out
    assert checkpoint.list_checkpoints(run)[-1].name == "step_000004"
    assert (run / "model" / "model.safetensors").is_file() and (run / "metrics.jsonl").is_file()
    png = tmp_path / "attention.png"
    assert main(["vision-attention", str(run / "model"), "--index", "7", "--out", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert main(["vision-attention", str(run / "model"), "--index", "10000", "--out", str(png)]) == 2
    assert "error: --index 10000 is out of range" in capsys.readouterr().err
    for flag, value in (("--threads", "0"), ("--limit", "-5"), ("--threads", "two")):
        with pytest.raises(SystemExit):
            main(["vision-train", "--out", str(run), flag, value])
        assert "argument " + flag in capsys.readouterr().err


def test_the_vision_budget_reads_the_whole_run_once(tmp_path, quadrant_splits, one_thread, fake_clock):
    # a 2-minute budget is 12 updates of 10 fake seconds, with a checkpoint every 30 of them
    # (an epoch is 32 updates: the budget, not the epochs, ends the run)
    recipe = quick_recipe(epochs=None, minutes=2.0, save_minutes=0.5)
    result = vision_train.train_vision(tmp_path / "vit", quadrant_splits, TINY, recipe, progress=False)
    assert (result.stop_reason, result.step, result.seconds) == ("minutes", 12, 120.0)
    saved = [_state(path)["loop"]["seconds"] for path in checkpoint.list_checkpoints(tmp_path / "vit")]
    assert saved == [90.0, 120.0]  # the last two kept


def test_the_budget_timing_leaves_each_evaluation_out_once(
    tmp_path, quadrant_splits, one_thread, fake_clock, monkeypatch
):
    """An epoch of 8 updates puts dev evaluations inside the timed span; each takes 100 fake seconds,
    the updates 10 each: the timing says 10 s per update (an evaluation left out twice said 0)."""
    real = vision_train.evaluate

    def slow(*args, **kwargs):
        fake_clock[0] += 100.0
        return real(*args, **kwargs)

    monkeypatch.setattr(vision_train, "evaluate", slow)
    recipe = quick_recipe(batch_size=128, epochs=5)
    vision_train.train_vision(tmp_path / "vit", quadrant_splits, TINY, recipe, progress=False)
    rows = map(json.loads, (tmp_path / "vit" / "metrics.jsonl").read_text().splitlines())
    (timing,) = [r for r in rows if r["kind"] == "eta"]
    assert (timing["step"], timing["s_per_update"], timing["img_s"]) == (eta.SKIP + eta.SPAN, 10.0, 12.8)


def _state(path):
    return torch.load(path / "trainer_state.pt", weights_only=True)


def test_a_vision_model_given_to_a_text_command_says_what_it_is(tmp_path, capsys):
    """translate, serve, export-hf and attention used to say `no "model" settings`."""
    from aiayn.model.io import load_model_dir
    from aiayn.vision.io import save_vision_model

    out = save_vision_model(VisionTransformer(TINY), tmp_path / "vit", ["NW", "NE", "SW", "SE"])
    with pytest.raises(
        AiaynError, match="a vision model .image classification.; `aiayn vision-attention` takes it"
    ):
        load_model_dir(out)
    (tmp_path / "in.txt").write_text("a\n")
    assert main(["translate", str(out), "-i", str(tmp_path / "in.txt")]) == 2
    assert "a vision model" in capsys.readouterr().err
