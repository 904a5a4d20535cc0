"""The run directory: resolved config, run metadata, resume detection and `--init-from`.

RUN_DIR/config.yaml      the RunConfig actually used (vocab_size from the data's spm.model)
RUN_DIR/run.json         the aiayn release, the data directory, languages (with a multilingual
                         model's target languages and their tag), world size, the model started
                         from, the longest training source (tokens with EOS: translating splits far
                         longer ones)
RUN_DIR/spm.model        a copy of the data's SentencePiece model (for `aiayn average`)
RUN_DIR/checkpoints/     see checkpoint.py
"""

from __future__ import annotations

import filecmp
import json
from pathlib import Path

import numpy as np
from safetensors.torch import load_file, load_model

from aiayn import __version__
from aiayn.config import ModelConfig, RunConfig
from aiayn.data.datadir import DataDir
from aiayn.errors import AiaynError
from aiayn.model.io import SPM_FILE, WEIGHTS_FILE, read_config
from aiayn.model.transformer import Transformer
from aiayn.overrides import apply_overrides
from aiayn.safe_io import atomic_copy, atomic_write_text, check_dir_path
from aiayn.train.checkpoint import RUN_CONFIG, RUN_INFO, RUN_SPM


def data_vocab_size(data_dir: Path) -> int:
    """The vocabulary size of a data directory's SentencePiece model."""
    data = DataDir(data_dir)
    if not data.spm_path.is_file():
        raise AiaynError(f"{data_dir}: not a data directory (no {SPM_FILE}); run `aiayn prepare` first")
    return data.tokenizer().vocab_size


def resolve_config(data_dir: Path, config: RunConfig) -> RunConfig:
    """Set the model's vocab_size from the data's spm.model; check that the data fits the model."""
    model = config.model.replace(vocab_size=data_vocab_size(data_dir))
    check_lengths(data_dir, model, config.train.max_tokens)
    return RunConfig(model=model, train=config.train, decode=config.decode)


def _model_differences(a: ModelConfig, b: ModelConfig) -> list[str]:
    da, db = a.to_dict(), b.to_dict()
    return [f"{k}: {da[k]!r} vs {db[k]!r}" for k in da if da[k] != db[k]]


def check_resume_config(run_dir: Path, config: RunConfig) -> None:
    """A run resumes with the model it started with; training settings (budgets) may change."""
    path = run_dir / RUN_CONFIG
    if not path.is_file():
        return
    saved = RunConfig.from_yaml(path).model
    diffs = _model_differences(saved, config.model)
    if diffs:
        raise AiaynError(
            f"{run_dir} holds checkpoints of a different model ({'; '.join(diffs)}); "
            "use a new --out directory or the run's own config.yaml"
        )


def _is_run_info(path: Path) -> bool:
    """Whether `path` is a run.json that `write_run_files` wrote (a JSON object naming its data)."""
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(info, dict) and "data_dir" in info


def _recorded(run_dir: Path, key: str, kind: type = str):
    """What run.json records under `key`, a `kind` (None when it records none or cannot be read)."""
    try:
        info = json.loads((run_dir / RUN_INFO).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    found = info.get(key) if isinstance(info, dict) else None
    return found if isinstance(found, kind) else None


def check_run_dir(run_dir: Path, data_dir: Path) -> None:
    """A one-line AiaynError unless training may write its run files into `run_dir`: a new or
    empty directory, a run directory (its run.json is ours), or one whose only file of those names
    is a config.yaml of aiayn settings (rewritten with the resolved config: every setting kept).

    Anything else of those names (another tool's config.yaml, a tokenizer's spm.model, the data
    directory itself) would be overwritten; nothing is written before this check passes.
    """
    check_dir_path(run_dir, "--out")
    if run_dir.resolve() == data_dir.resolve():
        raise AiaynError(f"{run_dir} is the data directory; train into another --out directory")
    if (run_dir / RUN_INFO).exists():
        if not _is_run_info(run_dir / RUN_INFO):
            raise AiaynError(f"{run_dir / RUN_INFO} is not an aiayn run's; choose another --out directory")
        return
    if (run_dir / RUN_SPM).exists():
        raise AiaynError(
            f"{run_dir / RUN_SPM} exists outside a run directory and training would replace it; "
            "choose another --out directory"
        )
    if (run_dir / RUN_CONFIG).exists():
        try:
            RunConfig.from_yaml(run_dir / RUN_CONFIG)
        except AiaynError as err:
            raise AiaynError(
                f"{run_dir / RUN_CONFIG} is not an aiayn config and training would replace it "
                f"({err}); choose another --out directory"
            ) from None


def write_run_files(
    run_dir: Path, data_dir: Path, config: RunConfig, world_size: int, init_from, resuming: bool
) -> None:
    """run.json, config.yaml and spm.model (rank 0 only), each atomically: rewritten at every start,
    so a kill there must leave the old file whole, not an empty one that a resume reads as defaults.
    run.json first: it marks the directory as a run's (`check_run_dir`) before the others land.

    A resumed run keeps the `init_from` it started from (its weights now come from its checkpoint),
    and says so when it goes on with another data directory (run.json records the newest)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    data = DataDir(data_dir)
    meta = data.meta if data.prepared else {}
    given = str(Path(init_from).resolve()) if init_from else None
    if resuming:
        started_from = _recorded(run_dir, "init_from")
        if given is not None and given != started_from:
            print(f"note: --init-from {init_from} ignored: {run_dir} resumes from its checkpoint", flush=True)
        given = started_from
        trained_on = _recorded(run_dir, "data_dir")
        if trained_on not in (None, str(data_dir.resolve())):
            note = f"note: {run_dir} was trained on {trained_on} until now; it goes on with {data_dir}"
            print(note, flush=True)
    info = {
        "aiayn_version": __version__,  # the release that started or resumed the run last
        "data_dir": str(data_dir.resolve()),
        "src_lang": meta.get("src_lang"),
        "tgt_lang": meta.get("tgt_lang"),
        "world_size": world_size,
        "init_from": given,
        "longest_source": _longest_source(
            data, _recorded(run_dir, "longest_source", int) if resuming else None
        ),
    }
    if meta.get("target_languages"):  # a multilingual model: the tag that chooses each language
        info.update(target_languages=meta["target_languages"], target_tag=meta.get("target_tag"))
    if meta.get("task") == "parse":  # the model directory says what it is (aiayn.parse.parser)
        info.update(task="parse", parse=meta.get("parse"))
    atomic_write_text(run_dir / RUN_INFO, json.dumps(info, indent=2) + "\n")
    config.to_yaml(run_dir / RUN_CONFIG)
    atomic_copy(data.spm_path, run_dir / RUN_SPM)


def _longest_source(data: DataDir, before) -> int | None:
    """The most source tokens (EOS included) of a training pair, over this data and, on a resumed run,
    the data it was trained on before (`before`, from run.json); None without a train split."""
    try:
        longest = int(data.tokens("train").src_lengths.max(initial=0)) if data.prepared else 0
    except AiaynError:
        longest = 0  # no train split: the trainer says so
    longest = max(longest, before or 0)
    return longest or None


def check_lengths(data_dir: Path, model: ModelConfig, max_tokens: int) -> None:
    """With learned positions (Table 3 row E), every pair that batching takes (width <= max_tokens)
    must fit max_positions: checked at the start, not when the first such batch comes (a dev one only
    after eval_every steps)."""
    if model.positions != "learned":
        return
    for split in ("train", "valid"):
        try:
            dataset = DataDir(data_dir).tokens(split)
        except AiaynError:
            continue  # no such split: the trainer says so, or runs without dev evaluation
        widths = np.maximum(dataset.src_lengths, dataset.tgt_lengths)  # (n,) tokens with EOS / BOS
        widest = int(widths[widths <= max_tokens].max(initial=0))
        if widest > model.max_positions:
            raise AiaynError(
                f"{data_dir}: the {split} split has pairs of up to {widest} tokens but the model has "
                f"max_positions={model.max_positions} learned positions; --set max_positions={widest}, "
                "or prepare with a smaller --max-len"
            )


def load_init_weights(model: Transformer, model_dir: str | Path, data_dir: Path) -> None:
    """`--init-from`: copy an existing model directory's weights into `model` (fine-tuning).

    The vocabulary must be the data's (same size and, if the model directory has one, the same
    SentencePiece model), the decoder must start from the same token (see ModelConfig's
    decoder_start_id) and every weight must have the shape the run's config gives it.
    """
    model_dir = Path(model_dir)
    config, _ = read_config(model_dir)
    if config.vocab_size != model.config.vocab_size:
        raise AiaynError(
            f"--init-from {model_dir}: its vocabulary has {config.vocab_size} pieces but "
            f"{DataDir(data_dir).spm_path} has {model.config.vocab_size}; prepare the data with its spm.model"
        )
    if config.start_id != model.config.start_id:
        value = "null" if config.decoder_start_id is None else config.decoder_start_id
        raise AiaynError(
            f"--init-from {model_dir}: its decoder starts from id {config.start_id}, this run's from "
            f"{model.config.start_id}; add --set decoder_start_id={value} to fine-tune it as it is"
        )
    spm, data_spm = model_dir / SPM_FILE, DataDir(data_dir).spm_path
    if spm.is_file() and not filecmp.cmp(spm, data_spm, shallow=False):
        raise AiaynError(
            f"--init-from {model_dir}: its {SPM_FILE} differs from {data_spm}; "
            "the token ids would mean different pieces"
        )
    weights = load_file(str(model_dir / WEIGHTS_FILE))
    own = model.state_dict()
    for name, tensor in weights.items():
        if name not in own:
            raise AiaynError(f"--init-from {model_dir}: weight {name} has no place in this model's config")
        if tuple(tensor.shape) != tuple(own[name].shape):
            differences = ", ".join(_model_differences(config, model.config))
            raise AiaynError(
                f"--init-from {model_dir}: {name} has shape {tuple(tensor.shape)} there but "
                f"{tuple(own[name].shape)} in this config ({differences})"
            )
    try:
        load_model(model, str(model_dir / WEIGHTS_FILE), strict=True)
    except RuntimeError as err:
        raise AiaynError(
            f"--init-from {model_dir}: weights do not fit this model: {str(err).splitlines()[-1]}"
        ) from None


def _read_run_config(path: Path) -> RunConfig:
    if not path.is_file():
        raise AiaynError(f"{path}: no such config file")
    try:
        return RunConfig.from_yaml(path)
    except TypeError as err:
        raise AiaynError(f"{path}: invalid config: {err}") from None


def build_run_config(
    run_dir: str | Path,
    *,
    preset: str | None = None,
    config_file: str | Path | None = None,
    init_from: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    max_steps: int | None = None,
    minutes: float | None = None,
    seed: int | None = None,
) -> RunConfig:
    """What `aiayn train` trains with. The base config is, in this order: `config_file`; `preset`;
    the run directory's own config.yaml (a resume); the `init_from` model's architecture; the
    paper's base model. Then `key=value` overrides, then the --max-steps/--minutes/--seed shortcuts.
    """
    saved = Path(run_dir) / RUN_CONFIG
    if config_file is not None:
        config = _read_run_config(Path(config_file))
    elif preset is not None:
        config = RunConfig(model=ModelConfig.preset(preset))
    elif saved.is_file():
        config = _read_run_config(saved)
    elif init_from is not None:
        config = RunConfig(model=read_config(init_from)[0])
    else:
        config = RunConfig(model=ModelConfig.preset("base"))
    model, train, decode = apply_overrides([config.model, config.train, config.decode], list(overrides))
    shortcuts = {"max_steps": max_steps, "minutes": minutes, "seed": seed}
    train = train.replace(**{k: v for k, v in shortcuts.items() if v is not None})
    return RunConfig(model=model, train=train, decode=decode)
