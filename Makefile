# aiayn: `make demo` runs the main job, `make test` the tests (and builds the docs). Both install what they need.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
DEB_PACKAGES := sword-text-sparv sword-text-kjv sword-text-web \
                libreoffice-help-en-us libreoffice-help-de libreoffice-help-es libreoffice-help-fr \
                dataset-fashion-mnist \
                chromium chromium-driver libtcmalloc-minimal4 g++ gettext
PIP_FLAGS := -q -c constraints.txt
# pytest-xdist: one worker per core; a test file stays on one worker (its module fixtures built once)
XDIST := -n auto --dist loadfile
MKDOCS := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict  # the theme's notice about its successor off

.PHONY: demo test test-fast bench lint docs docs-venv deb venv web clean

demo: venv
	$(VENV)/bin/aiayn quickstart

test: venv docs-venv web
	$(PY) -m pytest $(XDIST)
	$(MKDOCS) --quiet

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link or a missing API
# object fails. It builds offline: the theme's fonts are the system's, the API from the sources.
docs: docs-venv
	$(MKDOCS)

# The edit-test loop: everything but the end-to-end tests marked slow (`make test` runs those too).
test-fast: venv
	$(PY) -m pytest $(XDIST) -m "not slow"

bench: venv
	$(PIP) install $(PIP_FLAGS) -e '.[bench]'
	$(PY) benchmarks/run_all.py

lint: venv
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

# Debian packages: the built-in corpora, Fashion-MNIST, Chromium for the browser test, and g++ for
# the native decoding step (aiayn.runtime.native_build builds it on first use), gettext (msgfmt and
# msgunfmt: the PO file tests check their output with it).
# Skipped when every package is already installed.
deb:
	@if ! dpkg -s $(DEB_PACKAGES) >/dev/null 2>&1; then \
	  echo "installing Debian packages: $(DEB_PACKAGES)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEB_PACKAGES) >/dev/null; \
	fi

# The virtual environment: torch 2.13.0 first, then the package (editable) with its test extras,
# every install held to torch 2.13.0 by constraints.txt. Re-done only when pyproject.toml changes.
venv: deb $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install $(PIP_FLAGS) torch==2.13.0
	$(PIP) install $(PIP_FLAGS) -e '.[test]'
	touch $@

# The docs extra (MkDocs, Material, mkdocstrings), held by the same constraints file.
docs-venv: venv $(VENV)/.docs-installed

$(VENV)/.docs-installed: $(VENV)/.installed
	$(PIP) install $(PIP_FLAGS) -e '.[docs]'
	touch $@

# transformers.js for the page `aiayn export-onnx` writes (web/package.json, pinned by its lock file),
# from the npm registry; Debian's nodejs and npm first where no npm is installed. --ignore-scripts:
# onnxruntime-node's install script would download more; the page uses only the browser files.
# Re-done only when the lock file changes.
web: web/node_modules/.installed

web/node_modules/.installed: web/package.json web/package-lock.json
	@command -v npm >/dev/null || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null; }
	cd web && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

clean:
	rm -rf $(VENV) site web/node_modules
