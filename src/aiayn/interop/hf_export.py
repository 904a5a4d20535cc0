"""`aiayn export-hf`: an aiayn model directory -> a Hugging Face MarianMTModel directory.

Marian is the paper's post-norm Transformer (section 3), so most aiayn models export exactly:
any size, relu / gelu / swish, scaled or unscaled embeddings, shared or separate vocabularies,
any tying, any special ids. The paper's interleaved sin/cos encoding (3.5) is not Marian's
[sin | cos] layout, but permuting the model dimension of every weight turns one into the other
without changing the function (`weights.permute_model_dim`), so those export exactly too.

What Marian cannot express, and export refuses: pre-norm layers (norm_first), final-layer norms,
learned positions, a LayerNorm eps other than 1e-5, and head sizes d_k, d_v other than
d_model / n_heads.

The directory is what an OPUS-MT download holds (opus_layout.py): OPUS-MT's vocabulary layout
(</s> 0, <unk> 1, <pad> last), the decoder starting from <pad> and generation_config.json as
Hugging Face's Marian conversion script writes them. So it loads with `MarianMTModel` and
`MarianTokenizer`, and tools built for OPUS-MT take it unchanged, e.g. CTranslate2's
`ct2-transformers-converter --model OUT_DIR --output_dir OUT_DIR-ct2`. Those tools start the
decoder from a zero vector; a model whose decoder starts from a learned <s> (decoder_start_id:
null) still exports exactly for Transformers, with a warning that the others will differ. A model
with a shortlist (`aiayn shortlist`) gets it as CTranslate2's vocabulary map too, OUT_DIR/vmap.txt
(`ct2-transformers-converter ... --vocab_mapping OUT_DIR/vmap.txt`, then `use_vmap=True`).
"""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sentencepiece as spm
import torch
from safetensors.torch import save_file

from aiayn.config import ModelConfig
from aiayn.decode.shortlist import VMAP_FILE, read_shortlist, write_vmap
from aiayn.errors import AiaynError
from aiayn.interop.marian_import import TARGET_VOCAB_FILE, TOKENIZER_FILES
from aiayn.interop.marian_tokenizer import read_vocab
from aiayn.interop.opus_layout import OpusLayout
from aiayn.interop.weights import aiayn_to_marian, concat_permutation, permute_model_dim
from aiayn.model.io import load_model_dir
from aiayn.model.transformer import Transformer
from aiayn.safe_io import building_directory, resolve_inside, vacant
from aiayn.tokenizers import load_tokenizer


def marian_incompatibilities(config: ModelConfig) -> list[str]:
    """The options of `config` that MarianMTModel cannot express (empty: it exports exactly)."""
    problems = []
    if config.attention_window is not None:  # Marian, Transformers and CTranslate2 attend in full
        problems.append(f"self-attention restricted to a window (attention_window={config.attention_window})")
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


def marian_config(config: ModelConfig, ids: dict[str, Any]) -> dict[str, Any]:
    """The MarianConfig (as config.json's dict) of an exportable aiayn ModelConfig; `ids`: exported ids."""
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
        **{k: v for k, v in ids.items() if k != "bad_words_ids"},
    }


def generation_config(ids: dict[str, Any]) -> dict[str, Any]:
    """generate() defaults as Marian's conversion script writes them: beam 4 (the paper's), the
    decoder start, EOS forced at max_length 512, and bad_words_ids: the ids aiayn's search bans
    (<pad>, and <s> where the vocabulary has one)."""
    return {**ids, "num_beams": 4, "max_length": 512}


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


def _renumber_marian_vocab(out: Path, layout: OpusLayout, separate: bool) -> None:
    """Rewrite the copied vocab.json (and target_vocab.json) with the exported ids."""
    if not separate and not torch.equal(layout.source, layout.target):
        raise AiaynError(f"{out / TOKENIZER_FILES['vocab']}: one vocabulary for two differently sized sides")
    files = ((TOKENIZER_FILES["vocab"], "source"), (TARGET_VOCAB_FILE, "target"))
    for name, side in files[: 1 + separate]:
        _write_json(out / name, layout.renumber(read_vocab(out / name), side))


def _export_sentencepiece(
    model_dir: Path, settings: dict[str, Any], config: ModelConfig, layout: OpusLayout, out: Path
) -> dict:
    """aiayn's one SentencePiece model -> source.spm = target.spm, and vocab.json in OPUS-MT's layout."""
    where = f"{model_dir / 'config.json'}: tokenizer.model"
    path = resolve_inside(model_dir, settings.get("model", "spm.model"), where)
    if not path.is_file():
        raise AiaynError(f"{path}: SentencePiece model not found")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    for name in ("source", "target"):
        shutil.copyfile(path, out / TOKENIZER_FILES[name])
    pieces = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    _write_json(out / TOKENIZER_FILES["vocab"], layout.renumber(pieces, "target"))
    special = {"unk_token": config.unk_id, "eos_token": config.eos_id, "pad_token": config.pad_id}
    return {name: sp.id_to_piece(i) for name, i in special.items()}


def zero_start_warning(model: Transformer) -> str | None:
    """Why CTranslate2 and Marian, which start the decoder from a zero vector, would differ; None if not."""
    config = model.config
    if not config.zero_start:
        return (
            "the decoder starts from a learned <s> embedding (decoder_start_id: null): Transformers "
            "computes the export exactly, but CTranslate2 and Marian start Marian models from a zero "
            "vector and will translate it differently (train with decoder_start_id: 0, the default)"
        )
    if bool(model.tgt_embed.weight[config.pad_id].ne(0).any()):
        return (
            "the <pad> row the decoder starts from is not zero: CTranslate2 and Marian start from a "
            "zero vector and will translate it differently"
        )
    return None


EXPORT_FILES = frozenset(
    {"config.json", "generation_config.json", "model.safetensors", "tokenizer_config.json", TARGET_VOCAB_FILE}
    | {VMAP_FILE}
    | set(TOKENIZER_FILES.values())
)  # what an export writes, and all that a directory it replaces may hold


def _check_out(model_dir: Path, out: Path) -> None:
    """OUT may be absent, an empty directory or an earlier export (only EXPORT_FILES, a Marian
    config.json), which is replaced; anything else would be lost with it, so it is refused."""
    if out.exists() and out.resolve() == model_dir.resolve():
        raise AiaynError(f"{out}: the output directory cannot be the model directory itself")
    if vacant(out):
        return
    if not out.is_dir():
        raise AiaynError(f"{out} exists and is not a directory; choose another output directory")
    others = sorted(p.name for p in out.iterdir() if p.name not in EXPORT_FILES)
    try:
        marian = json.loads((out / "config.json").read_text()).get("model_type") == "marian"
    except (OSError, ValueError, AttributeError):
        marian = False
    if others or not marian:
        what = f"it holds {', '.join(others[:3])}" if others else "its config.json is not a Marian model's"
        raise AiaynError(f"{out} exists and is not an earlier export ({what}); choose another directory")


def export_hf(model_dir: str | Path, out_dir: str | Path, warn: Callable[[str], None] | None = None) -> Path:
    """Write a MarianMTModel directory (config, generation config, weights, tokenizer) for `model_dir`.

    `warn` receives what the export cannot keep for every tool (default: warnings.warn).
    """
    model_dir, out = Path(model_dir), Path(out_dir)
    _check_out(model_dir, out)
    model, data = load_model_dir(model_dir)
    load_tokenizer(model_dir, data)  # its entry and files checked, one-line errors, before any writing
    config = model.config
    problems = marian_incompatibilities(config)
    if problems:
        raise AiaynError(f"{model_dir}: Marian cannot express {'; '.join(problems)}")
    layout = OpusLayout.of(config)
    state = layout.permute_rows(model.state_dict())
    if config.sinusoid_layout == "interleaved":
        state = permute_model_dim(state, concat_permutation(config.d_model))
    with building_directory(out) as work:  # a failed export leaves `out` as it was
        save_file(aiayn_to_marian(state, config), str(work / "model.safetensors"), metadata={"format": "pt"})
        ids = layout.special_ids(config)
        _write_json(work / "config.json", marian_config(config, ids))
        _write_json(work / "generation_config.json", generation_config(ids))
        settings = data.get("tokenizer") or {}
        if settings.get("type") == "marian":
            extra = _export_marian_tokenizer(model_dir, settings, work)
            _renumber_marian_vocab(work, layout, extra["separate_vocabs"])
        elif settings.get("type") == "sentencepiece":
            extra = _export_sentencepiece(model_dir, settings, config, layout, work)
        else:
            raise AiaynError(f"{model_dir}: tokenizer type {settings.get('type')!r} cannot be exported")
        languages = {
            k: data[v] for k, v in (("source_lang", "src_lang"), ("target_lang", "tgt_lang")) if data.get(v)
        }
        tokenizer = {"tokenizer_class": "MarianTokenizer", **languages, **extra}
        _write_json(work / "tokenizer_config.json", tokenizer)
        shortlist = read_shortlist(model_dir, config)
        if shortlist is not None:  # for ct2-transformers-converter --vocab_mapping OUT_DIR/vmap.txt
            write_vmap(shortlist, load_tokenizer(model_dir, data), work / VMAP_FILE, config.banned_ids)
    message = zero_start_warning(model)
    if message:
        (warn or warnings.warn)(f"{model_dir}: {message}")
    return out
