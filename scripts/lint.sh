#!/usr/bin/env bash
# ruff over the product packages, tests/, bench/ and scripts/, and mypy over the product packages, both at zero
# findings (run by scripts/test.sh before the tests).
# The installed package `tenure.<layer>` lives in the top-level folder <layer>/ (pyproject's package-dir);
# mypy cannot follow that mapping, so it checks a view of the package made of symlinks in .cache/typecheck/.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
ruff_status=0
.venv/bin/ruff check --output-format concise || ruff_status=$?
view=.cache/typecheck/tenure
rm -rf .cache/typecheck
mkdir -p "$view"
for entry in tenure/*; do
  [ "$(basename "$entry")" = __pycache__ ] || ln -s "$REPO/$entry" "$view/"
done
for layer in protocol storage broker coordinator audit catchup security; do
  ln -s "$REPO/$layer" "$view/$layer"
done
MYPYPATH=.cache/typecheck .venv/bin/mypy -p tenure
exit "$ruff_status"
