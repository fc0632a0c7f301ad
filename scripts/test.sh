#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs the whole test suite. Extra args go to pytest.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
scripts/setup.sh test
exec .venv/bin/python -m pytest "$@"
