#!/usr/bin/env bash
# Smoke test of the compose environment, on host networking (docker-compose.hostnet.yml: 127.0.0.1 only):
# build the images, start the server and two static consumers, restart one consumer and check through the
# admin endpoint that the group's generation and that member's partitions did not change, run the audit
# profile, check report.html exists, and tear everything down (volumes and this run's images too).
# Each run has its own compose project name, image tags and free ports (TENURE_HOST_KAFKA_PORT and
# TENURE_HOST_ADMIN_PORT in the environment choose them), so runs side by side do not collide.
#
# Needs a Docker engine, the `docker compose` plugin (2.24+) and the base image python:3.11-slim already
# present locally (this script never pulls it; the build fetches Python packages from PyPI). Where any of
# these is missing it says so and exits 0. Every wait is bounded. Exit 1 on a failed check.
#
#   docker/smoke.sh            (from anywhere)
set -euo pipefail

skip() {
    echo "smoke.sh: SKIPPED, nothing was run: $*"
    exit 0
}

# Only shell builtins until docker is known to exist, so that this works (and skips) with any PATH.
command -v docker >/dev/null 2>&1 || skip "no docker command on PATH"

HERE="$(cd "${BASH_SOURCE[0]%/*}" && pwd)"
BASE_IMAGE="python:3.11-slim"
PROJECT="tenure-smoke-$$-$RANDOM"
GROUP="demo-static"
CONSUMERS=2

bounded() {    # bounded SECONDS CMD...: CMD, killed after SECONDS where timeout(1) exists
    local secs=$1
    shift
    if command -v timeout >/dev/null 2>&1; then
        timeout "$secs" "$@"
    else
        "$@"
    fi
}

bounded 30 docker info >/dev/null 2>&1 || skip "no Docker engine reachable (docker info failed)"
bounded 30 docker compose version >/dev/null 2>&1 || skip "the docker compose plugin is missing"
bounded 30 docker image inspect "$BASE_IMAGE" >/dev/null 2>&1 \
    || skip "the base image $BASE_IMAGE is not available locally (docker pull $BASE_IMAGE first; this script never pulls)"

in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port() {    # a port of 127.0.0.1 that nothing answers on, below Linux's ephemeral range (32768-)
    local port
    for _ in $(seq 1 200); do
        port=$((20000 + RANDOM % 12768))
        in_use "$port" || { echo "$port"; return 0; }
    done
    return 1
}

# the images under this run's own tags (removed on the way out; the builder's cache stays)
export TENURE_IMAGE="$PROJECT:server" TENURE_BASE_IMAGE="$PROJECT:base" TENURE_AUDIT_IMAGE="$PROJECT:audit"

COMPOSE=(docker compose -p "$PROJECT" -f "$HERE/docker-compose.yml" -f "$HERE/docker-compose.hostnet.yml"
         --profile audit)

cleanup() {
    echo "smoke.sh: tearing down"
    bounded 120 "${COMPOSE[@]}" down --volumes --remove-orphans --rmi all --timeout 15 >/dev/null 2>&1 || true
}
trap cleanup EXIT

fail() {
    echo "smoke.sh: FAIL: $*" >&2
    echo "---- logs" >&2
    bounded 60 "${COMPOSE[@]}" logs --no-color --tail 50 >&2 || true
    exit 1
}

# One line for the group, read from the admin endpoint from inside the server's container (it shares the
# host's network, so $ADMIN is the same address): "STATE GENERATION instance=member:partitions ...",
# or "none" while the group does not exist.
group_summary() {
    bounded 30 "${COMPOSE[@]}" exec -T tenure python -c '
import json, sys, urllib.request
try:
    g = json.load(urllib.request.urlopen("http://%s/groups/%s" % (sys.argv[1], sys.argv[2]), timeout=5))
except Exception:
    print("none")
    sys.exit(0)
members = sorted("%s=%s:%s" % (m["group_instance_id"], m["member_id"],
                                ",".join(str(p) for ps in (m["assignment"] or {}).values() for p in ps))
                 for m in g["members"])
print(g["state"], g["generation"], " ".join(members))
' "$ADMIN" "$GROUP" 2>/dev/null || echo "none"
}

# A settled group: Stable, $CONSUMERS members, each with partitions.
settled() {
    local state rest m n=0
    read -r state _ rest <<<"$1"
    [ "$state" = "Stable" ] || return 1
    for m in $rest; do
        case "$m" in *:) return 1 ;; esac
        n=$((n + 1))
    done
    [ "$n" -eq "$CONSUMERS" ]
}

member_of() {    # member_of SUMMARY INSTANCE -> "member_id:partitions"
    local m
    for m in $1; do
        case "$m" in "$2="*) echo "${m#*=}"; return 0 ;; esac
    done
    return 1
}

echo "smoke.sh: building the images"
bounded 1800 "${COMPOSE[@]}" build || fail "docker compose build"

# the ports are chosen now, after the build, so nothing else has had minutes to take them
TENURE_HOST_KAFKA_PORT="${TENURE_HOST_KAFKA_PORT:-$(free_port)}"
TENURE_HOST_ADMIN_PORT="${TENURE_HOST_ADMIN_PORT:-$(free_port)}"
[ "$TENURE_HOST_KAFKA_PORT" != "$TENURE_HOST_ADMIN_PORT" ] || TENURE_HOST_ADMIN_PORT="$(free_port)"
for port in "$TENURE_HOST_KAFKA_PORT" "$TENURE_HOST_ADMIN_PORT"; do
    if in_use "$port"; then
        echo "smoke.sh: FAIL: 127.0.0.1:$port is in use; choose other ports" >&2
        exit 1
    fi
done
export TENURE_HOST_KAFKA_PORT TENURE_HOST_ADMIN_PORT
ADMIN="127.0.0.1:$TENURE_HOST_ADMIN_PORT"
echo "smoke.sh: project $PROJECT: Kafka on 127.0.0.1:$TENURE_HOST_KAFKA_PORT, admin on $ADMIN"
echo "smoke.sh: starting tenure and $CONSUMERS consumers (host network)"
bounded 300 "${COMPOSE[@]}" up -d --scale consumer="$CONSUMERS" tenure consumer || fail "docker compose up"

health=""
for _ in $(seq 1 60); do
    health="$(docker inspect --format '{{.State.Health.Status}}' "$("${COMPOSE[@]}" ps -q tenure)" 2>/dev/null || true)"
    [ "$health" = "healthy" ] && break
    sleep 2
done
[ "$health" = "healthy" ] || fail "the server did not become healthy within 120 s (status: ${health:-none})"
echo "smoke.sh: server healthy"

summary=""
for _ in $(seq 1 60); do
    summary="$(group_summary)"
    if settled "$summary"; then
        sleep 3      # and still the same a moment later
        again="$(group_summary)"
        [ "$again" = "$summary" ] && break
        summary="$again"
    fi
    sleep 2
done
settled "$summary" || fail "group $GROUP did not settle with $CONSUMERS members within the wait: $summary"
read -r _ generation _ <<<"$summary"
echo "smoke.sh: group settled: $summary"

victim="$("${COMPOSE[@]}" ps -q consumer | sed -n 1p)"
[ -n "$victim" ] || fail "no consumer container"
instance="$(docker logs "$victim" 2>&1 | sed -n 's/^instance=\([^ ]*\) starting.*/\1/p' | sed -n 1p)"
[ -n "$instance" ] || fail "consumer $victim did not print its instance id"
before="$(member_of "$summary" "$instance")" || fail "instance $instance is not in the group: $summary"
echo "smoke.sh: restarting consumer $instance (member ${before%%:*}, partitions ${before#*:})"
bounded 60 docker restart --time 15 "$victim" >/dev/null || fail "docker restart $victim"

after=""
for _ in $(seq 1 45); do
    summary="$(group_summary)"
    if settled "$summary" && after="$(member_of "$summary" "$instance")" && [ "${after%%:*}" != "${before%%:*}" ]; then
        break
    fi
    after=""
    sleep 2
done
[ -n "$after" ] || fail "consumer $instance did not rejoin within 90 s: $summary"
read -r _ generation_after _ <<<"$summary"
[ "$generation_after" = "$generation" ] \
    || fail "the restart rebalanced the group: generation $generation -> $generation_after"
[ "${after#*:}" = "${before#*:}" ] \
    || fail "$instance came back with other partitions: ${before#*:} -> ${after#*:}"
echo "smoke.sh: OK: $instance rejoined as member ${after%%:*} with partitions ${after#*:}; generation still $generation"

echo "smoke.sh: running the audit"
bounded 900 "${COMPOSE[@]}" run --rm audit || fail "the audit failed"
bounded 120 "${COMPOSE[@]}" run --rm audit test -s /reports/report.html || fail "no /reports/report.html after the audit"
echo "smoke.sh: OK: audit wrote report.html to the reports volume"
echo "smoke.sh: PASS"
