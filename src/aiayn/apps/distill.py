"""`aiayn distill`: sequence-level knowledge distillation (Kim and Rush, 2016, "Sequence-Level
Knowledge Distillation", section 3.2): a teacher (one model, or an ensemble) translates the training
sources with beam search, and a student is trained on the teacher's translations instead of the
references. The students of the WMT efficiency task (Marian/Bergamot) are distilled so, with a
one- or two-layer decoder whose decoding steps cost a fraction of the teacher's; aiayn's student
(configs/student.yaml) keeps the tiny teacher's 3-layer encoder and has a 1-layer decoder.

    OUT/data                 a data directory with the teacher's vocabulary (spm.model copied): the
                             training sources, the teacher's translations as targets; valid and test
                             as the original's (scored against the human references)
    OUT/data.parts/          while translating: chunk-NNNNN.npz per finished chunk (an interrupted
                             run goes on from the last finished one), parts.json (what they are of)
    OUT/ckpt-*, OUT/model    the student's run and its model directory (last checkpoints averaged)

OUT/data's meta.json and OUT/model's config.json say what they were made from ("distilled": the
teachers, data and search), so a finished one is reused only by the same distillation (and the
model only as the same student); anything else there, or a link, is refused and left as it is.
Sources are translated as the data directory holds them (token ids), so nothing is lost to a
second tokenization; the data must be in the teacher's vocabulary (`prepare --spm TEACHER`).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from aiayn.apps.defaults import DISTILL_CHUNK as CHUNK
from aiayn.apps.defaults import STUDENT
from aiayn.apps.shortlist import check_same_vocabulary
from aiayn.config import DecodeConfig, ModelConfig, RunConfig
from aiayn.data.datadir import META_FILE, RAW_DIR, SPLITS, SPM_FILE, DataDir
from aiayn.data.dataset import ShardWriter, TokenDataset, has_split
from aiayn.errors import AiaynError
from aiayn.model.io import read_config
from aiayn.safe_io import (
    atomic_path,
    atomic_write_text,
    building_directory,
    output_dir,
    read_json_object,
    vacant,
)

PARTS, PARTS_FILE = "data.parts", "parts.json"
# what distill writes in OUT/data.parts (and atomic_path's temporaries of them, which a kill leaves)
PART_NAME = re.compile(r"\.?(parts\.json|chunk-\d{5,}\.npz)(\.[0-9a-f]{8}\.tmp)?")


def _sources(data: DataDir) -> list[np.ndarray]:
    """The training sources as the data directory holds them: piece ids + EOS."""
    train = data.tokens("train")
    return [np.asarray(train[i][0], dtype=np.int64) for i in range(len(train))]


def _chunk_path(parts: Path, index: int) -> Path:
    return parts / f"chunk-{index:05d}.npz"


def _same_run(a: dict, b: dict) -> bool:
    """Whether two descriptions are of the same teachers, data and search (the chunk size aside)."""
    return all(a.get(key) == b.get(key) for key in ("teachers", "data", "search"))


def _not_a_link(path: Path) -> None:
    """distill writes OUT/data, OUT/data.parts and OUT/model itself: a link there would lead its writes
    (and removals) to wherever the link points, so it is a one-line error."""
    if path.is_symlink():
        raise AiaynError(
            f"{path} is a link; distill makes that directory itself: remove the link or use another --out"
        )


def _finished_data(path: Path, description: dict) -> bool:
    """Whether OUT/data is this distillation's finished data (reused), or absent or empty (built).
    Anything else there would be replaced: a one-line error, what the user put there left alone."""
    _not_a_link(path)
    if vacant(path):
        return False
    made = DataDir(path).meta.get("distilled") if DataDir(path).prepared else None
    if not isinstance(made, dict):
        raise AiaynError(f"{path} exists and is not distill's data directory; move it or use another --out")
    if not _same_run(made, description):
        raise AiaynError(
            f"{path} holds the distillation of other teachers, data or search; remove it or use another --out"
        )
    return True


def _check_parts(parts: Path, description: dict) -> None:
    """parts.json says what the chunks are of: a resume must be of the same (teachers, data, search,
    chunk). PARTS is removed once the data is written: a file there that distill did not write is refused."""
    _not_a_link(parts)
    output_dir(parts, "--out")
    foreign = next(
        (p for p in sorted(parts.iterdir()) if not (p.is_file() and PART_NAME.fullmatch(p.name))), None
    )
    if foreign is not None:
        raise AiaynError(
            f"{foreign} is not distill's, and {parts} is removed when done; move it or use another --out"
        )
    path = parts / PARTS_FILE
    if path.is_file() and read_json_object(path) != description:
        raise AiaynError(
            f"{parts} holds the translations of another distillation (teachers, data, search or chunk); "
            "remove it or use another --out"
        )
    atomic_write_text(path, json.dumps(description, indent=2) + "\n")


def _chunk_problem(tokens: np.ndarray, lengths: np.ndarray, count: int, vocab_size: int) -> str | None:
    """What is wrong with a chunk's arrays, if anything, against what translate_chunks writes."""
    if any(a.dtype != np.int64 or a.ndim != 1 for a in (tokens, lengths)):
        return "its arrays are not 1-D int64 ones"
    if len(lengths) != count:
        return f"{len(lengths)} translations for {count} sources"
    if (lengths < 0).any() or lengths.sum() != len(tokens):
        return "its lengths do not add up to its tokens"
    if len(tokens) and (tokens.min() < 0 or tokens.max() >= vocab_size):
        return f"ids outside the vocabulary (0 to {vocab_size - 1})"
    return None


def _read_chunk(path: Path, count: int, vocab_size: int) -> list[list[int]] | None:
    """The `count` translations (ids, no EOS) that chunk file `path` holds; None when there is no such
    file, or when it is damaged: then it is removed, with a warning naming it, to be translated again."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as part:
            tokens, lengths = part["tokens"], part["lengths"]
        problem = _chunk_problem(tokens, lengths, count, vocab_size)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
        problem = f"cannot be read ({type(err).__name__}: {err})"
    if problem is None:
        return [t.tolist() for t in np.split(tokens, np.cumsum(lengths)[:-1])]
    print(f"warning: {path}: {problem}; translating its sources again", file=sys.stderr)
    path.unlink()
    return None


def translate_chunks(
    translator, sources: Sequence[np.ndarray], parts: Path, options, chunk: int, progress=True
) -> list[list[int]]:
    """The teacher's translations (ids, no EOS) of `sources`, in order: chunk by chunk into
    parts/chunk-NNNNN.npz (each written atomically), a chunk already there read instead (checked)."""
    starts = range(0, len(sources), chunk)
    vocab_size = translator.config.vocab_size
    found = [
        _read_chunk(_chunk_path(parts, i), len(sources[s : s + chunk]), vocab_size)
        for i, s in enumerate(starts)
    ]
    done = sum(len(f) for f in found if f is not None)
    with tqdm(total=len(sources), initial=done, desc="distilling", unit="sent", disable=not progress) as bar:
        for i, start in enumerate(starts):
            if found[i] is not None:
                continue
            ids = [s.tolist() for s in sources[start : start + chunk]]
            hypotheses = translator.translate_ids(ids, options.replace(n_best=1), progress=bar.update)
            found[i] = [h[0].tokens for h in hypotheses]
            lengths = np.array([len(t) for t in found[i]], dtype=np.int64)
            flat = np.array([t for ts in found[i] for t in ts], dtype=np.int64)
            with atomic_path(_chunk_path(parts, i)) as tmp, open(tmp, "wb") as f:
                np.savez(f, tokens=flat, lengths=lengths)
    return [t for ts in found for t in ts]


def _write_data(data: DataDir, out: Path, sources, outputs, description: dict) -> None:
    """OUT/data: the original's vocabulary, valid and test; train = sources + the teacher's outputs."""
    tokenizer = data.tokenizer()
    with building_directory(out) as work:
        shutil.copyfile(data.spm_path, work / SPM_FILE)
        shutil.copytree(data.path / RAW_DIR, work / RAW_DIR)
        for split in SPLITS[1:]:
            if has_split(data.path, split):
                for name in (f"{split}.src.bin", f"{split}.tgt.bin", f"{split}.index.npz"):
                    shutil.copyfile(data.path / name, work / name)
        writer = ShardWriter(work, "train", tokenizer.vocab_size)
        writer.add([s[:-1].tolist() for s in sources], outputs)
        writer.close()
        texts = tokenizer.decode(outputs) if outputs else []
        (work / RAW_DIR / "train.tgt").write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        train = TokenDataset(work, "train")  # the teacher's targets: their own token counts
        counted = {"src": int(train.src_lengths.sum()), "tgt": int(train.tgt_lengths.sum())}
        tokens = {**data.meta.get("tokens", {}), "train": counted}
        meta = {**data.meta, "tokens": tokens, "distilled": description}
        (work / META_FILE).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def distill_data(
    teachers: Sequence[str | Path],
    data_dir: str | Path,
    out: str | Path,
    options: DecodeConfig | None = None,
    *,
    chunk: int = CHUNK,
    device: str | None = None,
    int8: bool = False,
    progress: bool = True,
) -> Path:
    """Translate DATA's training sources with the teacher(s) (an ensemble when several) and write
    OUT/data; a finished OUT/data is reused, an interrupted one goes on from its last chunk."""
    from aiayn.decode.bundle import load_bundle
    from aiayn.decode.translator import Translator

    options, data = options or DecodeConfig(), DataDir(data_dir)
    if chunk < 1:
        raise AiaynError(f"--chunk must be at least 1, got {chunk}")
    if data.is_parse:
        raise AiaynError(f"{data.path}: parse data; distill translates translation pairs")
    for teacher in teachers:  # translation models of the data's vocabulary, before anything is reused
        config, info = read_config(teacher)
        check_same_vocabulary(Path(teacher), info, config, data)
    description = {
        "teachers": [str(Path(t).resolve()) for t in teachers],
        "data": str(data.path.resolve()),
        "search": options.replace(n_best=1).to_dict(),
        "chunk": chunk,
    }
    out = output_dir(out, "--out")
    if _finished_data(out / "data", description):
        return out / "data"
    parts = out / PARTS
    _check_parts(parts, description)
    teacher = list(teachers) if len(teachers) > 1 else teachers[0]
    translator = Translator(load_bundle(teacher, device, int8=int8))
    sources = _sources(data)
    outputs = translate_chunks(translator, sources, parts, options, chunk, progress)
    _write_data(data, out / "data", sources, outputs, description)
    shutil.rmtree(parts)
    return out / "data"


def student_config(
    out: str | Path,
    preset: str | None = None,
    config_file: str | Path | None = None,
    overrides=(),
    steps=None,
) -> RunConfig:
    """The student's RunConfig: `config_file` (as `aiayn train --config`), or configs/student.yaml
    (its model replaced by `preset`'s when given), then `key=value` overrides and `steps` updates."""
    from aiayn.overrides import apply_overrides
    from aiayn.train.run import build_run_config

    if config_file is not None:
        return build_run_config(out, config_file=config_file, overrides=list(overrides), max_steps=steps)
    config = RunConfig.named(STUDENT)
    if preset is not None and preset != STUDENT:
        config = config.replace(model=ModelConfig.preset(preset))
    model, train, decode = apply_overrides([config.model, config.train, config.decode], list(overrides))
    train = train if steps is None else train.replace(max_steps=steps)
    return RunConfig(model=model, train=train, decode=decode)


def train_student(data_dir: Path, out: Path, config: RunConfig, progress: bool = True) -> Path:
    """Train the student into OUT (resuming when it has checkpoints) and average its last
    checkpoints into OUT/model, its config.json recording the distillation it learned from; a
    finished OUT/model is reused if it is this student of this distillation (`_check_student`)."""
    from aiayn.train.checkpoint import average_run
    from aiayn.train.run import resolve_config
    from aiayn.train.trainer import train

    model_dir, made = out / "model", DataDir(data_dir).meta.get("distilled")
    _not_a_link(model_dir)
    if (model_dir / "config.json").is_file():
        _check_student(model_dir, resolve_config(data_dir, config).model, made)
        return model_dir
    result = train(data_dir, out, config, progress=progress)
    if result.stop_reason.startswith("signal"):
        raise KeyboardInterrupt
    return average_run(out, last=config.train.average_last, out_dir=model_dir, info={"distilled": made})


def _check_student(model_dir: Path, model: ModelConfig, made: dict | None) -> None:
    """A finished OUT/model is reused only if it is this student (`model`) trained on this distillation
    (`made`, which its config.json records under "distilled"): a one-line error otherwise."""
    student, info = read_config(model_dir)
    want, have = model.to_dict(), student.to_dict()
    diffs = [
        f"{key} {have.get(key)!r}, not {value!r}" for key, value in want.items() if have.get(key) != value
    ]
    if diffs:
        raise AiaynError(
            f"{model_dir} is another model ({'; '.join(diffs[:3])}); remove it or use another --out"
        )
    recorded = info.get("distilled")
    if not (isinstance(recorded, dict) and isinstance(made, dict) and _same_run(recorded, made)):
        raise AiaynError(
            f"{model_dir} was not trained on this distillation (teachers, data, search); "
            "remove it or use another --out"
        )
