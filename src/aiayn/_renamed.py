"""Modules that moved keep their old names: importing one warns (DeprecationWarning) and gives the
module at its new name, the same object (aliased in sys.modules, so it is imported and warns once).

`RENAMED` is the one table of moves, {old module name: new module name}; `install()` (which
`import aiayn` runs) puts its finder on sys.meta_path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

RENAMED = {
    "aiayn.model.linear": "aiayn.runtime.linear",
    "aiayn.model.quantize": "aiayn.runtime.quantize",
    "aiayn.model.native_step": "aiayn.runtime.native_step",
    "aiayn.decode.blockwise": "aiayn.runtime.blockwise",
    "aiayn.train.kernels": "aiayn.runtime.kernels",
    "aiayn.malloc": "aiayn.runtime.malloc",
    "aiayn.quickstart": "aiayn.apps.quickstart",
    "aiayn.doctor": "aiayn.apps.doctor",
    "aiayn.viz": "aiayn.apps.viz",
    "aiayn.variations": "aiayn.apps.variations",
    "aiayn.variations.rows": "aiayn.apps.variations.variants",
    "aiayn.variations.run": "aiayn.apps.variations.run",
    "aiayn.variations.table": "aiayn.apps.variations.table",
    "aiayn.cli.parse": "aiayn.cli.constituency",
    "aiayn.decode.row_decoder": "aiayn.decode.ragged",
    "aiayn.apps.variations.rows": "aiayn.apps.variations.variants",
    "aiayn.decode.common": "aiayn.decode.rules",
    "aiayn.decode.rows": "aiayn.decode.greedy",
}


class RenamedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old names of RENAMED and loads each as its new module."""

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec] = {}  # old name: the new module's own

    def find_spec(self, fullname: str, path=None, target=None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in RENAMED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = RENAMED[spec.name]
        warnings.warn(f"{spec.name} is deprecated: it is {new} now", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run (the new module ran already); the import system has just set the module's
        __spec__ to the old name's, so its own is put back."""
        module.__spec__ = self._specs.pop(module.__spec__.name)


def install() -> None:
    """Put the finder on sys.meta_path (once)."""
    if not any(isinstance(finder, RenamedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, RenamedFinder())  # first: an old package name's submodules too
