"""`aiayn prepare`: a corpus in, a data directory out (section 5.1's data pipeline).

Steps: stage the text of every split (`stage`: built-in corpus, a user's files validated by
`corpus`, or a recipe's several weighted corpora, `recipe`; empty pairs dropped; valid/test split off
with a seed when not given), clean the train pairs when asked (`cleaning`: duplicates, copies, the
wrong language; a sample of each rule's removals kept in DATA/cleaning/), with `train_limit` keep a
seeded sample of the train pairs, train the joint BPE vocabulary on the staged train text (or
reuse an existing SentencePiece model, `spm`, so that a trained model can be fine-tuned on the data;
`vocabulary`), encode every split in chunks into memory-mapped shards (`encode`; train pairs over
`max_len` tokens or with a length ratio over `max_ratio` dropped), keep the raw text of every
split, and write `meta.json` with every count and the reason for every drop. Valid and test pairs
over `max_len` stay in the raw text (BLEU scores the whole split) but not in the shards that dev-loss
batches are made of: one such pair would otherwise be a batch of its own, quadratic in attention
memory, or overflow learned positions; prepare reports their count and the first one's file:line
(meta.json: long_held_out). All of it happens in a hidden temporary directory, fsynced and renamed
into place at the end (`outdir`, `safe_io.building_directory`), so a killed run never leaves a
directory that looks complete (the next run removes what it left, never a live run's); a finished
directory is left alone unless `force`.

Data directory: meta.json, spm.model, spm.vocab, {split}.{src,tgt}.bin, {split}.index.npz and
raw/{split}.{src,tgt} for split in train, valid, test; from a recipe, train.corpus.npy (each train
pair's source, `mixing`); cleaned, cleaning/reasons.npy and cleaning/RULE.tsv (and with the score rule
cleaning/scores.npy).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np

from aiayn.data import cleaning as rules
from aiayn.data.builtin import get_corpus
from aiayn.data.cleaning import Cleaning
from aiayn.data.datadir import RAW_DIR, SPLITS, DataDir
from aiayn.data.dataset import token_dtype
from aiayn.data.encode import encode_split, note_long
from aiayn.data.mixing import CORPUS_FILE
from aiayn.data.outdir import building, check_same_corpus, check_space, resolved
from aiayn.data.provenance import Sources
from aiayn.data.recipe import Recipe
from aiayn.data.sources import Filters, SplitFiles
from aiayn.data.stage import (
    Stage,
    keep_staged,
    sample_train,
    stage_builtin,
    stage_recipe,
    stage_user,
    staged_pairs,
)
from aiayn.data.tokenizer import Tokenizer
from aiayn.data.vocabulary import (
    DEFAULT_VOCAB_SIZE,
    build_vocabulary,
    check_tag_pieces,
    note_unk,
    reused_tokenizer,
    target_tags,
    tokenizer_meta,
)
from aiayn.errors import AiaynError

FORMAT_VERSION = 1
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


def _language(path: str | Path | None, default: str) -> str:
    suffix = Path(path).suffix.lstrip(".") if path else ""
    return suffix if _LANGUAGE_SUFFIX.match(suffix) else default


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
    vocabulary = reused_tokenizer(spm, vocab_size) if spm is not None else vocab_size or DEFAULT_VOCAB_SIZE
    if isinstance(corpus, Recipe):
        clean = clean or corpus.clean
        src_lang, tgt_lang = src_lang or corpus.src_lang, tgt_lang or corpus.tgt_lang
    elif isinstance(corpus, str):
        get_corpus(corpus)  # an unknown name fails before anything is written
    else:
        corpus.inputs()  # checked: one of the two shapes
    meta = _describe(corpus, src_lang, tgt_lang, seed, clean)
    if isinstance(vocabulary, Tokenizer):
        check_tag_pieces(vocabulary, target_tags(corpus))
    check = _language_check(corpus, meta, clean)  # a missing identifier fails before any work
    scorer = _scorer(corpus, meta, clean)  # so do the score rule's models
    if not force and DataDir(out).prepared:
        check_same_corpus(out, meta)
    if workers is not None and workers < 1:
        raise AiaynError(f"--workers must be at least 1, got {workers}")
    with building(out, force) as work:
        if work is not None:
            check_space(work, corpus)
            judges = check, scorer
            built = _build(
                work, corpus, vocabulary, filters, seed, skip_bad_lines, progress, clean, judges, workers
            )
            meta.update(built)
            DataDir(work).write_meta(meta)
    return out


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
        header = {"corpus": "user", "description": "user files", "inputs": resolved(inputs)}
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
    tags = target_tags(corpus)  # each one piece
    tokenizer = build_vocabulary(work, vocabulary, seed, progress, tags, workers)
    tokens, unk, long = {}, {}, {}
    recipe = isinstance(corpus, Recipe)
    for split in SPLITS:
        tokens[split], unk[split], long[split] = encode_split(
            tokenizer, work, split, counts[split], filters, progress, sources if split == "train" else None
        )
    if not recipe:
        (work / CORPUS_FILE).unlink()  # one source: nothing to say
    note_long(long, filters.max_len)
    if counts["train"]["kept"] == 0:
        raise AiaynError(
            f"no train pairs left after the max_len={filters.max_len}, max_ratio={filters.max_ratio} filters"
        )
    reused = isinstance(vocabulary, Tokenizer)
    if reused:
        note_unk(unk["train"], tokens["train"])
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
