"""index.html of an export-onnx directory (aiayn.interop.onnx_page): the page, transformers.js and
ONNX Runtime Web copied beside it from a node_modules, or the reason they are missing."""

from __future__ import annotations

from aiayn.interop.onnx_page import RUNTIME_FILES, write_page


def test_the_page_and_its_runtime_are_written_from_node_modules(tmp_path, monkeypatch):
    modules = tmp_path / "node_modules"
    for name, source in RUNTIME_FILES.items():
        (modules / source).parent.mkdir(parents=True, exist_ok=True)
        (modules / source).write_text(f"contents of {name}")
    monkeypatch.setenv("AIAYN_NODE_MODULES", str(modules))
    out = tmp_path / "out"
    out.mkdir()
    assert write_page(out) is None
    page = (out / "index.html").read_text()
    assert "./transformers/transformers.min.js" in page and "env.allowRemoteModels = false" in page
    assert sorted(p.name for p in (out / "transformers").iterdir()) == sorted(RUNTIME_FILES)
    for name in RUNTIME_FILES:
        assert (out / "transformers" / name).read_text() == f"contents of {name}"


def test_a_missing_runtime_is_named_and_the_page_still_written(tmp_path, monkeypatch):
    monkeypatch.setenv("AIAYN_NODE_MODULES", str(tmp_path / "none"))
    why = write_page(tmp_path)
    first = next(iter(RUNTIME_FILES.values()))
    assert why.startswith(f"{tmp_path / 'none' / first} is missing: index.html needs transformers.js")
    assert "npm ci --ignore-scripts" in why and "\n" not in why
    assert (tmp_path / "index.html").is_file() and not (tmp_path / "transformers").exists()
