"""The JSON of the HTTP API: requests are validated strictly (wrong types or unknown fields -> 422).

No field names a file: a request carries texts and decoding settings (section 6.1) only. The
schema's own bounds (MAX_TEXTS, MAX_TEXT_CHARS) hold whatever the server's flags say; the flags'
tighter limits answer 413 (aiayn.serve.limits).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_BEAM = 16  # a server caps it: memory grows with texts x beams, and beams past ~10 buy nothing
MAX_TEXTS = 4096  # the most --max-batch may allow
MAX_TEXT_CHARS = 100_000  # the most --max-chars may allow
Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]


class TranslateRequest(BaseModel):
    """POST /v1/translate. `text` is one text or a list; the answer always lists one entry per text."""

    model_config = ConfigDict(strict=True, extra="forbid")

    text: Text | Annotated[list[Text], Field(max_length=MAX_TEXTS)] = Field(
        description="A text or a list of texts to translate."
    )
    beam_size: int = Field(4, ge=1, le=MAX_BEAM, description="Beam size (section 6.1: 4); 1 is greedy.")
    alpha: float = Field(0.6, ge=0.0, le=10.0, description="Length penalty exponent (section 6.1: 0.6).")
    n_best: int = Field(1, ge=1, le=MAX_BEAM, description="Hypotheses per text, best first (<= beam_size).")
    attention: bool = Field(False, description="Also return attention weights and subword tokens.")

    @model_validator(mode="after")
    def _n_best_within_beam(self) -> TranslateRequest:
        if self.n_best > self.beam_size:
            raise ValueError(f"n_best={self.n_best} is larger than beam_size={self.beam_size}")
        if isinstance(self.text, list) and not self.text:
            raise ValueError("text is an empty list")
        return self

    @property
    def texts(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else list(self.text)


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


class TranslateResponse(BaseModel):
    translations: list[Translation]


class Limits(BaseModel):
    max_batch: int = Field(description="Most texts in one request.")
    max_chars: int = Field(description="Most characters in one text.")
    timeout: float = Field(description="Seconds a request may take, queueing included.")
    max_body_bytes: int = Field(description="Most bytes in a request body.")
    max_work: int = Field(
        description="Most texts x beam x longest output (|source| + 50 tokens) in a request."
    )
    max_queue: int = Field(description="Most texts waiting for the model; beyond, 503 with Retry-After.")
    attention_texts: int = Field(description="Texts per request with attention.")
    max_attention_tokens: int = Field(
        description="Most tokens (with </s>) on each side of an attention answer."
    )
    max_attention_weights: int = Field(description="Most weights in an attention answer of this model.")


class ModelInfo(BaseModel):
    src_lang: str | None
    tgt_lang: str | None
    parameters: int
    config: dict
    int8: bool = Field(False, description="Whether the linear layers run in int8 (aiayn serve --int8).")
    limits: Limits


class Error(BaseModel):
    detail: str
