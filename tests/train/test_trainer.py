"""The training loop: exact resume, loss normalisation, stopping rules, non-finite losses, init-from."""

import json

import pytest
import torch
from safetensors.torch import load_file

from aiayn.errors import AiaynError
from aiayn.model.io import load_model_dir
from aiayn.model.transformer import Transformer
from aiayn.train import trainer as trainer_module
from aiayn.train.checkpoint import average_run, list_checkpoints
from aiayn.train.trainer import train
from toy_translation import tiny_config


def weights(checkpoint_dir):
    return load_file(str(checkpoint_dir / "model.safetensors"))


@pytest.mark.slow
def test_resume_is_bitwise_exact(data_dir, tmp_path):
    # dropout on, 2 micro-batches per update, a dev evaluation every 3 steps, an epoch boundary
    config = tiny_config(accumulation=2, eval_every=3)
    straight = train(
        data_dir, tmp_path / "a", config.replace(train=config.train.replace(max_steps=10)), progress=False
    )
    first = train(
        data_dir, tmp_path / "b", config.replace(train=config.train.replace(max_steps=5)), progress=False
    )
    resumed = train(
        data_dir, tmp_path / "b", config.replace(train=config.train.replace(max_steps=10)), progress=False
    )
    assert (first.step, resumed.start_step, resumed.step) == (5, 5, 10)
    state = torch.load(resumed.checkpoint / "trainer_state.pt", weights_only=True)
    assert state["loop"]["epoch"] >= 1, "the test should cross an epoch boundary"
    a, b = weights(straight.checkpoint), weights(resumed.checkpoint)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], weights(first.checkpoint)[k]) for k in a)
    # metrics.jsonl of the resumed run holds each step once, as the straight run's does, plus the
    # row the first run wrote for its last steps when it stopped (step 5, between two log steps)
    assert train_steps(tmp_path / "b") == sorted({*train_steps(tmp_path / "a"), 5})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_resume_on_a_gpu(data_dir, tmp_path):
    # the saved generator states must come back as CPU tensors whatever device the run is on
    config = tiny_config(accumulation=2)
    for steps in (3, 6):
        config = config.replace(train=config.train.replace(max_steps=steps))
        result = train(data_dir, tmp_path / "run", config, progress=False, device="cuda")
    assert (result.start_step, result.step) == (3, 6)


def train_steps(run):
    return [r["step"] for r in map(json.loads, (run / "metrics.jsonl").open()) if r["kind"] == "train"]


def test_accumulated_update_equals_one_big_batch(data_dir, tmp_path):
    """Loss normalisation: the sum over both micro-batches' tokens / their total, one Adam step."""
    from aiayn.data.batching import TokenBatchSampler, collate
    from aiayn.data.dataset import TokenDataset
    from aiayn.train.loss import label_smoothed_nll
    from aiayn.train.schedule import learning_rate

    config = tiny_config(accumulation=2, max_steps=1)
    config = config.replace(model=config.model.replace(dropout=0.0))
    result = train(data_dir, tmp_path / "run", config, progress=False, device="cpu")  # as the reference

    cfg = result_config = config.replace(model=config.model.replace(vocab_size=_vocab(data_dir)))
    torch.manual_seed(cfg.train.seed)
    model = Transformer(result_config.model)
    ds = TokenDataset(data_dir, "train")
    sampler = TokenBatchSampler(ds.src_lengths, ds.tgt_lengths, cfg.train.max_tokens, seed=cfg.train.seed)
    start = (cfg.model.pad_id, cfg.model.start_id)  # the decoder starts from <pad>, as the trainer's
    batches = [collate(ds, idx, *start) for idx in sampler.batches(0)[:2]]
    total = sum(b.n_tgt_tokens for b in batches)
    loss = sum(label_smoothed_nll(model(b.src, b.tgt_in), b.tgt_out, 0.1, 0)[0] for b in batches) / total
    loss.backward()
    opt = torch.optim.Adam(
        model.parameters(), lr=learning_rate(1, cfg.model, cfg.train), betas=(0.9, 0.98), eps=1e-9
    )
    opt.step()
    # The gradient, read back from Adam's first moment (exp_avg = (1 - beta1) g after one step).
    saved = torch.load(result.checkpoint / "trainer_state.pt", weights_only=True)["optimizer"]["state"]
    params = dict(model.named_parameters())
    g_max = max(p.grad.abs().max() for p in params.values())
    for i, p in enumerate(params.values()):
        torch.testing.assert_close(saved[i]["exp_avg"], 0.1 * p.grad, rtol=1e-4, atol=1e-6 * g_max)
    # The weights: Adam's first step moves each weight by lr * g / (|g| + eps), about lr * sign(g), so
    # where g is rounding noise (the keys' bias, which softmax ignores) its sign depends on the
    # kernels' summation order; compare the weights whose gradient is above that noise.
    trained = weights(result.checkpoint)
    for name, p in params.items():
        if name in trained:
            signal = p.grad.abs() > 1e-5 * g_max
            torch.testing.assert_close(trained[name][signal], p.detach()[signal], rtol=1e-5, atol=1e-6)


def _vocab(data_dir):
    from aiayn.data.tokenizer import Tokenizer

    return Tokenizer.load(data_dir / "spm.model").vocab_size


@pytest.mark.slow
def test_stops_at_max_epochs_and_time_budget(data_dir, tmp_path):
    from aiayn.data.batching import TokenBatchSampler
    from aiayn.data.dataset import TokenDataset

    ds = TokenDataset(data_dir, "train")
    per_epoch = len(TokenBatchSampler(ds.src_lengths, ds.tgt_lengths, 1000, seed=1).batches(0))
    config = tiny_config(max_steps=None, max_epochs=2, max_tokens=1000)
    result = train(data_dir, tmp_path / "e", config, progress=False)
    assert (result.stop_reason, result.step) == ("max_epochs", 2 * per_epoch)
    result = train(data_dir, tmp_path / "m", tiny_config(max_steps=None, minutes=0.0), progress=False)
    assert (result.stop_reason, result.step) == ("minutes", 1)
    assert [p.name for p in list_checkpoints(tmp_path / "m")] == ["step_000001"]


def test_last_steps_are_logged_when_the_run_stops_between_logs(data_dir, tmp_path):
    """A run that stops before its next `log_every` step still writes its train row (one-minute runs)."""
    train(data_dir, tmp_path / "r", tiny_config(max_steps=7, log_every=5), progress=False)
    rows = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["kind"] == "train"] == [5, 7]


def test_early_stopping_on_dev_loss(data_dir, tmp_path, monkeypatch):
    losses = iter([3.0, 3.0, 2.5, 2.6, 2.7, 2.8, 2.9, 3.0, 3.1, 3.2])

    def fake_dev_loss(*args, **kwargs):
        return {"loss": next(losses), "nll": 1.0, "ppl": 2.7}

    monkeypatch.setattr(trainer_module, "dev_loss", fake_dev_loss)
    result = train(
        data_dir, tmp_path / "r", tiny_config(max_steps=50, eval_every=2, patience=2), progress=False
    )
    # evaluations at steps 2 (3.0), 4 (2.5, best), 6 (2.7), 8 (2.9): two without improvement
    assert (result.stop_reason, result.step, result.best_dev_loss) == ("early_stop", 8, 2.5)
    dev_rows = [r for r in map(json.loads, (tmp_path / "r" / "metrics.jsonl").open()) if r["kind"] == "dev"]
    assert [r["step"] for r in dev_rows] == [2, 4, 6, 8]
    assert [r["dev_loss_shuffled"] for r in dev_rows] == [3.0, 2.6, 2.8, 3.0]


def test_non_finite_loss_skips_then_stops(data_dir, tmp_path, monkeypatch, capsys):
    real = trainer_module.label_smoothed_nll
    calls = {"n": 0}

    def flaky(logits, *args, **kwargs):
        calls["n"] += 1
        loss, nll = real(logits, *args, **kwargs)
        return (loss * float("nan"), nll) if calls["n"] in (2, 3) else (loss, nll)

    monkeypatch.setattr(trainer_module, "label_smoothed_nll", flaky)
    result = train(data_dir, tmp_path / "skip", tiny_config(max_steps=4, max_nonfinite=3), progress=False)
    assert result.step == 4 and calls["n"] == 6  # two updates were skipped and redone on new batches
    assert capsys.readouterr().err.count("non-finite loss") == 2
    assert all(torch.isfinite(t).all() for t in weights(result.checkpoint).values())

    def infinite(*args, **kwargs):
        loss, nll = real(*args, **kwargs)
        return loss * float("inf"), nll

    monkeypatch.setattr(trainer_module, "label_smoothed_nll", infinite)
    with pytest.raises(AiaynError, match="3 non-finite losses in a row"):
        train(data_dir, tmp_path / "fail", tiny_config(max_steps=10, max_nonfinite=3), progress=False)


def test_average_and_init_from(data_dir, tmp_path):
    run = tmp_path / "run"
    train(data_dir, run, tiny_config(max_steps=4, save_every=1), progress=False)
    last = list_checkpoints(run)[-3:]
    model_dir = average_run(run, last=3)
    assert model_dir == run / "model"
    model, info = load_model_dir(model_dir)
    assert (info["src_lang"], info["tgt_lang"]) == ("xx", "yy")
    assert (model_dir / "spm.model").read_bytes() == (data_dir / "spm.model").read_bytes()
    expected = {k: sum(weights(p)[k].double() for p in last) / 3 for k in weights(last[0])}
    for name, tensor in load_file(str(model_dir / "model.safetensors")).items():
        torch.testing.assert_close(tensor.double(), expected[name], rtol=0, atol=1e-7)

    fine = train(data_dir, tmp_path / "fine", tiny_config(max_steps=0), init_from=model_dir, progress=False)
    start = weights(fine.checkpoint)
    assert all(torch.equal(start[k], v) for k, v in load_file(str(model_dir / "model.safetensors")).items())

    wrong = tiny_config(max_steps=0)
    wrong = wrong.replace(model=wrong.model.replace(d_ff=48))
    with pytest.raises(AiaynError, match=r"has shape .* there but .* in this config \(d_ff: 64 vs 48\)"):
        train(data_dir, tmp_path / "wrong", wrong, init_from=model_dir, progress=False)


def test_init_from_rejects_another_vocabulary(data_dir, tmp_path):
    from aiayn.model.io import save_model_dir

    config = tiny_config().model.replace(vocab_size=_vocab(data_dir) + 5)
    other = save_model_dir(Transformer(config), tmp_path / "other")
    with pytest.raises(AiaynError, match="vocabulary has"):
        train(data_dir, tmp_path / "run", tiny_config(max_steps=0), init_from=other, progress=False)


def test_init_from_keeps_the_decoder_start(data_dir, tmp_path):
    """A model whose decoder starts from a learned <s> (aiayn's before the zero start) is not fine-tuned as
    one that starts from a zero vector, which would change its function; the message says what to set."""
    from aiayn.model.io import save_model_dir

    run = tiny_config(max_steps=0)
    config = run.model.replace(vocab_size=_vocab(data_dir), decoder_start_id=None)
    learned = save_model_dir(Transformer(config), tmp_path / "learned")
    message = "starts from id 2, this run.s from 0; add --set decoder_start_id=null"
    with pytest.raises(AiaynError, match=message):
        train(data_dir, tmp_path / "run", run, init_from=learned, progress=False)
    same = run.replace(model=run.model.replace(decoder_start_id=None))
    train(data_dir, tmp_path / "same", same, init_from=learned, progress=False)


def test_a_resumed_run_keeps_the_init_from_it_started_from(data_dir, tmp_path, capsys):
    """run.json says where a run's first weights came from; a resume (weights from its checkpoint) keeps
    that, and an --init-from given then is said to be ignored."""
    train(data_dir, tmp_path / "first", tiny_config(max_steps=1, save_every=1), progress=False)
    model_dir = average_run(tmp_path / "first", last=1)
    fine = tmp_path / "fine"
    train(data_dir, fine, tiny_config(max_steps=1), init_from=model_dir, progress=False)

    def recorded():
        return json.loads((fine / "run.json").read_text())["init_from"]

    assert recorded() == str(model_dir.resolve())
    capsys.readouterr()
    train(data_dir, fine, tiny_config(max_steps=2), init_from=tmp_path / "elsewhere", progress=False)
    assert f"note: --init-from {tmp_path / 'elsewhere'} ignored" in capsys.readouterr().out
    assert recorded() == str(model_dir.resolve())
    import shutil

    other = shutil.copytree(data_dir, tmp_path / "other")  # the same vocabulary: may go on, said
    train(other, fine, tiny_config(max_steps=3), progress=False)
    assert f"note: {fine} was trained on {data_dir.resolve()} until now; it goes on with {other}" in (
        capsys.readouterr().out
    )
    assert recorded() == str(model_dir.resolve())


def test_a_damaged_dev_split_is_an_error_not_a_run_without_dev(data_dir, tmp_path):
    """No valid split: training without dev evaluation; a damaged one: the index's one-line error."""
    import shutil

    data = shutil.copytree(data_dir, tmp_path / "data")
    (data / "valid.index.npz").write_bytes(b"")
    with pytest.raises(AiaynError, match=r"valid.index.npz: damaged index"):
        train(data, tmp_path / "damaged", tiny_config(max_steps=1), progress=False)
    (data / "valid.index.npz").unlink()
    assert train(data, tmp_path / "none", tiny_config(max_steps=1, eval_every=1), progress=False).step == 1
