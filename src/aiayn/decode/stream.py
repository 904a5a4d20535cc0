"""Line-by-line translation of a stream (what `aiayn translate` does): one line in, one line out.

Lines are read on a background thread; the translator takes whatever has already arrived (up to
`max_lines`), so a file is translated in large length-sorted batches while an interactive user
gets each answer as soon as the line is typed. Output order is input order; an empty line gives an
empty line. With n_best > 1 each input line gives up to n_best rows of tab-separated values:

    LINE  RANK  SCORE  LOG_PROB  TRANSLATION

LINE is the 1-based input line number, RANK 1 is the best hypothesis, SCORE is log P / lp (the
ranking score of section 6.1) and LOG_PROB is log P(translation + EOS | source). Tabs and newlines
inside a translation are written as spaces. A line of more than `safe_io.MAX_LINE_BYTES` (a binary or
a CR-only file has no "\\n") stops the stream with an error naming it, instead of being read whole.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable, Iterator
from typing import IO, Any, BinaryIO

from aiayn.config import DecodeConfig
from aiayn.decode.align import pharaoh
from aiayn.decode.translator import Translation, Translator
from aiayn.errors import AiaynError
from aiayn.safe_io import capped_lines, input_file

_END = object()


def _reader(lines: BinaryIO, name: str, out: queue.Queue) -> None:
    """Decode each line (UTF-8) onto `out`; then _END, or an AiaynError naming the bad line."""
    try:
        for number, raw in enumerate(capped_lines(lines, name), start=1):
            try:
                out.put(raw.decode("utf-8").rstrip("\r\n"))
            except UnicodeDecodeError:
                out.put(AiaynError(f"{name}:{number}: invalid UTF-8"))
                return
        out.put(_END)
    except AiaynError as err:  # an over-long line
        out.put(err)
    except OSError as err:
        out.put(AiaynError(f"{name}: cannot read: {err}"))


def read_chunks(lines: BinaryIO, name: str = "<stdin>", max_lines: int = 1000) -> Iterator[list[str]]:
    """Chunks of decoded lines: wait for one line, then take what is already there (<= max_lines)."""
    pending: queue.Queue = queue.Queue(maxsize=2 * max_lines)
    threading.Thread(target=_reader, args=(lines, name, pending), daemon=True).start()
    while True:
        chunk: list[str] = []
        item = pending.get()
        while True:
            if isinstance(item, AiaynError):
                if chunk:
                    yield chunk
                raise item
            if item is _END:
                if chunk:
                    yield chunk
                return
            chunk.append(item)
            if len(chunk) >= max_lines:
                break
            try:
                item = pending.get_nowait()
            except queue.Empty:
                break
        yield chunk


def _warn_split(
    warn: IO[str], name: str, first: int, index: int, length: int, limit: int, parts: int
) -> None:
    line = f"{name}:{first + index + 1}"
    print(
        f"warning: {line}: {length} tokens, over the limit of {limit}: translated in {parts} parts",
        file=warn,
        flush=True,
    )


def _clean(text: str) -> str:
    return text.replace("\t", " ").replace("\n", " ").replace("\r", " ")


def format_nbest(first_line: int, results: list[list[Translation]]) -> str:
    """TSV rows LINE RANK SCORE LOG_PROB TRANSLATION for `results` of lines first_line, first_line + 1, ..."""
    rows = []
    for offset, hyps in enumerate(results):
        for rank, t in enumerate(hyps, start=1):
            rows.append(f"{first_line + offset}\t{rank}\t{t.score:.4f}\t{t.log_prob:.4f}\t{_line(t)}\n")
    return "".join(rows)


def read_lines(path: str) -> list[str]:
    """A whole UTF-8 text file as lines (a prefix or constraints file); one-line errors."""
    with open(input_file(path, stream=True), "rb") as f:
        return [line for chunk in read_chunks(f, path) for line in chunk]


def read_document(lines: BinaryIO, name: str) -> str:
    """The whole input as one text (`aiayn translate --document`)."""
    return "".join(line + "\n" for chunk in read_chunks(lines, name) for line in chunk)


def _line(t: Translation) -> str:
    """One output line: the translation, and ` ||| i-j ...` when it carries an alignment."""
    if t.alignment is None:
        return _clean(t.text)
    return f"{_clean(t.text)} ||| {pharaoh(t.alignment)}"


def _per_line(values: list | None, start: int, count: int, what: str, name: str) -> list | None:
    """Lines start .. start + count of a prefix or constraints file, which must cover the input."""
    if values is None:
        return None
    if len(values) < start + count:
        raise AiaynError(f"{what} has {len(values)} lines; {name} has more (line {len(values) + 1} on)")
    return values[start : start + count]


def translate_lines(
    translator: Translator,
    chunk: list[str],
    first: int,
    options: DecodeConfig,
    warn: IO[str],
    name: str = "<stdin>",
    progress: Callable[[int], None] | None = None,
    **controls: Any,
) -> str:
    """The output text of `chunk`, input lines first + 1 .. first + len(chunk) of `name`.

    `controls` are `Translator.translate_batch`'s keywords, where `prefix` and `constraints` hold one
    entry per line of the whole input. Each line's samples are seeded by its line number, so the
    output does not depend on how the input is cut into chunks. `progress(n)` hears of each batch.
    """
    on_split = functools.partial(_warn_split, warn, name, first)
    per_line = {
        "prefix": _per_line(controls.pop("prefix", None), first, len(chunk), "the prefix file", name),
        "constraints": _per_line(
            controls.pop("constraints", None), first, len(chunk), "the constraints file", name
        ),
    }
    keys = list(range(first, first + len(chunk)))
    results = translator.translate_batch(
        chunk, options, on_split=on_split, progress=progress, keys=keys, **controls, **per_line
    )
    if options.n_best > 1:
        return format_nbest(first + 1, results)
    return "".join(_line(hyps[0]) + "\n" for hyps in results)


def translate_stream(
    translator: Translator,
    lines: BinaryIO,
    out: IO[str],
    warn: IO[str],
    name: str = "<stdin>",
    max_lines: int = 1000,
    options: DecodeConfig | None = None,
    progress: Callable[[int], None] | None = None,
    **controls: Any,
) -> int:
    """Translate every line of `lines` (bytes) to `out`, flushing after each chunk; returns the count.

    `options`: the search (default: the paper's); `controls` are `Translator.translate_batch`'s other
    keywords (sample, align, prefix, constraints, ...), where `prefix` and `constraints` hold one
    entry per input line. Over-long lines are translated sentence by sentence with a warning on
    `warn` that names the line. `progress(n)` hears of each chunk of n lines written.
    """
    done = 0
    options = options or DecodeConfig()
    for chunk in read_chunks(lines, name, max_lines):
        out.write(translate_lines(translator, chunk, done, options, warn, name, **controls))
        out.flush()
        done += len(chunk)
        if progress is not None:
            progress(len(chunk))
    for key, what in (("prefix", "the prefix file"), ("constraints", "the constraints file")):
        values = controls.get(key)
        if values is not None and len(values) > done:
            raise AiaynError(f"{what} has {len(values)} lines; {name} has {done}: they must match")
    return done
