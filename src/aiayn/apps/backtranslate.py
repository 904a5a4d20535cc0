"""`aiayn backtranslate`: a synthetic parallel corpus from monolingual target-language text
(Sennrich et al., 2016, "Improving Neural Machine Translation Models with Monolingual Data"): a
reverse model (target -> source) translates the text, and each (translation, original) pair is a
training pair for the forward model, whose targets are then all human-written.

Sampling is the default (Edunov et al., 2018, "Understanding Back-Translation at Scale": sampled
back-translations beat beam ones once the real data is not tiny, their noise a richer signal); `--beam`
back-translates with beam search instead. `--tag` starts every synthetic source with `<BT>` (Caswell
et al., 2019, "Tagged Back-Translation"), so the forward model can tell the two kinds of pairs apart.

    OUT/bt.SRC, OUT/bt.TGT   the corpus, one pair a line (SRC/TGT the forward model's languages:
                             the reverse model's target and source); `prepare` takes it as one more
                             weighted source of a recipe ({src: OUT/bt.es, tgt: OUT/bt.en, weight: 1})
    OUT/meta.json            what made it: the model, the text, the search, the counts
    OUT/parts/               while translating: part-NNNNN.SRC per finished chunk of lines, so an
                             interrupted run goes on from the last one (removed at the end)

Empty lines of the text are skipped (counted); a finished OUT made from another model, text or search
is refused in one line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from aiayn.apps.defaults import BT_CHUNK as CHUNK
from aiayn.apps.defaults import BT_TAG as TAG
from aiayn.config import DecodeConfig, SamplingConfig
from aiayn.data.corpus import decode_line
from aiayn.errors import AiaynError
from aiayn.model.io import read_config
from aiayn.safe_io import atomic_path, atomic_write_text, capped_lines, input_file, output_dir

META = "meta.json"


@dataclass(frozen=True)
class BackTranslation:
    """How the text is translated: sampled (SamplingConfig) or searched (DecodeConfig), tagged or not."""

    decode: DecodeConfig
    sample: SamplingConfig | None = field(default_factory=SamplingConfig)
    tag: bool = False

    def describe(self) -> dict:
        return {
            "search": self.decode.to_dict(),
            "sample": self.sample.to_dict() if self.sample else None,
            "tag": TAG if self.tag else None,
        }


def _lines(text: Path) -> tuple[list[str], int]:
    """The non-empty lines of `text` (whitespace collapsed, UTF-8 checked with file:line) and the
    number of empty ones."""
    lines, empty = [], 0
    with open(input_file(text), "rb") as f:
        for number, raw in enumerate(capped_lines(f, str(text)), start=1):
            line = decode_line(raw, text, number)
            if line:
                lines.append(line)
            else:
                empty += 1
    return lines, empty


def _languages(model: Path) -> tuple[str, str]:
    """(forward source, forward target) = the reverse model's (target, source) languages."""
    _, info = read_config(model)
    languages = info.get("tgt_lang"), info.get("src_lang")
    if not all(isinstance(lang, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,32}", lang) for lang in languages):
        raise AiaynError(f"{model}: not a translation model with its languages in config.json")
    return languages


def backtranslate(
    model: str | Path,
    text: str | Path,
    out: str | Path,
    how: BackTranslation,
    *,
    device: str | None = None,
    chunk: int = CHUNK,
    progress: bool = True,
) -> Path:
    """Translate `text` (monolingual, the forward target's language) with the reverse `model` into
    OUT/bt.SRC + OUT/bt.TGT; -> OUT. A finished OUT of the same inputs is reused."""
    from aiayn.decode.bundle import load_bundle
    from aiayn.decode.texts import translate_texts
    from aiayn.decode.translator import Translator

    model, text, out = Path(model), Path(text), output_dir(out, "--out")
    src_lang, tgt_lang = _languages(model)
    description = {"model": str(model.resolve()), "text": str(text.resolve()), **how.describe()}
    if (out / META).is_file():
        made = json.loads((out / META).read_text(encoding="utf-8"))
        if made.get("made_from") != description:
            raise AiaynError(
                f"{out} holds a back-translation of another model, text or search; use another --out"
            )
        return out
    lines, empty = _lines(text)
    if not lines:
        raise AiaynError(f"{text}: no non-empty lines to back-translate")
    parts = output_dir(out / "parts", "--out")
    _check_parts(parts, description)
    translator = Translator(load_bundle(model, device))
    starts = range(0, len(lines), chunk)
    with tqdm(total=len(lines), desc="back-translating", unit="line", disable=not progress) as bar:
        for i, start in enumerate(starts):
            path = parts / f"part-{i:05d}.{src_lang}"
            batch = lines[start : start + chunk]
            if not path.is_file():
                found = translate_texts(
                    translator,
                    batch,
                    how.decode,
                    sample=how.sample,
                    keys=list(range(start, start + len(batch))),
                )
                prefix = TAG + " " if how.tag else ""
                with atomic_path(path) as tmp:
                    tmp.write_text(
                        "".join(prefix + " ".join(t.split()) + "\n" for t in found), encoding="utf-8"
                    )
            bar.update(len(batch))
    _join(out, parts, len(starts), src_lang, tgt_lang, lines)
    meta = {
        "made_from": description,
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        "pairs": len(lines),
        "empty_lines": empty,
    }
    atomic_write_text(out / META, json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    return out


def _join(out: Path, parts: Path, count: int, src_lang: str, tgt_lang: str, lines: list[str]) -> None:
    """OUT/bt.SRC from the parts in order, OUT/bt.TGT the original lines; the parts removed."""
    sources = []
    for i in range(count):
        sources += (parts / f"part-{i:05d}.{src_lang}").read_text(encoding="utf-8").splitlines()
    if len(sources) != len(lines):
        raise AiaynError(
            f"{parts}: {len(sources)} translations for {len(lines)} lines; remove it and run again"
        )
    for name, side in ((f"bt.{src_lang}", sources), (f"bt.{tgt_lang}", lines)):
        with atomic_path(out / name) as tmp:
            tmp.write_text("".join(s + "\n" for s in side), encoding="utf-8")
    for path in parts.iterdir():
        path.unlink()
    parts.rmdir()


def _check_parts(parts: Path, description: dict) -> None:
    """parts/made_from.json says what the parts are of: an interrupted run of another model, text
    or search is refused (its parts would mix into this corpus), else the record is written."""
    record = parts / "made_from.json"
    if record.is_file() and json.loads(record.read_text(encoding="utf-8")) != description:
        raise AiaynError(
            f"{parts} holds the parts of another model, text or search; remove it or use another --out"
        )
    atomic_write_text(record, json.dumps(description, indent=2) + "\n")
