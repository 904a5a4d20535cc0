"""Translator: texts in, `Translation`s out, with the beam search of section 6.1, on a ModelBundle.

    translator = Translator(load_bundle("runs/quickstart/model"))      # or Translator.load(...)
    translator.translate_batch(["En el principio era el Verbo."])      # [[Translation('In the ...')]]
    translator.translate_batch(texts, beam_size=4, n_best=4)           # up to 4 per text, best first
    translator.translate_batch(texts, DecodeConfig(beam_size=8, shortlist=True))  # as one object

    translator.translate_batch(texts, prefix=["In the"], constraints=[["Word"]])   # steer the search
    translator.translate_batch(texts, sample=SamplingConfig(top_p=0.9, seed=1))     # sample instead
    translator.translate_batch(texts, align=True)     # Translation.alignment: (i, j) pairs
    translator.translate_batch(texts, target_language="de")   # a multilingual model: into German
    translate_texts(translator, texts)                # ['In the beginning ...'] (aiayn.decode.texts)
    translate_document(translator, text)              # paragraphs and sentences (aiayn.decode.texts)

Loading (models, ensembles, int8, a draft model, a shortlist) is aiayn.decode.bundle's; this module
runs texts. Sources are cut into pieces and closed with EOS (as in training), sorted by length into
batches of at most `batch_tokens` source tokens (padding counted) and translated together; results
come back in input order. An empty text translates to an empty text without running the model; a
text longer than the model's source limit is split into sentences (and a sentence still too long
into pieces of the limit), translated in parts and joined, with a warning: no text is dropped.
A multilingual model's target-language tag (aiayn.decode.languages) starts every source it reads,
each part of a split text included.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.config import DecodeConfig, SamplingConfig
from aiayn.decode import align as alignment
from aiayn.decode.bundle import ModelBundle, load_bundle
from aiayn.decode.generate import Controls, decode_batch, source_limit, target_limit
from aiayn.decode.inputs import (
    Encoded,
    SplitHook,
    source_units,
    tag_ids,
    target_constraints,
    target_prefixes,
)
from aiayn.decode.languages import text_tags
from aiayn.decode.rules import Hypothesis, StopHook
from aiayn.errors import AiaynError, TextError
from aiayn.model.transformer import Transformer

ProgressHook = Callable[[int], None]  # called with the number of sentences just translated


@dataclass
class Translation:
    """One hypothesis: its text, ranking score log P / lp, log P and target ids (without EOS)."""

    text: str
    score: float
    log_prob: float
    tokens: list[int]
    alignment: list[tuple[int, int]] | None = None  # (source word, target word) with align=True


def _warn_split(index: int, length: int, limit: int, parts: int) -> None:
    message = f"text {index + 1} has {length} tokens, over the limit of {limit}: translated in {parts} parts"
    warnings.warn(message, stacklevel=3)


def _joined(hyps: list[Hypothesis]) -> Hypothesis:
    """The translations of a text's parts as one hypothesis (scores and log P summed)."""
    tokens = [t for h in hyps for t in h.tokens]
    return Hypothesis(tokens, sum(h.score for h in hyps), sum(h.log_prob for h in hyps))


def token_batches(lengths: list[int], batch_tokens: int) -> list[list[int]]:
    """Indices sorted by length (longest first) and cut into batches of <= batch_tokens, padding counted.

    A single sentence longer than batch_tokens gets a batch of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and (len(batches[-1]) + 1) * lengths[batches[-1][0]] <= batch_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated: use {new}", DeprecationWarning, stacklevel=3)


def _forwarded(name: str, attribute: str | None = None) -> property:
    """A deprecated Translator attribute that is the bundle's `attribute` (default: `name`) now."""
    attribute = attribute or name
    new = f"translator.bundle.{attribute}"

    def get(self: Translator) -> Any:
        _deprecated(f"Translator.{name}", new)
        return getattr(self.bundle, attribute)

    def set_(self: Translator, value: Any) -> None:
        _deprecated(f"Translator.{name}", new)
        setattr(self.bundle, attribute, value)

    return property(get, set_, doc=f"Deprecated: `{new}`.")


class Translator:
    """Runs texts through a ModelBundle (aiayn.decode.bundle): `.bundle`, and the bundle's
    `.tokenizer`, `.config` and `.info`, which the text pipeline reads.

    `Translator(model, tokenizer, info, others, draft)`, the older form, still builds its bundle
    (deprecated), and the bundle's other attributes (`.model`, `.models`, `.draft`, `.shortlist`,
    ...) are still found here with a DeprecationWarning.
    """

    def __init__(self, bundle: ModelBundle | Transformer, *old: Any, **old_keywords: Any):
        if not isinstance(bundle, ModelBundle):
            _deprecated("Translator(model, tokenizer, ...)", "Translator(ModelBundle([model], tokenizer))")
            bundle = _old_bundle(bundle, *old, **old_keywords)
        elif old or old_keywords:
            raise TypeError("Translator(bundle) takes the bundle only")
        self.bundle = bundle

    @classmethod
    def load(cls, model_dir: str | Path | list, device: str | torch.device | None = None, **how: Any):
        """`Translator(load_bundle(model_dir, device, int8=..., draft=..., shortlist=...))`."""
        return cls(load_bundle(model_dir, device, **how))

    @property
    def tokenizer(self) -> Any:
        return self.bundle.tokenizer

    @property
    def config(self):
        return self.bundle.config

    @property
    def info(self) -> dict:
        return self.bundle.info

    model = _forwarded("model")
    models = _forwarded("models")
    draft = _forwarded("draft")
    model_dir = _forwarded("model_dir")
    shortlist = _forwarded("shortlist")
    int8 = _forwarded("int8")
    device = _forwarded("device")
    use_shortlist = _forwarded("use_shortlist", "always_shortlist")

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Source ids of each text, whole: pieces + EOS; [] for an empty text."""
        return [ids + [self.config.eos_id] if ids else [] for ids in self.tokenizer.encode(list(texts))]

    def sources(
        self,
        texts: list[str],
        on_split: SplitHook | None = None,
        pieces: list[list[int]] | None = None,
        tags: list[list[int]] | None = None,
    ) -> list[list[list[int]]]:
        """What each text is translated as: [tag + pieces + EOS], or its parts (each with the tag)
        when it is over the model's source limit (aiayn.decode.inputs.source_units); [] for an empty
        text. `pieces`: the texts' ids, when they were tokenized already; `tags`: each text's tag ids."""
        language = self.info.get("src_lang") or "en"
        limit = source_limit(self.config, self.info.get("longest_source"))
        hook = on_split or _warn_split
        return source_units(texts, self.tokenizer, limit, self.config.eos_id, language, hook, pieces, tags)

    def target_tags(
        self, texts: list[str], target_language: str | list[str | None] | None
    ) -> list[list[int]] | None:
        """The ids of each text's target-language tag (aiayn.decode.languages), None for no tags;
        a one-line error for a language the model does not have."""
        return tag_ids(self.tokenizer, text_tags(self.info, target_language, len(texts)))

    def encode_inputs(
        self,
        texts: list[str],
        prefix: list[str | None] | None = None,
        constraints: list[list[str] | None] | None = None,
        target_language: str | list[str | None] | None = None,
    ) -> Encoded:
        """Texts, and `translate_batch`'s prefix, constraints and target language, tokenized once
        (each checked: a one-line error names the text): what `translate_batch(texts, encoded=...)`
        takes."""
        if isinstance(texts, str):
            raise AiaynError("translate_batch() takes a list of texts, not one string")
        encode, limit = self.tokenizer.encode_target, target_limit(self.config)
        return Encoded(
            self.tokenizer.encode(list(texts)),
            target_prefixes(prefix, len(texts), encode, limit),
            target_constraints(constraints, len(texts), encode, limit),
            self.target_tags(texts, target_language),
        )

    def _src_tensor(self, sources: list[list[int]]) -> Tensor:
        """Right-padded (n, max_len) long tensor on the model's device."""
        src = torch.full((len(sources), max(map(len, sources))), self.config.pad_id, dtype=torch.long)
        for row, ids in enumerate(sources):
            src[row, : len(ids)] = torch.tensor(ids)
        return src.to(self.bundle.device)

    def translate_ids(
        self,
        sources: list[list[int]],
        options: DecodeConfig,
        progress: ProgressHook | None = None,
        controls: Controls | None = None,
        owners: list[int] | None = None,
        should_stop: StopHook | None = None,
    ) -> list[list[Hypothesis]]:
        """Source ids (pieces + EOS) -> up to n_best hypotheses each, in input order; `controls`
        has one entry per source, `owners` the text each comes from (for error messages).

        An empty source gives one empty hypothesis with score 0 without running the model.
        `should_stop()` is asked before every search step (SearchStopped when it answers True).
        """
        bundle = self.bundle
        controls = replace(controls or Controls(), shortlist=bundle.chosen_shortlist(options))
        if should_stop is not None:
            controls = replace(controls, should_stop=should_stop)
        results: list[list[Hypothesis]] = [[] for _ in sources]
        nonempty = [i for i, ids in enumerate(sources) if ids]
        lengths = [len(sources[i]) for i in nonempty]
        for batch in token_batches(lengths, options.batch_tokens):
            index = [nonempty[b] for b in batch]
            src = self._src_tensor([sources[i] for i in index])  # (batch, src_len)
            found = decode_batch(bundle.models, src, options, controls.subset(index), bundle.draft)
            for i, hyps in zip(index, found, strict=True):
                if not hyps or not math.isfinite(hyps[0].score):  # NaN or -inf everywhere
                    text = i if owners is None else owners[i]
                    raise TextError(text, "the model's scores are not finite (are its weights?)")
                results[i] = hyps
            if progress is not None:
                progress(len(index))
        for i, ids in enumerate(sources):
            if not ids:
                results[i] = [Hypothesis([], 0.0, 0.0)]
        if progress is not None:
            progress(len(sources) - len(nonempty))
        return results

    def _controls(self, units, encoded: Encoded, sample, keys) -> Controls:
        """Per source (texts' parts flattened): the prefix for a text's first part, constraints,
        and sampling keys (the text's key, default its index, * 4096 + part)."""
        prefixes, phrases = encoded.prefix, encoded.constraints
        if sample is not None and not isinstance(sample, SamplingConfig):
            raise AiaynError(f"sample: a SamplingConfig, not {type(sample).__name__}")
        for i, parts in enumerate(units):
            if (
                phrases
                and phrases[i]
                and (len(parts) > 1 or sample is not None or (prefixes and prefixes[i]))
            ):
                why = "it is translated in parts" if len(parts) > 1 else "with sampling or a prefix"
                raise TextError(i, f"constraints cannot be used {why}")
        owner = [(i, part) for i, parts in enumerate(units) for part in range(len(parts))]
        return Controls(
            None if prefixes is None else [prefixes[i] if part == 0 else [] for i, part in owner],
            None if phrases is None else [phrases[i] for i, _ in owner],
            sample,
            [(i if keys is None else keys[i]) * 4096 + part for i, part in owner],
        )

    def translate_batch(
        self,
        texts: list[str],
        options: DecodeConfig | None = None,
        *,
        on_split: SplitHook | None = None,
        progress: ProgressHook | None = None,
        prefix: list[str | None] | None = None,
        constraints: list[list[str] | None] | None = None,
        sample: SamplingConfig | None = None,
        align: bool = False,
        replace_unk: bool = False,
        align_layer: int | None = None,
        should_stop: StopHook | None = None,
        keys: list[int] | None = None,
        encoded: Encoded | None = None,
        target_language: str | list[str | None] | None = None,
        **search: Any,
    ) -> list[list[Translation]]:
        """Translate `texts` with beam search (greedy when beam_size is 1): the search of `options`
        (default: DecodeConfig(), the paper's) with `search`'s fields changed (beam_size=2, ...).

        Returns, for each text, a list of up to n_best `Translation`s, best first (a text translated in
        parts: one, its parts' best joined). `prefix`: per text a start the output must continue (or
        None); `constraints`: per text phrases the output must contain (dynamic beam allocation);
        `sample`: draw n_best samples instead of searching; `align`: Translation.alignment, (source word,
        target word) pairs from decoder layer `align_layer`'s cross-attention (default: the penultimate);
        `replace_unk`: an output word holding <unk> becomes its aligned source word. `on_split(index,
        length, limit, parts)` hears of each text over the source limit (default: a `warnings.warn`);
        `progress(n)` after each batch of n sources; `should_stop()` before every search step
        (aiayn.decode.rules.SearchStopped when it answers True). `keys`: per text, what seeds its samples
        (default: its index; a server batching texts of several requests passes each text's index in its
        own request, so samples do not depend on batching). `target_language`: for a multilingual model
        (aiayn.decode.languages), the language to translate into ("de"), or one (or None) per text; its
        tag starts every source the model reads, each part of a split text included (None: no tag, as
        for texts that carry their own). `encoded`: the texts with their prefix, constraints and tags as
        `encode_inputs` gave them, for a caller that tokenized them already (then `prefix`,
        `constraints` and `target_language` are not given).
        """
        options = options or DecodeConfig()  # sampling needs no beam: n_best may exceed beam_size
        options = options.replace(**{"sampling": options.sampling or sample is not None, **search})
        if isinstance(texts, str):
            raise AiaynError("translate_batch() takes a list of texts, not one string")
        if encoded is None:
            encoded = self.encode_inputs(texts, prefix, constraints, target_language)
        elif len(encoded.pieces) != len(texts) or (prefix, constraints, target_language) != (None,) * 3:
            raise AiaynError(
                "translate_batch(encoded=...): these texts' ids, and no prefix, constraints or "
                "target_language"
            )
        units = self.sources(texts, on_split, encoded.pieces, encoded.tags)
        controls = self._controls(units, encoded, sample, keys)
        flat = [u for parts in units for u in parts]
        owners = [i for i, parts in enumerate(units) for _ in parts]
        found = iter(self.translate_ids(flat, options, progress, controls, owners, should_stop))
        hyps = [[next(found) for _ in parts] for parts in units]
        per_text = [
            h[0] if len(h) == 1 else [_joined([p[0] for p in h])] if h else [Hypothesis([], 0.0, 0.0)]
            for h in hyps
        ]
        tagged = [len(tag) for tag in encoded.tags] if encoded.tags else [0] * len(texts)
        return self._texts(per_text, units, hyps, align, replace_unk, texts, align_layer, tagged)

    def _texts(
        self, per_text, units, hyps, align, replace_unk, texts, layer, tagged
    ) -> list[list[Translation]]:
        """Translations with their text (and, with `align`, their word alignment; `replace_unk`
        aligns too, to find each <unk>'s source word, but keeps the alignment only with `align`).
        `tagged`: how many ids of each text's sources are its tag, which is no source word."""
        flat = [h for hs in per_text for h in hs]
        decoded = iter(self.tokenizer.decode([h.tokens for h in flat]) if flat else [])
        out = [[Translation(next(decoded), h.score, h.log_prob, h.tokens) for h in hs] for hs in per_text]
        if not (align or replace_unk):
            return out
        layer = alignment.default_layer(self.config.n_layers) if layer is None else layer
        for i, translations in enumerate(out):
            for t in translations:
                if len(units[i]) > 1:  # a text in parts: its parts' best outputs
                    parts = list(zip(units[i], [h[0].tokens for h in hyps[i]], strict=True))
                else:
                    parts = [(units[i][0], t.tokens)] if units[i] else []
                t.alignment = self._word_pairs(parts, layer, tagged[i])
                if replace_unk:
                    t.text = self._replace_unknown(t, texts[i])
                t.alignment = t.alignment if align else None
        return out

    def _word_pairs(
        self, parts: list[tuple[list[int], list[int]]], layer: int, tagged: int = 0
    ) -> list[tuple[int, int]]:
        """(source word, target word) pairs of (tag + source ids + EOS, output ids) parts, in order;
        the `tagged` tag ids that start each source are left out, as EOS is."""
        if not parts:
            return []
        target_pieces = self.tokenizer.target_pieces
        sources, outputs = [s for s, _ in parts], [o for _, o in parts]
        weights = alignment.cross_attention(self.bundle.model, sources, outputs, layer)
        pairs, src_offset, tgt_offset = [], 0, 0
        for (src, out), w in zip(parts, weights, strict=True):
            w = w[:, tagged:]  # (output pieces, source pieces): the tag's columns left out
            src_words = alignment.word_index(self.tokenizer.pieces(src[tagged:-1]))
            tgt_words = alignment.word_index(target_pieces(out))
            pairs += [
                (i + src_offset, j + tgt_offset) for i, j in alignment.align_words(w, src_words, tgt_words)
            ]
            src_offset += len(set(src_words))
            tgt_offset += len(set(tgt_words))
        return pairs

    def _replace_unknown(self, t: Translation, source_text: str) -> str:
        target_pieces = self.tokenizer.target_pieces
        words = alignment.word_index(target_pieces(t.tokens))
        decode = lambda ids: self.tokenizer.decode([ids])[0]  # noqa: E731
        return alignment.replace_unknown(
            t.tokens, words, self.config.unk_id, t.alignment, source_text, decode
        )

    @torch.inference_mode()
    def attention(
        self,
        text: str,
        options: DecodeConfig | None = None,
        target_language: str | None = None,
        **search: Any,
    ) -> dict[str, Any]:
        """Translate one text (`translate_batch`'s search, into `target_language` for a multilingual
        model) and return the attention of every layer on that translation (the tag's pieces
        among the source's).

        Keys: translation (str); src_tokens (source pieces + "</s>"); tgt_tokens (output pieces +
        "</s>": the tokens each decoder position predicts); encoder, decoder, cross: lists with one
        float32 CPU tensor per layer, shaped (heads, src, src), (heads, tgt, tgt) and (heads, tgt, src).
        """
        units = self.sources([text], tags=self.target_tags([text], target_language))[0]
        if not units:
            raise AiaynError("attention maps need a non-empty text")
        if len(units) > 1:
            raise AiaynError(
                f"attention maps are drawn for one sentence of at most {source_limit(self.config)} tokens;"
                " this text is longer: shorten it or give one sentence at a time"
            )
        src_ids = units[0]
        hyp = self.translate_ids([src_ids], (options or DecodeConfig()).replace(**search))[0][0]
        return self.attention_maps(src_ids, hyp.tokens)

    @torch.inference_mode()
    def attention_maps(self, src_ids: list[int], tokens: list[int]) -> dict[str, Any]:
        """`attention()`'s dict for a given translation: source ids (pieces + EOS), output ids (no EOS)."""
        tgt_in = [self.config.start_id] + tokens  # the decoder's inputs; it predicts tokens + EOS
        src, device = torch.tensor([src_ids], device=self.bundle.device), self.bundle.device
        maps = self.bundle.model.attention_maps(src, torch.tensor([tgt_in], device=device))
        target_pieces = self.tokenizer.target_pieces
        result: dict[str, Any] = {
            "translation": self.tokenizer.decode([tokens])[0],
            "src_tokens": self.tokenizer.pieces(src_ids[:-1]) + ["</s>"],
            "tgt_tokens": target_pieces(tokens) + ["</s>"],
        }
        for kind in ("encoder", "decoder", "cross"):
            result[kind] = [w[0].float().cpu() for w in maps[kind]]
        return result

    def translate(
        self,
        texts: list[str],
        options: DecodeConfig | None = None,
        *,
        return_scores: bool = False,
        **controls: Any,
    ) -> list[str] | list[list[Translation]]:
        """Deprecated: `translate_texts(translator, texts, ...)` (strings) or `translate_batch` (results).
        Strings, or with n_best > 1 or return_scores, `translate_batch`'s lists of Translations."""
        _deprecated("Translator.translate", "aiayn.decode.translate_texts or Translator.translate_batch")
        found = self.translate_batch(texts, options, **controls)
        if controls.get("n_best", (options or DecodeConfig()).n_best) == 1 and not return_scores:
            return [t[0].text for t in found]
        return found

    def translate_document(self, text: str, options: DecodeConfig | None = None, **controls: Any) -> str:
        """Deprecated: `translate_document(translator, text, ...)` (aiayn.decode.texts)."""
        from aiayn.decode.texts import translate_document

        _deprecated("Translator.translate_document", "aiayn.decode.translate_document")
        return translate_document(self, text, options, **controls)


def _old_bundle(model: Transformer, tokenizer: Any, info: dict | None = None, others=None, draft=None):
    """The bundle of the older `Translator(model, tokenizer, info, others, draft)`."""
    return ModelBundle([model, *(others or [])], tokenizer, info or {}, draft)
