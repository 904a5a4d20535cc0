"""The packages import one way (docs/layout.md): the lower ones never import the upper ones, and no
two packages import each other, however indirectly (imports inside functions count)."""

import ast
import re
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "aiayn"
NEVER = {  # package: the packages it must not import
    "model": ("aiayn.runtime", "aiayn.train", "aiayn.decode", "aiayn.serve", "aiayn.apps", "aiayn.cli"),
    "runtime": ("aiayn.train", "aiayn.decode", "aiayn.serve", "aiayn.apps", "aiayn.cli"),
    "data": ("aiayn.train", "aiayn.decode", "aiayn.serve", "aiayn.apps", "aiayn.cli"),
    "decode": (
        "aiayn.train",
        "aiayn.evaluate",
        "aiayn.serve",
        "aiayn.parse",
        "aiayn.interop",
        "aiayn.vision",
        "aiayn.apps",
        "aiayn.cli",
    ),  # fmt: skip
}


def imported(path: Path, top_level: bool = False) -> set[str]:
    """The absolute imports of a module: anywhere in it, or only its own top-level statements."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body if top_level else ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", sorted(NEVER))
def test_a_lower_package_never_imports_an_upper_one(package):
    wrong = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in sorted((PACKAGE / package).rglob("*.py"))
        for name in sorted(imported(path))
        if name.startswith(NEVER[package])
    ]
    assert not wrong, wrong


def test_no_two_packages_import_each_other():
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    graph: dict[str, set[str]] = {name: set() for name in packages}
    for name in packages:
        for path in (PACKAGE / name).rglob("*.py"):
            graph[name] |= {m.split(".")[1] for m in imported(path) if m.startswith("aiayn.")} & packages
        graph[name].discard(name)
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as e:
        pytest.fail(f"packages import each other: {' -> '.join(e.args[1])}")
    assert {"model", "runtime", "decode"} <= set(order) and order.index("runtime") < order.index("decode")


def test_the_modules_of_decode_import_one_way():
    """Within the search, module by module (their top-level imports; a deprecated name that resolves on
    first use imports lazily): the entry above the strategies above the loops above the stepper."""
    modules = {p.stem for p in (PACKAGE / "decode").glob("*.py")} - {"__init__"}
    graph = {
        name: {m.split(".")[2] for m in imported(PACKAGE / "decode" / f"{name}.py", top_level=True)
               if m.startswith("aiayn.decode.")} & modules
        for name in modules
    }  # fmt: skip
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as e:
        pytest.fail(f"decode's modules import each other: {' -> '.join(e.args[1])}")
    assert "strategies" in graph["generate"] and {"beam", "greedy"} <= graph["strategies"]
    assert "stepper" in graph["beam"] & graph["greedy"] and "rules" in graph["stepper"]


def layout_row(layout: str, name: str) -> str:
    """The row of docs/layout.md's table whose first cell names `name` (a package as `model/`)."""
    rows = [line for line in layout.splitlines() if line.startswith("| `")]
    found = [row for row in rows if f"`{name}`" in row.split("|")[1]]
    assert found, f"docs/layout.md has no row for {name}"
    return found[0]


def parts(folder: Path) -> set[str]:
    """What a package holds, at any depth: its modules, its subpackages and its C++ sources."""
    found = set()
    for path in folder.rglob("*"):
        if "__pycache__" in path.parts or path.name.startswith("__"):
            continue
        if path.suffix == ".py":
            found.add(path.stem)
        elif path.suffix in (".h", ".cpp") or (path / "__init__.py").is_file():
            found.add(path.name)
    return found


def packages() -> list[str]:
    return sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())


@pytest.mark.parametrize("package", [*packages(), "the foundations"])
def test_the_layout_names_every_module_of_every_package(package):
    """docs/layout.md describes what the code is: each package's row names every module, subpackage
    and C++ source in it; the foundations' row every module of aiayn itself."""
    layout = (PACKAGE.parents[1] / "docs" / "layout.md").read_text(encoding="utf-8")
    if package == "the foundations":
        row, modules = (
            layout_row(layout, "errors"),
            {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"},
        )
    else:
        row, modules = layout_row(layout, f"{package}/"), parts(PACKAGE / package)
    named = set(re.findall(r"`([A-Za-z_]+(?:\.h|\.cpp)?)/?`", row))
    assert not modules - named, f"docs/layout.md's row of {package} does not name {sorted(modules - named)}"


TESTS = PACKAGE.parents[1] / "tests"
NO_MIRROR = {  # module: why it has no tests/<package path>/test_<module>.py
    "_renamed.py": "deprecation shim of moved modules: tests/test_renamed.py",
}


def modules_with_logic() -> list[str]:
    """The package's modules that define a function or class (not __init__ or __main__), relative
    to src/aiayn."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in ("__init__.py", "__main__.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defines = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        if any(isinstance(node, defines) for node in tree.body):
            found.append(path.relative_to(PACKAGE).as_posix())
    return found


def mirror(module: str) -> Path:
    """tests/<package path>/test_<module>.py of a module relative to src/aiayn."""
    path = Path(module)
    return TESTS / path.parent / f"test_{path.name}"


def test_every_module_with_logic_has_its_mirror_test_module():
    """The tests mirror the package (docs/layout.md): src/aiayn/decode/beam.py is tested in
    tests/decode/test_beam.py; only the modules of NO_MIRROR, for the reason given, have none."""
    missing = [m for m in modules_with_logic() if not mirror(m).is_file()]
    unlisted = sorted(set(missing) - set(NO_MIRROR))
    assert not unlisted, f"no tests/.../test_<module>.py for {unlisted} (src/aiayn/{unlisted[0]})"
    stale = sorted(set(NO_MIRROR) - set(modules_with_logic()))
    assert not stale, f"NO_MIRROR names {stale}, which are gone or have no logic"
