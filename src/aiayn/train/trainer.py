"""The training loop of section 5, one code path for one process and for DDP under `torchrun`.

Per update: `accumulation` micro-batches per rank (5.1: about 25,000 target tokens per update
across accumulation x ranks), label-smoothed cross entropy (5.4) summed over tokens and divided by
the update's total target-token count (so 2 ranks x 1 micro-batch == 1 rank x 2 micro-batches),
Adam with the learning rate of Eq. 3 (5.3), optional gradient clipping, mixed precision. Around
it: checkpoints every N steps and/or M minutes (5.2), dev loss / perplexity / BLEU at intervals,
early stopping, a wall-clock budget, signals, and exact resume from the newest checkpoint.

One host sync per update (is the gradient norm finite?); losses are summed on the device and
read back only at log intervals.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from aiayn.config import RunConfig
from aiayn.errors import AiaynError
from aiayn.model.transformer import Transformer
from aiayn.train import checkpoint, distributed, eta, kernels, precision
from aiayn.train.evaluation import ShuffledSources, dev_bleu, dev_loss
from aiayn.train.loss import label_smoothed_nll
from aiayn.train.metrics import MetricsLog, Progress
from aiayn.train.optim import accumulation_steps, build_optimizer, restore_optimizer
from aiayn.train.run import check_resume_config, load_init_weights, resolve_config, write_run_files
from aiayn.train.schedule import learning_rate
from aiayn.train.signals import StopSignals
from aiayn.train.stream import BatchStream

STATE_VERSION = 1


@dataclass
class LoopState:
    """Everything besides weights, optimizer and RNG that a checkpoint must carry for exact resume."""

    step: int = 0
    epoch: int = 0  # data position: the next batch is batches(epoch)[index]
    index: int = 0
    best_dev_loss: float | None = None
    bad_evals: int = 0  # dev evaluations since the best one (early stopping)
    nonfinite: int = 0  # consecutive updates skipped for a non-finite loss
    tokens: int = 0  # target tokens trained on, all ranks


@dataclass
class TrainResult:
    run_dir: Path
    start_step: int
    step: int
    stop_reason: str  # max_steps | max_epochs | minutes | early_stop | signal:<NAME>
    checkpoint: Path | None
    best_dev_loss: float | None


class Trainer:
    def __init__(self, data_dir: Path, run_dir: Path, config: RunConfig, env, init_from, progress: bool):
        from aiayn.data.batching import TokenBatchSampler
        from aiayn.data.dataset import TokenDataset

        self.data_dir, self.run_dir, self.config, self.env = data_dir, run_dir, config, env
        self.t, self.m = config.train, config.model
        torch.manual_seed(self.t.seed)  # the same initial weights on every rank
        self.model = Transformer(self.m).to(env.device)
        self.optimizer = build_optimizer(self.model, config, env.device)
        self.precision = precision.resolve(self.t.precision, env.device)
        self.accumulation = accumulation_steps(config, env.world_size)
        self.state = LoopState()
        self._restored_matmul: str | None = None
        checkpoint.seed_everything(self.t.seed + env.rank)  # dropout differs across ranks
        found = checkpoint.list_checkpoints(run_dir)
        if found:
            self._restore(found[-1])
        elif init_from:
            load_init_weights(self.model, init_from, data_dir)
        self.start_step = self.state.step
        eligible = env.device.type == "cpu" and self.precision.name == "fp32" and not self.t.compile
        self.kernels = kernels.KernelChoice(self.t.cpu_matmul, eligible, self._restored_matmul, env)
        self.forward_model = torch.compile(self.model) if self.t.compile else self.model
        self.engine = self._wrap_ddp(self.forward_model)
        self.train_data = TokenDataset(data_dir, "train")
        sampler = TokenBatchSampler(
            self.train_data.src_lengths,
            self.train_data.tgt_lengths,
            self.t.max_tokens,
            seed=self.t.seed,
            rank=env.rank,
            world_size=env.world_size,
        )
        self.stream = BatchStream(sampler, self.state.epoch, self.state.index)
        self.dev = self._dev_sets(TokenDataset, TokenBatchSampler)
        self.log = MetricsLog(run_dir, env.is_main)
        self.log.truncate(self.state.step)
        self.progress = Progress(
            progress and env.is_main, self.state.step, self.t.max_steps, self.t.minutes, messages=env.is_main
        )
        self.saved_path = found[-1] if found else None
        self.saved_step = self.state.step if found else -1

    # -- setup ------------------------------------------------------------------------------------
    def _wrap_ddp(self, module: torch.nn.Module) -> torch.nn.Module:
        if not self.env.distributed:
            return module
        ids = [self.env.device.index] if self.env.device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(module, device_ids=ids)

    def _dev_sets(self, dataset_cls, sampler_cls):
        """(dataset, this rank's batches) for the valid split and its shuffled-source view, or None.

        Every dev batch is used once across the ranks (uneven counts are fine: no collective inside).
        """
        try:
            dev = dataset_cls(self.data_dir, "valid")
        except (AiaynError, FileNotFoundError):
            return None
        if len(dev) == 0:
            return None
        sets = []
        for data in (dev, ShuffledSources(dev, seed=self.t.seed)):
            everything = sampler_cls(data.src_lengths, data.tgt_lengths, self.t.max_tokens, seed=self.t.seed)
            sets.append((data, everything.global_batches(0)[self.env.rank :: self.env.world_size]))
        return sets

    # -- checkpoints ------------------------------------------------------------------------------
    def _trainer_state(self) -> dict:
        self.state.epoch, self.state.index = self.stream.position
        rngs = [checkpoint.rng_state()]
        if self.env.distributed:
            rngs = [None] * self.env.world_size
            dist.all_gather_object(rngs, checkpoint.rng_state())
        scaler = self.precision.scaler
        return {
            "version": STATE_VERSION,
            "loop": asdict(self.state),
            "optimizer": self.optimizer.state_dict(),
            "scaler": scaler.state_dict() if scaler is not None else {},
            "rng": rngs,
            "world_size": self.env.world_size,
            "cpu_matmul": self.kernels.decision,
        }

    def _restore(self, path: Path) -> None:
        state = checkpoint.load_checkpoint(path, self.model, self.env.device)
        if state.get("version") != STATE_VERSION:
            raise AiaynError(f"{path}: trainer state version {state.get('version')!r} is not {STATE_VERSION}")
        self.state = LoopState(**state["loop"])
        self._restored_matmul = state.get("cpu_matmul")
        restore_optimizer(self.optimizer, state["optimizer"], self.config, self.env.device)
        if self.precision.scaler is not None and state["scaler"]:
            self.precision.scaler.load_state_dict(state["scaler"])
        if state["world_size"] == self.env.world_size:
            checkpoint.set_rng_state(state["rng"][self.env.rank])
        else:  # another world size: batches are re-sharded, so the resume cannot be exact
            self.state.index = self.state.index * state["world_size"] // self.env.world_size
        if self.env.is_main:
            print(f"resuming from {path} (step {self.state.step})", flush=True)

    def _save(self) -> Path:
        state = self._trainer_state()
        path = self.run_dir / checkpoint.CHECKPOINTS / checkpoint.checkpoint_name(self.state.step)
        if self.env.is_main:
            path = checkpoint.save_checkpoint(
                self.run_dir, self.state.step, self.model, state, self.t.keep_last
            )
        distributed.barrier(self.env)
        self.saved_path, self.saved_step, self.saved_time = path, self.state.step, time.monotonic()
        return path

    # -- one update -------------------------------------------------------------------------------
    def _update(self) -> bool:
        """Forward/backward `accumulation` micro-batches and take one optimizer step if finite."""
        from aiayn.data.batching import collate

        cfg = self.m
        batches = [
            collate(self.train_data, self.stream.next(), cfg.pad_id, cfg.start_id)
            for _ in range(self.accumulation)
        ]
        local = sum(int(b.n_tgt_tokens) for b in batches)
        total = (
            distributed.all_reduce(
                torch.tensor([local], dtype=torch.int64, device=self.env.device), self.env
            ).item()
            if self.env.distributed
            else local
        )
        scale = self.env.world_size / max(total, 1)  # DDP averages gradients over ranks
        update_loss = torch.zeros(2, device=self.env.device)
        for i, batch in enumerate(batches):
            batch = batch.to(self.env.device)
            last = i == len(batches) - 1
            sync = contextlib.nullcontext() if last or not self.env.distributed else self.engine.no_sync()
            with sync:
                with self.precision.autocast():
                    logits = self.engine(batch.src, batch.tgt_in)  # (batch, tgt_len, vocab)
                loss, nll = label_smoothed_nll(logits, batch.tgt_out, self.t.label_smoothing, cfg.pad_id)
                scaled = loss * scale
                (self.precision.scaler.scale(scaled) if self.precision.scaler else scaled).backward()
            update_loss += torch.stack([loss.detach(), nll.detach()])
        applied = self._step()
        self._account(applied, update_loss, local, total)
        return applied

    def _timed_update(self) -> bool:
        """`_update`, with the matmul backend probe and the budget clock around it."""
        tokens = self.state.tokens
        self.kernels.before_update()
        applied = self._update()
        message = self.kernels.after_update(applied, self.state.tokens - tokens)
        if message:
            self.progress.write(message)
            self.log.log("kernels", self.state.step, {"cpu_matmul": self.kernels.decision})
        timing = self.clock.after_update(self.state.step, self.state.tokens) if applied else None
        if timing:
            self.log.log("eta", self.state.step, timing)
            self.progress.write(self.clock.message(timing, self.state.step))
        return applied

    def _step(self) -> bool:
        """Set Eq. 3's rate, clip, step; False (nothing applied) if the gradient is not finite."""
        lr = learning_rate(self.state.step + 1, self.m, self.t)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        scaler = self.precision.scaler
        if scaler is not None:
            scaler.unscale_(self.optimizer)
        params = [p for p in self.model.parameters() if p.grad is not None]
        norm = torch.nn.utils.get_total_norm([p.grad for p in params], foreach=True)
        if self.t.clip_norm:
            torch.nn.utils.clip_grads_with_norm_(params, self.t.clip_norm, norm, foreach=True)
        finite = bool(torch.isfinite(norm))  # the one host sync of an update
        if scaler is not None:
            scaler.step(self.optimizer)
            scaler.update()
        elif finite:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return finite

    def _account(self, applied: bool, update_loss: torch.Tensor, local: int, total: int) -> None:
        if applied:
            self.state.step += 1
            self.state.nonfinite = 0
            self.state.tokens += total
            self._window += torch.cat([update_loss, update_loss.new_tensor([local])])
            return
        # every rank decides alike (one stopping while the others wait would hang the run)
        finite_loss = distributed.all_ranks(bool(torch.isfinite(update_loss[0])), self.env)
        if self.precision.scaler is not None and finite_loss:
            return  # fp16 overflow: the scaler lowered its scale and skipped the step, as designed
        self.state.nonfinite += 1
        self.progress.write(
            f"warning: non-finite loss at step {self.state.step + 1}; update skipped "
            f"({self.state.nonfinite} in a row)"
        )
        if self.state.nonfinite >= self.t.max_nonfinite:
            raise AiaynError(
                f"{self.state.nonfinite} non-finite losses in a row at step {self.state.step}; "
                "lower the learning rate (lr_scale / lr_peak), set clip_norm, or use fp32/bf16"
            )

    # -- logging and evaluation -------------------------------------------------------------------
    def _log_train(self) -> None:
        loss, nll, tokens = distributed.all_reduce(self._window.double(), self.env).tolist()
        now = time.monotonic()
        tokens_per_s = tokens / max(now - self._window_start, 1e-9)
        self._window.zero_()
        self._window_start, self._logged_step = now, self.state.step
        step, tokens = self.state.step, max(tokens, 1.0)
        row = {
            "loss": loss / tokens,
            "nll": nll / tokens,
            "ppl": math.exp(min(nll / tokens, 50.0)),
            "lr": learning_rate(step, self.m, self.t),
            "tok_s": tokens_per_s,
            "epoch": self.stream.epoch,
            "elapsed_s": now - self.start_time,
        }
        self.log.log("train", step, row)
        self.progress.update(
            step,
            loss=f"{row['loss']:.3f}",
            ppl=f"{row['ppl']:.1f}",
            lr=f"{row['lr']:.2e}",
            tok_s=f"{tokens_per_s:,.0f}",
        )

    def _evaluate(self) -> str | None:
        """Dev loss, shuffled-source dev loss, optional BLEU; 'early_stop' when patience runs out."""
        (dev, dev_batches), (shuffled, shuffled_batches) = self.dev
        args = (self.env, self.precision, self.t.label_smoothing, self.m.pad_id, self.m.start_id)
        real = dev_loss(self.forward_model, dev, dev_batches, *args)
        probe = dev_loss(self.forward_model, shuffled, shuffled_batches, *args)
        row = {
            "dev_loss": real["loss"],
            "dev_nll": real["nll"],
            "dev_ppl": real["ppl"],
            "dev_loss_shuffled": probe["loss"],
        }
        if self.t.eval_bleu and self.env.is_main:
            row["dev_bleu"] = dev_bleu(self.model, self.data_dir, self.config.decode, self.env.device)
        distributed.barrier(self.env)
        self.log.log("dev", self.state.step, row)
        self.progress.write(f"step {self.state.step}: " + ", ".join(f"{k} {v:.4g}" for k, v in row.items()))
        if self.state.best_dev_loss is None or real["loss"] < self.state.best_dev_loss:
            self.state.best_dev_loss, self.state.bad_evals = real["loss"], 0
        else:
            self.state.bad_evals += 1
        patience = self.t.patience
        return "early_stop" if patience is not None and self.state.bad_evals >= patience else None

    # -- the loop ---------------------------------------------------------------------------------
    def _budget_reason(self) -> str | None:
        if self.t.max_steps is not None and self.state.step >= self.t.max_steps:
            return "max_steps"
        if self.t.max_epochs is not None and self.stream.epochs_done >= self.t.max_epochs:
            return "max_epochs"
        return None

    def _control(self, signals: StopSignals) -> tuple[bool, bool, bool]:
        """(signal received, time budget spent, checkpoint due by time), agreed on by all ranks."""
        now = time.monotonic()
        flags = [
            signals.received is not None,
            self.t.minutes is not None and now - self.start_time >= self.t.minutes * 60,
            self.t.save_minutes is not None and now - self.saved_time >= self.t.save_minutes * 60,
        ]
        if self.env.distributed:
            agreed = torch.tensor(flags, dtype=torch.int32, device=self.env.device)
            flags = [bool(x) for x in distributed.all_reduce(agreed, self.env, op="max").tolist()]
        return flags[0], flags[1], flags[2]

    def _after_update(self, signals: StopSignals) -> str | None:
        step, t = self.state.step, self.t
        reason = None
        if step % t.log_every == 0:
            self._log_train()
        if self.dev is not None and t.eval_every and step % t.eval_every == 0:
            began = time.monotonic()
            reason = self._evaluate()
            self._window_start += time.monotonic() - began  # tokens/s counts training time only
            self.clock.pause(time.monotonic() - began)
        stopped, time_up, save_due = self._control(signals)
        if stopped:
            reason = f"signal:{signals.received or 'peer'}"
        elif time_up and reason is None:
            reason = "minutes"
        if reason is None and (save_due or (t.save_every and step % t.save_every == 0)):
            began = time.monotonic()
            self._save()
            self.clock.pause(time.monotonic() - began)
        return reason

    def run(self) -> TrainResult:
        self.start_time = self.saved_time = self._window_start = time.monotonic()
        self.clock = eta.BudgetClock(self.start_step, self.t.max_steps, self.t.minutes, self.start_time)
        self._window = torch.zeros(3, device=self.env.device)  # loss, nll, tokens since the last log
        self._logged_step = self.state.step
        self.engine.train()
        reason = None
        try:
            self.kernels.start()
            with StopSignals() as signals:
                while reason is None:
                    reason = self._budget_reason()
                    if reason is None and self._timed_update():
                        reason = self._after_update(signals)
                if self.state.step > self._logged_step:  # the steps since the last log_every
                    self._log_train()
                if self.saved_step != self.state.step:
                    self._save()
        finally:
            self.kernels.restore_process_default()
            self.progress.close()
            self.log.close()
        if reason.startswith("signal") and self.env.is_main:
            print(f"stopped by {reason[7:]}: checkpoint written to {self.saved_path}", flush=True)
        return TrainResult(
            self.run_dir, self.start_step, self.state.step, reason, self.saved_path, self.state.best_dev_loss
        )


def train(
    data_dir: str | Path,
    run_dir: str | Path,
    run_config: RunConfig,
    *,
    init_from: str | Path | None = None,
    progress: bool = True,
    device: str | None = None,
) -> TrainResult:
    """Train (or resume, if `run_dir` has checkpoints) a model on a prepared data directory."""
    env = distributed.setup(device)
    try:
        data_dir, run_dir = Path(data_dir), Path(run_dir)
        config = resolve_config(data_dir, run_config)
        if checkpoint.list_checkpoints(run_dir):
            check_resume_config(run_dir, config)
        if env.is_main:
            checkpoint.remove_partial(run_dir)
            write_run_files(run_dir, data_dir, config, env.world_size, init_from)
        distributed.barrier(env)
        return Trainer(data_dir, run_dir, config, env, init_from, progress).run()
    finally:
        distributed.teardown(env)
