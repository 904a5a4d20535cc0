"""`aiayn import-marian`: an OPUS-MT / Hugging Face MarianMTModel directory -> an aiayn model directory.

Marian's Transformer is the paper's (section 3) with these settings, each of which aiayn's
ModelConfig expresses: post-norm layers without final norms, LayerNorm eps 1e-5, sinusoidal
positions with all sines before all cosines ("concat"), from position 0; embeddings scaled by
sqrt(d_model) or not (`scale_embedding`); a bias on the output projection (`final_logits_bias`);
activation relu, gelu or swish (SiLU); one vocabulary for both sides or two; the decoder starts
from <pad>; EOS is 0. Marian has no BOS: aiayn's bos_id is set to the decoder start (pad) id.

Weights come from model.safetensors (or its shards), or from pytorch_model.bin read with
`torch.load(weights_only=True)` so that no pickled code runs. The tokenizer files (source.spm,
target.spm, vocab.json and, for separate vocabularies, target_vocab.json) are copied and named in
config.json as {"type": "marian", ...}; `MarianVocabTokenizer` reproduces Marian's token ids.

The config is checked against the weights' shapes before the model is built, and the output is
built in a hidden temporary directory renamed into place at the end (`safe_io.building_directory`):
a failed import leaves OUT as it was, never new tokenizer files beside old weights.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor

from aiayn.config import ConfigError, ModelConfig
from aiayn.errors import AiaynError
from aiayn.interop.marian_tokenizer import MarianVocabTokenizer, read_vocab
from aiayn.interop.weights import marian_to_aiayn
from aiayn.model.io import CONFIG_FILE, SPM_FILE, WEIGHTS_FILE, check_fits, check_model_out, save_model_dir
from aiayn.model.transformer import Transformer
from aiayn.safe_io import building_directory, plain_name, read_json_object

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish", "silu": "swish"}
TOKENIZER_FILES = {"source": "source.spm", "target": "target.spm", "vocab": "vocab.json"}
TARGET_VOCAB_FILE = "target_vocab.json"


def read_hf_config(hf_dir: Path) -> dict[str, Any]:
    path = hf_dir / "config.json"
    if not path.is_file():
        raise AiaynError(f"{hf_dir}: not a Hugging Face model directory (no config.json)")
    data = read_json_object(path)
    if data.get("model_type") != "marian":
        raise AiaynError(f"{path}: model_type is {data.get('model_type')!r}, not 'marian'")
    return data


def _single_id(hf: dict[str, Any], key: str, where: str) -> int | None:
    value = hf.get(key)
    if isinstance(value, list):
        if len(value) != 1:
            raise AiaynError(f"{where}: {key}={value} (aiayn takes exactly one id)")
        value = value[0]
    return value


def _same(hf: dict[str, Any], a: str, b: str, where: str) -> Any:
    if hf.get(a) != hf.get(b):
        raise AiaynError(
            f"{where}: {a}={hf.get(a)} differs from {b}={hf.get(b)}; aiayn uses one value for both"
        )
    return hf[a]


def config_from_marian(
    hf: dict[str, Any], tie: str, unk_id: int, where: str | Path = "config.json"
) -> ModelConfig:
    """MarianConfig (as a dict) -> the aiayn ModelConfig that computes the same function.

    `where` names the config.json in errors (its path, when it came from a directory).
    """
    activation = ACTIVATIONS.get(hf.get("activation_function", "gelu"))
    if activation is None:
        raise AiaynError(f"{where}: activation_function={hf['activation_function']!r} is not relu/gelu/swish")
    vocab = hf.get("vocab_size")
    if type(vocab) is not int or vocab < 1:
        raise AiaynError(f"{where}: vocab_size must be a positive integer, got {vocab!r}")
    shared = hf.get("share_encoder_decoder_embeddings", True)
    decoder_vocab = vocab if shared else (hf.get("decoder_vocab_size") or vocab)
    pad = hf.get("pad_token_id", vocab - 1)
    start = hf.get("decoder_start_token_id", pad)
    try:
        config = ModelConfig.from_dict(  # each value type-checked: "512" is not 512
            dict(
                vocab_size=decoder_vocab,
                src_vocab_size=None if shared else vocab,
                d_model=hf["d_model"],
                d_ff=_same(hf, "encoder_ffn_dim", "decoder_ffn_dim", where),
                n_heads=_same(hf, "encoder_attention_heads", "decoder_attention_heads", where),
                n_layers=hf["encoder_layers"],
                n_decoder_layers=hf["decoder_layers"],
                dropout=hf.get("dropout", 0.1),
                attention_dropout=hf.get("attention_dropout", 0.0),
                activation_dropout=hf.get("activation_dropout", 0.0),
                activation=activation,
                norm_first=False,
                final_norm=False,
                layer_norm_eps=1e-5,
                positions="sinusoidal",
                sinusoid_layout="concat",
                max_positions=hf.get("max_position_embeddings", 512),
                scale_embedding=hf.get("scale_embedding", False),
                tie_embeddings=tie,
                final_logits_bias=True,
                pad_id=pad,
                unk_id=unk_id,
                bos_id=start,
                eos_id=_single_id(hf, "eos_token_id", where),
                decoder_start_id=start,
            )
        )
    except KeyError as err:
        raise AiaynError(f"{where}: no {err.args[0]!r} setting (a Marian config.json has one)") from None
    except (ConfigError, TypeError) as err:
        raise AiaynError(f"{where}: cannot express this Marian model in aiayn: {err}") from None
    if not 0 <= start < decoder_vocab:
        raise AiaynError(f"{where}: decoder_start_token_id={start} is outside the target vocabulary")
    return config


def read_hf_weights(hf_dir: Path) -> dict[str, Tensor]:
    """model.safetensors, its shards (model.safetensors.index.json), or pytorch_model.bin (no pickle code)."""
    single, index, legacy = (
        hf_dir / "model.safetensors",
        hf_dir / "model.safetensors.index.json",
        hf_dir / "pytorch_model.bin",
    )
    if single.is_file():
        return _load_safetensors(single)
    if index.is_file():
        return {k: v for shard in _shard_names(index) for k, v in _load_safetensors(hf_dir / shard).items()}
    if legacy.is_file():
        try:
            weights = torch.load(legacy, map_location="cpu", weights_only=True)
        except Exception:  # the unpickler raises many types; all mean "not plain tensors"
            raise AiaynError(
                f"{legacy}: cannot be read as plain tensors (it holds pickled objects, which aiayn never "
                "runs); save the weights as model.safetensors"
            ) from None
        if not isinstance(weights, dict) or not all(isinstance(v, Tensor) for v in weights.values()):
            raise AiaynError(f"{legacy}: not a state dict (a mapping of names to tensors)")
        return weights
    raise AiaynError(f"{hf_dir}: no model.safetensors or pytorch_model.bin")


def _load_safetensors(path: Path) -> dict[str, Tensor]:
    """A safetensors file's tensors; a missing, truncated or foreign file is a one-line error."""
    try:
        return load_file(str(path))
    except (SafetensorError, OSError) as err:
        raise AiaynError(
            f"{path}: cannot be read as safetensors: {str(err).strip().splitlines()[0]}"
        ) from None


def _shard_names(index: Path) -> list[str]:
    """The shard files that model.safetensors.index.json names: plain names in its directory only.

    (They may be links, as in the Hugging Face cache; each is parsed as safetensors, never run.)
    """
    try:
        names = set(json.loads(index.read_text())["weight_map"].values())
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as err:
        raise AiaynError(f"{index}: not a safetensors index ({type(err).__name__}: {err})") from None
    return sorted(plain_name(name, f"{index}: weight_map") for name in names)


def resolve_embeddings(hf: dict[str, Any], weights: dict[str, Tensor]) -> tuple[dict[str, Tensor], str]:
    """The source, target and output matrices MarianMTModel actually uses, and aiayn's tying for them.

    Which stored names are live depends on share_encoder_decoder_embeddings / tie_word_embeddings
    (and on the transformers version that wrote the file); tying is then read from the values.
    """

    def first(*names: str) -> Tensor:
        for name in names:
            if name in weights:
                return weights[name]
        raise AiaynError(f"weights have none of {', '.join(names)}")

    shared, tied = hf.get("share_encoder_decoder_embeddings", True), hf.get("tie_word_embeddings", True)
    enc, dec, common = (
        "model.encoder.embed_tokens.weight",
        "model.decoder.embed_tokens.weight",
        "model.shared.weight",
    )
    if shared and tied:
        src = tgt = first(common, enc, dec)
    else:
        src, tgt = first(enc, common), first(dec, common)
    output = tgt if tied else first("lm_head.weight")
    bias = weights.get("final_logits_bias", torch.zeros(1, output.size(0)))
    same_src = src.shape == tgt.shape and torch.equal(src, tgt)
    same_out = output.shape == tgt.shape and torch.equal(output, tgt)
    tie = "all" if same_src and same_out else "decoder" if same_out else "none"
    return {"src": src, "tgt": tgt, "output": output, "bias": bias}, tie


def _copy_tokenizer(hf_dir: Path, out: Path, separate: bool) -> tuple[dict[str, Any], int]:
    """Copy the tokenizer files; return config.json's "tokenizer" entry and the <unk> id.

    `separate` is tokenizer_config.json's separate_vocabs (MarianTokenizer reads target_vocab.json
    only then), which is independent of whether the model shares its embedding matrices.
    """
    names = dict(TOKENIZER_FILES, target_vocab=TARGET_VOCAB_FILE if separate else None)
    missing = [n for n in names.values() if n is not None and not (hf_dir / n).is_file()]
    if missing:
        raise AiaynError(f"{hf_dir}: missing tokenizer file(s) {', '.join(missing)}")
    settings = {"type": "marian", **names}
    tokenizer = MarianVocabTokenizer.from_settings(hf_dir, settings)  # errors name the user's files
    for name in names.values():
        if name is not None:
            shutil.copyfile(hf_dir / name, out / name)
    return settings, tokenizer.unk_id


def _check_vocab(config: ModelConfig, hf_dir: Path, settings: dict[str, Any]) -> None:
    for key, size in (("vocab", config.source_vocab_size), ("target_vocab", config.vocab_size)):
        if settings.get(key) and max(read_vocab(hf_dir / settings[key]).values()) >= size:
            raise AiaynError(f"{hf_dir / settings[key]}: ids reach beyond the model's vocabulary of {size}")


def read_tokenizer_config(hf_dir: Path) -> dict[str, Any]:
    """tokenizer_config.json (separate_vocabs, source_lang, target_lang), or {} when there is none."""
    path = hf_dir / "tokenizer_config.json"
    if not path.is_file():
        return {}
    return read_json_object(path)


def _check_layers(hf: dict[str, Any], weights: dict[str, Tensor], where: Path) -> None:
    """encoder_layers / decoder_layers against the layers the weights hold, before anything is built."""
    for stack in ("encoder", "decoder"):
        prefix = f"model.{stack}.layers."
        found = len({name[len(prefix) :].split(".")[0] for name in weights if name.startswith(prefix)})
        key = f"{stack}_layers"
        if hf[key] != found:
            raise AiaynError(f"{where}: {key}={hf[key]} but the weights hold {found} {stack} layers")


def _check_out(hf_dir: Path, out: Path) -> None:
    """OUT may be absent, an empty directory or an aiayn model directory (which is replaced)."""
    if out.exists() and out.resolve() == hf_dir.resolve():
        raise AiaynError(f"{out}: the output directory cannot be the Marian directory itself")
    check_model_out(out)
    _check_nothing_lost(out)


def import_marian(hf_dir: str | Path, out_dir: str | Path) -> Path:
    """Convert a local MarianMTModel directory into an aiayn model directory; returns its path."""
    hf_dir, out = Path(hf_dir), Path(out_dir)
    hf, tok_config = read_hf_config(hf_dir), read_tokenizer_config(hf_dir)
    _check_out(hf_dir, out)
    weights = read_hf_weights(hf_dir)
    embeddings, tie = resolve_embeddings(hf, weights)
    with building_directory(out) as work:
        settings, unk_id = _copy_tokenizer(hf_dir, work, bool(tok_config.get("separate_vocabs")))
        config = config_from_marian(hf, tie, unk_id, hf_dir / "config.json")
        _check_vocab(config, hf_dir, settings)
        _check_layers(hf, weights, hf_dir / "config.json")
        state = marian_to_aiayn(weights, config, embeddings)
        check_fits(config, {k: tuple(v.shape) for k, v in state.items()}, str(hf_dir))
        model = Transformer(config)
        model.load_state_dict(state, strict=True)
        pairs = (("src_lang", "source_lang"), ("tgt_lang", "target_lang"))
        languages = {ours: tok_config[key] for ours, key in pairs if isinstance(tok_config.get(key), str)}
        save_model_dir(model, work, tokenizer=settings, imported_from=str(hf_dir.resolve()), **languages)
    return out


def _check_nothing_lost(out: Path) -> None:
    """The new directory replaces OUT whole: refuse if OUT holds anything but a model's files (an
    `aiayn evaluate` eval/ directory, notes), which the swap would delete."""
    model_files = {
        CONFIG_FILE,
        WEIGHTS_FILE,
        SPM_FILE,
        "spm.vocab",
        *TOKENIZER_FILES.values(),
        TARGET_VOCAB_FILE,
    }
    lost = sorted(p.name for p in out.iterdir() if p.name not in model_files) if out.is_dir() else []
    if lost:
        raise AiaynError(
            f"{out} also holds {', '.join(lost)}, which replacing the model would delete; "
            "move it away or choose another output directory"
        )
