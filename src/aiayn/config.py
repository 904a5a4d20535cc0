"""Typed configuration: the model (section 3), training (section 5) and decoding (section 6.1).

`ModelConfig.preset("base", vocab_size=37000)` gives the paper's base model; `TrainConfig` holds
the recipe of section 5; `DecodeConfig` the beam search of section 6.1. All three read and write
plain dicts and YAML, and take `key=value` overrides by their plain field names, which are unique
across the three (`aiayn.overrides.apply_overrides`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from aiayn.checks import ConfigError, check_choice, check_number, check_seed
from aiayn.configs import PRESETS, config_path, names
from aiayn.serialization import Serializable, load_yaml

FORMAT_VERSION = 1

# Special token ids shared by the tokenizer (SentencePiece is trained with these) and the model.
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


@dataclass
class ModelConfig(Serializable):
    """The Transformer of section 3. Defaults are the paper's base model (Table 3)."""

    vocab_size: int = 8000
    src_vocab_size: int | None = None  # None: one vocabulary shared by source and target
    d_model: int = 512
    d_ff: int = 2048
    n_heads: int = 8
    d_k: int | None = None  # query/key size per head; None: d_model / n_heads (3.2.2; Table 3 row B)
    d_v: int | None = None  # value size per head; None: d_model / n_heads
    n_layers: int = 6
    n_decoder_layers: int | None = None  # None: as many as n_layers
    dropout: float = 0.1  # P_drop (5.4): embeddings + positions and every sublayer output
    attention_dropout: float = 0.0  # on the attention weights (not in the paper)
    activation_dropout: float = 0.0  # inside the FFN (not in the paper)
    activation: str = "relu"  # Eq. 2 uses ReLU; gelu and swish are options
    norm_first: bool = False  # the paper is post-norm: LayerNorm(x + Sublayer(x))
    final_norm: bool | None = None  # None: on exactly when norm_first
    layer_norm_eps: float = 1e-5
    positions: str = "sinusoidal"  # 3.5; "learned" is Table 3 row (E)
    sinusoid_layout: str = "interleaved"  # 3.5: sin on even, cos on odd dims; "concat": [sin | cos]
    max_positions: int = 1024  # only for learned positions
    scale_embedding: bool = True  # 3.4: embeddings multiplied by sqrt(d_model)
    tie_embeddings: str = "all"  # 3.4: "all" (src, tgt, output), "decoder" (tgt, output), "none"
    final_logits_bias: bool = False  # a bias on the output projection (Marian has one)
    pad_id: int = PAD_ID
    unk_id: int = UNK_ID
    bos_id: int = BOS_ID
    eos_id: int = EOS_ID
    # The decoder's first input. pad_id: a zero vector (the <pad> row is held at zero), as in
    # tensor2tensor and Marian, and what CTranslate2 and every OPUS-MT tool assume; None: bos_id,
    # a learned <s> embedding (fairseq's way, and aiayn's models trained before the zero start).
    decoder_start_id: int | None = PAD_ID
    # Self-attention restricted to a neighbourhood of r positions (Table 1's fourth row, section 7;
    # aiayn.model.window): the encoder's sees i - r ... i + r, the decoder's i - r ... i (itself and
    # the r before it). Cross-attention stays full. None: full attention, the paper's models.
    attention_window: int | None = None

    def __post_init__(self) -> None:
        self.validate()

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ModelConfig:
        """The model of configs/NAME.yaml (tiny, base, big), with `overrides` (field names)."""
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
        return cls.from_dict({**(load_yaml(config_path(name)).get("model") or {}), **overrides})

    # -- derived values -------------------------------------------------------------------------
    @property
    def key_dim(self) -> int:
        """d_k as used: the field, or d_model / n_heads (the paper's choice, 3.2.2)."""
        return self.d_model // self.n_heads if self.d_k is None else self.d_k

    @property
    def value_dim(self) -> int:
        """d_v as used: the field, or d_model / n_heads."""
        return self.d_model // self.n_heads if self.d_v is None else self.d_v

    @property
    def shared_vocab(self) -> bool:
        return self.src_vocab_size is None

    @property
    def source_vocab_size(self) -> int:
        return self.vocab_size if self.src_vocab_size is None else self.src_vocab_size

    @property
    def decoder_layers(self) -> int:
        return self.n_layers if self.n_decoder_layers is None else self.n_decoder_layers

    @property
    def use_final_norm(self) -> bool:
        return self.norm_first if self.final_norm is None else self.final_norm

    @property
    def start_id(self) -> int:
        return self.bos_id if self.decoder_start_id is None else self.decoder_start_id

    @property
    def banned_ids(self) -> list[int]:
        """Ids an output never contains: padding, BOS and the decoder start token (not EOS)."""
        return sorted({self.pad_id, self.bos_id, self.start_id} - {self.eos_id})

    @property
    def zero_start(self) -> bool:
        """The decoder starts from <pad>, whose target embedding is zero (Marian's convention)."""
        return self.start_id == self.pad_id

    def validate(self) -> None:
        for name in ("vocab_size", "d_model", "d_ff", "n_heads", "n_layers", "max_positions"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("d_k", "d_v", "attention_window"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive or null, got {getattr(self, name)}")
        if (self.d_k is None or self.d_v is None) and self.d_model % self.n_heads:
            raise ConfigError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads} "
                "(d_k and d_v default to d_model / n_heads; set both to choose them)"
            )
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        check_number("layer_norm_eps", self.layer_norm_eps, zero=True)
        check_choice("activation", self.activation, ("relu", "gelu", "swish"))
        check_choice("positions", self.positions, ("sinusoidal", "learned"))
        check_choice("sinusoid_layout", self.sinusoid_layout, ("interleaved", "concat"))
        check_choice("tie_embeddings", self.tie_embeddings, ("all", "decoder", "none"))
        if self.tie_embeddings == "all" and not self.shared_vocab and self.src_vocab_size != self.vocab_size:
            raise ConfigError(
                "tie_embeddings='all' needs one shared vocabulary; set tie_embeddings='decoder' "
                "or 'none' for separate source/target vocabularies"
            )
        if self.positions == "sinusoidal" and self.d_model % 2:
            raise ConfigError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        for name in ("pad_id", "unk_id", "bos_id", "eos_id"):
            if not 0 <= getattr(self, name) < min(self.vocab_size, self.source_vocab_size):
                raise ConfigError(f"{name}={getattr(self, name)} is outside the vocabulary")


@dataclass
class TrainConfig(Serializable):
    """The training recipe of section 5. Defaults are the paper's where it gives one."""

    max_tokens: int = 4096  # tokens per batch per device, padding included (5.1)
    update_tokens: int = 25000  # target tokens per update, reached by accumulation x ranks (5.1)
    accumulation: int | None = None  # None: derived from update_tokens
    lr_scale: float = 1.0  # multiplies Eq. 3
    lr_peak: float | None = None  # if set, Eq. 3 is rescaled so its peak (at warm-up end) is this
    warmup_steps: int = 4000  # Eq. 3
    adam_beta1: float = 0.9  # 5.3
    adam_beta2: float = 0.98
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    label_smoothing: float = 0.1  # 5.4
    clip_norm: float | None = None
    max_steps: int | None = 100000  # base model: 100k steps (5.2)
    max_epochs: int | None = None
    minutes: float | None = None  # wall-clock budget
    patience: int | None = None  # early stopping: dev evaluations without improvement
    eval_every: int = 1000  # steps between dev evaluations
    eval_bleu: bool = False  # dev BLEU (beam search) at each evaluation
    save_every: int | None = None  # steps between checkpoints
    save_minutes: float | None = 10.0  # 5.2: checkpoints written at 10-minute intervals
    keep_last: int = 5
    average_last: int = 5  # 6.1: the base models average the last 5 checkpoints
    precision: str = "auto"  # auto | fp32 | bf16 | fp16
    compile: bool = False
    cpu_matmul: str = "auto"  # auto (timed on the first updates) | onednn | mkl: aiayn.runtime.kernels
    seed: int = 1
    log_every: int = 50
    max_nonfinite: int = 5  # consecutive non-finite losses before training stops

    def __post_init__(self) -> None:
        check_choice("precision", self.precision, ("auto", "fp32", "bf16", "fp16"))
        check_choice("cpu_matmul", self.cpu_matmul, ("auto", "onednn", "mkl"))
        check_seed("seed", self.seed)
        if self.warmup_steps <= 0:
            raise ConfigError(f"warmup_steps must be positive, got {self.warmup_steps}")
        for name in ("max_tokens", "update_tokens", "log_every", "keep_last", "max_nonfinite", "eval_every"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("accumulation", "save_every", "patience"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive or null, got {getattr(self, name)}")
        if self.max_steps is not None and self.max_steps < 0:
            raise ConfigError(f"max_steps must be 0 or more, or null, got {self.max_steps}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        for name in ("adam_beta1", "adam_beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        check_number("lr_scale", self.lr_scale)
        check_number("adam_eps", self.adam_eps)
        check_number("weight_decay", self.weight_decay, zero=True)
        for name in ("lr_peak", "clip_norm"):
            check_number(name, getattr(self, name), null=True)
        for name in ("minutes", "save_minutes"):  # 0: after the first update
            check_number(name, getattr(self, name), zero=True, null=True)


MAX_BEAM_SIZE = 1024  # a beam past ~10 buys nothing; past this its score tensors outgrow memory
MAX_DRAFT_TOKENS = 64  # a draft that long is rarely accepted whole; each proposal costs a draft step
MIN_TEMPERATURE = 0.01  # below it the scaled logits of a float32 model are no longer finite
LENGTH_PENALTY_STYLES = ("gnmt", "len", "fairseq")  # see aiayn.decode.strategies


@dataclass(frozen=True)
class DecodeConfig(Serializable):
    """Beam search of section 6.1: beam 4, length penalty alpha 0.6, max length |src| + 50.

    The one home of the decoding defaults: the CLI, the server's schema, `Translator.translate`
    and evaluation all start from these. Frozen, so one can be shared (the server batches the
    requests whose options are equal).
    """

    beam_size: int = 4
    alpha: float = 0.6
    length_penalty_style: str = "gnmt"  # gnmt: ((5+|Y|)/6)^alpha; len (HF), fairseq (CTranslate2): |Y|^alpha
    max_len_a: float = 1.0
    max_len_b: int = 50
    n_best: int = 1  # outputs per text: the best of the beam, or samples
    batch_tokens: int = TrainConfig.max_tokens  # source tokens per decoding batch: a training batch's
    sampling: bool = False  # draw n_best samples (as SamplingConfig says) instead of searching
    draft_tokens: int = 4  # tokens a draft proposes per check (aiayn.decode.speculative; BENCHMARKS.md)
    shortlist: bool = False  # restrict the output layer to the model's shortlist (aiayn.decode.shortlist)

    def __post_init__(self) -> None:
        """The one check of the decoding options: the searches below take them as they come."""
        check_choice("length_penalty_style", self.length_penalty_style, LENGTH_PENALTY_STYLES)
        if not 1 <= self.beam_size <= MAX_BEAM_SIZE:  # (n, beam, beam) tensors: 100,000 took 10 GB
            raise ConfigError(f"beam_size must be between 1 and {MAX_BEAM_SIZE}, got {self.beam_size}")
        if self.sampling and self.n_best < 1:
            raise ConfigError(f"n_best (samples) must be at least 1, got {self.n_best}")
        if not self.sampling and not 1 <= self.n_best <= self.beam_size:
            raise ConfigError(f"n_best={self.n_best} must be between 1 and beam_size={self.beam_size}")
        if not math.isfinite(self.alpha):
            raise ConfigError(f"alpha must be a finite number, got {self.alpha}")
        if not (math.isfinite(self.max_len_a) and self.max_len_a >= 0):
            raise ConfigError(f"max_len_a must be a finite number >= 0, got {self.max_len_a}")
        if self.batch_tokens < 1:
            raise ConfigError(f"batch_tokens (--batch-tokens) must be at least 1, got {self.batch_tokens}")
        if not 1 <= self.draft_tokens <= MAX_DRAFT_TOKENS:
            raise ConfigError(
                f"draft_tokens (--draft-tokens) must be between 1 and {MAX_DRAFT_TOKENS},"
                f" got {self.draft_tokens}"
            )


@dataclass
class SamplingConfig(Serializable):
    """Sampling instead of search (back-translation, diverse outputs): each next token is drawn
    from the model's distribution divided by `temperature`, cut to the `top_k` most probable
    tokens (0: all) and then to the smallest set holding `top_p` of the mass (Holtzman et al.,
    2020), renormalised. `seed` makes the draws reproducible, whatever the batching."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        check_number("temperature", self.temperature)
        if not MIN_TEMPERATURE <= self.temperature <= 100.0:
            raise ConfigError(
                f"temperature must be between {MIN_TEMPERATURE} and 100, got {self.temperature}"
            )
        check_seed("seed", self.seed)
        if self.top_k < 0:
            raise ConfigError(f"top_k must be 0 (all tokens) or more, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")


@dataclass
class RunConfig(Serializable):
    """What a run directory's config.yaml holds: the model, training and decoding configs."""

    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        """The sections `model`, `train` and `decode`; with `preset: NAME`, the model starts from
        that preset's (ModelConfig.preset) and its section changes it."""
        sections = ("model", "train", "decode", "preset")
        unknown = sorted(set(data) - set(sections))
        if unknown:
            known = ", ".join(sections)
            raise ConfigError(f"unknown config section(s): {', '.join(unknown)} (the sections: {known})")
        model = data.get("model") or {}
        if not isinstance(model, dict):
            raise ConfigError(f"ModelConfig settings must be a mapping, got {type(model).__name__}")
        return cls(
            model=ModelConfig.preset(data["preset"], **model)
            if "preset" in data
            else ModelConfig.from_dict(model),
            train=TrainConfig.from_dict(data.get("train") or {}),
            decode=DecodeConfig.from_dict(data.get("decode") or {}),
        )

    @classmethod
    def named(cls, name: str) -> RunConfig:
        """A config shipped with aiayn (aiayn/configs: the presets tiny, base, big; quickstart)."""
        if name not in names():
            raise ConfigError(f"no config named {name!r}; choose one of {', '.join(names())}")
        return cls.from_yaml(config_path(name))
