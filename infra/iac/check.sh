#!/usr/bin/env bash
# `make iac`: checkov (static analysis, offline) over infra/terraform and infra/Dockerfile.
# checkov pins packaging<24, which the project's lock cannot take next to LiteLLM, so it lives in its
# own virtual environment (.venv-iac) from its own hash-pinned requirements (infra/iac/requirements.txt;
# regenerate: uv pip compile --python-version 3.11 --generate-hashes infra/iac/requirements.in -o
# infra/iac/requirements.txt). `make test` does not need it: the HCL structure tests use python-hcl2
# from the dev group (tests/test_infra.py). Skips carry their reason inline (`checkov:skip=`).
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.venv-iac
stamp="$venv/.installed"
if [ ! -f "$stamp" ] || [ infra/iac/requirements.txt -nt "$stamp" ]; then
  "${PY:-python3}" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps \
    -r infra/iac/requirements.txt
  touch "$stamp"
fi
export BC_SKIP_MAPPING=TRUE  # no download of Prisma Cloud guideline mappings (offline)
"$venv/bin/checkov" --quiet --compact --skip-download --framework terraform -d infra/terraform
"$venv/bin/checkov" --quiet --compact --skip-download --framework dockerfile -f infra/Dockerfile
