"""The training loop of section 5, one code path for one process and for DDP under `torchrun`.

Per update: `accumulation` micro-batches per rank (5.1: about 25,000 target tokens per update
across accumulation x ranks), label-smoothed cross entropy (5.4) summed over tokens and divided by
the update's total target-token count (so 2 ranks x 1 micro-batch == 1 rank x 2 micro-batches),
Adam with the learning rate of Eq. 3 (5.3), optional gradient clipping, mixed precision. Around
it, in one loop (`Trainer._train`) read top to bottom: the train row every `log_every` steps, dev
loss / perplexity / BLEU at intervals, the stop rules (step and epoch budgets, early stopping, a
wall-clock budget, signals), checkpoints every N steps and/or M minutes (5.2) and exact resume from
the newest one. The parts are the ones the Vision Transformer's trainer uses too: the checkpointer
(aiayn.train.checkpointer), the run clock (aiayn.train.clock), the stop rules (aiayn.train.stop)
and the run log (aiayn.train.metrics).

One host sync per update (is the gradient norm finite?); losses are summed on the device and
read back only at log intervals.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from aiayn.config import RunConfig
from aiayn.data.batching import BatchStream, TokenBatchSampler, collate
from aiayn.data.datadir import DataDir
from aiayn.data.dataset import TokenDataset, has_split
from aiayn.data.mixing import read_mix
from aiayn.data.plan_cache import CACHE_DIR
from aiayn.errors import AiaynError
from aiayn.model.transformer import Transformer
from aiayn.runtime import kernels
from aiayn.runtime.linear import route_linears
from aiayn.train import checkpoint, distributed, precision
from aiayn.train.checkpointer import Checkpointer
from aiayn.train.clock import RunClock
from aiayn.train.evaluation import ShuffledSources, dev_bleu, dev_loss
from aiayn.train.loss import label_smoothed_nll
from aiayn.train.metrics import RunLog
from aiayn.train.optim import build_optimizer, restore_optimizer, resumed_accumulation, update_record
from aiayn.train.run import (
    check_resume_config,
    check_run_dir,
    load_init_weights,
    resolve_config,
    write_run_files,
)
from aiayn.train.schedule import learning_rate
from aiayn.train.signals import StopSignals
from aiayn.train.stop import StopRules


@dataclass
class TrainResult:
    run_dir: Path
    start_step: int
    step: int
    stop_reason: str  # max_steps | max_epochs | minutes | early_stop | signal:<NAME>
    checkpoint: Path | None
    best_dev_loss: float | None


class Trainer:
    """Builds the model, optimizer, data and parts for a run directory; `run()` trains."""

    def __init__(self, data_dir: Path, run_dir: Path, config: RunConfig, env, init_from, progress: bool):
        self.data_dir, self.run_dir, self.config, self.env = data_dir, run_dir, config, env
        self.t, self.m, self.show_progress = config.train, config.model, progress
        torch.manual_seed(self.t.seed)  # the same initial weights on every rank
        self.model = route_linears(Transformer(self.m).to(env.device))  # products through oneDNN
        self.optimizer = build_optimizer(self.model, config, env.device)
        self.precision = precision.resolve(self.t.precision, env.device)
        checkpoint.seed_everything(self.t.seed + env.rank)  # dropout differs across ranks
        self.checkpoints = Checkpointer(run_dir, env, self.model, self.optimizer, self.t.keep_last)
        self.state, saved = self.checkpoints.restore(self._load_optimizer)
        self.start_step = self.state.step
        self.accumulation, rescaled = resumed_accumulation(config, env.world_size, saved)
        if rescaled and env.is_main:
            print(rescaled, flush=True)
        if self.precision.scaler is not None and saved.get("scaler"):
            self.precision.scaler.load_state_dict(saved["scaler"])
        if self.checkpoints.path is None and init_from:
            load_init_weights(self.model, init_from, data_dir)
        eligible = env.device.type == "cpu" and self.precision.name == "fp32" and not self.t.compile
        self.kernels = kernels.KernelChoice(self.t.cpu_matmul, eligible, saved.get("cpu_matmul"), env)
        self.forward_model = torch.compile(self.model) if self.t.compile else self.model
        # compiled, the loss is fused plain operations (aiayn.train.loss): a second graph
        self.criterion = torch.compile(label_smoothed_nll) if self.t.compile else label_smoothed_nll
        self.engine = self._wrap_ddp(self.forward_model)
        self.train_data = TokenDataset(data_dir, "train")
        sampler = TokenBatchSampler(
            self.train_data.src_lengths,
            self.train_data.tgt_lengths,
            self.t.max_tokens,
            seed=self.t.seed,
            rank=env.rank,
            world_size=env.world_size,
            mix=read_mix(data_dir, DataDir(data_dir).meta, self.t.seed, len(self.train_data)),
            cache=data_dir / CACHE_DIR,  # the epoch's plan, sorted once for every start and rank
        )
        self.stream = BatchStream(sampler, self.state.epoch, self.state.index, self.state.start)
        self.dev = self._dev_sets()

    # -- setup ------------------------------------------------------------------------------------
    def _wrap_ddp(self, module: torch.nn.Module) -> torch.nn.Module:
        if not self.env.distributed:
            return module
        ids = [self.env.device.index] if self.env.device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(module, device_ids=ids)

    def _dev_sets(self):
        """(dataset, this rank's batches) for the valid split and its shuffled-source view, or None.

        Every dev batch is used once across the ranks (uneven counts are fine: no collective inside).
        """
        if not has_split(self.data_dir, "valid"):
            return None
        dev = TokenDataset(self.data_dir, "valid")  # a damaged split is an error, not silence
        if len(dev) == 0:
            return None
        sets, seed = [], self.t.seed
        for data in (dev, ShuffledSources(dev, seed=seed)):
            everything = TokenBatchSampler(data.src_lengths, data.tgt_lengths, self.t.max_tokens, seed=seed)
            sets.append((data, everything.global_batches(0)[self.env.rank :: self.env.world_size]))
        return sets

    # -- checkpoints: besides the loop state, the optimizer's settings, the scaler, the backend ----
    def _load_optimizer(self, saved: dict) -> None:
        restore_optimizer(self.optimizer, saved, self.config, self.env.device)

    def _save(self) -> None:
        """A checkpoint (left out of the budget timing and the log window's rates)."""
        scaler = self.precision.scaler
        extra = {
            "scaler": scaler.state_dict() if scaler is not None else {},
            "cpu_matmul": self.kernels.decision,
            "update": update_record(self.config, self.env.world_size, self.accumulation),
        }
        with self.clock.paused():
            self.checkpoints.save(self.state, self.stream.position, self.clock.seconds(), extra)
            self.clock.saved()

    # -- the loop ---------------------------------------------------------------------------------
    def run(self) -> TrainResult:
        """Train until a stop rule says so (this invocation's clock, log and rules around the loop)."""
        t = self.t
        self.clock = RunClock(self.state.seconds, self.start_step, t.max_steps, t.minutes)
        main, step = self.env.is_main, self.state.step
        self.log = RunLog(
            self.run_dir, main, step, bar=self.show_progress, max_steps=t.max_steps, minutes=t.minutes
        )
        self._window = torch.zeros(3, device=self.env.device)  # loss, nll, tokens since the last log
        self.engine.train()
        try:
            self.kernels.start()
            with StopSignals() as signals:
                rules = StopRules(
                    self.env, signals, max_steps=t.max_steps, max_epochs=t.max_epochs, minutes=t.minutes,
                    save_minutes=t.save_minutes, patience=t.patience,
                )  # fmt: skip
                reason = self._train(rules)
        finally:
            self.kernels.restore_process_default()
            self.log.close()
        path, state = self.checkpoints.path, self.state
        if reason.startswith("signal") and main:
            print(f"stopped by {reason[7:]}: checkpoint written to {path}", flush=True)
        return TrainResult(self.run_dir, self.start_step, state.step, reason, path, state.best_dev_loss)

    def _train(self, rules: StopRules) -> str:
        """The loop: updates until a stop reason; then the last steps' train row and a checkpoint."""
        t, state = self.t, self.state
        while (reason := rules.before_update(state.step, self.stream.epochs_done)) is None:
            tokens = state.tokens
            self.kernels.before_update()  # the matrix-product backend probe around the first updates
            applied = self._update()
            if applied:
                self._say_timing()
            self._say_kernels(applied, state.tokens - tokens)
            if not applied:
                continue  # a skipped update: no row, no evaluation, no stop rule asked
            if state.step % t.log_every == 0:
                self._log_train()
            if self.dev is not None and t.eval_every and state.step % t.eval_every == 0:
                with self.clock.paused():
                    reason = self._evaluate(rules)
            reason, save_due = rules.after_update(self.clock, reason)
            if reason is not None:
                break
            if save_due or (t.save_every and state.step % t.save_every == 0):
                self._save()
        if state.step > self.log.train_step:  # the steps since the last log_every
            self._log_train()
        if self.checkpoints.step != state.step:
            self._save()
        return reason

    # -- one update -------------------------------------------------------------------------------
    def _update(self) -> bool:
        """Forward/backward `accumulation` micro-batches and take one optimizer step if finite."""
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
                loss, nll = self.criterion(
                    logits, batch.tgt_out, self.t.label_smoothing, cfg.pad_id, overwrite_logits=True
                )
                scaled = loss * scale
                (self.precision.scaler.scale(scaled) if self.precision.scaler else scaled).backward()
            update_loss += torch.stack([loss.detach(), nll.detach()])
        applied = self._step()
        self._account(applied, update_loss, local, total)
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
        self.log.say(
            f"warning: non-finite loss at step {self.state.step + 1}; update skipped "
            f"({self.state.nonfinite} in a row)"
        )
        if self.state.nonfinite >= self.t.max_nonfinite:
            raise AiaynError(
                f"{self.state.nonfinite} non-finite losses in a row at step {self.state.step}; "
                "lower the learning rate (lr_scale / lr_peak), set clip_norm, or use fp32/bf16"
            )

    # -- logging and evaluation -------------------------------------------------------------------
    def _say_timing(self) -> None:
        """Once, early in the run: the measured speed and when the budget ends (aiayn.train.eta)."""
        row = self.clock.eta.after_update(self.state.step, self.state.tokens)
        if row is not None:
            self.log.row("eta", self.state.step, row)
            self.log.say(self.clock.eta.message(row, self.state.step))

    def _say_kernels(self, applied: bool, tokens: int) -> None:
        """The backend probe's decision, once it is made (aiayn.runtime.kernels)."""
        message = self.kernels.after_update(applied, tokens)
        if message:
            self.log.say(message)
            self.log.row("kernels", self.state.step, {"cpu_matmul": self.kernels.decision})

    def _log_train(self) -> None:
        """The train row of metrics.jsonl and the bar, for the updates since the last one."""
        loss, nll, tokens = distributed.all_reduce(self._window.double(), self.env).tolist()
        tokens_per_s = tokens / max(self.clock.lap(), 1e-9)
        self._window.zero_()
        step, tokens = self.state.step, max(tokens, 1.0)
        row = {
            "loss": loss / tokens,
            "nll": nll / tokens,
            "ppl": math.exp(min(nll / tokens, 50.0)),
            "lr": learning_rate(step, self.m, self.t),
            "tok_s": tokens_per_s,
            "epoch": self.stream.epoch,
            "elapsed_s": self.clock.elapsed(),
        }
        self.log.row("train", step, row)
        self.log.bar(
            step,
            loss=f"{row['loss']:.3f}",
            ppl=f"{row['ppl']:.1f}",
            lr=f"{row['lr']:.2e}",
            tok_s=f"{tokens_per_s:,.0f}",
        )

    def _evaluate(self, rules: StopRules) -> str | None:
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
        self.log.result("dev", self.state.step, row)
        return rules.early_stop(self.state, real["loss"])


def train(
    data_dir: str | Path,
    run_dir: str | Path,
    run_config: RunConfig,
    *,
    init_from: str | Path | None = None,
    progress: bool = True,
    device: str | None = None,
    dist_timeout: float = distributed.DEFAULT_TIMEOUT_MINUTES,
) -> TrainResult:
    """Train (or resume, if `run_dir` has checkpoints) a model on a prepared data directory;
    `dist_timeout`: minutes a collective waits for the other ranks."""
    env = distributed.setup(device, dist_timeout)
    try:
        data_dir, run_dir = Path(data_dir), Path(run_dir)
        config = resolve_config(data_dir, run_config)
        check_run_dir(run_dir, data_dir)
        resuming = bool(checkpoint.list_checkpoints(run_dir))
        if resuming:
            check_resume_config(run_dir, config)
        if env.is_main:
            checkpoint.remove_partial(run_dir)
            write_run_files(run_dir, data_dir, config, env.world_size, init_from, resuming)
        distributed.barrier(env)
        return Trainer(data_dir, run_dir, config, env, init_from, progress).run()
    except RuntimeError as err:
        lost = distributed.peer_lost(err, env, dist_timeout)
        if lost is None:
            raise
        raise lost from err
    finally:
        distributed.teardown(env)
