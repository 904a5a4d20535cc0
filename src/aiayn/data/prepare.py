"""`aiayn prepare`: a corpus in, a data directory out (section 5.1's data pipeline).

Steps: stage the text of every split (`stage`: built-in corpus, a user's files validated by
`corpus`, or a recipe's several weighted corpora, `recipe`; empty pairs dropped; valid/test split off
with a seed when not given), clean the train pairs when asked (`cleaning`: duplicates, copies, the
wrong language; a sample of each rule's removals kept in DATA/cleaning/), with `train_limit` keep a
seeded sample of the train pairs, train the joint BPE vocabulary on the staged train text (or
reuse an existing SentencePiece model, `spm`, so that a trained model can be fine-tuned on the data),
encode every split in chunks into memory-mapped shards (train pairs over `max_len` tokens or with a
length ratio over `max_ratio` dropped), keep the raw text of every split, and write `meta.json` with
every count and the reason for every drop. Valid and test pairs over `max_len` stay in the raw text
(BLEU scores the whole split) but not in the shards that dev-loss batches are made of: one such pair
would otherwise be a batch of its own, quadratic in attention memory, or overflow learned positions;
prepare reports their count and the first one's file:line (meta.json: long_held_out).
All of it happens in a hidden temporary directory, fsynced and renamed into place at the end
(`safe_io.building_directory`), so a killed run never leaves a directory that looks complete (the next
run removes what it left, never a live run's); a finished directory is left alone unless `force`.

Data directory: meta.json, spm.model, spm.vocab, {split}.{src,tgt}.bin, {split}.index.npz and
raw/{split}.{src,tgt} for split in train, valid, test; from a recipe, train.corpus.npy (each train
pair's source, `mixing`); cleaned, cleaning/reasons.npy and cleaning/RULE.tsv (and with the score rule
cleaning/scores.npy).
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from itertools import chain, islice
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from aiayn.config import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from aiayn.data import cleaning as rules
from aiayn.data.builtin import get_corpus
from aiayn.data.cleaning import Cleaning
from aiayn.data.datadir import RAW_DIR, SPLITS, SPM_FILE, DataDir
from aiayn.data.dataset import ShardWriter, TokenDataset, token_dtype
from aiayn.data.mixing import CORPUS_FILE
from aiayn.data.provenance import Sources
from aiayn.data.recipe import Recipe
from aiayn.data.sources import Filters, SplitFiles
from aiayn.data.stage import (
    Stage,
    keep_staged,
    open_text,
    read_lines,
    sample_train,
    stage_builtin,
    stage_recipe,
    stage_user,
    staged_pairs,
)
from aiayn.data.tokenizer import CHARACTER_COVERAGE, Tokenizer
from aiayn.errors import AiaynError
from aiayn.safe_io import building_directory, vacant

FORMAT_VERSION = 1
CHUNK = 20_000  # pairs encoded at a time
DEFAULT_VOCAB_SIZE = 8000
UNK_NOTE = 0.005  # with a reused vocabulary, say so when more than this share of train tokens is unk
DROP_REASONS = {
    "bad_lines": "invalid UTF-8 or a malformed TSV line, skipped because of --skip-bad-lines",
    "empty": "the source or the target is empty",
    "overlap_with_train": "a held-out pair whose source or target sentence also occurs in train",
    "train_limit": "not in the seeded sample of --train-limit train pairs (train only)",
    "too_long": "the source or the target has more than max_len tokens (train only)",
    "ratio": "the longer side has more than max_ratio times the tokens of the shorter (train only)",
    **{rule: f"{why} (train only, when cleaning)" for rule, why in rules.RULE_REASONS.items()},
}
_LANGUAGE_SUFFIX = re.compile(r"^[a-z]{2,3}([_-][A-Za-z]{2,4})?$")


def _say(message: str, progress: bool) -> None:
    """A progress line: shown with the progress bars (--no-progress hides both)."""
    if progress:
        print(message, file=sys.stderr)


def _note(message: str) -> None:
    """Something the user must know (a reused directory, pieces left out): shown even with --no-progress."""
    print(message, file=sys.stderr)


def _chunks(stage_dir: Path, split: str) -> Iterator[tuple[list[str], list[str], list[str]]]:
    """(sources, targets, origins) of CHUNK staged pairs at a time; no origins for train."""
    sources, targets = read_lines(stage_dir / f"{split}.src"), read_lines(stage_dir / f"{split}.tgt")
    where = stage_dir / f"{split}.where"
    origins = read_lines(where) if where.is_file() else iter(())
    while chunk_src := list(islice(sources, CHUNK)):
        yield chunk_src, list(islice(targets, CHUNK)), list(islice(origins, CHUNK))


def _length_rule(src_len: int, tgt_len: int, filters: Filters) -> str | None:
    """The length filter that drops a train pair ("too_long", "ratio"), or None if it is kept."""
    if max(src_len, tgt_len) > filters.max_len:
        return "too_long"
    if max(src_len, tgt_len) > filters.max_ratio * max(1, min(src_len, tgt_len)):
        return "ratio"
    return None


def _held_out_fits(lengths, max_len: int, origins: list[str], long: dict[str, Any]) -> list[int]:
    """Indices of the valid/test pairs within max_len; the others are counted in `long`, first named."""
    keep = []
    for i, (s, t) in enumerate(lengths):
        if max(s, t) <= max_len:
            keep.append(i)
        else:
            long["pairs"] += 1
            long["first"] = long["first"] or origins[i]
    return keep


def _encode_split(
    tokenizer: Tokenizer,
    work: Path,
    split: str,
    counts: dict[str, int],
    filters: Filters,
    progress: bool,
    provenance: Sources | None = None,
):
    """Encode one staged split into shards and raw text (train_limit is applied before, when staging).

    Train pairs outside the limits are dropped (and counted in `provenance` by source, which then keeps
    the sources of the pairs kept); valid/test pairs over max_len are kept in the raw text and left
    out of the shards. Returns the split's token counts (EOS included) and unk counts, per side, and
    {"pairs", "first"} of the valid/test pairs left out.
    """
    writer = ShardWriter(work, split, tokenizer.vocab_size)
    unk = {"src": 0, "tgt": 0}
    long: dict[str, Any] = {"pairs": 0, "first": None}
    total = counts["read"] - sum(v for k, v in counts.items() if k != "read")
    with ExitStack() as stack:
        raw = [stack.enter_context(open_text(DataDir(work).raw(split, side), "w")) for side in ("src", "tgt")]
        bar = stack.enter_context(
            tqdm(total=total, desc=f"encode {split}", unit=" pairs", disable=not progress)
        )
        done = 0
        for sources, targets, origins in _chunks(work / "stage", split):
            src_ids, tgt_ids = tokenizer.encode(sources), tokenizer.encode(targets)
            lengths = zip(map(len, src_ids), map(len, tgt_ids), strict=True)
            if split == "train":
                dropped = [_length_rule(s, t, filters) for s, t in lengths]
                keep = text = [i for i, rule in enumerate(dropped) if rule is None]
                for rule in filter(None, dropped):
                    counts[rule] += 1
                if provenance is not None:
                    provenance.note_lengths(done, dropped)
                done += len(dropped)
            else:
                keep, text = _held_out_fits(lengths, filters.max_len, origins, long), range(len(sources))
            writer.add([src_ids[i] for i in keep], [tgt_ids[i] for i in keep])
            for side, ids in (("src", src_ids), ("tgt", tgt_ids)):
                unk[side] += sum(ids[i].count(UNK_ID) for i in keep)
            for f, lines in zip(raw, (sources, targets), strict=True):
                f.writelines(lines[i] + "\n" for i in text)
            bar.update(len(sources))
    counts["kept"] = writer.close()
    if provenance is not None:
        np.save(work / CORPUS_FILE, provenance.corpus)
    dataset = TokenDataset(work, split)
    return {"src": int(dataset.src_lengths.sum()), "tgt": int(dataset.tgt_lengths.sum())}, unk, long


def _language(path: str | Path | None, default: str) -> str:
    suffix = Path(path).suffix.lstrip(".") if path else ""
    return suffix if _LANGUAGE_SUFFIX.match(suffix) else default


# What `prepare` writes (DataDir's files): only these are replaced by --force
_OWN_FILES = re.compile(
    r"meta\.json|spm\.model|spm\.vocab|\w+\.(src|tgt)\.bin|\w+\.index\.npz|raw/\w+\.(src|tgt|tree)"
    r"|train\.corpus\.npy|cleaning/\w+\.(tsv|npy)|plan-cache/[^/]+"  # the trainer's (aiayn.data.plan_cache)
)


def _foreign_file(out: Path) -> Path | None:
    """The first file under `out` that `prepare` did not write, if any (--force would delete it)."""
    for path in sorted(out.rglob("*")):
        if not (path.is_dir() or _OWN_FILES.fullmatch(path.relative_to(out).as_posix())):
            return path
    return None


def _check_out(out: Path, force: bool) -> bool:
    """True if `out` is already prepared and should be left alone; errors if it is someone else's,
    or if --force would delete files that `prepare` did not write there."""
    if DataDir(out).prepared:
        foreign = _foreign_file(out) if force else None
        if foreign is not None:
            raise AiaynError(
                f"--force would delete {foreign}, which prepare did not write; move it, or another --out"
            )
        return not force
    if not vacant(out):
        raise AiaynError(f"{out} exists and is not a data directory (no meta.json); choose another --out")
    return False


def prepare(
    out_dir: str | Path,
    corpus: str | SplitFiles | Recipe,
    *,
    filters: Filters | None = None,
    clean: Cleaning | None = None,
    vocab_size: int | None = None,
    spm: str | Path | None = None,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    seed: int = 1,
    force: bool = False,
    skip_bad_lines: bool = False,
    progress: bool = True,
    workers: int | None = None,
) -> Path:
    """Prepare a data directory from `corpus`, a built-in corpus's name, a user's SplitFiles or a
    Recipe of several weighted ones; returns its path. `clean` (or a recipe's own `clean`) cleans
    the train pairs (`aiayn.data.cleaning`).

    `vocab_size` pieces (default 8000) are trained on the train split, unless `spm` names an existing
    SentencePiece model (a .model file, or a model or data directory holding spm.model) to encode
    with: its file is copied unchanged, so `aiayn train --init-from` accepts the model it belongs to.
    `seed` splits valid/test off a user's train files when they are not given, draws the train_limit
    sample (see Filters; default Filters()) and seeds the vocabulary's training.
    """
    out, filters = Path(out_dir), filters or Filters()
    if (vocab_size is not None and vocab_size < 16) or filters.max_len < 1 or filters.max_ratio < 1:
        raise AiaynError("--vocab-size must be at least 16, --max-len at least 1 and --max-ratio at least 1")
    if filters.train_limit is not None and filters.train_limit < 1:
        raise AiaynError(f"--train-limit must be at least 1, got {filters.train_limit}")
    vocabulary = _reused_tokenizer(spm, vocab_size) if spm is not None else vocab_size or DEFAULT_VOCAB_SIZE
    if isinstance(corpus, Recipe):
        clean = clean or corpus.clean
        src_lang, tgt_lang = src_lang or corpus.src_lang, tgt_lang or corpus.tgt_lang
    elif isinstance(corpus, str):
        get_corpus(corpus)  # an unknown name fails before anything is written
    else:
        corpus.inputs()  # checked: one of the two shapes
    meta = _describe(corpus, src_lang, tgt_lang, seed, clean)
    if isinstance(vocabulary, Tokenizer):
        _check_tag_pieces(vocabulary, _tags(corpus))
    check = _language_check(corpus, meta, clean)  # a missing identifier fails before any work
    scorer = _scorer(corpus, meta, clean)  # so do the score rule's models
    if not force and DataDir(out).prepared:
        _check_same_corpus(out, meta)
    if workers is not None and workers < 1:
        raise AiaynError(f"--workers must be at least 1, got {workers}")
    with building(out, force) as work:
        if work is not None:
            _check_space(work, corpus)
            judges = check, scorer
            built = _build(
                work, corpus, vocabulary, filters, seed, skip_bad_lines, progress, clean, judges, workers
            )
            meta.update(built)
            DataDir(work).write_meta(meta)
    return out


SPACE_FACTOR = 3  # staged text + raw/ + shards, against the input's size (measured: ~2.5x at the peak)


def _input_bytes(corpus) -> int:
    """The size of the user's files that `corpus` names (built-in corpora are small: 0)."""
    if isinstance(corpus, str):
        return 0
    if isinstance(corpus, Recipe):
        groups = [s.files for s in corpus.sources if not s.corpus] + [corpus.valid, corpus.test]
    else:
        groups = [corpus.train, corpus.valid, corpus.test]
    paths = [p for g in groups for p in (g.src, g.tgt, g.tsv) if p is not None]
    return sum(p.stat().st_size for p in paths if p.is_file())


def _check_space(work: Path, corpus) -> None:
    """Refuse, before the build, when the disk holding `work` cannot hold what it will write."""
    need, free = SPACE_FACTOR * _input_bytes(corpus), shutil.disk_usage(work).free
    if need > free:
        raise AiaynError(
            f"{work.parent}: {free / 2**30:.1f} GiB free, but preparing this corpus needs about "
            f"{need / 2**30:.1f} GiB ({SPACE_FACTOR}x its files: staged text, raw/ and shards); "
            "free some space or choose another --out"
        )


def _language_check(corpus, meta: dict, clean: Cleaning | None) -> rules.LanguageCheck | None:
    """The language rule's check (a target language per source of a tagged recipe), or None."""
    if clean is None or "language" not in clean.rules:
        return None
    targets = meta["tgt_lang"]
    if isinstance(corpus, Recipe) and corpus.tags:
        targets = [corpus.target_language(s) for s in corpus.sources]
    return rules.LanguageCheck(meta["src_lang"], targets, clean.min_chars)


_PLACEHOLDERS = {"src_lang": "src", "tgt_lang": "tgt"}  # `_languages` of files without a suffix: unknown


def _scorer(corpus, meta: dict, clean: Cleaning | None):
    """The score rule's two models (`aiayn.data.scoring`), loaded and checked, or None."""
    if clean is None or clean.score is None:
        return None
    if isinstance(corpus, Recipe) and corpus.tags:
        raise AiaynError(
            "the score rule scores one language pair; a recipe with tags: true has several "
            "(prepare each pair's corpora with it apart, or leave score out)"
        )
    from aiayn.data.scoring import Scorer

    src, tgt = (None if meta[k] == default else meta[k] for k, default in _PLACEHOLDERS.items())
    return Scorer(clean.score.forward, clean.score.reverse, src, tgt)


def _check_same_corpus(out: Path, wanted: dict) -> None:
    """A prepared `out` is reused as it is only for the corpus (or files, or recipe) it was prepared
    from, cleaned the same way."""
    meta = DataDir(out).meta
    keys = lambda m: (m.get("corpus"), _resolved(m.get("inputs")), m.get("recipe"), m.get("clean"))  # noqa: E731
    if keys(meta)[:3] == keys(wanted)[:3] and meta.get("clean") != wanted.get("clean"):
        raise AiaynError(
            f"{out} is already prepared from this corpus with other cleaning ({meta.get('clean')}); pass "
            "--force to prepare it again, or choose another --out"
        )
    if keys(meta) != keys(wanted):
        was = meta.get("corpus") if meta.get("inputs") is None else f"files {meta['inputs']}"
        raise AiaynError(
            f"{out} is already prepared from another corpus ({was}); pass --force to prepare it again "
            "from this one, or choose another --out"
        )


@contextmanager
def building(out: Path, force: bool) -> Iterator[Path | None]:
    """A hidden temporary directory beside `out`, renamed to `out` when the block ends without error.

    Yields None (and nothing is done) when `out` is already prepared and not `force`.
    """
    if _check_out(out, force):
        _note(f"{out} is already prepared; pass --force to prepare it again")
        yield None
        return
    with building_directory(out) as work:
        yield work


def _resolved(inputs: dict | None) -> dict | None:
    """{split: {side: absolute path}} of the user's files, None for a built-in corpus: the same files
    compare equal however they were named (a path written relative to the directory it ran in, in
    meta.json by releases before this one, resolves against the current one)."""
    if inputs is None:
        return None
    return {
        split: {side: str(Path(f).resolve()) for side, f in files.items()}
        for split, files in inputs.items()
        if files
    }


def _describe(corpus, src_lang: str | None, tgt_lang: str | None, seed: int, clean: Cleaning | None) -> dict:
    """The meta.json entries that say where the data came from and how it was cleaned."""
    if isinstance(corpus, Recipe):
        first = corpus.sources[0]
        header = {"corpus": "recipe", "description": f"{len(corpus.sources)} sources", "inputs": None}
        header["recipe"] = corpus.describe()
        languages = _languages(first.corpus, first.files.files("") if not first.corpus else None)
        targets = corpus.target_languages()
        if corpus.tags:  # many target languages: the model is told which by a tag
            header.update(target_languages=targets, target_tag=">>{lang}<<")
            languages = languages[0], targets[0] if len(targets) == 1 else "mul"
    elif isinstance(corpus, str):
        header = {"corpus": corpus, "description": get_corpus(corpus).description, "inputs": None}
        languages = _languages(corpus, None)
    else:
        inputs = corpus.inputs()
        header = {"corpus": "user", "description": "user files", "inputs": _resolved(inputs)}
        languages = _languages(None, inputs["train"])
    header["clean"] = clean.describe() if clean else None
    return {
        "format_version": FORMAT_VERSION,
        **header,
        "src_lang": src_lang or languages[0],
        "tgt_lang": tgt_lang or languages[1],
        "seed": seed,
    }


def _languages(builtin: str | None, train: dict | None) -> tuple[str, str]:
    """A built-in corpus's languages, or those of a user's train files' suffixes ("src", "tgt" if none)."""
    if builtin:
        return get_corpus(builtin).src_lang, get_corpus(builtin).tgt_lang
    return _language(train.get("src"), "src"), _language(train.get("tgt"), "tgt")


def _tags(corpus) -> list[str]:
    """The target-language tags of a recipe with `tags: true` (each one piece of the vocabulary)."""
    if not (isinstance(corpus, Recipe) and corpus.tags):
        return []
    return [f">>{lang}<<" for lang in corpus.target_languages()]


def _check_tag_pieces(tokenizer: Tokenizer, tags: list[str]) -> None:
    """A reused vocabulary (--spm) must hold each tag as one piece: split into several, the model
    would read a language's tag as ordinary text."""
    missing = [tag for tag in tags if tag not in tokenizer.pieces(tokenizer.encode([tag])[0])]
    if missing:
        raise AiaynError(
            f"--spm {tokenizer.path} has no piece for the target-language tag(s) {', '.join(missing)} "
            "(tags: true); leave --spm out to train a vocabulary with them"
        )


def _reused_tokenizer(spm: str | Path, vocab_size: int | None) -> Tokenizer:
    """`--spm`: the SentencePiece model to encode with (a file, or a directory holding spm.model)."""
    path = Path(spm)
    tokenizer = Tokenizer.load(path / SPM_FILE if path.is_dir() else path)
    if vocab_size is not None and vocab_size != tokenizer.vocab_size:
        raise AiaynError(
            f"--spm {tokenizer.path} has {tokenizer.vocab_size} pieces but --vocab-size asks for "
            f"{vocab_size}; leave --vocab-size out to use that vocabulary"
        )
    return tokenizer


def tokenizer_meta(trained_on: str) -> dict[str, Any]:
    """meta.json's "tokenizer" entry for the data directory's spm.model."""
    return {
        "type": "sentencepiece",
        "model_type": "bpe",
        "model": SPM_FILE,
        "trained_on": trained_on,
        "character_coverage": CHARACTER_COVERAGE,
        **{"pad_id": PAD_ID, "unk_id": UNK_ID, "bos_id": BOS_ID, "eos_id": EOS_ID},
    }


def _vocabulary(
    work: Path,
    vocabulary: Tokenizer | int,
    seed: int,
    progress: bool,
    symbols: list[str],
    workers: int | None,
) -> Tokenizer:
    """Train the joint BPE on the staged train text, or copy the reused model unchanged."""
    if isinstance(vocabulary, Tokenizer):
        _say(f"encoding with the {vocabulary.vocab_size}-piece vocabulary {vocabulary.path}", progress)
        vocabulary.threads = workers or vocabulary.threads
        return vocabulary.copy_to(DataDir(work).spm_path)
    _say(f"training a {vocabulary}-piece joint BPE vocabulary on the train split", progress)
    train_text = chain(read_lines(work / "stage" / "train.src"), read_lines(work / "stage" / "train.tgt"))
    tokenizer = Tokenizer.train(
        train_text, DataDir(work).spm_path, vocabulary, seed=seed, user_symbols=symbols, threads=workers
    )
    if tokenizer.vocab_size < vocabulary:
        _note(f"note: the train text only supports {tokenizer.vocab_size} pieces, not {vocabulary}")
    return tokenizer


def _note_unk(unk: dict[str, int], tokens: dict[str, int]) -> None:
    share = sum(unk.values()) / max(1, sum(tokens.values()))
    if share > UNK_NOTE:
        _note(
            f"note: {share:.1%} of the train tokens are <unk>: the reused vocabulary lacks characters "
            "of this corpus (meta.json: unk)"
        )


def _note_long(long: dict[str, dict[str, Any]], max_len: int) -> None:
    for split in ("valid", "test"):
        if long[split]["pairs"]:
            _note(
                f"note: {long[split]['pairs']} {split} pair(s) have more than max_len={max_len} pieces "
                f"(first: {long[split]['first']}); BLEU scores them (raw/{split}.*), the dev loss leaves "
                "them out (meta.json: long_held_out)"
            )


def _stage(work: Path, corpus, counts: dict, seed: int, skip: bool, progress: bool) -> Sources:
    """Stage every split's text into work/stage; -> the train pairs' sources."""
    stages = {split: Stage(work / "stage", split, counts[split]) for split in SPLITS}
    try:
        if isinstance(corpus, Recipe):
            sizes = stage_recipe(corpus, stages, seed, skip, progress)
            return Sources([s.name for s in corpus.sources], [s.weight for s in corpus.sources], sizes)
        if isinstance(corpus, str):
            stage_builtin(corpus, stages)
        else:
            stage_user(corpus.inputs(), stages, seed, skip, progress)
        return Sources([corpus if isinstance(corpus, str) else "user"], [1.0], [stages["train"].staged])
    finally:
        for stage in stages.values():
            stage.close()


def _clean(work: Path, sources: Sources, clean: Cleaning, judges, counts: dict, progress: bool) -> None:
    """Apply the cleaning rules to the staged train pairs: counted by rule and source, a sample of
    each rule's removals and every pair's fate in work/cleaning/, the rest staged again. `judges`:
    the language rule's check and the score rule's scorer (each None when its rule is not asked for)."""
    (check, scorer), stage, n = judges, work / "stage", len(sources.corpus)
    reasons = rules.decide(staged_pairs(stage, "train"), n, clean, check, progress, sources.corpus)
    if scorer is not None:  # second pass: the pairs the other rules kept
        scores = scorer.scores(staged_pairs(stage, "train"), reasons == 0, progress)  # (n,) float32
        rules.remove_worst(reasons, scores, clean.score.drop)
    rules.write_samples(
        work / rules.CLEANING_DIR,
        reasons,
        staged_pairs(stage, "train"),
        sources.names,
        sources.corpus,
        clean.sample,
    )
    if scorer is not None:
        np.save(work / rules.CLEANING_DIR / rules.SCORES_FILE, scores)
    for i, rule in enumerate(rules.RULES, start=1):
        counts[rule] += int((reasons == i).sum())
        sources.count(rule, reasons == i)
    sources.corpus = sources.corpus[reasons == 0]
    keep_staged(stage, "train", reasons == 0)


def _build(
    work: Path,
    corpus,
    vocabulary: Tokenizer | int,
    filters: Filters,
    seed: int,
    skip: bool,
    progress,
    clean,
    judges,
    workers: int | None = None,
) -> dict:
    """Stage, clean, train (or reuse) the vocabulary, encode; -> the meta.json entries of the result.
    `judges`: (language check, scorer) of the cleaning rules that need them."""
    (work / "stage").mkdir()
    (work / RAW_DIR).mkdir()
    counts = {split: {"read": 0, **dict.fromkeys(DROP_REASONS, 0)} for split in SPLITS}
    sources = _stage(work, corpus, counts, seed, skip, progress)
    if counts["train"]["read"] == sum(v for k, v in counts["train"].items() if k != "read"):
        raise AiaynError("no training pairs left: every train line was empty or bad")
    if clean is not None:
        _clean(work, sources, clean, judges, counts["train"], progress)
        if len(sources.corpus) == 0:
            removed = ", ".join(
                f"{rule} {counts['train'][rule]:,}" for rule in rules.RULES if counts["train"][rule]
            )
            raise AiaynError(
                f"cleaning removed every train pair ({removed}); check src_lang/tgt_lang and the files"
            )
    if filters.train_limit is not None:
        kept = sample_train(work / "stage", counts["train"], filters.train_limit, seed)
        if kept is not None:
            sources.remove("train_limit", ~kept)
    tokenizer = _vocabulary(work, vocabulary, seed, progress, _tags(corpus), workers)  # a tag is one piece
    tokens, unk, long = {}, {}, {}
    recipe = isinstance(corpus, Recipe)
    for split in SPLITS:
        tokens[split], unk[split], long[split] = _encode_split(
            tokenizer, work, split, counts[split], filters, progress, sources if split == "train" else None
        )
    if not recipe:
        (work / CORPUS_FILE).unlink()  # one source: nothing to say
    _note_long(long, filters.max_len)
    if counts["train"]["kept"] == 0:
        raise AiaynError(
            f"no train pairs left after the max_len={filters.max_len}, max_ratio={filters.max_ratio} filters"
        )
    reused = isinstance(vocabulary, Tokenizer)
    if reused:
        _note_unk(unk["train"], tokens["train"])
    shutil.rmtree(work / "stage")
    reasons = [k for k in DROP_REASONS if clean is not None or k not in rules.RULES]
    return {
        "vocab_size": tokenizer.vocab_size,
        "requested_vocab_size": tokenizer.vocab_size if reused else vocabulary,
        "tokenizer": tokenizer_meta(
            f"reused: {vocabulary.path.resolve()}" if reused else "train split, source and target"
        ),
        "token_dtype": token_dtype(tokenizer.vocab_size).name,
        "pairs": {split: counts[split]["kept"] for split in SPLITS},
        "tokens": tokens,
        "unk": unk,
        "filters": filters.describe(),
        "lines_read": {split: counts[split]["read"] for split in SPLITS},
        "long_held_out": {split: long[split] for split in ("valid", "test")},
        "dropped": {split: {k: counts[split][k] for k in reasons} for split in SPLITS},
        "drop_reasons": {k: DROP_REASONS[k] for k in reasons},
        **({"sources": sources.describe()} if recipe or clean else {}),
    }
