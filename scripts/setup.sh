#!/usr/bin/env bash
# Creates .venv/ in the repo root and installs tenure into it (with the test extras when asked).
#   scripts/setup.sh          -> the server only
#   scripts/setup.sh audit    -> plus the audit extra (PySpark; Java 17 must be on the machine)
#   scripts/setup.sh test     -> plus the test clients: pip extras (test, audit: PySpark), kcat (Debian), the Java jars
# It does only what is not done yet: pip runs when .venv/ has no install of this pyproject.toml for this mode
# (a stamp in .venv/ records it; the code itself is installed editable, so an edit needs no reinstall), apt-get
# when kcat or chromium is missing, the jar download when the jars are missing. pip's own output is kept in
# .venv/setup.log and printed only when pip fails.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PY="${PYTHON:-python3}"
MODE="${1:-server}"
case "$MODE" in      # a mode's install holds the smaller modes' (test has the audit extra)
  server) EXTRAS=""; LEVEL=0 ;;
  audit) EXTRAS="[audit]"; LEVEL=1 ;;
  test) EXTRAS="[test,audit]"; LEVEL=2 ;;
  *) echo "setup: unknown mode '$MODE' (use: scripts/setup.sh [audit|test])" >&2; exit 2 ;;
esac
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# what an install depends on: the project's metadata and the interpreter; the stamp holds it and the mode's level
WANT="$(cat pyproject.toml <(.venv/bin/python -VV) | .venv/bin/python -c \
  'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')"
STAMP=.venv/.tenure-setup
HAVE=""; HAVE_LEVEL=-1
if [ -f "$STAMP" ]; then read -r HAVE HAVE_LEVEL <"$STAMP" || true; fi
if [ "$HAVE" != "$WANT" ] || [ "$HAVE_LEVEL" -lt "$LEVEL" ] || [ ! -x .venv/bin/tenure ]; then
  echo "setup: installing tenure$EXTRAS into .venv/ (pip's output goes to .venv/setup.log)" >&2
  if ! { .venv/bin/python -m pip install --upgrade pip && .venv/bin/python -m pip install -e ".$EXTRAS"; } \
      >.venv/setup.log 2>&1; then
    tail -n 40 .venv/setup.log >&2
    echo "setup: pip failed (the whole output is in .venv/setup.log)" >&2
    exit 1
  fi
  [ "$HAVE" = "$WANT" ] && [ "$HAVE_LEVEL" -gt "$LEVEL" ] && LEVEL="$HAVE_LEVEL"
  echo "$WANT $LEVEL" >"$STAMP"
fi
if [ "$MODE" = "audit" ]; then
  command -v java >/dev/null 2>&1 || echo "setup: the audit (Spark) needs Java 17+ on the PATH" >&2
elif [ "$MODE" = "test" ]; then
  MISSING=""
  command -v kcat >/dev/null 2>&1 || MISSING="$MISSING kcat"
  command -v chromium >/dev/null 2>&1 || MISSING="$MISSING chromium"   # the audit report is rendered in it
  if [ -n "$MISSING" ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "setup: installing$MISSING (apt-get)" >&2
    $SUDO apt-get update -q >/dev/null
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -q $MISSING >/dev/null
  fi
  for tool in java javac; do
    command -v "$tool" >/dev/null 2>&1 || { echo "setup: $tool (JDK 17+) is required for the Java client tests" >&2; exit 1; }
  done
  PYTHON="$REPO/.venv/bin/python" scripts/fetch-jars.sh
fi
