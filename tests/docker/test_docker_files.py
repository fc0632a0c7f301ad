"""docker/: no Docker engine runs on these machines, so the Dockerfile and the compose files are checked
structurally (services, volumes, ports, healthchecks, commands), the pieces that can run without an
engine are run for real (the image's ENTRYPOINT and HEALTHCHECK commands, the example consumer against
an in-process server, smoke.sh's skip paths), and smoke.sh is linted."""
from __future__ import annotations

import json
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

import pytest
import yaml

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.support.docker import free_port, http_json

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
BASH = shutil.which("bash") or "/bin/bash"

pytestmark = pytest.mark.timeout(180)


# ---------------------------------------------------------------------- parsing
@dataclass
class Tagged:
    """A Compose merge tag (`!reset`, `!override`) and its value."""
    tag: str
    value: object


class ComposeLoader(yaml.SafeLoader):
    """Refuses a mapping key given twice, as Compose does ("mapping key ... already defined"); PyYAML
    would silently keep the last one."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            if key_node.value in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"mapping key {key_node.value!r} already defined", key_node.start_mark)
            seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


def _construct_tagged(loader, node):
    if isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    elif isinstance(node, yaml.MappingNode):
        value = loader.construct_mapping(node, deep=True)
    else:
        value = loader.construct_scalar(node)
    return Tagged(node.tag, value)


for _tag in ("!reset", "!override"):
    ComposeLoader.add_constructor(_tag, _construct_tagged)


INTERPOLATION = re.compile(r"\$\{(\w+):-([^}]*)\}")


def load_compose(name: str, env: dict[str, str] | None = None) -> dict:
    """The file as Compose reads it, `${VAR:-default}` taken from env (default: the defaults)."""
    env = env or {}
    text = INTERPOLATION.sub(lambda m: env.get(m.group(1), m.group(2)), (DOCKER / name).read_text())
    assert "${" not in text, "only ${VAR:-default} interpolation is used"
    return yaml.load(text, Loader=ComposeLoader)


def merge(base, override):
    """Compose's merge rules, as far as these files use them: mappings merge, `!reset`/`!override`
    replace, other values from the override win (our lists are not merged across the two files)."""
    if isinstance(override, Tagged):
        return None if override.tag == "!reset" and override.value in ([], {}, None) else override.value
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for k, v in override.items():
            out[k] = merge(base.get(k), v) if k in base else (v.value if isinstance(v, Tagged) else v)
        return out
    return override


def env_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


@dataclass
class Stage:
    name: str
    parent: str
    instructions: list[tuple[str, str]]     # (INSTRUCTION, arguments), continuation lines joined


def dockerfile_stages() -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages in order)."""
    text = (DOCKER / "Dockerfile").read_text()
    logical, cur = [], ""
    for line in text.splitlines():
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        logical.append(cur + line)
        cur = ""
    args, stages = {}, []
    for line in logical:
        instr, _, rest = line.strip().partition(" ")
        instr, rest = instr.upper(), rest.strip()
        if instr == "FROM":
            m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", rest, re.IGNORECASE)
            assert m, line
            stages.append(Stage(m.group(2) or str(len(stages)), m.group(1), []))
        elif not stages:
            assert instr == "ARG", f"only ARG may come before the first FROM: {line}"
            k, _, v = rest.partition("=")
            args[k] = v
        else:
            stages[-1].instructions.append((instr, rest))
    return args, stages


def chain(stages: list[Stage], name: str) -> list[Stage]:
    """The stage and its ancestors, oldest first."""
    by_name = {s.name: s for s in stages}
    out = [by_name[name]]
    while out[0].parent in by_name:
        out.insert(0, by_name[out[0].parent])
    return out


def last(stages: list[Stage], name: str, instr: str) -> str | None:
    """The effective value of an inherited instruction (USER, ENTRYPOINT, HEALTHCHECK...) in a stage."""
    value = None
    for s in chain(stages, name):
        for i, rest in s.instructions:
            if i == instr:
                value = rest
    return value


def all_of(stages: list[Stage], name: str, instr: str) -> list[str]:
    return [rest for s in chain(stages, name) for i, rest in s.instructions if i == instr]


def exec_form(rest: str) -> list[str]:
    value = json.loads(rest)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), rest
    return value


# ---------------------------------------------------------------------- the compose files
def test_compose_services_volumes_and_build():
    c = load_compose("docker-compose.yml")
    assert set(c["services"]) == {"tenure", "consumer", "audit"}
    assert {"tenure-data", "reports"} <= set(c["volumes"])
    _, stages = dockerfile_stages()
    names = {s.name for s in stages}
    for name, svc in c["services"].items():
        build = svc["build"]
        assert (DOCKER / build["context"]).resolve() == ROOT, f"{name}: the build context is the repo root"
        assert (ROOT / build["dockerfile"]).resolve() == DOCKER / "Dockerfile"
        assert build["target"] in names, f"{name}: no stage {build['target']!r} in docker/Dockerfile"
        assert "container_name" not in svc, f"{name}: a fixed container_name would prevent --scale"
        assert "network_mode" not in svc, f"{name}: the base file uses the compose network"
    assert c["services"]["tenure"]["build"]["target"] == "server"
    assert c["services"]["audit"]["build"]["target"] == "audit"


def test_compose_tenure_service():
    t = load_compose("docker-compose.yml")["services"]["tenure"]
    assert "tenure-data:/data" in t["volumes"]
    published = {}
    for p in t["ports"]:
        parts = str(p).split(":")
        published[int(parts[-1])] = (parts[0] if len(parts) == 3 else None, int(parts[-2]))
    assert published == {9092: ("127.0.0.1", 9092), 9644: ("127.0.0.1", 9644)}
    env = env_of(t)
    assert env["TENURE_ADVERTISED_HOST"] == "tenure", "clients on the compose network reach it as `tenure`"
    assert env["TENURE_HOST"] == "0.0.0.0" and env["TENURE_PORT"] == "9092" and env["TENURE_ADMIN_PORT"] == "9644"
    assert env["TENURE_ADMIN_HOST"] == "0.0.0.0", "the published admin port reaches the endpoint"
    # other host ports for a second stack beside the first; the container's own ports stay
    moved = load_compose("docker-compose.yml", {"TENURE_HOST_KAFKA_PORT": "19092", "TENURE_HOST_ADMIN_PORT": "19644"})
    assert moved["services"]["tenure"]["ports"] == ["127.0.0.1:19092:9092", "127.0.0.1:19644:9644"]
    hc = t["healthcheck"]
    assert hc["test"][0] == "CMD" and "/health" in " ".join(hc["test"])
    assert int(hc["retries"]) >= 1 and hc["interval"] and hc["timeout"]
    assert "command" not in t and "entrypoint" not in t, "the image's ENTRYPOINT runs the server"


def test_compose_consumer_service():
    c = load_compose("docker-compose.yml")["services"]["consumer"]
    assert c["depends_on"] == {"tenure": {"condition": "service_healthy"}}
    assert c["command"] == ["python", "/opt/tenure/consumer.py"]
    env = env_of(c)
    assert env["BOOTSTRAP_SERVERS"] == "tenure:9092"
    assert "GROUP_INSTANCE_ID" not in env, "one fixed instance id would fence the scaled replicas"
    assert int(env["SESSION_TIMEOUT_MS"]) >= 10000, "room for a restart within the session"
    assert "ports" not in c
    # the image the consumer runs has the script where the command looks for it
    _, stages = dockerfile_stages()
    copies = [rest.split() for rest in all_of(stages, c["build"]["target"], "COPY")]
    assert ["docker/consumer.py", "/opt/tenure/consumer.py"] in copies


def test_compose_audit_service():
    a = load_compose("docker-compose.yml")["services"]["audit"]
    assert a["profiles"] == ["audit"], "run-once: not started by a plain `docker compose up`"
    assert "tenure-data:/data:ro" in a["volumes"]
    assert "reports:/reports" in a["volumes"]
    assert a["command"] == ["tenure", "audit", "/data", "--out", "/reports"]
    assert a.get("restart", "no") == "no"
    assert "depends_on" not in a, "the audit reads the volume; it needs no running server"


def test_hostnet_override_uses_host_networking_and_loopback_only():
    base = load_compose("docker-compose.yml")
    over = load_compose("docker-compose.hostnet.yml")
    assert set(over["services"]) == set(base["services"])
    for name, svc in over["services"].items():
        assert svc["network_mode"] == "host", name
        assert svc["build"]["network"] == "host", name
    assert isinstance(over["services"]["tenure"]["ports"], Tagged)
    assert over["services"]["tenure"]["ports"].tag == "!reset"
    # every address in the override is a loopback one
    text = (DOCKER / "docker-compose.hostnet.yml").read_text()
    addresses = re.findall(r"\b\d{1,3}(?:\.\d{1,3}){3}\b", text)
    assert addresses and all(a.startswith("127.") for a in addresses), addresses

    merged = {n: merge(base["services"][n], over["services"].get(n, {})) for n in base["services"]}
    t = merged["tenure"]
    assert t["network_mode"] == "host" and not t.get("ports")
    env = env_of(t)
    assert env["TENURE_HOST"] == "127.0.0.1" and env["TENURE_ADVERTISED_HOST"] == "127.0.0.1"
    assert env["TENURE_PORT"] == "9092" and env["TENURE_ADMIN_PORT"] == "9644"
    assert env["TENURE_ADMIN_HOST"] == "127.0.0.1"
    assert env_of(merged["consumer"])["BOOTSTRAP_SERVERS"] == "127.0.0.1:9092"
    moved = load_compose("docker-compose.hostnet.yml", {"TENURE_HOST_KAFKA_PORT": "19092",
                                                        "TENURE_HOST_ADMIN_PORT": "19644"})["services"]
    assert env_of(moved["tenure"])["TENURE_PORT"] == "19092" and env_of(moved["tenure"])["TENURE_ADMIN_PORT"] == "19644"
    assert env_of(moved["consumer"])["BOOTSTRAP_SERVERS"] == "127.0.0.1:19092"
    assert merged["consumer"]["depends_on"] == {"tenure": {"condition": "service_healthy"}}
    assert merged["audit"]["profiles"] == ["audit"] and "tenure-data:/data:ro" in merged["audit"]["volumes"]
    for name, svc in merged.items():
        assert svc["network_mode"] == "host", name
        for value in env_of(svc).values():
            for a in re.findall(r"\b\d{1,3}(?:\.\d{1,3}){3}\b", value):
                assert a.startswith("127."), f"{name}: {value}"


# ---------------------------------------------------------------------- the Dockerfile
def test_dockerfile_structure():
    args, stages = dockerfile_stages()
    assert args.get("PYTHON_IMAGE") == "python:3.11-slim"
    names = [s.name for s in stages]
    assert {"build", "base", "audit", "server"} <= set(names)
    assert names[-1] == "server", "the server is the default target (the last stage)"
    assert all(s.parent in ("${PYTHON_IMAGE}", *names) for s in stages), [s.parent for s in stages]

    user = last(stages, "server", "USER")
    assert user and user.split(":")[0] not in ("root", "0"), user
    runs = " ".join(all_of(stages, "server", "RUN"))
    assert re.search(rf"useradd\b[^&]*\b{re.escape(user)}\b", runs), "the USER is created"
    assert "pip install --no-cache-dir" in runs
    assert "chown" in runs and "/data" in runs, "/data belongs to the user (named volumes inherit it)"
    assert any("/data" in v for v in all_of(stages, "server", "VOLUME"))
    exposed = {p for v in all_of(stages, "server", "EXPOSE") for p in v.split()}
    assert {"9092", "9644"} <= exposed

    hc = last(stages, "server", "HEALTHCHECK")
    assert hc and "urllib" in hc and "/health" in hc and "TENURE_ADMIN_PORT" in hc
    assert "curl" not in hc and "wget" not in hc, "python:3.11-slim has neither"

    ep = exec_form(last(stages, "server", "ENTRYPOINT"))
    line = " ".join(ep)
    for part in ("tenure serve", "--host", "--data-dir /data", "--admin-port", "--admin-host", "--advertised-host",
                 "TENURE_ADVERTISED_HOST", "TENURE_ADMIN_HOST"):
        assert part in line, part
    assert re.search(r"-c\s+exec tenure serve", line), "exec: tenure is PID 1 and gets docker stop's SIGTERM"
    env = " ".join(all_of(stages, "server", "ENV"))
    for var, default in (("TENURE_HOST", "0.0.0.0"), ("TENURE_PORT", "9092"), ("TENURE_ADMIN_HOST", "0.0.0.0"),
                         ("TENURE_ADMIN_PORT", "9644")):
        assert f"{var}={default}" in env, var

    audit = " ".join(all_of(stages, "audit", "RUN"))
    assert "default-jre-headless" in audit and "[audit]" in audit and "rm -rf /var/lib/apt/lists" in audit
    assert last(stages, "audit", "USER") == user
    assert "VOLUME" not in {i for i, _ in stages[names.index("build")].instructions}


def test_dockerignore_keeps_what_the_build_needs():
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]
    for must in (".venv", ".git", ".cache", "data", "**/__pycache__"):
        assert must in patterns, must

    def ignored(path: str) -> bool:
        return any(fnmatch(path, p) or fnmatch(path.split("/")[0], p) for p in patterns)

    pyproject = (ROOT / "pyproject.toml").read_text()
    package_dirs = re.findall(r'^"tenure[.\w]*"\s*=\s*"([^"]+)"', pyproject, re.MULTILINE)
    assert package_dirs
    needed = ["pyproject.toml", "README.md", "docker/consumer.py", *{d.split("/")[0] for d in package_dirs}]
    for path in needed:
        assert (ROOT / path).exists(), path
        assert not ignored(path), f"{path} is needed by docker/Dockerfile but .dockerignore drops it"


def test_image_entrypoint_and_healthcheck_run_the_server(tmp_path):
    """The server stage's ENTRYPOINT and HEALTHCHECK commands, run as they are (only /data and the ports
    swapped for a temp dir and free ports, `python` for this interpreter): the server starts with the
    env's addresses, the healthcheck passes against it and fails without it, SIGTERM exits 0."""
    _, stages = dockerfile_stages()
    ep = exec_form(last(stages, "server", "ENTRYPOINT"))
    cmd = exec_form(last(stages, "server", "CMD"))
    assert ep[0] == "/bin/sh" and ep[1] == "-c"
    data = tmp_path / "data"
    data.mkdir()
    ep[2] = ep[2].replace("--data-dir /data", f"--data-dir {shlex.quote(str(data))}")
    hc = last(stages, "server", "HEALTHCHECK")
    hc_cmd = exec_form(hc[hc.index("CMD") + 3:].strip())
    assert hc_cmd[0] == "python"
    hc_cmd[0] = sys.executable

    # Kafka and the admin endpoint on different loopback addresses: each flag reaches the server
    port, admin = free_port(), free_port()
    env = dict(os.environ, TENURE_HOST="127.0.0.2", TENURE_PORT=str(port), TENURE_ADVERTISED_HOST="127.0.0.2",
               TENURE_ADMIN_HOST="127.0.0.1", TENURE_ADMIN_PORT=str(admin),
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])

    def healthcheck() -> int:
        return subprocess.run(hc_cmd, env=env, capture_output=True, timeout=20).returncode

    assert healthcheck() != 0, "the healthcheck fails while nothing listens"
    proc = subprocess.Popen(ep + cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    try:
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
        assert lines.get(timeout=30).strip() == f"tenure listening on 127.0.0.2:{port}"
        assert healthcheck() == 0
        assert http_json(f"http://127.0.0.1:{admin}/health") == {"status": "ok"}
        with pytest.raises(urllib.error.URLError):
            http_json(f"http://127.0.0.2:{admin}/health")     # TENURE_ADMIN_HOST, not TENURE_HOST
        assert (data / "meta.properties").exists(), "the server keeps its log in the data dir"
        proc.send_signal(signal.SIGTERM)   # `exec`: the signal reaches tenure itself
        assert proc.wait(30) == 0
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)     # whatever is left: the shell, or a server left under it
        except ProcessLookupError:
            pass
        proc.wait(10)


QUIET_START = r"""
import os, signal, subprocess, sys, time, urllib.request
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
line = proc.stdout.readline().strip()
status = urllib.request.urlopen("http://127.0.0.1:9644/health", timeout=10).status
proc.send_signal(signal.SIGTERM)
_, err = proc.communicate(timeout=30)
print(repr((line, status, proc.returncode, err)))
"""


def test_the_compose_server_environment_starts_quiet_and_safe(tmp_path):
    """The image's ENTRYPOINT with the compose file's environment for the server as it is (the admin endpoint
    on 0.0.0.0, no token), run in a network namespace of its own (so 0.0.0.0 and the default ports are that
    namespace's alone): it starts with no WARNING line, its admin line says other addresses may only read."""
    unshare = shutil.which("unshare")
    if not unshare or subprocess.run([unshare, "-rn", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs unshare -rn (a network namespace of its own)")
    _, stages = dockerfile_stages()
    ep = exec_form(last(stages, "server", "ENTRYPOINT"))
    data = tmp_path / "data"
    data.mkdir()
    ep[2] = ep[2].replace("--data-dir /data", f"--data-dir {shlex.quote(str(data))}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENURE_")}
    env.update(env_of(load_compose("docker-compose.yml")["services"]["tenure"]))
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    out = subprocess.run([unshare, "-rn", "sh", "-c", 'ip link set lo up 2>/dev/null || ifconfig lo up; exec "$@"',
                          "sh", sys.executable, "-c", QUIET_START, *ep], env=env, capture_output=True, text=True,
                         timeout=90)
    assert out.returncode == 0, out.stderr[-3000:]
    import ast
    line, status, code, err = ast.literal_eval(out.stdout.strip().splitlines()[-1])
    assert (line, status, code) == ("tenure listening on tenure:9092", 200, 0), (line, status, code, err)
    assert " WARNING " not in err and " ERROR " not in err, err
    assert "admin endpoint on http://0.0.0.0:9644 (reachable from other machines (--admin-host): read-only for " \
           "them without a token; no token)" in err, err


def test_reports_copied_out_of_the_audit_are_not_committed_or_built():
    assert subprocess.run(["git", "check-ignore", "-q", "reports/report.html"], cwd=ROOT).returncode == 0
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()]
    assert "reports" in patterns


def test_compose_healthcheck_command_runs():
    t = load_compose("docker-compose.yml")["services"]["tenure"]
    test = list(t["healthcheck"]["test"][1:])
    assert test[0] == "python"
    test[0] = sys.executable
    with ServerThread(ServerConfig(port=0, admin_port=0)) as s:
        env = dict(os.environ, TENURE_ADMIN_PORT=str(s.server.admin_port))
        assert subprocess.run(test, env=env, capture_output=True, timeout=20).returncode == 0
    env = dict(os.environ, TENURE_ADMIN_PORT=str(free_port()))
    assert subprocess.run(test, env=env, capture_output=True, timeout=20).returncode != 0


# ---------------------------------------------------------------------- smoke.sh
def test_smoke_script_is_valid_bash():
    script = DOCKER / "smoke.sh"
    assert os.access(script, os.X_OK), "docker/smoke.sh is executable"
    assert script.read_text().startswith("#!/usr/bin/env bash\n")
    r = subprocess.run([BASH, "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    if shutil.which("shellcheck"):     # a lint where it is installed; bash -n above always runs
        r = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout


def _fake_docker(bin_dir: Path, log: Path, info_ok: bool) -> None:
    """A `docker` that records its arguments; `info`, `compose version` succeed or not, `image inspect`
    fails (no base image), anything else is an error the smoke script must not reach."""
    (bin_dir / "docker").write_text(f"""#!{BASH}
echo "$*" >> {shlex.quote(str(log))}
case "$1 $2" in
  "info "*) exit {0 if info_ok else 1} ;;
  "compose version") exit 0 ;;
  "image inspect") exit 1 ;;
esac
echo "unexpected docker $*" >&2
exit 42
""")
    (bin_dir / "docker").chmod(0o755)


@pytest.mark.parametrize("case", ["no-docker", "no-engine", "no-base-image"])
def test_smoke_script_skips_cleanly(tmp_path, case):
    """With only the fake docker (or nothing) on PATH: a clear message, exit 0, and no build, pull or up."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "docker.log"
    if case != "no-docker":
        _fake_docker(bin_dir, log, info_ok=(case == "no-base-image"))
    r = subprocess.run([BASH, str(DOCKER / "smoke.sh")], env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "SKIPPED" in r.stdout, r.stdout
    expect = {"no-docker": "no docker command", "no-engine": "no Docker engine",
              "no-base-image": "python:3.11-slim is not available locally"}[case]
    assert expect in r.stdout, r.stdout
    calls = log.read_text().splitlines() if log.exists() else []
    assert {c.split()[0] for c in calls} <= {"info", "compose", "image"}, calls
    assert not any(w in c.split() for c in calls for w in ("pull", "build", "up", "run")), calls
    assert "unexpected" not in r.stderr


# ---------------------------------------------------------------------- the example consumer
class Consumer:
    """docker/consumer.py as a child process; its stdout lines collected by a thread."""
    ASSIGNED = re.compile(r"^instance=(\S+) generation=(\d+) member=(\S+) assigned=(\S+)$")

    def __init__(self, bootstrap: str, group: str, topic: str, instance: str) -> None:
        env = dict(os.environ, BOOTSTRAP_SERVERS=bootstrap, GROUP_ID=group, TOPIC=topic, PARTITIONS="4",
                   GROUP_INSTANCE_ID=instance, SESSION_TIMEOUT_MS="30000", PRODUCE_INTERVAL_S="0.2")
        self.instance = instance
        self.proc = subprocess.Popen([sys.executable, str(DOCKER / "consumer.py")], env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def assignments(self) -> list[tuple[int, str, str]]:
        """[(generation, member id, "topic:0,1")] in the order printed."""
        out = []
        for line in list(self.lines):
            m = self.ASSIGNED.match(line)
            if m:
                assert m.group(1) == self.instance, line
                out.append((int(m.group(2)), m.group(3), m.group(4)))
        return out

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._reader.join(10)
        return code

    def stats(self) -> dict[str, int]:
        for line in self.lines:
            m = re.search(r" stopping: consumed=(\d+) produced=(\d+)$", line)
            if m:
                return {"consumed": int(m.group(1)), "produced": int(m.group(2))}
        raise AssertionError(f"{self.instance} printed no stopping line: {self.lines}")


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def partitions(text: str) -> set[int]:
    topic, _, parts = text.partition(":")
    return {int(p) for p in parts.split(",") if p}


def test_example_consumer_restart_is_not_a_rebalance():
    """Two docker/consumer.py processes with their own instance ids share a topic; one is stopped
    (SIGTERM) and started again: it comes back as a new member id with the same generation and the same
    partitions, the other never sees a rebalance, and the admin endpoint agrees."""
    group, topic = f"dk-g-{uuid.uuid4().hex[:8]}", f"dk-t-{uuid.uuid4().hex[:8]}"
    with ServerThread(ServerConfig(port=0, admin_port=0)) as s:
        admin = f"http://127.0.0.1:{s.server.admin_port}/groups/{group}"

        def view():
            try:
                return http_json(admin)
            except urllib.error.HTTPError:
                return None

        procs = [Consumer(s.bootstrap, group, topic, "inst-a"), Consumer(s.bootstrap, group, topic, "inst-b")]
        a, b = procs
        try:
            def settled():
                la, lb = a.assignments(), b.assignments()
                if not la or not lb or la[-1][0] != lb[-1][0]:
                    return None
                pa, pb = partitions(la[-1][2]), partitions(lb[-1][2])
                if not pa or not pb or pa & pb or pa | pb != {0, 1, 2, 3}:
                    return None
                v = view()
                if not v or v["state"] != "Stable" or v["generation"] != la[-1][0] or len(v["members"]) != 2:
                    return None
                return la[-1], lb[-1], v
            (gen, member_a, text_a), last_b, before = wait_until(settled, 60, "both consumers assigned")
            assert all(line.startswith("instance=inst-") for c in procs for line in c.lines)
            b_lines = len(b.assignments())
            by_instance = {m["group_instance_id"]: m for m in before["members"]}
            assert by_instance["inst-a"]["member_id"] == member_a
            assert by_instance["inst-a"]["assignment"] == {topic: sorted(partitions(text_a))}

            assert a.stop() == 0
            assert a.stats()["produced"] > 0
            first_run = a
            a = Consumer(s.bootstrap, group, topic, "inst-a")
            procs[0] = a
            back = wait_until(lambda: a.assignments(), 60, "inst-a back with an assignment")
            assert len(back) == 1, back
            gen_back, member_back, text_back = back[0]
            assert gen_back == gen, f"the restart rebalanced the group: generation {gen} -> {gen_back}"
            assert member_back != member_a, "a restart is a new member id for the same instance"
            assert partitions(text_back) == partitions(text_a)

            after = view()
            assert after["state"] == "Stable" and after["generation"] == gen
            by_instance = {m["group_instance_id"]: m for m in after["members"]}
            assert set(by_instance) == {"inst-a", "inst-b"}
            assert by_instance["inst-a"]["member_id"] == member_back
            assert by_instance["inst-a"]["assignment"] == {topic: sorted(partitions(text_a))}
            assert len(b.assignments()) == b_lines and b.assignments()[-1] == last_b, "inst-b saw a rebalance"
        finally:
            codes = [c.stop() for c in procs]
        assert codes == [0, 0]
        stats = [first_run.stats(), a.stats(), b.stats()]
        assert all(st["produced"] > 0 for st in stats), stats
        assert sum(st["consumed"] for st in stats) > 0, stats
        assert view()["generation"] == gen, "no rebalance until the end either"


# ---------------------------------------------------------------------- .ci/run
@pytest.mark.parametrize("engine", ["ok", "fails", "absent"])
def test_ci_run_sets_up_the_engine_runs_the_tests_and_stops_it(tmp_path, engine):
    """.ci/run with a stand-in engine set-up script beside the clone and a stand-in scripts/test.sh: the
    set-up runs first, the tests run whatever it did, the engine is stopped after them, and the exit code
    is the tests'."""
    log = tmp_path / "calls"
    repo = tmp_path / "clone"
    (repo / ".ci").mkdir(parents=True)
    (repo / "scripts").mkdir()
    shutil.copy(ROOT / ".ci" / "run", repo / ".ci" / "run")
    (repo / "scripts" / "test.sh").write_text(f'#!{BASH}\necho "test.sh $*" >> {shlex.quote(str(log))}\nexit 3\n')
    (repo / "scripts" / "test.sh").chmod(0o755)
    if engine != "absent":
        setup = tmp_path / "shared" / "container" / "setup-engine.sh"
        setup.parent.mkdir(parents=True)
        setup.write_text(f'echo "setup-engine $*" >> {shlex.quote(str(log))}\n'
                         f'[ "${{1:-}}" = stop ] || exit {0 if engine == "ok" else 1}\n')
    r = subprocess.run([BASH, str(repo / ".ci" / "run")], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 3, (r.stdout, r.stderr)
    calls = log.read_text().splitlines()
    if engine == "absent":
        assert calls == ["test.sh -p no:cacheprovider"]
        assert "the Docker tests run only if an engine already answers" in r.stderr
    else:
        assert calls == ["setup-engine ", "test.sh -p no:cacheprovider", "setup-engine stop"]
        assert ("the Docker tests will be skipped" in r.stderr) == (engine == "fails")


# ---------------------------------------------------------------------- where no engine answers
def test_docker_tests_say_why_they_cannot_run(monkeypatch):
    """The reason the engine tests are skipped with: only when no engine (or no compose) answers."""
    from tests.support.docker import engine_missing

    monkeypatch.setenv("PATH", "")
    assert engine_missing() == "no docker command on PATH"
    monkeypatch.undo()
    if shutil.which("docker") is None:
        return
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    why = engine_missing()
    assert why and why.startswith("no Docker engine answers") and "nonexistent" in why
