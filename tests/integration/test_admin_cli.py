"""`tenure serve` has its admin endpoint on by default (loopback), says where in a --ready-file and its log,
and `tenure groups/fault` find it: `--admin` anywhere on the line, TENURE_ADMIN, or the default address.
A fault rule can stay until cleared from the command line."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request

import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tenure.tools.cli import main
from tests.support.procs import READY

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def server():
    with ServerThread(ServerConfig(port=0, admin_port=0)) as s:
        yield s


def test_admin_option_anywhere_and_from_the_environment(server, monkeypatch, capsys):
    admin = server.server.admin_address
    monkeypatch.delenv("TENURE_ADMIN", raising=False)
    for argv in (["groups", "--admin", admin, "list"], ["groups", "list", "--admin", admin],
                 ["groups", "list", "--admin", f"http://{admin}/"],
                 ["fault", "list", "--admin", admin], ["fault", "--admin", admin, "list"],
                 ["fault", "fail", "JoinGroup", "COORDINATOR_NOT_AVAILABLE", "--admin", admin, "--count", "2"],
                 ["fault", "clear", "JoinGroup", "--admin", admin]):
        assert main(argv) == 0, argv
    capsys.readouterr()
    monkeypatch.setenv("TENURE_ADMIN", admin)
    assert main(["fault", "delay", "Heartbeat", "5"]) == 0
    assert json.loads(capsys.readouterr().out)["remaining"] is None
    assert main(["fault", "clear"]) == 0
    assert json.loads(capsys.readouterr().out) == {"removed": 1}
    monkeypatch.setenv("TENURE_ADMIN", "127.0.0.1:9")          # the option wins over the environment
    assert main(["fault", "list", "--admin", admin]) == 0
    capsys.readouterr()
    assert main(["fault", "list"]) == 1
    assert "cannot reach the admin endpoint at 127.0.0.1:9 (from TENURE_ADMIN)" in capsys.readouterr().err


def test_a_fault_rule_can_stay_until_cleared_from_the_cli(server, capsys):
    admin = server.server.admin_address
    assert main(["fault", "--admin", admin, "fail", "JoinGroup", "15", "--until-cleared"]) == 0
    rule = json.loads(capsys.readouterr().out)
    assert rule["remaining"] is None and rule["error"] == 15
    assert main(["fault", "--admin", admin, "close", "SyncGroup", "--until-cleared"]) == 0
    assert json.loads(capsys.readouterr().out)["remaining"] is None
    assert main(["fault", "--admin", admin, "delay", "Heartbeat", "3", "--count", "4"]) == 0
    assert json.loads(capsys.readouterr().out)["remaining"] == 4
    assert [r["remaining"] for r in server.call(lambda: [r.to_dict() for r in server.server.faults.rules()])] \
        == [None, None, 4]
    assert main(["fault", "--admin", admin, "clear"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["fault", "--admin", admin, "fail", "JoinGroup", "15", "--count", "0"])
    err = capsys.readouterr().err
    assert "--until-cleared" in err and "None" not in err, err
    with pytest.raises(SystemExit):
        main(["fault", "--admin", admin, "close", "JoinGroup", "--count", "2", "--until-cleared"])
    with pytest.raises(ValueError) as exc:
        server.faults.fail("JoinGroup", 15, count=0)
    assert "None" not in str(exc.value) and "until cleared" in str(exc.value)


def test_advance_clock_cli_refuses_what_the_endpoint_refuses(server, capsys):
    admin = server.server.admin_address
    assert main(["fault", "--admin", admin, "advance-clock", str(10 ** 300)]) == 1
    err = capsys.readouterr().err
    assert "INVALID_REQUEST (42)" in err and "9999-12-31" in err and len(err.splitlines()) == 1, err


@contextlib.contextmanager
def serving(tmp_path, *args, env=None):
    """`tenure serve --port 0 --ready-file F ARGS` for the block: yields (process, the ready file's JSON, the
    ready line's match); killed at the end if still running."""
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen([sys.executable, "-m", "tenure", "serve", "--port", "0", "--ready-file", str(ready),
                             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        m = READY.match(proc.stdout.readline().rstrip("\n"))
        assert m, "the ready line"
        yield proc, json.loads(ready.read_text()), m        # written before the ready line
        assert not ready.exists(), "removed at exit"
    finally:
        if proc.poll() is None:
            proc.kill()


def stop(proc) -> str:
    """SIGTERM, exit 0, exactly one line on stdout; returns the log."""
    proc.terminate()
    assert proc.wait(15) == 0
    assert proc.stdout.read() == ""
    return proc.stderr.read()


def test_ready_file_names_bootstrap_and_admin_and_stdout_keeps_its_one_line(tmp_path):
    with serving(tmp_path, "--host", "0.0.0.0", "--advertised-host", "127.0.0.1") as (proc, info, m):
        assert info["bootstrap"] == f"127.0.0.1:{m.group(2)}" and info["pid"] == proc.pid
        host, port = info["admin"].rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) not in (0, int(m.group(2)))
        with urllib.request.urlopen(f"http://{info['admin']}/health", timeout=10) as r:
            assert json.loads(r.read()) == {"status": "ok"}
        err = stop(proc)
        assert f"admin endpoint on http://127.0.0.1:{port}" in err and "loopback only" in err, err


@pytest.mark.parametrize("off", [("--no-admin",), ("--admin-port", "-1")])
def test_admin_endpoint_can_be_turned_off(tmp_path, off):
    with serving(tmp_path, *off) as (proc, info, _):
        assert info["admin"] is None
        assert "admin endpoint off" in stop(proc)


OUT_OF_THE_BOX = textwrap.dedent("""
    import json, os, subprocess, sys, tempfile
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    srv = subprocess.Popen([sys.executable, "-m", "tenure", "serve"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        assert srv.stdout.readline().strip() == "tenure listening on 127.0.0.1:9092"
        admin = AdminClient({"bootstrap.servers": "127.0.0.1:9092"})
        admin.create_topics([NewTopic("box-t", 1, 1)])["box-t"].result(30)
        c = Consumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "box-g", "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition("box-t", 0, 3)], asynchronous=False)
        c.close()
        out = subprocess.run([sys.executable, "-m", "tenure", "groups", "list"], capture_output=True, text=True,
                             timeout=60)
        # a second server while 9644 is taken: its admin endpoint falls back to a free port and says so
        ready = os.path.join(tempfile.mkdtemp(), "ready.json")
        second = subprocess.Popen([sys.executable, "-m", "tenure", "serve", "--port", "9093", "--ready-file", ready],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        second.stdout.readline()
        address = json.load(open(ready))["admin"]
        second.terminate()
        second.wait(15)
        said = "port 9644 was in use" in second.stderr.read()
        print(out.returncode, out.stdout, out.stderr, f"{address} {said}", sep="|")
    finally:
        srv.terminate()
        srv.wait(15)
        sys.stderr.write(srv.stderr.read())
""")


def test_serve_then_groups_list_works_out_of_the_box():
    """`tenure serve` and `tenure groups list`, no options at all. Run in a network namespace of its own (a
    fresh loopback) so the default ports 9092/9644 are free whatever else runs on this machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENURE_")}
    argv = [sys.executable, "-c", OUT_OF_THE_BOX]
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-rn", "true"], capture_output=True).returncode == 0:
        argv = [unshare, "-rn", "sh", "-c", 'ip link set lo up 2>/dev/null || ifconfig lo up; exec "$@"', "sh",
                *argv]
    else:
        for port in (9092, 9644):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    pytest.skip(f"no network namespace (unshare -rn refused) and 127.0.0.1:{port} is in use")
    out = subprocess.run(argv, capture_output=True, text=True, timeout=90, env=env)
    assert out.returncode == 0, out.stderr
    rc, stdout, stderr, second = out.stdout.rstrip("\n").split("|", 3)
    assert rc == "0", (stdout, stderr, out.stderr)
    assert [line.split() for line in stdout.splitlines()] == [
        ["GROUP", "KIND", "STATE", "GENERATION", "#MEMBERS", "#STATIC", "REBALANCES"],
        ["box-g", "classic", "Empty", "0", "0", "0", "0"]], stdout
    assert "admin endpoint on http://127.0.0.1:9644 (loopback only" in out.stderr
    admin, said = second.split()
    assert admin.startswith("127.0.0.1:") and admin != "127.0.0.1:9644" and said == "True", second


def test_an_admin_port_given_and_in_use_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "tenure", "serve", "--port", "0", "--admin-port", str(port)],
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stdout == ""
    assert f"admin endpoint on 127.0.0.1:{port}" in out.stderr and "--admin-port 0" in out.stderr, out.stderr


def test_serve_reads_its_token_from_the_environment(tmp_path):
    with serving(tmp_path, env=dict(os.environ, TENURE_ADMIN_TOKEN="from-env")) as (proc, info, _):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://{info['admin']}/groups", timeout=10)
        assert err.value.code == 401
        req = urllib.request.Request(f"http://{info['admin']}/groups", headers={"Authorization": "Bearer from-env"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert json.loads(r.read()) == []
        assert "token required" in stop(proc)
