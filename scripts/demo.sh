#!/usr/bin/env bash
# Create .venv if needed, install streamkm, run the embedded demo: a drifting non-linear
# stream written to ./.streamkm/demo/stream.jsonl and clustered live (metrics on
# http://127.0.0.1:9108/metrics; a busy port is an error, --metrics-port 0 takes any free
# one). Usage: scripts/demo.sh [--duration S] [--rate R] [--metrics-port P] ...
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
exec .venv/bin/streamkm demo "$@"
