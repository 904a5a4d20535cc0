"""The JSON of the HTTP API: requests are validated strictly (wrong types or unknown fields -> 422).

No field names a file: a request carries texts and decoding settings (section 6.1) only. The
schema's own bounds (MAX_TEXTS, MAX_TEXT_CHARS) hold whatever the server's flags say; the flags'
tighter limits answer 413 (aiayn.serve.limits). Before the fields are validated, the strings of a
request are checked (check_translate, check_document): JSON can carry more texts or longer strings
than any server allows, and lone surrogates ("\\ud800", not Unicode: no tokenizer can encode them);
each gets one error that says what is wrong and where (texts count from 1, as in every message of
the server), never an echo of the input. Numbers must be finite: JSON parsers accept NaN.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from aiayn.checks import ConfigError
from aiayn.config import MIN_TEMPERATURE, DecodeConfig, SamplingConfig

DEFAULT = DecodeConfig()  # the paper's search (section 6.1), which a request changes field by field
SAMPLING = SamplingConfig()  # a "sample" object's defaults
MAX_BEAM = 16  # a server caps it: memory grows with texts x beams, and beams past ~10 buy nothing
MAX_TEXTS = 4096  # the most --max-batch may allow
MAX_TEXT_CHARS = 100_000  # the most --max-chars may allow
MAX_CONSTRAINTS = 32  # phrases per text: dynamic beam allocation needs beams for each
Language = Annotated[str, Field(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_-]+$")]
TARGET = (
    "The language to translate into, for a model of several target languages (GET /v1/model lists "
    "them); a model of one may be given its own or none."
)
Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
Phrases = Annotated[list[Text], Field(max_length=MAX_CONSTRAINTS)]
BeamSize = Annotated[
    int, Field(ge=1, le=MAX_BEAM, description=f"Beam size (section 6.1: {DEFAULT.beam_size}); 1 is greedy.")
]
Alpha = Annotated[
    float,
    Field(
        allow_inf_nan=False,
        ge=0.0,
        le=10.0,
        description=f"Length penalty exponent (section 6.1: {DEFAULT.alpha}).",
    ),
]
LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads joins the pairs: what is left is lone
# The error types of check_translate that the server answers with its own limits (aiayn.serve.app).
TOO_MANY_TEXTS, TEXT_TOO_LONG = "too_many_texts", "text_too_long"


def too_many_texts(count: int, limit: int) -> str:
    return f"{count} texts in one request; the limit is {limit}"


def too_long(what: str, chars: int, limit: int) -> str:
    return f"{what} has {chars} characters; the limit is {limit}"


def _error(kind: str, message: str, **ctx: Any) -> PydanticCustomError:
    """A validation error of type `kind`; `ctx` is for the server to read (`message` holds no braces,
    so pydantic, which formats it with `ctx`, leaves it as it is)."""
    return PydanticCustomError(kind, message, ctx or None)


def check_string(value: Any, what: str, kind: str = "string_too_long") -> None:
    """`value`, if a string, is at most MAX_TEXT_CHARS characters of valid Unicode."""
    if not isinstance(value, str):
        return  # the schema says what it should be
    if len(value) > MAX_TEXT_CHARS:
        raise _error(kind, too_long(what, len(value), MAX_TEXT_CHARS), what=what, chars=len(value))
    bad = LONE_SURROGATE.search(value)
    if bad:
        at = bad.start() + 1
        raise _error("unicode", f"{what} is not valid Unicode: a lone surrogate at character {at}")


def _entries(value: Any, name: str, limit: int) -> list:
    """`value` as a list (anything else: one entry) of at most `limit` entries."""
    if not isinstance(value, list):
        return [value]
    if len(value) > limit:
        raise _error("too_long", f"{name} has {len(value)} entries; the limit is {limit}")
    return value


def _check_constraints(value: Any) -> None:
    """Phrases for one text, or one list (or null) per text."""
    if not isinstance(value, list):
        return
    nested = any(isinstance(v, list) for v in value)
    for i, phrases in enumerate(_entries(value, "constraints", MAX_TEXTS) if nested else [value]):
        if not isinstance(phrases, list):
            continue
        if len(phrases) > MAX_CONSTRAINTS:
            raise _error(
                "too_long", f"text {i + 1}: {len(phrases)} constraints; the limit is {MAX_CONSTRAINTS}"
            )
        for j, phrase in enumerate(phrases):
            check_string(phrase, f"text {i + 1}: constraint {j + 1}")


def check_translate(data: Any) -> None:
    """The strings of a /v1/translate body (parsed JSON, not yet validated): sizes and Unicode."""
    if not isinstance(data, dict):
        return
    text = data.get("text")
    if isinstance(text, list) and len(text) > MAX_TEXTS:
        raise _error(TOO_MANY_TEXTS, too_many_texts(len(text), MAX_TEXTS), count=len(text))
    for i, one in enumerate(text if isinstance(text, list) else [text]):
        check_string(one, f"text {i + 1}", TEXT_TOO_LONG)
    for i, prefix in enumerate(_entries(data.get("prefix"), "prefix", MAX_TEXTS)):
        check_string(prefix, f"text {i + 1}: the prefix")
    _check_constraints(data.get("constraints"))


def check_document(data: Any) -> None:
    """The document of a /v1/translate/stream body (parsed JSON, not yet validated)."""
    if isinstance(data, dict):
        check_string(data.get("text"), "the document")


class Sample(BaseModel):
    """Sampling instead of beam search (aiayn.config.SamplingConfig: the same fields and checks)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    temperature: float = Field(
        SAMPLING.temperature,
        allow_inf_nan=False,
        ge=MIN_TEMPERATURE,
        le=100.0,
        description=f"Divides the logits ({MIN_TEMPERATURE} to 100).",
    )
    top_k: int = Field(SAMPLING.top_k, ge=0, description="Draw from the k most probable tokens (0: all).")
    top_p: float = Field(
        SAMPLING.top_p,
        allow_inf_nan=False,
        gt=0.0,
        le=1.0,
        description="Then from the smallest set with this mass.",
    )
    seed: int = Field(
        SAMPLING.seed, ge=0, lt=2**62, description="Equal seeds, equal samples, whatever the batching."
    )


class TranslateRequest(BaseModel):
    """POST /v1/translate. `text` is one text or a list; the answer always lists one entry per text."""

    model_config = ConfigDict(strict=True, extra="forbid")

    text: Text | Annotated[list[Text], Field(max_length=MAX_TEXTS)] = Field(
        description="A text or a list of texts to translate."
    )
    beam_size: BeamSize = DEFAULT.beam_size
    alpha: Alpha = DEFAULT.alpha
    n_best: int = Field(
        DEFAULT.n_best, ge=1, le=MAX_BEAM, description="Hypotheses per text, best first (<= beam_size)."
    )
    attention: bool = Field(False, description="Also return attention weights and subword tokens.")
    prefix: Text | Annotated[list[Text | None], Field(max_length=MAX_TEXTS)] | None = Field(
        None,
        description="A start the translation must continue: a string for one text, or one string "
        "(or null) per text of a list.",
    )
    constraints: Phrases | Annotated[list[Phrases | None], Field(max_length=MAX_TEXTS)] | None = Field(
        None,
        description="Phrases the translation must contain: a list of strings for one text, or one "
        "list (or null) per text of a list.",
    )
    sample: Sample | None = Field(None, description="Draw n_best samples instead of searching.")
    align: bool = Field(False, description="Word alignments: [source word, target word] pairs.")
    target: Language | None = Field(None, description=TARGET)

    @model_validator(mode="before")
    @classmethod
    def _strings(cls, data: Any) -> Any:
        check_translate(data)
        return data

    @model_validator(mode="after")
    def _consistent(self) -> TranslateRequest:
        try:
            self.search  # noqa: B018 (DecodeConfig checks the options together, e.g. n_best <= beam_size)
        except ConfigError as err:
            raise ValueError(str(err)) from None
        if isinstance(self.text, list) and not self.text:
            raise ValueError("text is an empty list")
        for name, single in (("prefix", "a string"), ("constraints", "a list of strings")):
            self._check_per_text(name, single)
        return self

    def _check_per_text(self, name: str, single: str) -> None:
        """One text takes `single`; a list of texts takes one entry (or null) per text."""
        value = getattr(self, name)
        if value is None:
            return
        nested = isinstance(value, list) and (name == "prefix" or any(not isinstance(v, str) for v in value))
        if isinstance(self.text, str):
            if nested:
                raise ValueError(f"{name}: for one text, {single}")
        elif not nested:
            raise ValueError(f"{name}: one entry per text of the list (null for none)")
        elif len(value) != len(self.text):
            raise ValueError(f"{name} has {len(value)} entries for {len(self.text)} texts")

    @property
    def search(self) -> DecodeConfig:
        """The request's search: the server's defaults (DecodeConfig's) with its fields."""
        return DEFAULT.replace(beam_size=self.beam_size, alpha=self.alpha, n_best=self.n_best)

    @property
    def texts(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else list(self.text)

    @property
    def prefixes(self) -> list[str | None]:
        """One prefix (or None) per text."""
        if self.prefix is None or isinstance(self.prefix, str):
            return [self.prefix] * len(self.texts)
        return list(self.prefix)

    @property
    def constraint_lists(self) -> list[list[str] | None]:
        """One list of phrases (or None) per text."""
        if isinstance(self.text, str):
            return [self.constraints]
        return [None] * len(self.texts) if self.constraints is None else list(self.constraints)


class StreamRequest(BaseModel):
    """POST /v1/translate/stream: one document, translated sentence by sentence."""

    model_config = ConfigDict(strict=True, extra="forbid")

    text: Annotated[str, Field(max_length=MAX_TEXT_CHARS)] = Field(
        description="A document: paragraphs at blank lines, split into sentences (Moses' rules)."
    )
    beam_size: BeamSize = DEFAULT.beam_size
    alpha: Alpha = DEFAULT.alpha
    sample: Sample | None = Field(None, description="Draw one sample per sentence instead of searching.")
    target: Language | None = Field(None, description=TARGET)

    @model_validator(mode="before")
    @classmethod
    def _strings(cls, data: Any) -> Any:
        check_document(data)
        return data

    @property
    def search(self) -> DecodeConfig:
        return DEFAULT.replace(beam_size=self.beam_size, alpha=self.alpha)


class Hypothesis(BaseModel):
    text: str
    score: float = Field(description="log P(Y|X) / lp(Y), the beam's ranking score.")
    log_prob: float = Field(description="log P(Y|X) summed over the output tokens and EOS.")


class Attention(BaseModel):
    """Weights rounded to 4 decimals; every matrix is indexed [layer][head][query][key]."""

    src_tokens: list[str] = Field(description="Source subwords + '</s>' (keys of cross attention).")
    tgt_tokens: list[str] = Field(description="Output subwords + '</s>' (queries of cross attention).")
    cross: list[list[list[list[float]]]] = Field(description="(layers, heads, tgt, src)")
    encoder: list[list[list[list[float]]]] = Field(description="(layers, heads, src, src)")
    decoder: list[list[list[list[float]]]] = Field(description="(layers, heads, tgt, tgt)")


class Translation(BaseModel):
    text: str = Field(description="The best translation.")
    score: float
    log_prob: float
    hypotheses: list[Hypothesis] = Field(description="The n_best hypotheses, best first.")
    attention: Attention | None = None
    alignment: list[tuple[int, int]] | None = Field(
        None, description="With align: [source word, target word] pairs of the best translation, from 0."
    )


class TranslateResponse(BaseModel):
    translations: list[Translation]


class Limits(BaseModel):
    max_batch: int = Field(description="Most texts in one request.")
    max_chars: int = Field(description="Most characters in one text.")
    timeout: float = Field(description="Seconds a request may take, queueing included.")
    max_body_bytes: int = Field(description="Most bytes in a request body.")
    max_work: int = Field(
        description=f"Most texts x beam x longest output (|source| + {DEFAULT.max_len_b} tokens) "
        "in a request."
    )
    max_queue: int = Field(description="Most texts waiting for the model; beyond, 503 with Retry-After.")
    attention_texts: int = Field(description="Texts per request with attention.")
    max_attention_tokens: int = Field(
        description="Most tokens (with </s>) on each side of an attention answer."
    )
    max_attention_weights: int = Field(description="Most weights in an attention answer of this model.")


class ModelInfo(BaseModel):
    src_lang: str | None
    tgt_lang: str | None = Field(description='The target language ("mul" for several).')
    target_languages: list[str] = Field(
        [], description="A multilingual model's target languages (a request's target); [] for one."
    )
    parameters: int
    config: dict
    int8: bool = Field(False, description="Whether the linear layers run in int8 (aiayn serve --int8).")
    limits: Limits


class Error(BaseModel):
    detail: str
