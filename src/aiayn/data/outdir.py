"""Where `aiayn prepare` writes: the out directory's three states (vacant, someone else's, already
prepared), what `--force` may replace, the free space a build needs, and when a prepared directory
is reused as it is. The build itself happens in a hidden temporary directory renamed into place at
the end (`safe_io.building_directory`)."""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aiayn.data.datadir import DataDir
from aiayn.data.recipe import Recipe
from aiayn.errors import AiaynError
from aiayn.safe_io import building_directory, vacant

# What `prepare` writes (DataDir's files): only these are replaced by --force
_OWN_FILES = re.compile(
    r"meta\.json|spm\.model|spm\.vocab|\w+\.(src|tgt)\.bin|\w+\.index\.npz|raw/\w+\.(src|tgt|tree)"
    r"|train\.corpus\.npy|cleaning/\w+\.(tsv|npy)|plan-cache/[^/]+"  # the trainer's (aiayn.data.plan_cache)
)
SPACE_FACTOR = 3  # staged text + raw/ + shards, against the input's size (measured: ~2.5x at the peak)


@contextmanager
def building(out: Path, force: bool) -> Iterator[Path | None]:
    """A hidden temporary directory beside `out`, renamed to `out` when the block ends without error.

    Yields None (and nothing is done) when `out` is already prepared and not `force`.
    """
    if _check_out(out, force):
        print(f"{out} is already prepared; pass --force to prepare it again", file=sys.stderr)
        yield None
        return
    with building_directory(out) as work:
        yield work


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


def _foreign_file(out: Path) -> Path | None:
    """The first file under `out` that `prepare` did not write, if any (--force would delete it)."""
    for path in sorted(out.rglob("*")):
        if not (path.is_dir() or _OWN_FILES.fullmatch(path.relative_to(out).as_posix())):
            return path
    return None


def check_space(work: Path, corpus) -> None:
    """Refuse, before the build, when the disk holding `work` cannot hold what it will write."""
    need, free = SPACE_FACTOR * _input_bytes(corpus), shutil.disk_usage(work).free
    if need > free:
        raise AiaynError(
            f"{work.parent}: {free / 2**30:.1f} GiB free, but preparing this corpus needs about "
            f"{need / 2**30:.1f} GiB ({SPACE_FACTOR}x its files: staged text, raw/ and shards); "
            "free some space or choose another --out"
        )


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


def check_same_corpus(out: Path, wanted: dict) -> None:
    """A prepared `out` is reused as it is only for the corpus (or files, or recipe) it was prepared
    from, cleaned the same way (`wanted`: the meta.json entries `prepare` would write)."""
    meta = DataDir(out).meta
    keys = lambda m: (m.get("corpus"), resolved(m.get("inputs")), m.get("recipe"), m.get("clean"))  # noqa: E731
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


def resolved(inputs: dict | None) -> dict | None:
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
