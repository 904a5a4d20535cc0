"""The packages import one way (docs/layout.md): the lower ones never import the upper ones."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "aiayn"
NEVER = {  # package: the packages it must not import
    "model": ("aiayn.runtime", "aiayn.train", "aiayn.decode", "aiayn.serve", "aiayn.apps", "aiayn.cli"),
    "runtime": ("aiayn.train", "aiayn.decode", "aiayn.serve", "aiayn.apps", "aiayn.cli"),
    "data": ("aiayn.train", "aiayn.decode", "aiayn.serve", "aiayn.apps", "aiayn.cli"),
}


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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
