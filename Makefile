# Switchboard: `make run` starts everything, `make test` runs the tests.
# Both create .venv from the lock file (uv.lock, hash-checked) on first use:
#   make run   installs the runtime dependencies only (no test or lint tools);
#   make test  (and lint, audit, install) also installs the `dev` group.
# docs/contributing.md lists the dependency groups.

VENV := .venv
PY ?= python3
UV := $(VENV)/bin/uv
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
DOCS_STAMP := $(VENV)/.installed-docs
LOCK_INPUTS := pyproject.toml uv.lock infra/requirements-bootstrap.txt
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(VENV)
# Installed packages get their .pyc files at install time. Where PYTHONDONTWRITEBYTECODE is set (many
# container images and CI machines) Python never writes them itself, so each of `switchboard run`'s nine
# processes compiled LiteLLM, SQLAlchemy, FastAPI... from source on every start: 64 s instead of 31 s
# warm.
export UV_COMPILE_BYTECODE := 1
COMPILED_STAMP := $(VENV)/.compiled

.PHONY: run test lint typecheck format audit install clean-data i18n iac docs

# A .venv made with a Python older than pyproject's requires-python (3.11), or whose interpreter is gone,
# is removed here and made again below with $(PY) (uv sync would otherwise refuse it or reuse it broken).
# "absent" (a fresh clone: nothing to remove), "yes" (usable) or empty (too old or broken).
VENV_OK := $(shell if test ! -e $(VENV); then echo absent; elif $(VENV)/bin/python -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' >/dev/null 2>&1; then echo yes; fi)
ifeq ($(VENV_OK),)
$(info $(VENV) was made with a Python older than 3.11 (or its interpreter is gone): recreating it with $(PY))
$(shell rm -rf $(VENV))
endif

# uv comes from the hash-pinned bootstrap file once; afterwards uv.lock manages it (a dev dependency).
$(UV): infra/requirements-bootstrap.txt
	@test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	test -x $(UV) || $(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r infra/requirements-bootstrap.txt
	@touch $(UV)

# Runtime only. --inexact: keeps what is already there (uv itself, the dev tools of an earlier
# `make test`) instead of removing it; everything the lock names is installed at its locked version.
$(RUN_STAMP): $(LOCK_INPUTS) $(UV)
	$(UV) sync --frozen --no-dev --inexact --python $(VENV)/bin/python
	@touch $(RUN_STAMP)

# Runtime + dev, exactly as locked (removes anything else, e.g. the `load` group).
$(DEV_STAMP): $(LOCK_INPUTS) $(UV)
	$(UV) sync --frozen --python $(VENV)/bin/python
	@touch $(DEV_STAMP) $(RUN_STAMP)
	@rm -f $(DOCS_STAMP)

# Runtime + dev + the `docs` group (mkdocs-material). --inexact: leaves everything else in place; the
# next exact sync of `make test` removes the docs tools again (and this stamp with them).
$(DOCS_STAMP): $(LOCK_INPUTS) $(UV) $(DEV_STAMP)
	$(UV) sync --frozen --inexact --group docs --python $(VENV)/bin/python
	@touch $(DOCS_STAMP)

install: $(DEV_STAMP) ## create .venv from uv.lock with the dev tools (what `make test` uses)

# A .venv installed before UV_COMPILE_BYTECODE (or by a plain `uv sync`) is compiled once here. A few
# packages ship .py files that are not Python 3 (test data, templates): those just get no .pyc.
$(COMPILED_STAMP): $(RUN_STAMP)
	$(VENV)/bin/python -m compileall -qq -j 0 $$($(VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') || true
	@touch $(COMPILED_STAMP)

# Our own code is an editable install (no .pyc from uv): compileall rewrites only the files changed
# since the last run (a tenth of a second when none did).
run: $(RUN_STAMP) $(COMPILED_STAMP) ## start every service (embedded Postgres+Redis unless DATABASE_URL/REDIS_URL are set)
	@$(VENV)/bin/python -m compileall -q libs services
	$(VENV)/bin/switchboard run

test: $(DEV_STAMP) ## run the test suite against embedded (or DATABASE_URL/REDIS_URL) servers
	$(VENV)/bin/pytest $(PYTEST_ARGS)

lint: $(DEV_STAMP) ## ruff lint + format check, import layers (import-linter, pyproject [tool.importlinter])
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

# mypy, strict, on the packages listed in pyproject's [tool.mypy] (the rest is not checked yet).
typecheck: $(DEV_STAMP) ## type check (mypy --strict on the packages pyproject [tool.mypy] lists)
	$(VENV)/bin/mypy

audit: $(DEV_STAMP) ## dependencies: declared/used (deptry), advisories (pip-audit), *.pth files, licences
	$(VENV)/bin/python infra/audit.py

# The documentation site into site/: strict (a broken link, anchor or nav entry fails), the
# configuration and CLI references generated from the code (docs/gen/), then a check that no page
# loads anything from another host. (NO_MKDOCS_2_WARNING: material's end-of-life notice, May 2027;
# its successor Zensical builds the same mkdocs.yml.)
docs: $(DOCS_STAMP) ## build the documentation site into site/ (mkdocs-material, strict, offline)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --clean --site-dir site
	$(VENV)/bin/python docs/gen/check_site.py site

format: $(DEV_STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Catalogs: re-extract messages.pot from code and templates, then merge it into every language's .po
# (edit the new Spanish msgstr and remove `#, fuzzy`). The .po files are compiled in memory at first
# use (switchboard.i18n), so there is no .mo to build or commit.
LOCALE_DIR := libs/switchboard/i18n/locale
i18n: $(DEV_STAMP) ## re-extract the gettext catalogs (Babel) and merge them into en/es .po files
	$(VENV)/bin/pybabel extract -F babel.cfg -k N_ --no-location --sort-output --omit-header -o $(LOCALE_DIR)/messages.pot libs/switchboard
	$(VENV)/bin/pybabel update -i $(LOCALE_DIR)/messages.pot -d $(LOCALE_DIR) -D messages --ignore-obsolete --no-wrap

iac: ## checkov over infra/terraform and infra/Dockerfile (own venv .venv-iac: its pins conflict with uv.lock)
	infra/iac/check.sh

# DATA_DIR from the environment, else from .env (as `switchboard run` reads it), else ./.switchboard.
clean-data: ## delete DATA_DIR (default ./.switchboard): embedded databases, generated secrets
	@dir="$${DATA_DIR:-$$(sed -n 's/^DATA_DIR=//p' .env 2>/dev/null | tail -n 1)}"; dir="$${dir:-./.switchboard}"; \
	case "$$dir" in /|.|..|./|~) echo "refusing to delete DATA_DIR=$$dir" >&2; exit 2;; esac; \
	echo "deleting DATA_DIR $$dir"; rm -rf -- "$$dir"
