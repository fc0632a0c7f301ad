import re
import signal
import subprocess
import sys

import pytest

from tenure.tools.cli import main
from tests.support.clients import confluent_round_trip

READY = re.compile(r"^tenure listening on 127\.0\.0\.1:(\d+)$")


def _start(*args):
    proc = subprocess.Popen([sys.executable, "-m", "tenure", "serve", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline().rstrip("\n")
    return proc, line


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_one_ready_line_serves_and_exits_0_on_signal(sig):
    proc, line = _start("--default-partitions", "2")
    try:
        m = READY.match(line)
        assert m, line
        bootstrap = f"127.0.0.1:{m.group(1)}"
        produced, consumed = confluent_round_trip(bootstrap, "cli-topic", partitions=2, n=4)
        assert len(consumed) == 4
        proc.send_signal(sig)
        assert proc.wait(timeout=15) == 0
        assert proc.stdout.read() == ""  # exactly one line on stdout; logs go to stderr
        assert "shutting down" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_advertised_host_is_what_metadata_reports():
    proc, line = _start("--advertised-host", "localhost")
    try:
        port = int(line.rsplit(":", 1)[1])
        from tests.support.wire import WireClient, metadata_request
        with WireClient("127.0.0.1", port) as c:
            md = c.call(metadata_request(), 12)
        assert [(b.host, b.port) for b in md.brokers] == [("localhost", port)]
    finally:
        proc.terminate()
        proc.wait(10)


def test_port_in_use_is_a_clear_error(tenure_server, capsys):
    assert main(["serve", "--port", str(tenure_server.port)]) == 1
    assert "cannot listen" in capsys.readouterr().err


def test_bad_arguments_exit_nonzero():
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--default-partitions", "0"])
    assert "at least 1" in str(exc.value)


def test_max_request_elements_flag_reaches_the_server_config():
    from tenure.tools.cli import _config, _parser
    args = _parser().parse_args(["serve", "--max-request-elements", "250"])
    assert _config(args).decode_limits().max_request_elements == 250
    assert _config(_parser().parse_args(["serve"])).max_request_elements == 100_000
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--max-request-elements", "0"])
    assert "--max-request-elements must be at least 1" in str(exc.value)


def test_demo_runs_its_story_and_checks_it(capsys, tmp_path):
    """`tenure demo` (without the Spark step, which tests/audit covers): static consumers restart with
    no rebalance, the server restarts with every offset back; every check it prints is ok."""
    assert main(["demo", "--no-audit", "--dir", str(tmp_path), "--members", "3", "--partitions", "6"]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and out.rstrip().endswith("demo passed")
    for line in ("ok   generation unchanged", "ok   0 rebalances during the restarts (0)",
                 "ok   every consumer got exactly its partitions", "ok   no other consumer saw an assignment callback",
                 "ok   every committed offset is back", "ok   no rebalance after the server restart"):
        assert line in out, line
    assert (tmp_path / "data" / "__consumer_offsets-0").is_dir()


def test_demo_without_a_dir_removes_its_temporary_directory(capsys, tmp_path, monkeypatch):
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))      # where mkdtemp puts the demo's dir
    assert main(["demo", "--no-audit", "--members", "2", "--partitions", "2"]) == 0
    out = capsys.readouterr().out
    assert f"data dir {tmp_path}/tenure-demo-" in out and out.rstrip().endswith("demo passed")
    assert list(tmp_path.iterdir()) == []


def test_limit_flags_reach_the_config_and_bad_values_are_refused():
    from tenure.tools.cli import _config, _parser
    args = _parser().parse_args(["serve", "--max-connections", "7", "--max-buffered-request-bytes", "4096",
                                 "--connections-max-idle-ms", "0", "--max-partitions-per-topic", "3",
                                 "--max-partitions", "9", "--log-window-ms", "250", "--log-burst", "2"])
    c = _config(args)
    assert (c.max_connections, c.max_buffered_request_bytes, c.connections_max_idle_ms, c.max_partitions_per_topic,
            c.max_partitions, c.log_window_ms, c.log_burst) == (7, 4096, 0, 3, 9, 250, 2)
    assert _config(_parser().parse_args(["serve"])).max_connections is None     # 1000 or half the fd limit
    for flag, value, least in [("--max-connections", "0", 1), ("--connections-max-idle-ms", "-1", 0),
                               ("--max-partitions", "0", 1), ("--log-burst", "0", 1)]:
        with pytest.raises(SystemExit) as exc:
            main(["serve", flag, value])
        assert str(exc.value) == f"tenure: {flag} must be at least {least}"
    with pytest.raises(SystemExit) as exc:               # __consumer_offsets is created under the caps too
        main(["serve", "--offsets-partitions", "5", "--max-partitions-per-topic", "4"])
    assert str(exc.value) == "tenure: --offsets-partitions must fit --max-partitions-per-topic and --max-partitions"


def test_every_setting_is_one_field_whose_flag_reaches_the_config():
    """tenure/config.py's fields carry their flags: each flag given a value (the least allowed, or a choice)
    reaches its field through `tenure serve`'s parsing and _config, and its default is the field's."""
    import dataclasses
    from tenure.config import ServerConfig, flag_of, flag_settings
    from tenure.tools.cli import _config, _parser
    defaults = _config(_parser().parse_args(["serve", "--no-admin"]))
    for f in flag_settings():
        if f.name.startswith("admin_"):
            continue                                      # the admin endpoint's flags: tests/integration/test_admin_cli.py
        if f.type == "bool":
            argv, want = [flag_of(f)], not f.default
        elif f.metadata["choices"]:
            want = f.metadata["choices"][0]
            argv = [flag_of(f), want]
        elif f.type == "tuple[str, ...] | None":          # --racks: one per broker, comma-separated
            argv, want = [flag_of(f), "r1"], ("r1",)
        elif f.type == "tuple[str, ...]":                 # a repeatable flag: each value kept, in order
            want = {"acls": ("allow User:a read topic:t", "deny User:* all group:g"),
                    "super_users": ("User:a", "User:b")}[f.name]
            argv = [x for value in want for x in (flag_of(f), value)]
        elif f.type in ("str", "str | None"):
            want = "/tmp/x" if f.name == "data_dir" else "h.example"
            argv = [flag_of(f), want]
        else:
            want = max(f.metadata["least"] or 0, 1) + (2 if f.name != "offsets_partitions" else 0)
            argv = [flag_of(f), str(want)]
        got = _config(_parser().parse_args(["serve", "--no-admin", *argv]))
        assert getattr(got, f.name) == want, argv
        assert getattr(defaults, f.name) == f.default, f.name
        assert dataclasses.replace(got, **{f.name: f.default}) == defaults, argv    # nothing else moved
    assert ServerConfig().admin_port is None and defaults.admin_port is None
