"""Translator: text in, text out with the beam search of section 6.1.

    translator = Translator.load("runs/quickstart/model")
    translator = Translator.load("runs/quickstart/model", int8=True)   # int8 linear layers, CPU
    translator.translate(["En el principio era el Verbo."])           # ['In the beginning ...']
    translator.translate(texts, beam_size=4, n_best=4)                 # [[Translation, ...], ...]
    translator.translate(texts, DecodeConfig(beam_size=8, shortlist=True))  # as one object; shortlist

    translator.translate(texts, prefix=["In the"], constraints=[["Word"]])   # steer the search
    translator.translate(texts, sample=SamplingConfig(top_p=0.9, seed=1))      # sample instead
    translator.translate(texts, align=True, return_scores=True)  # Translation.alignment: (i, j) pairs
    Translator.load(["run_a/model", "run_b/model"])                    # an ensemble
    Translator.load("runs/quickstart/model", draft="runs/student/model")  # speculative greedy search
    translator.translate_document(text)                                # paragraphs and sentences

Sources are cut into pieces and closed with EOS (as in training), sorted by length into batches
of at most `batch_tokens` source tokens (padding counted) and translated together; results come
back in input order. An empty text translates to an empty text without running the model; a text
longer than the model's source limit is split into sentences (and a sentence still too long into
pieces of the limit), translated in parts and joined, with a warning: no text is dropped.
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
from aiayn.decode.document import join_document, split_document
from aiayn.decode.ensemble import check_shared_vocabulary
from aiayn.decode.inputs import Encoded, SplitHook, source_units, target_constraints, target_prefixes
from aiayn.decode.search import Hypothesis, StopHook
from aiayn.decode.shortlist import Shortlist, chosen_shortlist, read_shortlist
from aiayn.decode.speculative import Draft
from aiayn.decode.stepper import Controls, decode_batch, source_limit, target_limit
from aiayn.errors import AiaynError, TextError
from aiayn.model.io import load_model_dir
from aiayn.model.transformer import Transformer
from aiayn.runtime.inference import prepare_for_inference
from aiayn.runtime.quantize import check_int8_device, is_int8
from aiayn.tokenizers import load_tokenizer

ProgressHook = Callable[[int], None]  # called with the number of sentences just translated
_UNREAD: Any = object()  # a Translator's shortlist before it is first asked for


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


class Translator:
    """A model (or an ensemble) with its tokenizer. `.model` (Transformer, eval mode; an ensemble's
    first), `.models`, `.tokenizer`, `.config`, `.info`, `.draft` (aiayn.decode.speculative)."""

    def __init__(self, model: Transformer, tokenizer: Any, info: dict | None = None, others=None, draft=None):
        self.model, self.tokenizer, self.info, self.draft = model, tokenizer, info or {}, draft
        self.models, self.config = [model, *(others or [])], model.config
        self.model_dir: Path | None = None  # where `shortlist` is read from (`load` sets it)
        self._shortlist, self.use_shortlist = _UNREAD, False  # aiayn.decode.shortlist; True: always used

    @classmethod
    def load(
        cls,
        model_dir: str | Path | list,
        device: str | torch.device | None = None,
        int8: bool = False,
        draft=None,
    ) -> Translator:
        """Read a model directory (config.json, model.safetensors, tokenizer); GPU when there is one.

        A list of directories loads an ensemble (aiayn.decode.ensemble): models that share one
        vocabulary. `int8`: quantise the linear layers for int8 inference (aiayn.runtime.quantize;
        CPU only, and the CPU by default). `draft`: a draft model's directory, which makes greedy search
        speculative (aiayn.decode.speculative; its target vocabulary must be the model's).
        """
        dirs = [model_dir] if isinstance(model_dir, (str, Path)) else list(model_dir)
        if not dirs:
            raise AiaynError("Translator.load needs at least one model directory")
        if int8:
            device = check_int8_device(device)
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        loaded = [load_model_dir(d, device) for d in dirs]
        tokenizers = [load_tokenizer(d, info) for d, (_, info) in zip(dirs, loaded, strict=True)]
        if len(dirs) > 1:
            vocabularies = [t.pieces(list(range(t.vocab_size))) for t in tokenizers]
            specials = [
                (m.config.pad_id, m.config.bos_id, m.config.eos_id, m.config.start_id) for m, _ in loaded
            ]
            check_shared_vocabulary([str(d) for d in dirs], vocabularies, specials)
        for d, (model, _) in zip(dirs, loaded, strict=True):
            prepare_for_inference(model, int8, str(d))  # int8 or packed weights; the native step on the CPU
        (model, info), others = loaded[0], [m for m, _ in loaded[1:]]
        if draft is not None and others:
            raise AiaynError(f"a draft model ({draft}) speeds up one model, not an ensemble of {len(dirs)}")
        draft = draft if draft is None else Draft.load(draft, dirs[0], model, tokenizers[0], int8)
        translator = cls(model, tokenizers[0], info, others, draft)
        translator.model_dir = Path(dirs[0])
        return translator

    @property
    def shortlist(self) -> Shortlist | None:
        """The model's shortlist (None: it has none), read from its directory when first asked for:
        a damaged file troubles only the searches that would use it."""
        if self._shortlist is _UNREAD:
            self._shortlist = None if self.model_dir is None else read_shortlist(self.model_dir, self.config)
        return self._shortlist

    @shortlist.setter
    def shortlist(self, shortlist: Shortlist | None) -> None:
        self._shortlist = shortlist

    @property
    def int8(self) -> bool:
        """Whether the model runs in int8 (Translator.load(..., int8=True))."""
        return is_int8(self.model)

    @property
    def device(self) -> torch.device:
        return self.model.output_weight.device

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Source ids of each text, whole: pieces + EOS; [] for an empty text."""
        return [ids + [self.config.eos_id] if ids else [] for ids in self.tokenizer.encode(list(texts))]

    def sources(
        self, texts: list[str], on_split: SplitHook | None = None, pieces: list[list[int]] | None = None
    ) -> list[list[list[int]]]:
        """What each text is translated as: [pieces + EOS], or its parts when it is over the model's
        source limit (aiayn.decode.inputs.source_units); [] for an empty text. `pieces`: the texts'
        ids, when they were tokenized already."""
        language = self.info.get("src_lang") or "en"
        limit = source_limit(self.config, self.info.get("longest_source"))
        return source_units(
            texts, self.tokenizer, limit, self.config.eos_id, language, on_split or _warn_split, pieces
        )

    def encode_inputs(
        self,
        texts: list[str],
        prefix: list[str | None] | None = None,
        constraints: list[list[str] | None] | None = None,
    ) -> Encoded:
        """Texts, and `translate`'s prefix and constraints, tokenized once (each checked: a one-line
        error names the text): what `translate(texts, encoded=...)` takes."""
        if isinstance(texts, str):
            raise AiaynError("translate() takes a list of texts, not one string")
        encode, limit = self.tokenizer.encode_target, target_limit(self.config)
        return Encoded(
            self.tokenizer.encode(list(texts)),
            target_prefixes(prefix, len(texts), encode, limit),
            target_constraints(constraints, len(texts), encode, limit),
        )

    def _src_tensor(self, sources: list[list[int]]) -> Tensor:
        """Right-padded (n, max_len) long tensor on the model's device."""
        src = torch.full((len(sources), max(map(len, sources))), self.config.pad_id, dtype=torch.long)
        for row, ids in enumerate(sources):
            src[row, : len(ids)] = torch.tensor(ids)
        return src.to(self.device)

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
        controls = replace(controls or Controls(), shortlist=chosen_shortlist(self, options))
        if should_stop is not None:
            controls = replace(controls, should_stop=should_stop)
        results: list[list[Hypothesis]] = [[] for _ in sources]
        nonempty = [i for i, ids in enumerate(sources) if ids]
        lengths = [len(sources[i]) for i in nonempty]
        for batch in token_batches(lengths, options.batch_tokens):
            index = [nonempty[b] for b in batch]
            src = self._src_tensor([sources[i] for i in index])  # (batch, src_len)
            found = decode_batch(self.models, src, options, controls.subset(index), self.draft)
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

    def translate(
        self,
        texts: list[str],
        options: DecodeConfig | None = None,
        *,
        return_scores: bool = False,
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
        **search: Any,
    ) -> list[str] | list[list[Translation]]:
        """Translate `texts` with beam search (greedy when beam_size is 1): the search of `options`
        (default: DecodeConfig(), the paper's) with `search`'s fields changed (beam_size=2, ...).

        Returns a list of strings, or, with n_best > 1 or return_scores, for each text a list of up
        to n_best `Translation`s, best first (a text translated in parts: one, its parts' best
        joined). `prefix`: per text a start the output must continue (or None); `constraints`: per
        text phrases the output must contain (dynamic beam allocation); `sample`: draw n_best
        samples instead of searching; `align`: Translation.alignment, (source word, target word)
        pairs from decoder layer `align_layer`'s cross-attention (default: the penultimate);
        `replace_unk`: an output word holding <unk> becomes its aligned source word.
        `on_split(index, length, limit, parts)` hears of each text over the source limit (default:
        a `warnings.warn`); `progress(n)` after each batch of n sources; `should_stop()` before
        every search step (aiayn.decode.search.SearchStopped when it answers True). `keys`: per
        text, what seeds its samples (default: its index; a server batching texts of several
        requests passes each text's index in its own request, so samples do not depend on batching).
        `encoded`: the texts with their prefix and constraints as `encode_inputs` gave them, for a
        caller that tokenized them already (then `prefix` and `constraints` are not given).
        """
        options = options or DecodeConfig()  # sampling needs no beam: n_best may exceed beam_size
        options = options.replace(**{"sampling": options.sampling or sample is not None, **search})
        if isinstance(texts, str):
            raise AiaynError("translate() takes a list of texts, not one string")
        if encoded is None:
            encoded = self.encode_inputs(texts, prefix, constraints)
        elif len(encoded.pieces) != len(texts) or prefix is not None or constraints is not None:
            raise AiaynError("translate(encoded=...): the ids of these texts, and no prefix or constraints")
        units = self.sources(texts, on_split, encoded.pieces)
        controls = self._controls(units, encoded, sample, keys)
        flat = [u for parts in units for u in parts]
        owners = [i for i, parts in enumerate(units) for _ in parts]
        found = iter(self.translate_ids(flat, options, progress, controls, owners, should_stop))
        hyps = [[next(found) for _ in parts] for parts in units]
        per_text = [
            h[0] if len(h) == 1 else [_joined([p[0] for p in h])] if h else [Hypothesis([], 0.0, 0.0)]
            for h in hyps
        ]
        out = self._texts(per_text, units, hyps, align, replace_unk, texts, align_layer)
        if options.n_best == 1 and not return_scores:
            return [t[0].text for t in out]
        return out

    def _texts(self, per_text, units, hyps, align, replace_unk, texts, layer) -> list[list[Translation]]:
        """Translations with their text (and, with `align`, their word alignment; `replace_unk`
        aligns too, to find each <unk>'s source word, but keeps the alignment only with `align`)."""
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
                t.alignment = self._word_pairs(parts, layer)
                if replace_unk:
                    t.text = self._replace_unknown(t, texts[i])
                t.alignment = t.alignment if align else None
        return out

    def _word_pairs(self, parts: list[tuple[list[int], list[int]]], layer: int) -> list[tuple[int, int]]:
        """(source word, target word) pairs of (source ids + EOS, output ids) parts, in order."""
        if not parts:
            return []
        target_pieces = self.tokenizer.target_pieces
        weights = alignment.cross_attention(self.model, [s for s, _ in parts], [o for _, o in parts], layer)
        pairs, src_offset, tgt_offset = [], 0, 0
        for (src, out), w in zip(parts, weights, strict=True):
            src_words = alignment.word_index(self.tokenizer.pieces(src[:-1]))
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

    def translate_document(self, text: str, options: DecodeConfig | None = None, **controls: Any) -> str:
        """A document (paragraphs at blank lines) translated sentence by sentence, its layout kept;
        `options` and `controls` are `translate`'s."""
        doc = split_document(text, self.info.get("src_lang") or "en")
        translations = self.translate(doc.sentences, options, **controls) if doc.sentences else []
        return join_document(doc, [t if isinstance(t, str) else t[0].text for t in translations])

    @torch.inference_mode()
    def attention(self, text: str, options: DecodeConfig | None = None, **search: Any) -> dict[str, Any]:
        """Translate one text (`translate`'s search) and return the attention of every layer on
        that translation.

        Keys: translation (str); src_tokens (source pieces + "</s>"); tgt_tokens (output pieces +
        "</s>": the tokens each decoder position predicts); encoder, decoder, cross: lists with one
        float32 CPU tensor per layer, shaped (heads, src, src), (heads, tgt, tgt) and (heads, tgt, src).
        """
        units = self.sources([text])[0]
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
        src = torch.tensor([src_ids], device=self.device)
        maps = self.model.attention_maps(src, torch.tensor([tgt_in], device=self.device))
        target_pieces = self.tokenizer.target_pieces
        result: dict[str, Any] = {
            "translation": self.tokenizer.decode([tokens])[0],
            "src_tokens": self.tokenizer.pieces(src_ids[:-1]) + ["</s>"],
            "tgt_tokens": target_pieces(tokens) + ["</s>"],
        }
        for kind in ("encoder", "decoder", "cross"):
            result[kind] = [w[0].float().cpu() for w in maps[kind]]
        return result
