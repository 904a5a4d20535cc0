"""The reference covers what the code has: a page for every command of the parser, in the site's
navigation; the Python API pages document each object once and no private one; the README's
results table shows the figures of BENCHMARKS.md's newest table."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest
import yaml

from aiayn.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
DIRECTIVE = re.compile(r"^::: ([\w.]+)\n((?:    .*\n)*)", re.MULTILINE)


def nav_pages(node) -> list[str]:
    """Every page mkdocs.yml's nav lists."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [page for item in node for page in nav_pages(item)]
    return [page for value in node.values() for page in nav_pages(value)]


class _Loader(yaml.SafeLoader):
    """mkdocs.yml's own tags (none used in nav) read as plain values."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def test_every_command_has_a_page_in_the_navigation():
    commands = set(build_parser().get_default("subcommands"))
    pages = set(nav_pages(yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)["nav"]))
    missing = sorted(c for c in commands if not (DOCS / "cli" / f"{c}.md").is_file())
    assert not missing, f"no docs/cli page for {missing}"
    assert {f"cli/{c}.md" for c in commands} <= pages
    assert {p[4:-3] for p in pages if p.startswith("cli/") and p != "cli/index.md"} == commands


def _resolve(target: str):
    """The object a `::: target` names: a module, or an attribute of one."""
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise AssertionError(f"{target}: nothing to import")


def _documented(target: str, options: str) -> list[tuple[str, object]]:
    """The (name, object) pairs a directive documents at its top level: the object, and for a
    module its public classes and functions (its `__all__`, or those defined in it)."""
    obj = _resolve(target)
    found = [(target, obj)]
    if inspect.ismodule(obj) and "members: false" not in options:
        names = getattr(obj, "__all__", None)
        if names is None:
            names = [n for n, v in vars(obj).items() if getattr(v, "__module__", None) == obj.__name__]
        found += [(f"{target}.{n}", getattr(obj, n)) for n in names if not n.startswith("_")]
    return found


def test_the_api_pages_document_each_public_object_once():
    seen: dict[int, str] = {}
    for page in sorted((DOCS / "api").glob("*.md")):
        for match in DIRECTIVE.finditer(page.read_text()):
            target, options = match.groups()
            assert not any(part.startswith("_") for part in target.split(".")), f"{page.name}: {target}"
            for name, obj in _documented(target, options):
                if inspect.ismodule(obj) or not (inspect.isclass(obj) or inspect.isfunction(obj)):
                    continue
                assert id(obj) not in seen, f"{name} ({page.name}) is documented already as {seen[id(obj)]}"
                seen[id(obj)] = f"{name} ({page.name})"


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _table_after(text: str, heading: str) -> list[list[str]]:
    """The rows (cells) of the first table after the line `heading`, its header row left out."""
    lines = text[text.index(heading) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(_cells(line))
    return rows


def _figures(text: str) -> set[str]:
    """The numbers of a text: ratios, ranges, counts (commas dropped), each once."""
    return set(re.findall(r"\d[\d,]*(?:\.\d+)?", text.replace("**", ""))) - {""}


@pytest.fixture(scope="module")
def benchmarks_table() -> list[list[str]]:
    text = (ROOT / "BENCHMARKS.md").read_text()
    newest = re.search(r"^## .*$", text, re.MULTILINE).group(0)  # machines newest first
    return _table_after(text, newest)


def test_the_readme_shows_the_newest_benchmark_figures(benchmarks_table):
    readme = (ROOT / "README.md").read_text()
    rows = _table_after(readme, "## How good")
    assert [cells[0] for cells in rows] and all(len(cells) == 5 for cells in rows)
    wanted = {cells[0]: cells for cells in benchmarks_table}
    for measure, ours, peer, ratio, _ in rows:
        assert measure in wanted, f"README's {measure!r} is not a row of BENCHMARKS.md's newest table"
        bench = wanted[measure]
        assert _figures(ours) == _figures(bench[1]), measure
        assert _figures(ratio) == _figures(bench[3]), measure
        assert _figures(peer) <= _figures(bench[2]) | {"4.8.5"}, measure
    date = re.search(r"\d{4}-\d\d-\d\d", (ROOT / "BENCHMARKS.md").read_text().split("\n## ", 1)[1]).group(0)
    assert all(date in machine for *_, machine in rows)
