"""`aiayn translate -i F -o OUT`: a long translation as a job that resumes where it stopped.

The input is translated in parts of CHUNK lines, each written to OUT.parts/ beside OUT as soon as it
is done; OUT is then the parts joined, written aside and renamed, and OUT.parts is removed:

    OUT.parts/job.json                    what the parts are of: the model directories (each file's
                                          size and modification time), the input's SHA-256 and line
                                          count, those of the prefix and constraints files, every
                                          other option, aiayn's version and CHUNK
    OUT.parts/part-NNNNN.DIGEST.txt       the output of input lines NNNNN * CHUNK + 1 on; DIGEST is the
                                          first 16 hex digits of the part's own SHA-256

A run killed at any point (kill -9 included) goes on from its finished parts: each part is written
aside and renamed, so a part is whole or absent, and one whose bytes do not match its DIGEST (damaged
since) is removed with a warning and translated again. Parts are cut at fixed lines and each line's
samples are seeded by its line number, so OUT is byte for byte what an uninterrupted run writes.
Parts of another job (another model, input or option) are refused in one line that names what
changed, and left as they are: remove OUT.parts, or give the job's options again. A run that fails
before its first part is finished leaves no OUT.parts.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

import aiayn
from aiayn.errors import AiaynError
from aiayn.safe_io import atomic_path, atomic_write_text, capped_lines, output_dir, read_json_object

CHUNK = 1000  # input lines per part: what an interruption can lose, and one translate_batch call
JOB_FILE = "job.json"
PART = re.compile(r"part-(\d{5,})\.([0-9a-f]{16})\.txt")
OURS = re.compile(r"\.?(job\.json|part-\d{5,}\.[0-9a-f]{16}\.txt)(\.[0-9a-f]{8}\.tmp)?")  # + atomic_path's

# render(lines, first, progress) -> the output text of input lines first + 1 .. first + len(lines)
Render = Callable[[list[str], int, Callable[[int], None]], str]


def parts_dir(out: Path) -> Path:
    """Where the parts of OUT's job are kept: OUT.parts beside OUT."""
    return out.with_name(out.name + ".parts")


def scan_input(path: Path) -> dict:
    """The input's line count and SHA-256, every line checked (length, UTF-8) before any work."""
    digest, count = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for count, raw in enumerate(capped_lines(f, str(path)), start=1):
            digest.update(raw)
            _decode(raw, path, count)
    return {"sha256": digest.hexdigest(), "lines": count}


def file_record(path: str | Path) -> dict:
    """A file that the output depends on (a prefix or constraints file): its SHA-256."""
    return {"sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest()}


def model_record(model_dir: str | Path) -> dict:
    """A model directory: its path and each top-level file's size and modification time, so that
    weights written again (`aiayn average`) make another job; subdirectories (eval/) do not count."""
    path = Path(model_dir).resolve()
    files = (
        sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        if path.is_dir()
        else []
    )
    return {"path": str(path), "files": {p.name: [p.stat().st_size, p.stat().st_mtime_ns] for p in files}}


def _decode(raw: bytes, path: Path, number: int) -> str:
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise AiaynError(f"{path}:{number}: invalid UTF-8") from None


def _chunks(path: Path, size: int) -> Iterator[list[str]]:
    """The input's lines, decoded, `size` at a time (the last chunk shorter)."""
    chunk: list[str] = []
    with open(path, "rb") as f:
        for number, raw in enumerate(capped_lines(f, str(path)), start=1):
            chunk.append(_decode(raw, path, number))
            if len(chunk) == size:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


def _changed(old: dict, new: dict, where: str = "") -> list[str]:
    """The names of what differs between two job records ("options.beam", "input", ...)."""
    names = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict) and key in ("options", "models"):
            names += _changed(a, b, f"{where}{key}.")
        else:
            names.append(f"{where}{key}")
    return names


def check_parts(parts: Path, record: dict) -> None:
    """OUT.parts, if it is there, holds only this job's files (job.json, parts, temporaries), and its
    job.json, if any, records this job; else a one-line error naming what is foreign or what changed."""
    if parts.is_symlink():
        raise AiaynError(f"{parts} is a link; translate makes that directory itself: remove the link")
    if not parts.exists():
        return
    output_dir(parts, "-o")  # a directory, not a file
    foreign = next((p for p in sorted(parts.iterdir()) if not (p.is_file() and OURS.fullmatch(p.name))), None)
    if foreign is not None:
        raise AiaynError(f"{foreign} is not translate's, and {parts} is removed when done; move it")
    path = parts / JOB_FILE
    if path.is_file() and (old := read_json_object(path)) != record:
        changed = ", ".join(_changed(old, record)[:4])
        raise AiaynError(
            f"{parts} holds the parts of another job ({changed} changed); "
            "run it as before to finish it, or remove that directory to start this one"
        )


def finished_parts(parts: Path) -> dict[int, Path]:
    """Part index -> its file, for the parts whose bytes match their digest; the others (damaged)
    are removed with a warning, and atomic_path's temporaries that a kill left behind are removed."""
    found: dict[int, Path] = {}
    for path in sorted(parts.iterdir()):
        match = PART.fullmatch(path.name)
        if match is None:
            if path.name != JOB_FILE:
                path.unlink()  # a temporary of a killed run
            continue
        if hashlib.sha256(path.read_bytes()).hexdigest()[:16] != match[2] or int(match[1]) in found:
            print(f"warning: {path}: damaged; translating its lines again", file=sys.stderr)
            path.unlink()
            continue
        found[int(match[1])] = path
    return found


def _write_part(parts: Path, index: int, text: str) -> Path:
    data = text.encode("utf-8")
    path = parts / f"part-{index:05d}.{hashlib.sha256(data).hexdigest()[:16]}.txt"
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return path


def _join(out: Path, paths: list[Path]) -> None:
    """OUT: the parts in order, written aside and renamed."""
    with atomic_path(out) as tmp, open(tmp, "wb") as joined:
        for path in paths:
            with open(path, "rb") as part:
                shutil.copyfileobj(part, joined)


@dataclass(frozen=True)
class TranslationJob:
    """A file `source` translated into file `out` in parts of `chunk` lines (the module's docstring);
    `record` is what job.json says of it."""

    source: Path
    out: Path
    record: dict
    chunk: int

    @classmethod
    def open(cls, source: Path, out: Path, made_from: dict, chunk: int | None = None) -> TranslationJob:
        """The job of translating `source` into `out` as `made_from` says (models, options, other
        files), its input checked and parts of another job refused, before any model loads."""
        chunk = chunk or CHUNK
        record = {**made_from, "input": scan_input(source), "chunk": chunk, "aiayn": aiayn.__version__}
        check_parts(parts_dir(out), record)
        return cls(source, out, record, chunk)

    @property
    def lines(self) -> int:
        return self.record["input"]["lines"]

    def run(self, render: Render, progress: bool = False) -> int:
        """Translate the parts not finished yet, join them into OUT, remove OUT.parts; -> the lines.
        `progress`: a bar of the lines done, with the time left, on stderr."""
        parts, count = parts_dir(self.out), -(-self.lines // self.chunk)  # ceil(lines / chunk)
        output_dir(parts, "-o")
        try:
            if not (parts / JOB_FILE).is_file():
                atomic_write_text(parts / JOB_FILE, json.dumps(self.record, indent=2, sort_keys=True) + "\n")
            found = self._translate(render, finished_parts(parts), progress)
        except BaseException as err:
            self._stopped(parts, count, err)
            raise
        if sorted(found) != list(range(count)):
            raise AiaynError(f"{self.source} changed while it was translated; run the command again")
        _join(self.out, [found[i] for i in range(count)])
        shutil.rmtree(parts)
        return self.lines

    def _translate(self, render: Render, found: dict[int, Path], progress: bool) -> dict[int, Path]:
        """The parts not in `found`, translated and written in order; -> every part's file."""
        parts, chunk, total = parts_dir(self.out), self.chunk, self.lines
        done = sum(min(chunk, total - i * chunk) for i in found)
        with tqdm(total=total, initial=done, unit="line", file=sys.stderr, disable=not progress) as bar:
            for i, lines in enumerate(_chunks(self.source, chunk)):
                if i in found:
                    continue
                end = bar.n + len(lines)  # a line translated in parts is counted once
                text = render(lines, i * chunk, lambda n, end=end: bar.update(min(n, end - bar.n)))
                found[i] = _write_part(parts, i, text)
                bar.update(end - bar.n)
        return found

    @staticmethod
    def _stopped(parts: Path, count: int, err: BaseException) -> None:
        """After a failure: OUT.parts removed if no part is finished (nothing to go on from), else kept,
        and after a Ctrl-C a line saying how far the job got."""
        kept = sum(1 for p in parts.iterdir() if PART.fullmatch(p.name))
        if not kept:
            shutil.rmtree(parts)
        elif isinstance(err, KeyboardInterrupt):
            print(f"{parts}: {kept} of {count} parts done; the same command goes on", file=sys.stderr)
