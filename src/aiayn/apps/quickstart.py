"""`aiayn quickstart`: the whole paper on a small corpus in one command.

Prepare bible-es-en (5.1), train the tiny preset for 1,000 updates (5.2-5.4), average the last
checkpoints and decode the test books with beam 4 and alpha 0.6 (6.1), then print sacreBLEU's
BLEU and chrF, five sample translations beside their references, an attention heatmap and the
training curves. Every stage is reused when it is already done, so a re-run resumes.
"""

from __future__ import annotations

from pathlib import Path

from aiayn.config import RunConfig
from aiayn.configs import QUICKSTART
from aiayn.data.datadir import DataDir
from aiayn.errors import AiaynError
from aiayn.safe_io import output_dir

# configs/quickstart.yaml: the tiny model and a recipe for a ~29k-pair corpus on a 2-core CPU
QUICKSTART_STEPS = RunConfig.named(QUICKSTART).train.max_steps
QUICKSTART_OUT, QUICKSTART_CORPUS = "runs/quickstart", "bible-es-en"  # where it runs, on what
SAMPLE_COUNT = 5


def quickstart_config(
    steps: int | None = QUICKSTART_STEPS, minutes: float | None = None, seed: int | None = None
) -> RunConfig:
    """The quickstart's recipe (configs/quickstart.yaml) with `steps` updates and/or a budget of
    `minutes`; `seed` (None: the recipe's) sets the initial weights and the batch order (another
    seed: another model, for ensembles)."""
    recipe = RunConfig.named(QUICKSTART)
    seed = recipe.train.seed if seed is None else seed
    return recipe.replace(train=recipe.train.replace(max_steps=steps, minutes=minutes, seed=seed))


def _say(text: str = "") -> None:
    print(text, flush=True)


def _budget(steps: int | None, minutes: float | None) -> str:
    parts = ([f"{steps:,} updates"] if steps else []) + ([f"{minutes:g} minutes"] if minutes else [])
    return " or ".join(parts)


RECIPE_FLAGS = {"seed": "--seed", "max_steps": "--steps", "minutes": "--minutes"}


def _flag(name: str, value: float | None) -> str:
    """How a setting reads as its command-line flag: --seed 1, --minutes 20, no --minutes."""
    if value is None:
        return f"no {RECIPE_FLAGS[name]}"
    return f"{RECIPE_FLAGS[name]} {value:g}" if isinstance(value, float) else f"{RECIPE_FLAGS[name]} {value}"


def _check_same_recipe(out: Path, config: RunConfig, names: tuple[str, ...], what: str) -> None:
    """`what` (the finished model, or the checkpoints a re-run resumes) is kept only for the settings
    `names` it came from: another seed (or, for a finished model, budget) asks for another model,
    which is refused in one line rather than answered with the old one."""
    from aiayn.train.checkpoint import RUN_CONFIG

    saved = RunConfig.from_yaml(out / RUN_CONFIG).train
    changed = [k for k in names if getattr(saved, k) != getattr(config.train, k)]
    if changed:
        was = ", ".join(_flag(k, getattr(saved, k)) for k in changed)
        asked = ", ".join(_flag(k, getattr(config.train, k)) for k in changed)
        raise AiaynError(f"{what} was trained with {was}, not {asked}; use another --out for another model")


def _train_and_average(data_dir: Path, out: Path, config: RunConfig) -> Path:
    """Train (resuming if checkpoints exist) unless a finished model is there; return the model dir."""
    from aiayn.train import eta
    from aiayn.train.checkpoint import average_run, list_checkpoints
    from aiayn.train.trainer import train

    model_dir, done = out / "model", out / "model" / "config.json"
    if done.is_file():
        _check_same_recipe(out, config, tuple(RECIPE_FLAGS), str(model_dir))
        _say(f"== training: reusing the finished model in {model_dir}")
        return model_dir
    if list_checkpoints(out):  # a resume may change the budget, not the seed its weights began from
        _check_same_recipe(out, config, ("seed",), f"the interrupted run in {out}")
    steps, minutes = config.train.max_steps, config.train.minutes
    _say(f"== training the tiny preset for {_budget(steps, minutes)} (Ctrl-C saves; a re-run resumes)")
    if steps and steps >= eta.SKIP + eta.SPAN:
        _say(f"   how long that takes here is measured and printed after {eta.SKIP + eta.SPAN} updates")
    result = train(data_dir, out, config)
    _say(f"   stopped after step {result.step} ({result.stop_reason})")
    if result.stop_reason.startswith("signal"):
        raise KeyboardInterrupt
    average_run(out, last=config.train.average_last, out_dir=model_dir)
    _say(f"   averaged the last {config.train.average_last} checkpoints into {model_dir}")
    return model_dir


def _samples(data: DataDir, hyp_path: Path, count: int) -> list[tuple[str, str, str]]:
    """`count` (source, reference, hypothesis) triples spread evenly over the test set."""
    hyp = hyp_path.read_text(encoding="utf-8").splitlines()
    src = data.raw("test", "src").read_text(encoding="utf-8").splitlines()[: len(hyp)]
    ref = data.raw("test", "tgt").read_text(encoding="utf-8").splitlines()[: len(hyp)]
    step = max(1, len(src) // count)
    return [(src[i], ref[i], hyp[i]) for i in range(step // 2, len(src), step)][:count]


def _pictures(model_dir: Path, out: Path, sentence: str) -> list[Path]:
    """The cross-attention heatmap of one sentence, and the training curves."""
    from aiayn.apps.viz import plot_training_curves, save_attention_png
    from aiayn.decode.bundle import load_bundle
    from aiayn.decode.translator import Translator

    attn = Translator(load_bundle(model_dir)).attention(sentence)
    pictures = [save_attention_png(attn, out / "attention.png", kind="cross")]
    if not (out / "metrics.jsonl").is_file():
        _say("   no training curves: the run stopped before its first log interval")
        return pictures
    return pictures + plot_training_curves(out, out / "plots")


def quickstart(
    out: str | Path = QUICKSTART_OUT,
    steps: int | None = QUICKSTART_STEPS,
    minutes: float | None = None,
    corpus: str = QUICKSTART_CORPUS,
    test_limit: int | None = None,
    seed: int | None = None,
) -> dict:
    """Run the main job end to end; returns the test scores (also in OUT/eval/scores.json).

    Training stops after `steps` updates or `minutes` of wall-clock time, whichever comes first
    (None: no such limit; at least one must be given).

    `test_limit` scores only the first N test sentences (for quick checks; the BLEU of the
    README is on all of them). `seed`: another seed trains another model of the same recipe (None:
    the recipe's).
    """
    from aiayn.data.prepare import prepare
    from aiayn.evaluate import evaluate_model

    if not steps and not minutes:
        raise AiaynError("quickstart needs a budget: a number of steps, minutes, or both")
    out = output_dir(out, "--out")
    _say(f"== preparing {corpus} in {out / 'data'}")
    data = DataDir(prepare(out / "data", corpus))
    _say(f"   pairs: {data.meta['pairs']}")
    config = quickstart_config(steps, minutes, seed)
    model_dir = _train_and_average(data.path, out, config)
    search = config.decode
    _say(f"== translating the test books (beam {search.beam_size}, alpha {search.alpha:g})")
    scores = evaluate_model(
        model_dir, data.path, "test", search, out_dir=out / "eval", limit=test_limit, progress=True
    )
    _say(scores["bleu_text"])
    _say(scores["chrf_text"])
    samples = _samples(data, Path(scores["hypotheses"]), SAMPLE_COUNT)
    _say("== sample translations")
    for src, ref, hyp in samples:
        _say(f"   source:    {src}\n   reference: {ref}\n   aiayn:     {hyp}\n")
    shortest = min((s for s, _, _ in samples), key=len)
    for path in _pictures(model_dir, out, shortest):
        _say(f"   wrote {path}")
    _say("== next")
    _say(f"   echo 'En el principio era el Verbo.' | aiayn translate {model_dir}")
    _say(f"   aiayn serve {model_dir}            # then open http://127.0.0.1:8000")
    _say(f"   aiayn attention {model_dir} 'Y dijo Dios: Sea la luz.' --out attn.png")
    return scores
