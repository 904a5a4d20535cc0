"""Parsing as translation (section 6.3): a Transformer trained on (words, linearised tree) pairs,
decoded with beam search under the well-formedness mask of aiayn.parse.constraint.

    parser = Parser.load("runs/parse/model")                 # labels from its config.json
    parser.parse([["the", "dog", "barks", "."]])             # [Tree('S', ...)], POS tags XX

The paper's parsing search (6.3): beam 21, alpha 0.3, maximum output length |input| + 300
(`PARSE_DECODE`). Every output is one tree with exactly one terminal per input word.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from aiayn.config import DecodeConfig
from aiayn.decode.bundle import load_bundle
from aiayn.decode.generate import Controls, source_limit
from aiayn.decode.translator import ProgressHook, Translator
from aiayn.errors import AiaynError
from aiayn.parse.constraint import TreeMask, TreeVocab
from aiayn.parse.trees import Tree, delinearise

PARSE_DECODE = {"beam_size": 21, "alpha": 0.3, "max_len_a": 1.0, "max_len_b": 300}  # section 6.3


def parse_info(info: dict[str, Any], where: str) -> list[str]:
    """The constituent labels of a parse model's config.json or a parse data directory's meta.json."""
    labels = (info.get("parse") or {}).get("labels") if info.get("task") == "parse" else None
    if not labels:
        raise AiaynError(f'{where}: not a parser (no "task": "parse" with its labels)')
    return list(labels)


class Parser:
    """A Translator whose outputs are trees. `.translator`, `.vocab` (TreeVocab)."""

    def __init__(self, translator: Translator, labels: Sequence[str]):
        self.translator = translator
        tokenizer, config = translator.tokenizer, translator.config
        ids = {piece: i for i, piece in enumerate(tokenizer.pieces(list(range(config.vocab_size))))}
        self.vocab = TreeVocab.build(labels, ids.get, config.eos_id, config.vocab_size)

    @classmethod
    def load(
        cls, model_dir: str | Path, device: str | torch.device | None = None, int8: bool = False,
        labels: Sequence[str] | None = None,
    ) -> Parser:  # fmt: skip
        """A model directory; `labels` default to its config.json's (written for parse data)."""
        translator = Translator(load_bundle(model_dir, device, int8=int8))
        where = str(Path(model_dir) / "config.json")
        return cls(translator, labels if labels is not None else parse_info(translator.info, where))

    def parse_tokens(
        self, sentences: Sequence[Sequence[str]], options: DecodeConfig, progress: ProgressHook | None = None
    ) -> list[list[str]]:
        """The best linearised tree (target tokens, no EOS) of each sentence (a list of words)."""
        for i, words in enumerate(sentences):
            if isinstance(words, str):
                raise AiaynError(f"sentence {i + 1} is a string; give each sentence as a list of words")
            if not words:
                raise AiaynError(f"sentence {i + 1} is empty: there is nothing to parse")
        translator = self.translator
        sources = translator.encode([" ".join(words) for words in sentences])
        limit = source_limit(translator.config)
        for i, ids in enumerate(sources):
            if len(ids) > limit:
                raise AiaynError(f"sentence {i + 1} has {len(ids)} source tokens, over the model's {limit}")
        mask = TreeMask(self.vocab, torch.tensor([len(words) for words in sentences]))
        hyps = translator.translate_ids(sources, options.replace(n_best=1), progress, Controls(mask=mask))
        return [translator.tokenizer.pieces(h[0].tokens) for h in hyps]

    def parse(
        self,
        sentences: Sequence[Sequence[str]],
        options: DecodeConfig | None = None,
        tags: Sequence[Sequence[str]] | None = None,
        progress: ProgressHook | None = None,
    ) -> list[Tree]:
        """A tree for each sentence (a list of words); POS tags XX, or `tags` (one per word) if given.

        `options` default to PARSE_DECODE (beam 21, alpha 0.3, |input| + 300).
        """
        options = options or DecodeConfig(**PARSE_DECODE)
        out = []
        for i, tokens in enumerate(self.parse_tokens(sentences, options, progress)):
            try:
                out.append(delinearise(tokens, sentences[i], tags[i] if tags is not None else None))
            except ValueError as err:  # the constraint makes this impossible: a bug, not bad input
                raise RuntimeError(f"sentence {i + 1}: the search emitted a malformed tree: {err}") from err
        return out
