"""The server's unit of work and its model call: texts tokenized once, in the request's worker
thread, travel as ids (`Item`) to the micro-batcher, the search and the attention answer.

`run_batch` is what the batcher's model thread runs: one `Translator.translate_batch` for texts that share
their `Options` (the ids passed on: aiayn.decode.inputs.Encoded), or with attention one per text,
its output cut so that the weights answered are those of exactly the translation returned. A text's
target-language tag travels with it, not in the Options: requests for several target languages of
a multilingual model share model calls, each source starting with its own tag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from aiayn.config import DecodeConfig, SamplingConfig
from aiayn.decode.inputs import Encoded
from aiayn.decode.languages import requested_target
from aiayn.serve.batcher import StopHook
from aiayn.serve.limits import ServeSettings, check_texts, output_limits, text_costs
from aiayn.serve.schemas import Attention, Hypothesis, Sample, TranslateRequest, Translation

ATTENTION_DECIMALS = 4


class TranslatorLike(Protocol):
    """What the server needs of `aiayn.decode.Translator`."""

    config: Any
    info: dict[str, Any]
    bundle: Any  # aiayn.decode.bundle.ModelBundle

    def translate_batch(self, texts: list[str], options: DecodeConfig, **controls: Any): ...

    def attention_maps(self, src_ids: list[int], tokens: list[int]) -> dict[str, Any]: ...

    def encode_inputs(
        self, texts: list[str], prefix=None, constraints=None, target_language=None
    ) -> Encoded: ...


@dataclass(frozen=True)
class Options:
    """Decoding options: requests share a model call only when these are equal."""

    search: DecodeConfig
    attention: bool = False
    sample: Sample | None = None
    align: bool = False


@dataclass
class Item:
    """One text of a request, as ids, and what steers its search alone: the batcher's unit of work."""

    text: str
    pieces: list[int]  # its source ids (no </s>)
    prefix: list[int]  # target ids its output starts with ([] for none)
    constraints: list[list[int]]  # target ids of the phrases its output must hold
    key: int = 0  # its index in its request: what seeds its samples, whatever the batching
    tag: list[int] = field(default_factory=list)  # the ids of its target-language tag ([] for none)


def items_of(texts: list[str], encoded: Encoded) -> list[Item]:
    """The items of a request's texts, with the ids `encoded` holds for them."""
    n = len(texts)
    prefixes, constraints = encoded.prefix or [[]] * n, encoded.constraints or [[]] * n
    tags = encoded.tags or [[]] * n
    return [
        Item(text, pieces, prefix, phrases, key, tag)
        for key, (text, pieces, prefix, phrases, tag) in enumerate(
            zip(texts, encoded.pieces, prefixes, constraints, tags, strict=True)
        )
    ]


def request_target(translator: TranslatorLike, target: str | None) -> str | None:
    """A request's `target`, or the model's one target language; a one-line AiaynError (400) for a
    model of several given none, or for a language the model lacks (aiayn.decode.languages)."""
    return requested_target(translator.info, target, "target")


def text_items(
    translator: TranslatorLike, body: TranslateRequest, settings: ServeSettings
) -> tuple[list[Item], list[int]]:
    """POST /v1/translate's texts as items, and each one's work: the request's limits checked
    (ClientError 413), every text, prefix and constraint tokenized once. For a worker thread."""
    texts = body.texts
    check_texts(texts, settings)
    target = request_target(translator, body.target)
    encoded = translator.encode_inputs(texts, body.prefixes, body.constraint_lists, target)
    sources = encoded.sources(translator.config.eos_id)  # whole texts (a long one is translated in parts)
    costs = text_costs(sources, translator.config, body.beam_size, body.attention, settings, encoded.forced())
    return items_of(texts, encoded), costs


def _encoded(items: list[Item]) -> Encoded:
    """The items' ids as one batch: each keeps its own tag, so texts of several target languages
    share a model call."""
    prefixes, constraints = [i.prefix for i in items], [i.constraints for i in items]
    tags = [i.tag for i in items]
    return Encoded(
        [i.pieces for i in items],
        prefixes if any(prefixes) else None,
        constraints if any(constraints) else None,
        tags if any(tags) else None,
    )


def _rounded(weights: list[Any]) -> list:
    """Per-layer (heads, q, k) tensors -> nested lists rounded to ATTENTION_DECIMALS."""
    return [w.float().round(decimals=ATTENTION_DECIMALS).tolist() for w in weights]


def _attention(maps: dict[str, Any]) -> Attention:
    """The weights as nested lists of floats, built as the schema says (no validation pass: it
    would copy every list)."""
    return Attention.model_construct(
        src_tokens=maps["src_tokens"],
        tgt_tokens=maps["tgt_tokens"],
        **{kind: _rounded(maps[kind]) for kind in ("cross", "encoder", "decoder")},
    )


def _translation(hyps: list[Any], attention: Attention | None = None) -> Translation:
    best = hyps[0]
    listed = [Hypothesis(text=h.text, score=h.score, log_prob=h.log_prob) for h in hyps]
    return Translation(
        text=best.text,
        score=best.score,
        log_prob=best.log_prob,
        hypotheses=listed,
        attention=attention,
        alignment=best.alignment,
    )


def run_batch(
    translator: TranslatorLike,
    items: list[Item],
    options: Options,
    should_stop: StopHook,
    attention_tokens: int,
) -> list[Translation]:
    """One model call for texts that share `options` (runs in the model thread).

    With attention, each text is translated on its own, its output cut to attention_tokens tokens
    (with </s>), and the weights are those of exactly the translation returned.
    """
    sample = None if options.sample is None else SamplingConfig(**options.sample.model_dump())
    common = dict(should_stop=should_stop, align=options.align, sample=sample)

    def translate(items: list[Item], search: DecodeConfig) -> list[list[Any]]:
        texts, keys = [i.text for i in items], [i.key for i in items]
        return translator.translate_batch(texts, search, **common, keys=keys, encoded=_encoded(items))

    if not options.attention:
        return [_translation(h) for h in translate(items, options.search)]
    out = []
    for item in items:
        (src_ids,) = _encoded([item]).sources(translator.config.eos_id)
        (longest,) = output_limits([src_ids], translator.config, attention_tokens)
        (hyps,) = translate([item], options.search.replace(max_len_a=0.0, max_len_b=longest))
        attention = None
        if src_ids:  # "" or "  " has no tokens: nothing to attend to
            attention = _attention(translator.attention_maps(src_ids, hyps[0].tokens))
        out.append(_translation(hyps, attention))
    return out
