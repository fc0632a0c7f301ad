#!/usr/bin/env bash
# Creates .venv/ in the repo root and installs tenure into it (with the test extras when asked).
#   scripts/setup.sh          -> the server only
#   scripts/setup.sh audit    -> plus the audit extra (PySpark; Java 17 must be on the machine)
#   scripts/setup.sh test     -> plus the test clients: pip extras (test, audit: PySpark), kcat (Debian), the Java jars
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
if [ "${1:-}" = "audit" ]; then
  .venv/bin/python -m pip install -q -e '.[audit]'
  command -v java >/dev/null 2>&1 || echo "setup: the audit (Spark) needs Java 17+ on the PATH" >&2
elif [ "${1:-}" = "test" ]; then
  .venv/bin/python -m pip install -q -e '.[test,audit]'
  if ! command -v kcat >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -q >/dev/null
    $SUDO apt-get install -y -q kcat >/dev/null
  fi
  if ! command -v chromium >/dev/null 2>&1; then   # the audit report is rendered in headless Chromium
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -q >/dev/null
    $SUDO apt-get install -y -q chromium >/dev/null
  fi
  for tool in java javac; do
    command -v "$tool" >/dev/null 2>&1 || { echo "setup: $tool (JDK 17+) is required for the Java client tests" >&2; exit 1; }
  done
  PYTHON="$REPO/.venv/bin/python" scripts/fetch-jars.sh
else
  .venv/bin/python -m pip install -q -e .
fi
