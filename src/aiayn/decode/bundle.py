"""What a translation runs on: the models of a model directory (or an ensemble), their tokenizer,
and what speeds their search up (int8 layers, a draft model, a vocabulary shortlist).

    bundle = load_bundle("runs/quickstart/model")                     # GPU when there is one
    bundle = load_bundle("runs/quickstart/model", int8=True)          # int8 linear layers, CPU
    bundle = load_bundle(["run_a/model", "run_b/model"])              # an ensemble
    bundle = load_bundle("runs/quickstart/model", draft="runs/student/model")  # speculative greedy
    bundle = load_bundle("runs/quickstart/model", shortlist=True)     # every search shortlisted

`load_bundle` is the one place that knows how these are read and checked; `aiayn.decode.Translator`
takes a bundle and runs texts through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from aiayn.config import DecodeConfig, ModelConfig
from aiayn.decode.ensemble import check_shared_vocabulary
from aiayn.decode.languages import target_languages
from aiayn.decode.shortlist import NO_SHORTLIST, SHORTLIST_FILE, Shortlist, read_shortlist
from aiayn.decode.speculative import Draft
from aiayn.errors import AiaynError
from aiayn.model.io import load_model_dir
from aiayn.model.transformer import Transformer
from aiayn.runtime.inference import prepare_for_inference
from aiayn.runtime.quantize import check_int8_device, is_int8
from aiayn.tokenizers import load_tokenizer

_UNREAD: Any = object()  # a bundle's shortlist before it is first asked for


@dataclass(eq=False)
class ModelBundle:
    """Models that share one vocabulary (one model, or an ensemble: the first is `.model`), their
    tokenizer and the first model directory's `info`; `draft` (aiayn.decode.speculative) makes greedy
    search speculative; `model_dir` is where the shortlist is read from; `always_shortlist`: every
    search uses it (otherwise only a search whose DecodeConfig.shortlist asks for it)."""

    models: list[Transformer]
    tokenizer: Any
    info: dict = field(default_factory=dict)
    draft: Draft | None = None
    model_dir: Path | None = None
    always_shortlist: bool = False
    _shortlist: Any = field(default=_UNREAD, repr=False)

    @property
    def model(self) -> Transformer:
        """The (first) model."""
        return self.models[0]

    @property
    def config(self) -> ModelConfig:
        return self.models[0].config

    @property
    def device(self) -> torch.device:
        return self.models[0].output_weight.device

    @property
    def target_languages(self) -> list[str]:
        """The languages the model's target-language tags choose (config.json's "target_languages",
        aiayn.decode.languages); [] for a model of one target language, `info["tgt_lang"]`."""
        return target_languages(self.info)

    @property
    def int8(self) -> bool:
        """Whether the model runs in int8 (load_bundle(..., int8=True))."""
        return is_int8(self.models[0])

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

    def chosen_shortlist(self, options: DecodeConfig | None) -> Shortlist | None:
        """The shortlist a search with `options` decodes with: the model's when `options.shortlist`
        asks for it or the bundle always uses it; None: the whole vocabulary. A one-line AiaynError
        when it is asked for and the model has none."""
        if not (self.always_shortlist or (options is not None and options.shortlist)):
            return None
        if self.shortlist is None:
            raise AiaynError("the model " + NO_SHORTLIST.format(file=SHORTLIST_FILE))
        return self.shortlist


def load_bundle(
    model_dir: str | Path | list,
    device: str | torch.device | None = None,
    int8: bool = False,
    draft: str | Path | None = None,
    shortlist: bool = False,
) -> ModelBundle:
    """Read a model directory (config.json, model.safetensors, tokenizer); GPU when there is one.

    A list of directories loads an ensemble (aiayn.decode.ensemble): models that share one
    vocabulary. `int8`: quantise the linear layers for int8 inference (aiayn.runtime.quantize; CPU
    only, and the CPU by default). `draft`: a draft model's directory, which makes greedy search
    speculative (aiayn.decode.speculative; its target vocabulary must be the model's). `shortlist`:
    every search restricted to the model's shortlist (`aiayn serve --shortlist`; a one-line error
    when it has none).
    """
    dirs = [model_dir] if isinstance(model_dir, (str, Path)) else list(model_dir)
    if not dirs:
        raise AiaynError("loading a model needs at least one model directory")
    if int8:
        device = check_int8_device(device)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    loaded = [load_model_dir(d, device) for d in dirs]
    tokenizers = [load_tokenizer(d, info) for d, (_, info) in zip(dirs, loaded, strict=True)]
    if len(dirs) > 1:
        vocabularies = [t.pieces(list(range(t.vocab_size))) for t in tokenizers]
        specials = [(m.config.pad_id, m.config.bos_id, m.config.eos_id, m.config.start_id) for m, _ in loaded]
        check_shared_vocabulary([str(d) for d in dirs], vocabularies, specials)
    for d, (model, _) in zip(dirs, loaded, strict=True):
        prepare_for_inference(model, int8, str(d))  # int8 or packed weights; the native step on the CPU
    models, info = [m for m, _ in loaded], loaded[0][1]
    if draft is not None and len(models) > 1:
        raise AiaynError(f"a draft model ({draft}) speeds up one model, not an ensemble of {len(dirs)}")
    loaded_draft = None if draft is None else Draft.load(draft, dirs[0], models[0], tokenizers[0], int8)
    bundle = ModelBundle(models, tokenizers[0], info, loaded_draft, Path(dirs[0]), shortlist)
    bundle.chosen_shortlist(None)  # with `shortlist`: read and checked now
    return bundle
