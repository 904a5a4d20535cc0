"""`aiayn export-hf`: an aiayn model directory -> a Hugging Face MarianMTModel directory.

Marian is the paper's post-norm Transformer (section 3), so most aiayn models export exactly:
any size, relu / gelu / swish, scaled or unscaled embeddings, shared or separate vocabularies,
any tying, any special ids. The paper's interleaved sin/cos encoding (3.5) is not Marian's
[sin | cos] layout, but permuting the model dimension of every weight turns one into the other
without changing the function (`weights.permute_model_dim`), so those export exactly too.

What Marian cannot express, and export refuses: pre-norm layers (norm_first), final-layer norms,
learned positions, a LayerNorm eps other than 1e-5, and head sizes d_k, d_v other than
d_model / n_heads.

The result loads with `MarianMTModel.from_pretrained(OUT_DIR)` and `MarianTokenizer.from_pretrained(
OUT_DIR)`, and converts for CTranslate2 with `ct2-transformers-converter --model OUT_DIR
--output_dir OUT_DIR-ct2`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import sentencepiece as spm
from safetensors.torch import save_file

from aiayn.config import ModelConfig
from aiayn.decode.stepper import banned_ids
from aiayn.errors import AiaynError
from aiayn.interop.marian_import import TARGET_VOCAB_FILE, TOKENIZER_FILES
from aiayn.interop.weights import aiayn_to_marian, concat_permutation, permute_model_dim
from aiayn.model.io import load_model_dir
from aiayn.safe_io import resolve_inside


def marian_incompatibilities(config: ModelConfig) -> list[str]:
    """The options of `config` that MarianMTModel cannot express (empty: it exports exactly)."""
    problems = []
    if config.norm_first:
        problems.append("pre-norm layers (norm_first=true)")
    if config.use_final_norm:
        problems.append("a final LayerNorm after each stack (final_norm)")
    if config.positions != "sinusoidal":
        problems.append(f"{config.positions} positions (Marian's are sinusoidal)")
    if config.layer_norm_eps != 1e-5:
        problems.append(f"layer_norm_eps={config.layer_norm_eps} (Marian's is 1e-5)")
    width = config.d_model // config.n_heads  # Marian's head size
    if config.d_model % config.n_heads or (config.key_dim, config.value_dim) != (width, width):
        problems.append(
            f"d_k={config.key_dim}, d_v={config.value_dim} per head (Marian's are d_model / n_heads)"
        )
    return problems


def marian_config(config: ModelConfig) -> dict[str, Any]:
    """The MarianConfig (as config.json's dict) of an exportable aiayn ModelConfig."""
    return {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        "is_encoder_decoder": True,
        "vocab_size": config.source_vocab_size,
        "decoder_vocab_size": config.vocab_size,
        "share_encoder_decoder_embeddings": config.tie_embeddings == "all",
        "tie_word_embeddings": config.tie_embeddings != "none",
        "d_model": config.d_model,
        "encoder_layers": config.n_layers,
        "decoder_layers": config.decoder_layers,
        "encoder_attention_heads": config.n_heads,
        "decoder_attention_heads": config.n_heads,
        "encoder_ffn_dim": config.d_ff,
        "decoder_ffn_dim": config.d_ff,
        "activation_function": config.activation,
        "dropout": config.dropout,
        "attention_dropout": config.attention_dropout,
        "activation_dropout": config.activation_dropout,
        "scale_embedding": config.scale_embedding,
        "max_position_embeddings": config.max_positions,
        "pad_token_id": config.pad_id,
        "eos_token_id": config.eos_id,
        "bos_token_id": config.bos_id,
        "decoder_start_token_id": config.start_id,
        "forced_eos_token_id": config.eos_id,
    }


def generation_config(config: ModelConfig) -> dict[str, Any]:
    """generate() defaults: beam 4 as the paper and OPUS-MT; never the ids aiayn's search bans."""
    return {
        "bos_token_id": config.bos_id,
        "decoder_start_token_id": config.start_id,
        "eos_token_id": config.eos_id,
        "forced_eos_token_id": config.eos_id,
        "pad_token_id": config.pad_id,
        "bad_words_ids": [[i] for i in banned_ids(config)],
        "num_beams": 4,
        "max_length": 512,
    }


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def _export_marian_tokenizer(model_dir: Path, settings: dict[str, Any], out: Path) -> dict[str, Any]:
    """Copy a Marian tokenizer's files back; return tokenizer_config.json's extra entries."""
    names = dict(TOKENIZER_FILES, target_vocab=TARGET_VOCAB_FILE)
    for key, name in names.items():
        if settings.get(key):
            source = resolve_inside(model_dir, settings[key], f"{model_dir / 'config.json'}: tokenizer.{key}")
            shutil.copyfile(source, out / name)
    return {"separate_vocabs": bool(settings.get("target_vocab"))}


def _export_sentencepiece(model_dir: Path, settings: dict[str, Any], config: ModelConfig, out: Path) -> dict:
    """aiayn's one SentencePiece model -> source.spm = target.spm and vocab.json of aiayn's own ids."""
    where = f"{model_dir / 'config.json'}: tokenizer.model"
    path = resolve_inside(model_dir, settings.get("model", "spm.model"), where)
    if not path.is_file():
        raise AiaynError(f"{path}: SentencePiece model not found")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    for name in ("source", "target"):
        shutil.copyfile(path, out / TOKENIZER_FILES[name])
    _write_json(out / TOKENIZER_FILES["vocab"], {sp.id_to_piece(i): i for i in range(sp.get_piece_size())})
    special = {"unk_token": config.unk_id, "eos_token": config.eos_id, "pad_token": config.pad_id}
    return {name: sp.id_to_piece(i) for name, i in special.items()}


def export_hf(model_dir: str | Path, out_dir: str | Path) -> Path:
    """Write a MarianMTModel directory (config, generation config, weights, tokenizer) for `model_dir`."""
    model_dir, out = Path(model_dir), Path(out_dir)
    model, data = load_model_dir(model_dir)
    config = model.config
    problems = marian_incompatibilities(config)
    if problems:
        raise AiaynError(f"{model_dir}: Marian cannot express {'; '.join(problems)}")
    state = model.state_dict()
    if config.sinusoid_layout == "interleaved":
        state = permute_model_dim(state, concat_permutation(config.d_model))
    out.mkdir(parents=True, exist_ok=True)
    save_file(aiayn_to_marian(state, config), str(out / "model.safetensors"), metadata={"format": "pt"})
    _write_json(out / "config.json", marian_config(config))
    _write_json(out / "generation_config.json", generation_config(config))
    settings = data.get("tokenizer") or {}
    if settings.get("type") == "marian":
        extra = _export_marian_tokenizer(model_dir, settings, out)
    elif settings.get("type") == "sentencepiece":
        extra = _export_sentencepiece(model_dir, settings, config, out)
    else:
        raise AiaynError(f"{model_dir}: tokenizer type {settings.get('type')!r} cannot be exported")
    languages = {
        k: data[v] for k, v in (("source_lang", "src_lang"), ("target_lang", "tgt_lang")) if data.get(v)
    }
    _write_json(out / "tokenizer_config.json", {"tokenizer_class": "MarianTokenizer", **languages, **extra})
    return out
