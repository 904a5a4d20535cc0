"""Moved modules keep their old names (aiayn._renamed): the old name is the new module, and warns once."""

import importlib
import sys
import warnings

import pytest

from aiayn._renamed import RENAMED


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED.items()))
def test_an_old_name_is_the_new_module_and_warns_once(old, new, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=rf"^{old} is deprecated: it is {new} now$"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new) and sys.modules[old] is module
    assert module.__name__ == module.__spec__.name == new  # its own name and spec, not the old one's
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert importlib.import_module(old) is module  # once: no second warning
        exec(f"from {old.rpartition('.')[0]} import {old.rpartition('.')[2]} as again", {})


def test_a_name_used_by_the_readme_still_works_from_its_old_module():
    with pytest.warns(DeprecationWarning):
        sys.modules.pop("aiayn.model.linear", None)
        from aiayn.model.linear import PackedLinear, route_linears
    from aiayn.runtime import linear

    assert route_linears is linear.route_linears and PackedLinear is linear.PackedLinear


def test_a_renamed_class_is_found_by_its_old_name_with_a_warning():
    from aiayn.decode import ragged

    new = "aiayn.decode.ragged.RaggedDecoder"
    with pytest.warns(DeprecationWarning, match=f"RowDecoder is deprecated: it is {new}"):
        assert ragged.RowDecoder is ragged.RaggedDecoder
    with pytest.raises(AttributeError):
        _ = ragged.NoSuchClass


def test_a_name_that_never_existed_is_still_not_found():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("aiayn.model.no_such_module")


@pytest.mark.parametrize(
    ("module", "name", "new"),
    [
        ("aiayn.decode.stepper", "decode_batch", "aiayn.decode.generate"),
        ("aiayn.decode.stepper", "Controls", "aiayn.decode.generate"),
        ("aiayn.decode.stepper", "max_lengths", "aiayn.decode.generate"),
        ("aiayn.decode.search", "Hypothesis", "aiayn.decode.rules"),
        ("aiayn.decode.search", "SearchStopped", "aiayn.decode.rules"),
        ("aiayn.decode.search", "length_penalty", "aiayn.decode.rules"),
    ],
)
def test_a_name_that_moved_out_of_a_module_is_found_there_with_a_warning(module, name, new):
    with pytest.warns(
        DeprecationWarning, match=rf"^{module}\.{name} is deprecated: it is {new}\.{name} now$"
    ):
        found = getattr(importlib.import_module(module), name)
    assert found is getattr(importlib.import_module(new), name)


def test_the_old_entries_of_sampling_and_constraints_warn():
    from aiayn.decode import constrained, sampling

    with pytest.warns(DeprecationWarning, match=r"^aiayn\.decode\.sampling\.sample_search is deprecated"):
        assert callable(sampling.sample_search)
    with pytest.warns(DeprecationWarning, match=r"^aiayn\.decode\.constrained\.constrained_beam_search is"):
        assert callable(constrained.constrained_beam_search)
    with pytest.raises(AttributeError):
        _ = sampling.no_such_search
