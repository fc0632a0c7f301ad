"""A real Docker engine for tests/docker and bench/docker_start.py: the CLI run with a bound on every call,
the images built from docker/Dockerfile under tags of their own, and compose stacks with a unique project
name and free ports on 127.0.0.1, so runs never collide with each other or with a user's own stack.

    why = engine_missing()          # None when an engine and `docker compose` answer, else the reason
    images = Images.build(tag)      # server, base and audit images (docker build --network host)
    stack = Stack(images)           # docker compose -p <unique> with TENURE_HOST_*_PORT free ports
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker" / "docker-compose.yml"


class DockerError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url: str, timeout: float = 10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()


def docker(*args: str, timeout: float = 120, check: bool = True, env: dict[str, str] | None = None,
           cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`docker ARGS`, killed after `timeout` s (or by kill_running()); DockerError with the command's
    output when check fails."""
    exe = shutil.which("docker")
    if exe is None:
        raise DockerError("no docker command on PATH")
    cmd = [exe, *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            env=None if env is None else {**os.environ, **env})
    with _running_lock:
        _running.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise DockerError(f"{' '.join(cmd)}: no answer within {timeout} s\n{out[-4000:]}\n{err[-4000:]}") from None
    finally:
        with _running_lock:
            _running.discard(proc)
    r = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if check and r.returncode != 0:
        raise DockerError(f"{' '.join(cmd)} exited {r.returncode}\n--- stdout\n{r.stdout[-4000:]}\n"
                          f"--- stderr\n{r.stderr[-4000:]}")
    return r


def kill_running() -> None:
    """Stop every docker command still running (a build the session no longer needs); the CLI cancels
    what it asked the engine to do."""
    with _running_lock:
        procs = list(_running)
    for proc in procs:
        proc.kill()


def engine_missing() -> str | None:
    """None when a Docker engine and the compose plugin answer; otherwise why the Docker tests cannot run."""
    if shutil.which("docker") is None:
        return "no docker command on PATH"
    try:
        r = docker("info", "--format", "{{.ServerVersion}}", timeout=30, check=False)
    except DockerError as e:
        return f"no Docker engine answers: {e}"
    if r.returncode != 0 or not r.stdout.strip():
        return f"no Docker engine answers (docker info: {(r.stderr or r.stdout).strip()[-300:]})"
    r = docker("compose", "version", timeout=30, check=False)
    if r.returncode != 0:
        return f"the docker compose plugin is missing ({r.stderr.strip()[-300:]})"
    return None


@dataclass
class Images:
    """The three images of docker/Dockerfile under one tag prefix: server (the default target), base (the
    example consumer's) and audit."""
    repo: str
    build_seconds: float = 0.0

    @property
    def server(self) -> str:
        return f"{self.repo}:server"

    @property
    def base(self) -> str:
        return f"{self.repo}:base"

    @property
    def audit(self) -> str:
        return f"{self.repo}:audit"

    @classmethod
    def build(cls, repo: str, timeout: float = 1500) -> Images:
        """docker build --network host, as docs/docker.md says (an engine without a default bridge needs
        it); the audit first so that base and the server reuse its layers."""
        images = cls(repo)
        t0 = time.monotonic()
        for target, tag in (("audit", images.audit), ("base", images.base), (None, images.server)):
            args = ["build", "--network", "host", "-f", "docker/Dockerfile", "-t", tag]
            if target:
                args += ["--target", target]
            docker(*args, ".", timeout=timeout)
        images.build_seconds = time.monotonic() - t0
        return images

    def size(self, image: str) -> int:
        return int(docker("image", "inspect", "--format", "{{.Size}}", image).stdout)

    def remove(self) -> None:
        """Untag; the layers stay as the builder's cache for the next session (--no-prune), and only the
        small tenure layers differ from one source version to the next (docker/Dockerfile's order)."""
        docker("image", "rm", "--no-prune", self.server, self.base, self.audit, timeout=120, check=False)


@dataclass
class Stack:
    """docker/docker-compose.yml under a unique project name, published on free ports of 127.0.0.1,
    running the given images (never built by compose here: --no-build)."""
    images: Images
    project: str = field(default_factory=lambda: f"tenure-test-{uuid.uuid4().hex[:10]}")
    kafka_port: int = field(default_factory=free_port)
    admin_port: int = field(default_factory=free_port)

    @property
    def env(self) -> dict[str, str]:
        return {"TENURE_HOST_KAFKA_PORT": str(self.kafka_port), "TENURE_HOST_ADMIN_PORT": str(self.admin_port),
                "TENURE_IMAGE": self.images.server, "TENURE_BASE_IMAGE": self.images.base,
                "TENURE_AUDIT_IMAGE": self.images.audit}

    @property
    def admin(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def compose(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess:
        return docker("compose", "-p", self.project, "-f", str(COMPOSE_FILE), "--profile", "audit", *args,
                      timeout=timeout, check=check, env=self.env)

    def containers(self, service: str) -> list[str]:
        """Full ids of the service's containers (running or not), in a stable order."""
        out = self.compose("ps", "--all", "-q", service, timeout=60).stdout.split()
        return sorted(out)

    def health(self) -> bool:
        try:
            return http_json(f"{self.admin}/health", timeout=3) == {"status": "ok"}
        except (OSError, ValueError):
            return False

    def group(self, group: str) -> dict | None:
        try:
            return http_json(f"{self.admin}/groups/{group}", timeout=5)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise
        except (OSError, ValueError):      # the server is (re)starting
            return None

    def rebalances_metric(self, group: str) -> float:
        """The sum over causes of tenure_rebalances_total{group=...} on /metrics."""
        with urllib.request.urlopen(f"{self.admin}/metrics", timeout=5) as r:
            text = r.read().decode()
        return sum(s.value for fam in text_string_to_metric_families(text) if fam.name == "tenure_rebalances"
                   for s in fam.samples if s.name.endswith("_total") and s.labels.get("group") == group)

    def logs(self) -> str:
        return self.compose("logs", "--no-color", "--tail", "40", timeout=60, check=False).stdout

    def down(self) -> subprocess.CompletedProcess:
        return self.compose("down", "--volumes", "--remove-orphans", "--timeout", "15", timeout=180, check=False)

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, volumes and networks still labelled with this project."""
        label = f"label=com.docker.compose.project={self.project}"
        return {kind: docker(*cmd, "--filter", label, timeout=60).stdout.split()
                for kind, cmd in (("containers", ("ps", "-a", "-q")), ("volumes", ("volume", "ls", "-q")),
                                  ("networks", ("network", "ls", "-q")))}
