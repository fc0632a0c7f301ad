"""The server image: its size, and a container's start to ready, against `tenure serve` started directly.

1. image   `docker build --network host -f docker/Dockerfile` (the server, the default target) under a tag
           of its own, unless --image names one already built. Prints the image's size, the Python base
           image's size (the `FROM`) and what tenure adds on top (its layers: tenure, kafka-python, aiohttp,
           ...).
2. start   --runs times: `docker run -d` of the image on a network of its own with Kafka and the admin
           endpoint published on free ports of 127.0.0.1 and an empty anonymous /data volume, timed from
           just before `docker run` to (a) `docker run` returning (the container created and started),
           (b) the Kafka port answering an ApiVersions request through the published port, (c) the admin
           endpoint's /health answering 200 (the server is ready: both listeners are up, the data dir is
           open). Then `docker stop` is timed and the exit code read (tenure is PID 1 and exits 0 on
           SIGTERM). The container is removed with its volume after each run.
3. host    The same readiness ((b) and (c)) for `python -m tenure serve --data-dir TMP --admin-port P`
           started directly on the host, --runs times, for the ratio container / process.

    .venv/bin/python bench/docker_start.py [--runs 10] [--image TAG] [--keep-image]

Needs a Docker engine. Prints figures only; it never asserts timings.
"""
from __future__ import annotations

import argparse
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

from benchcommon import tree_version

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kafka.protocol.metadata import ApiVersionsRequest  # noqa: E402

from tests.support.docker import docker, engine_missing, free_port  # noqa: E402
from tests.support.wire import WireClient  # noqa: E402

READY_TIMEOUT_S = 60.0


def kafka_answers(bootstrap: str) -> bool:
    """An ApiVersions v0 request answered (a connect alone would succeed on docker-proxy's listener)."""
    try:
        c = WireClient.to(bootstrap, timeout=1.0)
    except OSError:
        return False
    try:
        return c.call(ApiVersionsRequest(), 0).error_code == 0
    except (OSError, ConnectionError, ValueError, struct.error):
        return False
    finally:
        c.close()


def health(admin: str) -> bool:
    try:
        with urllib.request.urlopen(f"{admin}/health", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def until(pred, t0: float) -> float:
    """ms from t0 until pred() is true (polled every 10 ms), bounded by READY_TIMEOUT_S."""
    while not pred():
        if time.perf_counter() - t0 > READY_TIMEOUT_S:
            raise RuntimeError(f"not ready within {READY_TIMEOUT_S:.0f} s")
        time.sleep(0.01)
    return (time.perf_counter() - t0) * 1000.0


def container_run(image: str, network: str) -> dict[str, float]:
    name = f"tenure-bench-{uuid.uuid4().hex[:10]}"
    port, admin_port = free_port(), free_port()
    bootstrap, admin = f"127.0.0.1:{port}", f"http://127.0.0.1:{admin_port}"
    t0 = time.perf_counter()
    try:
        docker("run", "-d", "--name", name, "--network", network, "-p", f"127.0.0.1:{port}:{port}",
               "-p", f"127.0.0.1:{admin_port}:9644", "-e", f"TENURE_PORT={port}",
               "-e", "TENURE_ADVERTISED_HOST=127.0.0.1", image, "--log-level", "WARNING")
        started = (time.perf_counter() - t0) * 1000.0
        kafka = until(lambda: kafka_answers(bootstrap), t0)
        ready = until(lambda: health(admin), t0)
        t1 = time.perf_counter()
        docker("stop", "--time", "15", name, timeout=60)
        stop = (time.perf_counter() - t1) * 1000.0
        code = int(docker("inspect", "--format", "{{.State.ExitCode}}", name).stdout)
        return {"run": started, "kafka": kafka, "ready": ready, "stop": stop, "exit": code}
    finally:
        docker("rm", "--force", "--volumes", name, check=False)


def host_run() -> dict[str, float]:
    port, admin_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as data:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "tenure", "serve", "--port", str(port), "--data-dir", data,
                                 "--admin-port", str(admin_port), "--log-level", "WARNING"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            kafka = until(lambda: kafka_answers(f"127.0.0.1:{port}"), t0)
            ready = until(lambda: health(f"http://127.0.0.1:{admin_port}"), t0)
        finally:
            proc.terminate()
            proc.wait(15)
        return {"kafka": kafka, "ready": ready}


def line(label: str, values: list[float]) -> str:
    return (f"  {label:<34} median {statistics.median(values):7.0f} ms   min {min(values):7.0f}   "
            f"max {max(values):7.0f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--image", default=None, help="an image already built (default: build one now)")
    ap.add_argument("--keep-image", action="store_true", help="leave the built image's tag in place")
    args = ap.parse_args()
    why = engine_missing()
    if why:
        print(f"docker_start: nothing measured: {why}")
        return 0
    print(f"tree {tree_version()}; engine {docker('version', '--format', '{{.Server.Version}}').stdout.strip()}; "
          f"load average at start {os.getloadavg()[0]:.2f}")

    image = args.image
    if image is None:
        image = f"tenure-bench-{uuid.uuid4().hex[:8]}:server"
        t0 = time.perf_counter()
        docker("build", "--network", "host", "-f", "docker/Dockerfile", "-t", image, ".", timeout=1800)
        print(f"built {image} in {time.perf_counter() - t0:.0f} s (with whatever the builder had cached)")
    size = int(docker("image", "inspect", "--format", "{{.Size}}", image).stdout)
    base = docker("image", "inspect", "--format", "{{.Size}}", "python:3.11-slim", check=False).stdout.strip()
    print(f"image size: {size / 1e6:.1f} MB", end="")
    if base:
        print(f"; python:3.11-slim (the FROM) {int(base) / 1e6:.1f} MB; tenure and its dependencies add "
              f"{(size - int(base)) / 1e6:.1f} MB")
    else:
        print()

    network = f"tenure-bench-{uuid.uuid4().hex[:8]}"
    docker("network", "create", network)
    try:
        runs = [container_run(image, network) for _ in range(args.runs)]
    finally:
        docker("network", "rm", network, check=False)
        if args.image is None and not args.keep_image:
            docker("image", "rm", "--no-prune", image, check=False)
    hosts = [host_run() for _ in range(args.runs)]

    print(f"container ({args.runs} runs, from just before `docker run`):")
    print(line("docker run returned", [r["run"] for r in runs]))
    print(line("Kafka answers (published port)", [r["kafka"] for r in runs]))
    print(line("ready (/health on published port)", [r["ready"] for r in runs]))
    print(line("docker stop", [r["stop"] for r in runs]))
    print(f"  exit codes: {sorted({int(r['exit']) for r in runs})}")
    print(f"host process ({args.runs} runs, python -m tenure serve --data-dir --admin-port):")
    print(line("Kafka answers", [h["kafka"] for h in hosts]))
    print(line("ready (/health)", [h["ready"] for h in hosts]))
    ratio = statistics.median(r["ready"] for r in runs) / statistics.median(h["ready"] for h in hosts)
    print(f"ready, container / host process: {ratio:.2f}x (medians)")
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
