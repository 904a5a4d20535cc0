"""Training the Vision Transformer: a short classification loop (`VisionTrainer._train`).

Built from the parts `aiayn train` (section 5) uses: atomic checkpoints with exact resume (weights,
optimizer, RNG states, data position; aiayn.train.checkpointer), the run clock and the early timing
of the budget (aiayn.train.clock), metrics.jsonl + TensorBoard and the progress bar
(aiayn.train.metrics), the stop-signal rule (aiayn.train.stop); and label-smoothed cross entropy
(5.4) and, as an option, the learning rate of Eq. 3 (5.3). Specific to images: AdamW with
decoupled weight decay, linear warm-up then cosine decay, random-crop / flip augmentation,
accuracy, a dev evaluation after each epoch.

The cosine runs over the run's progress: the larger of steps done / planned steps and, with a time
budget, seconds spent / seconds available, so the rate reaches zero when the budget ends however
fast the machine is. The budget covers the whole run, the final test evaluation included.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

from aiayn.checks import ConfigError, check_choice, check_number, check_seed
from aiayn.config import Serializable, load_yaml
from aiayn.data.batching import BatchStream
from aiayn.errors import AiaynError
from aiayn.runtime.linear import route_linears
from aiayn.safe_io import atomic_write_text, output_dir
from aiayn.train import checkpoint
from aiayn.train.checkpointer import Checkpointer
from aiayn.train.clock import RunClock
from aiayn.train.distributed import DistEnv
from aiayn.train.loss import label_smoothed_nll
from aiayn.train.metrics import RunLog
from aiayn.train.schedule import noam_lr
from aiayn.train.signals import StopSignals
from aiayn.train.stop import StopRules
from aiayn.vision.data import ImageSplits, ShuffledBatches, augment, to_tensor
from aiayn.vision.evaluate import evaluate
from aiayn.vision.io import check_vision_model_out, save_vision_model
from aiayn.vision.model import VisionConfig, VisionTransformer
from aiayn.vision.plots import plot_vision_curves

RUN_CONFIG = "config.yaml"
DEFAULT_EPOCHS = 20  # 90.5% test accuracy; about 14 min on a 2-core AVX-512 EPYC, 52 on AVX2 only


@dataclass
class VisionTrainConfig(Serializable):
    """The recipe. Field names differ from VisionConfig's, so `--set key=value` finds the owner."""

    batch_size: int = 128
    lr: float = 3e-3  # the peak rate, reached at the end of warm-up
    warmup_steps: int = 200
    schedule: str = "cosine"  # cosine | noam (Eq. 3, rescaled so its peak is `lr`)
    weight_decay: float = 0.05  # AdamW's, decoupled; not applied to biases, norms, positions
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    label_smoothing: float = 0.1
    clip_norm: float | None = 1.0
    epochs: int | None = None  # None: DEFAULT_EPOCHS, or with `minutes` as many as the time allows
    minutes: float | None = None  # time budget of the whole run (final evaluation included)
    valid_size: int = 2000  # held out of the training images
    crop_pad: int = 1  # random crop after zero padding by this many pixels (shifts of up to 1); 0: off
    flip: bool = True  # random horizontal flip
    eval_batch_size: int = 1000
    log_every: int = 50
    save_minutes: float | None = 5.0
    keep_last: int = 2
    seed: int = 1

    def __post_init__(self) -> None:
        check_choice("schedule", self.schedule, ("cosine", "noam"))
        for name in ("batch_size", "warmup_steps", "epochs", "eval_batch_size", "log_every", "keep_last"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.crop_pad < 0:
            raise ConfigError(f"crop_pad must be 0 (no crop) or more, got {self.crop_pad}")
        check_number("lr", self.lr)
        check_number("minutes", self.minutes, null=True)
        check_number("weight_decay", self.weight_decay, zero=True)
        check_number("clip_norm", self.clip_norm, null=True)
        check_number("save_minutes", self.save_minutes, zero=True, null=True)
        check_seed("seed", self.seed)
        for name in ("label_smoothing", "adam_beta1", "adam_beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)}")


@dataclass
class VisionResult:
    run_dir: Path
    model_dir: Path
    step: int
    epochs: float
    stop_reason: str  # epochs | minutes | signal:<NAME>
    test_accuracy: float | None
    test_loss: float | None
    seconds: float
    n_parameters: int


def vision_lr(step: int, fraction: float, t: VisionTrainConfig, d_model: int) -> float:
    """The rate of update `step` (from 1) when `fraction` of the run is done: linear warm-up over
    `warmup_steps`, then a cosine to zero at fraction 1; or Eq. 3 with its peak rescaled to `lr`."""
    if t.schedule == "noam":
        return noam_lr(step, d_model, t.warmup_steps, peak=t.lr)
    return t.lr * min(1.0, step / t.warmup_steps) * 0.5 * (1.0 + math.cos(math.pi * min(fraction, 1.0)))


@dataclass
class Window:
    """Training figures since the last log line, and the time per image (a moving average)."""

    loss: float = 0.0
    correct: int = 0
    seen: int = 0
    seconds_per_image: float = 0.0

    def add(self, loss: float, correct: int, images: int, seconds: float) -> None:
        self.loss, self.correct, self.seen = self.loss + loss, self.correct + correct, self.seen + images
        rate = seconds / images
        self.seconds_per_image = 0.9 * self.seconds_per_image + 0.1 * rate if self.seconds_per_image else rate


def build_optimizer(model: VisionTransformer, t: VisionTrainConfig) -> torch.optim.AdamW:
    """AdamW; the projection matrices decay, the rest (biases, LayerNorm gains, class token,
    positions) does not."""
    params = list(model.named_parameters())
    decay = [p for n, p in params if n.endswith(".weight") and p.dim() == 2]
    other = [p for n, p in params if not (n.endswith(".weight") and p.dim() == 2)]
    groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": other, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=0.0, betas=(t.adam_beta1, t.adam_beta2), foreach=True)


def write_run_config(run_dir: Path, model: VisionConfig, t: VisionTrainConfig) -> None:
    """config.yaml; resuming with another model config is refused (the weights would not fit), and
    a config.yaml that no vision run wrote (another program's) is never overwritten."""
    path = run_dir / RUN_CONFIG
    saved = load_yaml(path) if path.exists() else None
    if path.exists() and not (isinstance(saved, dict) and "vision" in saved):
        raise AiaynError(
            f"{path} is not a vision run's config and training would replace it; use a new --out"
        )
    if saved is not None and checkpoint.list_checkpoints(run_dir) and saved["vision"] != model.to_dict():
        raise AiaynError(
            f"{path}: the run's checkpoints were made with another model config; use a new --out"
        )
    output_dir(run_dir, "--out")
    text = yaml.safe_dump({"vision": model.to_dict(), "train": t.to_dict()}, sort_keys=False)
    atomic_write_text(path, text)


def check_images_fit(splits: ImageSplits, config: VisionConfig) -> None:
    """A ConfigError unless the model takes these images and labels: its image_size, channels and
    n_classes against the splits' (a mismatch would fail in the first forward pass, or worse)."""
    images = splits.train[0]  # (n, H, W) or (n, C, H, W)
    if not len(images):
        raise AiaynError("no training images")
    channels, height, width = (1, *images.shape[1:]) if images.ndim == 3 else images.shape[1:]
    if (height, width) != (config.image_size, config.image_size) or channels != config.channels:
        raise ConfigError(
            f"the images are {channels} x {height} x {width} but the model takes "
            f"{config.channels} x {config.image_size} x {config.image_size} (channels, image_size)"
        )
    top = max(int(y.max()) for _, y in (splits.train, splits.valid, splits.test) if len(y))
    if top >= config.n_classes:
        raise ConfigError(f"the labels go up to {top} but the model has n_classes={config.n_classes}")


class VisionTrainer:
    """Builds the model, optimizer, data and parts for a run directory; `run()` trains."""

    def __init__(
        self, run_dir: Path, splits: ImageSplits, model_config: VisionConfig, t: VisionTrainConfig, device
    ):
        self.run_dir, self.splits, self.t = run_dir, splits, t
        self.env = DistEnv(rank=0, world_size=1, device=torch.device(device))
        torch.manual_seed(t.seed)
        self.model = VisionTransformer(model_config).to(self.env.device)
        route_linears(self.model.encoder)  # the encoder's products through oneDNN, as the text model's
        self.optimizer = build_optimizer(self.model, t)
        checkpoint.seed_everything(t.seed)
        self.images, self.labels = splits.train
        if not len(self.images):
            raise AiaynError("no training images")
        self.steps_per_epoch = math.ceil(len(self.images) / t.batch_size)
        epochs = t.epochs or (None if t.minutes else DEFAULT_EPOCHS)
        self.total_steps = epochs * self.steps_per_epoch if epochs else None  # None: the time decides
        self.checkpoints = Checkpointer(run_dir, self.env, self.model, self.optimizer, t.keep_last)
        self.state, _ = self.checkpoints.restore()
        self.start_step = self.state.step
        batches = ShuffledBatches(len(self.images), t.batch_size, t.seed)
        self.stream = BatchStream(batches, self.state.epoch, self.state.index, self.state.start)
        self.window, self.fraction = Window(), 0.0

    # -- progress of the run ----------------------------------------------------------------------
    def _fraction(self) -> float:
        """The fraction of the run done: of the steps, or of the time budget less a reserve for
        the last evaluations (a forward pass costs about a third of an update)."""
        done = self.state.step / self.total_steps if self.total_steps else 0.0
        if self.t.minutes is None:
            return done
        n_eval = len(self.splits.test[0]) + len(self.splits.valid[0])
        reserve = n_eval * self.window.seconds_per_image / 2
        return max(done, self.clock.seconds() / max(self.t.minutes * 60 - reserve, 1e-9))

    def _lr(self) -> float:
        return vision_lr(self.state.step + 1, self.fraction, self.t, self.model.config.d_model)

    def _budget_reason(self) -> str | None:
        """`epochs`, or `minutes`: the budget of the whole run, across resumes."""
        self.fraction = self._fraction()
        if self.fraction < 1.0:
            return None
        return "epochs" if self.total_steps and self.state.step >= self.total_steps else "minutes"

    # -- training ---------------------------------------------------------------------------------
    def _update(self) -> bool:
        """One AdamW step on the stream's next batch of training images."""
        began = time.monotonic()
        index = self.stream.next()
        x = to_tensor(self.images[index])  # (batch, C, H, W) in [0, 1]
        if self.t.crop_pad or self.t.flip:
            x = augment(x, self.t.crop_pad, self.t.flip)
        x, y = x.to(self.env.device), torch.from_numpy(self.labels[index]).to(self.env.device)  # y (batch,)
        logits = self.model(x)  # (batch, n_classes)
        correct = int((logits.argmax(-1) == y).sum())  # before the loss writes over the logits
        loss, _ = label_smoothed_nll(logits, y, self.t.label_smoothing, -1, overwrite_logits=True)
        (loss / len(index)).backward()
        if self.t.clip_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.t.clip_norm, foreach=True)
        for group in self.optimizer.param_groups:
            group["lr"] = self._lr()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.state.step, self.state.tokens = self.state.step + 1, self.state.tokens + len(index)
        self.window.add(loss.item(), correct, len(index), time.monotonic() - began)
        return True

    def _save(self) -> None:
        """A checkpoint (left out of the budget timing)."""
        with self.clock.paused():
            self.checkpoints.save(self.state, self.stream.position, self.clock.seconds())
            self.clock.saved()

    # -- logging and evaluation -------------------------------------------------------------------
    def _say_timing(self) -> None:
        """Once, early in the run: the measured speed and when the budget ends (aiayn.train.eta)."""
        row = self.clock.eta.after_update(self.state.step, self.state.tokens)
        if row is not None:
            self._add_evaluations(row)
            self.log.row("eta", self.state.step, row)
            self.log.say(self.clock.eta.message(row, self.state.step))

    def _add_evaluations(self, row: dict) -> None:
        """The rest of the epochs as the clock measured them, plus the evaluations still to come
        (a forward pass costs about a third of an update), within the time budget."""
        epochs_left = self.total_steps / self.steps_per_epoch - self.state.epoch
        eval_images = epochs_left * len(self.splits.valid[0]) + len(self.splits.test[0])
        row["seconds_left"] += eval_images * row["s_per_update"] / self.t.batch_size / 3
        if self.t.minutes is not None:
            row["seconds_left"] = min(row["seconds_left"], self.t.minutes * 60 - self.clock.seconds())

    def _log_train(self) -> None:
        w = self.window
        row = {
            "loss": w.loss / max(w.seen, 1),
            "accuracy": w.correct / max(w.seen, 1),
            "lr": self._lr(),
            "img_s": 1.0 / max(w.seconds_per_image, 1e-9),
            "epoch": self.state.step / self.steps_per_epoch,
            "elapsed_s": self.clock.seconds(),
        }
        w.loss, w.correct, w.seen = 0.0, 0, 0
        self.log.row("train", self.state.step, row)
        shown = {
            "loss": f"{row['loss']:.3f}",
            "acc": f"{row['accuracy']:.3f}",
            "img_s": f"{row['img_s']:.0f}",
        }
        self.log.bar(self.state.step, **shown)

    def _evaluate_split(self, split: str) -> dict[str, float]:
        """valid -> a "dev" metrics row; test -> a "test" row. {} for an empty split."""
        images, labels = getattr(self.splits, split)
        if not len(images):
            return {}
        with self.clock.paused():
            loss, accuracy = evaluate(self.model, images, labels, self.t.eval_batch_size)
        self.model.train()
        row = {f"{split}_loss": loss, f"{split}_accuracy": accuracy}
        self.log.result("dev" if split == "valid" else split, self.state.step, row, spec=".4f")
        return row

    # -- the loop ---------------------------------------------------------------------------------
    def run(self, progress: bool = True) -> VisionResult:
        """Train until the budget or a signal ends the run; evaluate; write RUN_DIR/model."""
        t, step = self.t, self.state.step
        self.clock = RunClock(
            self.state.seconds, self.start_step, self.total_steps, t.minutes, "img_s", "images"
        )
        self.log = RunLog(
            self.run_dir, True, step, bar=progress, max_steps=self.total_steps, minutes=t.minutes
        )
        self.model.train()
        test = {}
        try:
            with StopSignals() as signals:
                reason = self._train(StopRules(self.env, signals, save_minutes=t.save_minutes))
                if reason == "minutes":  # stopped mid-epoch: the final weights' dev figures too
                    self._evaluate_split("valid")
                if not reason.startswith("signal"):
                    test = self._evaluate_split("test")
        finally:
            self.log.close()
        return self._finish(reason, test)

    def _train(self, rules: StopRules) -> str:
        """The loop: updates until the budget or a signal ends the run; then the last steps' train
        row and a checkpoint. The time budget is the fraction's (`_budget_reason`), not the rules'."""
        state = self.state
        while (reason := self._budget_reason()) is None:
            self._update()
            self._say_timing()
            if state.step % self.t.log_every == 0:
                self._log_train()
            if self.stream.end_of_epoch:
                self._evaluate_split("valid")
            reason, save_due = rules.after_update(self.clock)
            if reason is not None:
                break
            if save_due:
                self._save()
        if state.step > self.log.train_step:  # the steps since the last log_every
            self._log_train()
        if self.checkpoints.step != state.step:
            self._save()
        return reason

    def _finish(self, reason: str, test: dict[str, float]) -> VisionResult:
        """Write RUN_DIR/model (with the test figures in its config.json) and the plots."""
        seconds, epochs, n_params = (
            self.clock.seconds(),
            self.state.step / self.steps_per_epoch,
            self.model.num_parameters(),
        )
        info = {"steps": self.state.step, "epochs": round(epochs, 3), "train_seconds": round(seconds, 1)}
        classes = list(self.splits.classes)
        model_dir = save_vision_model(
            self.model, self.run_dir / "model", classes, n_parameters=n_params, **info, **test
        )
        plot_vision_curves(self.run_dir)
        return VisionResult(
            self.run_dir, model_dir, self.state.step, epochs, reason,
            test.get("test_accuracy"), test.get("test_loss"), seconds, n_params,
        )  # fmt: skip


def train_vision(
    run_dir: str | Path,
    splits: ImageSplits,
    model_config: VisionConfig | None = None,
    train_config: VisionTrainConfig | None = None,
    progress: bool = True,
    device: str = "cpu",
) -> VisionResult:
    """Train (or resume, if `run_dir` has checkpoints) a Vision Transformer on `splits`; write
    checkpoints, metrics.jsonl, plots/ and the final model directory RUN_DIR/model."""
    run_dir = Path(run_dir)
    model_config = model_config or VisionConfig()
    train_config = train_config or VisionTrainConfig()
    check_images_fit(splits, model_config)
    check_vision_model_out(run_dir / "model")  # before training, not after it
    write_run_config(run_dir, model_config, train_config)
    checkpoint.remove_partial(run_dir)
    return VisionTrainer(run_dir, splits, model_config, train_config, device).run(progress)
