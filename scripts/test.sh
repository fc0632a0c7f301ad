#!/usr/bin/env bash
# Sets everything up on a fresh machine, checks the product with ruff and mypy (scripts/lint.sh) and runs the
# whole test suite. Extra args go to pytest.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
scripts/setup.sh test
scripts/lint.sh                      # ruff and mypy over the product packages: zero findings, or no tests run
exec .venv/bin/python -m pytest "$@"
