"""Files that outlive a command: written whole or not at all, read within their directory and bounds.

Writes. Every file that a later command reads (config.yaml, run.json, model directories, scores,
data directories) is written to a temporary name beside its target, fsynced, renamed over the
target, and the directory fsynced (`atomic_path`, `atomic_write_text`, `atomic_copy`): a kill -9, a
power cut or a full disk leaves the old file or the new one, never an empty or half-written one.
A whole directory (`aiayn prepare`, `aiayn import-marian`) is built in a hidden temporary directory
next to it and renamed into place (`building_directory`); the run holds a lock on its temporary
directory, so the next run into the same parent directory (whatever its name) removes what a killed
one left without touching a live one's.

Reads of files someone else made. A file name taken from a config file must be a plain name that
resolves inside its directory (`resolve_inside`), so that a model directory's config.json cannot make
aiayn read or copy ~/.ssh/id_ed25519; and a text line may not exceed MAX_LINE_BYTES (`capped_lines`),
so that a binary or a CR-only file, which has no "\\n", is refused instead of read whole into memory.
"""

from __future__ import annotations

import glob
import json
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from aiayn.errors import AiaynError

WORK_NAME = re.compile(r"\..+\.tmp-[a-z0-9_]{8}")  # building_directory's: ".OUT.tmp-" + mkdtemp's 8
MAX_LINE_BYTES = 1 << 20  # 1 MiB: far beyond any sentence, far below a whole file read by mistake


def fsync_file(path: str | Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def fsync_dir(path: str | Path) -> None:
    """Make a rename or a new entry in directory `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()  # what an ordinary new file gets (0644 under the usual umask)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path` for the caller to write; fsynced and renamed onto `path` at the end.

    If the block raises, the temporary file is removed and `path` is untouched.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        yield tmp
        os.chmod(tmp, FILE_MODE)  # writers such as safetensors make private (0600) files
        fsync_file(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write UTF-8 text (newlines as given) atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_copy(source: str | Path, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        shutil.copyfile(source, tmp)
    return Path(path)


def fsync_tree(root: str | Path) -> None:
    """fsync every file and directory under `root` (before the tree is renamed into place)."""
    for directory, _, files in os.walk(root):
        for name in files:
            fsync_file(Path(directory) / name)
        fsync_dir(directory)


def _lock(path: Path, blocking: bool = True) -> int | None:
    """An exclusive flock on the directory `path`: its fd (close it to unlock), or None if it is held.

    The kernel drops the lock when the process dies, however it dies. (fcntl is POSIX: imported here
    so that the rest of aiayn imports without it.)
    """
    import fcntl

    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


@contextmanager
def _holding(path: Path) -> Iterator[None]:
    fd = _lock(path)
    try:
        yield
    finally:
        os.close(fd)


def _clean_leftovers(out: Path) -> None:
    """What killed runs left beside `out` (the caller holds the lock on out's parent).

    A run killed between its two renames left `out` moved aside: it is put back. Temporary
    directories of any run into this parent (`building_directory`'s names) whose run is dead (their
    lock is free) are removed, whatever directory they were building; a live run's are left alone.
    """
    hidden = glob.escape(f".{out.name}")
    olds = sorted(out.parent.glob(hidden + ".old-*"))
    if olds and not out.exists():
        olds.pop().rename(out)
    for old in olds:
        shutil.rmtree(old, ignore_errors=True)
    for work in out.parent.glob(".*.tmp-*"):
        if not WORK_NAME.fullmatch(work.name) or work.is_symlink() or not work.is_dir():
            continue
        try:
            fd = _lock(work, blocking=False)
        except FileNotFoundError:  # gone meanwhile
            continue
        if fd is not None:
            shutil.rmtree(work, ignore_errors=True)
            os.close(fd)


def _swap(work: Path, out: Path) -> None:
    """Rename `work` to `out`, the old `out` (if any) moved aside first and removed after."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{secrets.token_hex(4)}")
        out.rename(old)
    work.rename(out)
    fsync_dir(out.parent)
    if old is not None:
        shutil.rmtree(old)


def vacant(path: str | Path) -> bool:
    """Whether `path` is absent or an empty directory: what `building_directory` may replace with
    nothing lost. Callers say which other contents they accept (their own earlier output)."""
    path = Path(path)
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


@contextmanager
def building_directory(out: str | Path, what: str = "--out") -> Iterator[Path]:
    """An empty hidden directory beside `out` to build in; it replaces `out` when the block succeeds.

    If the block raises, the work is removed and `out` is untouched. Every file is fsynced before the
    rename, so that after a crash `out` holds all of the new files or the old directory. A file at
    `out` or on the way to it is a one-line AiaynError (`what` names the option), before anything is made.
    A symbolic link at `out` is followed: its target is rebuilt and swapped, and the link kept.
    """
    out = check_dir_path(out, what)
    if out.is_symlink():
        out = Path(os.path.realpath(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    with _holding(out.parent):
        _clean_leftovers(out)
        work = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
        alive = _lock(work)  # "this run is alive", for other runs' _clean_leftovers
    try:
        work.chmod(0o755)  # mkdtemp makes it private; the result is an ordinary directory
        yield work
        fsync_tree(work)
        with _holding(out.parent):
            _swap(work, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        os.close(alive)


def input_file(path: str | Path, what: str = "", stream: bool = False) -> Path:
    """`path` if it is a file to read, else a one-line AiaynError saying why (`what` names the option):
    no such file, a directory, or (unless the reader reads it once, `stream`) a pipe or device."""
    path, name = Path(path), f"{what} {path}".strip()
    if path.is_dir():
        raise AiaynError(f"{name}: is a directory, not a file")
    if not path.exists():
        raise AiaynError(f"{name}: no such file")
    if not (stream or path.is_file()):
        raise AiaynError(f"{name}: not a regular file (it is read twice); save it to a file first")
    return path


def read_json_object(path: str | Path) -> dict:
    """The JSON object in file `path` (config.json and the like); a one-line AiaynError naming the
    file when it cannot be read, is not UTF-8, is not JSON (with its line) or holds no object."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise AiaynError(f"{path}:{err.lineno}: invalid JSON: {err.msg}") from None
    except UnicodeDecodeError:
        raise AiaynError(f"{path}: not UTF-8 text, so not a JSON file") from None
    except OSError as err:
        raise AiaynError(f"{path}: cannot read it: {err.strerror}") from None
    if not isinstance(data, dict):
        raise AiaynError(f"{path}: expected a JSON object of settings, found {type(data).__name__}")
    return data


def output_file(
    path: str | Path, what: str, inputs: tuple[str | Path | None, ...] = (), reads_stdin: bool = False
) -> Path:
    """`path` if a file may be written there, else a one-line AiaynError: a directory, a missing
    parent directory, one of the command's `inputs` (which writing would empty before it is read), a
    file inside an input that is a directory (a model's weights), or, with `reads_stdin`, the file
    that standard input reads (`-o F < F`)."""
    path = Path(path)
    if path.is_dir():
        raise AiaynError(f"{what} {path}: is a directory; name a file")
    if not path.absolute().parent.is_dir():
        raise AiaynError(f"{what} {path}: no such directory {path.parent}")
    for source in (s for s in inputs if s is not None and Path(s).exists()):
        if Path(source).is_dir() and path.resolve().is_relative_to(Path(source).resolve()):
            raise AiaynError(f"{what} {path} is inside the input directory {source}; write elsewhere")
        if path.exists() and path.samefile(source):
            raise AiaynError(f"{what} {path} is the input file {source}; write to another file")
    if reads_stdin and path.exists() and _is_stdin(path):
        raise AiaynError(f"{what} {path} is the file standard input reads; write to another file")
    return path


def _is_stdin(path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(0), path.stat())
    except OSError:  # no standard input
        return False


def output_dir(path: str | Path, what: str) -> Path:
    """Directory `path`, made if needed; the one-line AiaynError of `check_dir_path` when it cannot be."""
    path = check_dir_path(path, what)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise AiaynError(f"{what} {path}: a file is there, not a directory") from None
    except OSError as err:
        raise AiaynError(f"{what} {path}: cannot make the directory: {err.strerror}") from None
    return path


def check_dir_path(path: str | Path, what: str) -> Path:
    """`path` if a directory is there or can be made there (nothing is made), else the one-line
    AiaynError of `output_dir`: a file at `path`, a file where one of its parents should be, or a
    link to nothing at `path` or on its way (making its target would make a path the user never named)."""
    path = Path(path)
    existing = next((p for p in (path, *path.absolute().parents) if p.exists() or p.is_symlink()), None)
    if existing is not None and not existing.exists():
        where = "" if existing == path.absolute() else f"{existing} is "
        raise AiaynError(f"{what} {path}: {where}a link to {os.readlink(existing)}, which does not exist")
    if existing is not None and not existing.is_dir():
        raise AiaynError(f"{what} {path}: a file is there, not a directory")
    return path


def plain_name(name: object, what: str) -> str:
    """`name` if it is a plain file name (no directory part, not "." or ".."); else a one-line error."""
    if not isinstance(name, str) or name in ("", ".", "..") or any(c in name for c in "/\\\0"):
        raise AiaynError(f"{what}: {name!r} is not a plain file name (only files in the directory are read)")
    return name


def resolve_inside(directory: str | Path, name: object, what: str) -> Path:
    """DIRECTORY/NAME, for a plain file name that resolves (links followed) inside DIRECTORY.

    `what` says where the name came from, e.g. "model/config.json: tokenizer.vocab". Anything else
    (an absolute path, "../x", a link that leads out) is a one-line AiaynError.
    """
    path = Path(directory) / plain_name(name, what)
    if not path.resolve().is_relative_to(Path(directory).resolve()):
        raise AiaynError(f"{what}: {name!r} is a link that leads outside {directory}; it is not read")
    return path


def capped_lines(f: BinaryIO, name: str, limit: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """The lines of a binary file (each with its "\\n"), refusing one of more than `limit` bytes.

    Reading stops at the over-long line with "NAME:LINE: ..." instead of reading the file whole.
    """
    number = 0
    while line := f.readline(limit + 1):
        number += 1
        if len(line) > limit and not line.endswith(b"\n"):
            kind = "are its lines ended by CR only?" if b"\r" in line else "is it a text file?"
            raise AiaynError(f"{name}:{number}: a line of more than {limit:,} bytes; {kind}")
        yield line
