# Switchboard: `make run` starts everything, `make test` runs the tests.
# Both create .venv from the lock file (uv.lock, hash-checked) on first use.

VENV := .venv
PY ?= python3
STAMP := $(VENV)/.installed
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(VENV)

.PHONY: run test lint format install clean-data

$(STAMP): pyproject.toml uv.lock infra/requirements-bootstrap.txt
	@test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	@# uv comes from the hash-pinned bootstrap file once; afterwards uv.lock manages it (it is a dev dependency).
	test -x $(VENV)/bin/uv || $(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r infra/requirements-bootstrap.txt
	$(VENV)/bin/uv sync --frozen --python $(VENV)/bin/python
	@touch $(STAMP)

install: $(STAMP) ## create .venv from uv.lock

run: $(STAMP) ## start every service (embedded Postgres+Redis unless DATABASE_URL/REDIS_URL are set)
	$(VENV)/bin/switchboard run

test: $(STAMP) ## run the test suite against embedded (or DATABASE_URL/REDIS_URL) servers
	$(VENV)/bin/pytest $(PYTEST_ARGS)

lint: $(STAMP) ## ruff lint + format check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean-data: ## delete DATA_DIR (./.switchboard): embedded databases, generated secrets
	rm -rf ./.switchboard
