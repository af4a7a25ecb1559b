#!/usr/bin/env bash
# Create .venv if needed, install streamkm with its dev extra, run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev]"
exec .venv/bin/python -m pytest -q "$@"
