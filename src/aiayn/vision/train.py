"""Training the Vision Transformer: a short classification loop on the trainer's machinery.

Shared with `aiayn train` (section 5): atomic checkpoints with exact resume (weights, optimizer,
RNG states, data position; `aiayn.train.checkpoint`), metrics.jsonl + TensorBoard and the progress
bar (`aiayn.train.metrics`), the stop-signal handling, label-smoothed cross entropy (5.4) and, as
an option, the learning rate of Eq. 3 (5.3). Specific to images: AdamW with decoupled weight
decay, linear warm-up then cosine decay, random-crop / flip augmentation, accuracy.

The cosine runs over the run's progress: the larger of steps done / planned steps and, with a time
budget, seconds spent / seconds available, so the rate reaches zero when the budget ends however
fast the machine is. The budget covers the whole run, the final test evaluation included.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import yaml

from aiayn.config import ConfigError, _check_choice, _Serializable
from aiayn.errors import AiaynError
from aiayn.safe_io import atomic_write_text
from aiayn.train import checkpoint, eta
from aiayn.train.loss import label_smoothed_nll
from aiayn.train.metrics import MetricsLog, Progress
from aiayn.train.schedule import noam_lr
from aiayn.train.signals import StopSignals
from aiayn.vision.data import ImageSplits, augment, to_tensor
from aiayn.vision.evaluate import evaluate
from aiayn.vision.io import save_vision_model
from aiayn.vision.model import VisionConfig, VisionTransformer
from aiayn.vision.plots import plot_vision_curves

STATE_VERSION = 1
RUN_CONFIG = "config.yaml"
DEFAULT_EPOCHS = 20  # 90.5% test accuracy; about 14 min on a 2-core AVX-512 EPYC, 52 on AVX2 only


@dataclass
class VisionTrainConfig(_Serializable):
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
        _check_choice("schedule", self.schedule, ("cosine", "noam"))
        for name in ("batch_size", "warmup_steps", "epochs", "eval_batch_size", "log_every", "keep_last"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.lr <= 0 or (self.minutes is not None and self.minutes <= 0):
            raise ConfigError("lr and minutes must be positive")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")


@dataclass
class LoopState:
    """What a checkpoint carries besides weights, optimizer and RNG states."""

    step: int = 0
    epoch: int = 0  # data position: the next batch is batches(epoch)[index]
    index: int = 0
    seconds: float = 0.0  # wall-clock time of the run so far, across resumes


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
    """config.yaml; resuming with another model config is refused (the weights would not fit)."""
    path = run_dir / RUN_CONFIG
    if path.is_file() and checkpoint.list_checkpoints(run_dir):
        old = (yaml.safe_load(path.read_text()) or {}).get("vision")
        if old != model.to_dict():
            raise AiaynError(
                f"{path}: the run's checkpoints were made with another model config; use a new --out"
            )
    run_dir.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump({"vision": model.to_dict(), "train": t.to_dict()}, sort_keys=False)
    atomic_write_text(path, text)


class VisionTrainer:
    def __init__(
        self, run_dir: Path, splits: ImageSplits, model_config: VisionConfig, t: VisionTrainConfig, device
    ):
        self.run_dir, self.splits, self.t, self.device = run_dir, splits, t, torch.device(device)
        self.start = time.monotonic()
        torch.manual_seed(t.seed)
        self.model = VisionTransformer(model_config).to(self.device)
        self.optimizer = build_optimizer(self.model, t)
        self.state = LoopState()
        checkpoint.seed_everything(t.seed)
        self.images, self.labels = splits.train
        if not len(self.images):
            raise AiaynError("no training images")
        self.steps_per_epoch = math.ceil(len(self.images) / t.batch_size)
        epochs = t.epochs or (None if t.minutes else DEFAULT_EPOCHS)
        self.total_steps = epochs * self.steps_per_epoch if epochs else None  # None: the time decides
        found = checkpoint.list_checkpoints(run_dir)
        if found:
            self._restore(found[-1])
        self.seconds_before = self.state.seconds
        self.saved_step, self.saved_time = self.state.step, self.start
        self.window = Window()

    # -- checkpoints ------------------------------------------------------------------------------
    def _restore(self, path: Path) -> None:
        state = checkpoint.load_checkpoint(path, self.model, self.device)
        if state.get("version") != STATE_VERSION:
            raise AiaynError(f"{path}: trainer state version {state.get('version')!r} is not {STATE_VERSION}")
        self.state = LoopState(**state["loop"])
        self.optimizer.load_state_dict(state["optimizer"])
        checkpoint.set_rng_state(state["rng"])
        print(f"resuming from {path} (step {self.state.step})", flush=True)

    def _save(self) -> Path:
        self.state.seconds = self._seconds()
        state = {
            "version": STATE_VERSION,
            "loop": asdict(self.state),
            "optimizer": self.optimizer.state_dict(),
            "rng": checkpoint.rng_state(),
        }
        path = checkpoint.save_checkpoint(self.run_dir, self.state.step, self.model, state, self.t.keep_last)
        self.saved_step, self.saved_time = self.state.step, time.monotonic()
        return path

    # -- progress of the run ----------------------------------------------------------------------
    def _seconds(self) -> float:
        return self.seconds_before + time.monotonic() - self.start

    def _fraction(self) -> float:
        """The fraction of the run done: of the steps, or of the time budget less a reserve for
        the last evaluations (a forward pass costs about a third of an update)."""
        done = self.state.step / self.total_steps if self.total_steps else 0.0
        if self.t.minutes is None:
            return done
        n_eval = len(self.splits.test[0]) + len(self.splits.valid[0])
        reserve = n_eval * self.window.seconds_per_image / 2
        return max(done, self._seconds() / max(self.t.minutes * 60 - reserve, 1e-9))

    def _lr(self, fraction: float) -> float:
        return vision_lr(self.state.step + 1, fraction, self.t, self.model.config.d_model)

    # -- training ---------------------------------------------------------------------------------
    def _update(self, index: np.ndarray, lr: float) -> tuple[float, int]:
        """One AdamW step on the training images `index` -> (summed loss, number correct)."""
        x = to_tensor(self.images[index])  # (batch, C, H, W) in [0, 1]
        if self.t.crop_pad or self.t.flip:
            x = augment(x, self.t.crop_pad, self.t.flip)
        x, y = x.to(self.device), torch.from_numpy(self.labels[index]).to(self.device)  # y (batch,)
        logits = self.model(x)  # (batch, n_classes)
        loss, _ = label_smoothed_nll(logits, y, self.t.label_smoothing, ignore_index=-1)
        (loss / len(index)).backward()
        if self.t.clip_norm:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.t.clip_norm, foreach=True)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.item(), int((logits.argmax(-1) == y).sum())

    def _train_epoch(self, signals: StopSignals) -> str | None:
        """Updates until the epoch, the budget or a signal ends; None when the epoch ended."""
        t = self.t
        order = np.random.default_rng([t.seed, self.state.epoch]).permutation(len(self.images))
        while self.state.index < self.steps_per_epoch:
            fraction = self._fraction()
            if fraction >= 1.0:
                return "epochs" if self.total_steps and self.state.step >= self.total_steps else "minutes"
            began = time.monotonic()
            index = order[self.state.index * t.batch_size : (self.state.index + 1) * t.batch_size]
            loss, correct = self._update(index, self._lr(fraction))
            self.state.step, self.state.index = self.state.step + 1, self.state.index + 1
            self.images_done += len(index)
            self._say_timing()
            self.window.add(loss, correct, len(index), time.monotonic() - began)
            if self.state.step % t.log_every == 0:
                self._log_train(fraction)
            if signals.received:
                return f"signal:{signals.received}"
            if t.save_minutes is not None and time.monotonic() - self.saved_time >= t.save_minutes * 60:
                with self._paused():
                    self._save()
        self.state.epoch, self.state.index = self.state.epoch + 1, 0
        return None

    # -- logging and evaluation -------------------------------------------------------------------
    @contextlib.contextmanager
    def _paused(self):
        """Work other than updates (evaluation, checkpoints): not counted in the budget clock's span."""
        began = time.monotonic()
        yield
        self.clock.pause(time.monotonic() - began)

    def _say_timing(self) -> None:
        """Once, early in the run: how long the rest of the epochs take on this machine, the
        evaluations still to come included (a forward pass costs about a third of an update)."""
        row = self.clock.after_update(self.state.step, self.images_done)
        if row is None:
            return
        epochs_left = self.total_steps / self.steps_per_epoch - self.state.epoch
        eval_images = epochs_left * len(self.splits.valid[0]) + len(self.splits.test[0])
        row["seconds_left"] += eval_images * row["s_per_update"] / self.t.batch_size / 3
        if self.t.minutes is not None:
            row["seconds_left"] = min(row["seconds_left"], self.t.minutes * 60 - self._seconds())
        self.bar.write(self.clock.message(row, self.state.step, unit="images"))
        row["img_s"] = row.pop("tok_s")
        self.log.log("eta", self.state.step, row)

    def _log_train(self, fraction: float) -> None:
        w = self.window
        row = {
            "loss": w.loss / max(w.seen, 1),
            "accuracy": w.correct / max(w.seen, 1),
            "lr": self._lr(fraction),
            "img_s": 1.0 / max(w.seconds_per_image, 1e-9),
            "epoch": self.state.step / self.steps_per_epoch,
            "elapsed_s": self._seconds(),
        }
        w.loss, w.correct, w.seen = 0.0, 0, 0
        self.log.log("train", self.state.step, row)
        shown = {
            "loss": f"{row['loss']:.3f}",
            "acc": f"{row['accuracy']:.3f}",
            "img_s": f"{row['img_s']:.0f}",
        }
        self.bar.update(self.state.step, **shown)

    def _evaluate(self, split: str) -> dict[str, float]:
        """valid -> a "dev" metrics row; test -> a "test" row. {} for an empty split."""
        images, labels = getattr(self.splits, split)
        if not len(images):
            return {}
        with self._paused():
            loss, accuracy = evaluate(self.model, images, labels, self.t.eval_batch_size)
        self.model.train()
        row = {f"{split}_loss": loss, f"{split}_accuracy": accuracy}
        self.log.log("dev" if split == "valid" else split, self.state.step, row)
        self.bar.write(f"step {self.state.step}: " + ", ".join(f"{k} {v:.4f}" for k, v in row.items()))
        return row

    def run(self, progress: bool = True) -> VisionResult:
        self.log = MetricsLog(self.run_dir, True)
        self.log.truncate(self.state.step)
        self.bar = Progress(progress, self.state.step, self.total_steps, self.t.minutes)
        self.clock = eta.BudgetClock(self.state.step, self.total_steps, self.t.minutes, self.start)
        self.images_done = 0
        self.model.train()
        reason, test = None, {}
        try:
            with StopSignals() as signals:
                while reason is None:
                    reason = self._train_epoch(signals)
                    if reason is None:
                        self._evaluate("valid")
                if self.saved_step != self.state.step or not checkpoint.list_checkpoints(self.run_dir):
                    self._save()
                if reason == "minutes":  # stopped mid-epoch: the final weights' dev figures too
                    self._evaluate("valid")
                if not reason.startswith("signal"):
                    test = self._evaluate("test")
        finally:
            self.bar.close()
            self.log.close()
        return self._finish(reason, test)

    def _finish(self, reason: str, test: dict[str, float]) -> VisionResult:
        """Write RUN_DIR/model (with the test figures in its config.json) and the plots."""
        seconds, epochs, n_params = (
            self._seconds(),
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
    write_run_config(run_dir, model_config, train_config)
    checkpoint.remove_partial(run_dir)
    return VisionTrainer(run_dir, splits, model_config, train_config, device).run(progress)
