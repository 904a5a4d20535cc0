"""The doctor tests' optional modules: one missing, one whose import raises (not an ImportError)."""

import importlib.abc
import importlib.machinery
import sys

import pytest

from aiayn.apps.doctor import probes


class _BrokenFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `aiayn_broken_module`, whose import raises a RuntimeError (not an ImportError)."""

    def find_spec(self, name, path=None, target=None):
        return importlib.machinery.ModuleSpec(name, self) if name == "aiayn_broken_module" else None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        raise RuntimeError("boom at import time")


@pytest.fixture
def broken_module(monkeypatch):
    monkeypatch.setattr(sys, "meta_path", [_BrokenFinder(), *sys.meta_path])
    names = ("sentencepiece", "aiayn_no_such_module", "aiayn_broken_module")
    monkeypatch.setattr(probes, "OPTIONAL", names)
