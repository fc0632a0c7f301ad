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


SAMPLES = {"listeners": ("SASL_SSL://127.0.0.1:9093",), "users": ("alice:secret",),
           "listener_security_protocol_map": "EXTERNAL:SASL_SSL", "sasl_mechanisms": "SCRAM-SHA-512"}     # (security/: docs/security.md)


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
        elif f.name in SAMPLES:                          # values the config checks the form of
            want = SAMPLES[f.name]
            argv = [flag_of(f), want[0] if isinstance(want, tuple) else want]
        elif f.type == "tuple[str, ...] | None":          # --racks: one per broker, comma-separated
            argv, want = [flag_of(f), "r1"], ("r1",)
        elif f.name == "max_connections_per_ip_overrides":  # HOST:N,...
            want = "h.example:3"
            argv = [flag_of(f), want]
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


# start-up failures name what failed, the value and the flag (one line on stderr, exit 1)

def test_a_taken_port_names_the_address_and_the_flags(tenure_server, capsys):
    port = tenure_server.port
    assert main(["serve", "--port", str(port), "--no-admin"]) == 1
    err = capsys.readouterr().err
    assert err == f"tenure: cannot listen on 127.0.0.1:{port} (--host 127.0.0.1, --port {port}): " \
                  "Address already in use\n", err


def test_a_taken_port_of_a_second_broker_names_the_broker(capsys):
    import socket

    def taken_after_a_free_port() -> socket.socket:
        """A listening socket on a port whose port - 1 was free a moment ago (broker 0 listens there: another
        process on the machine may hold the port below an ephemeral one)."""
        for _ in range(100):
            taken = socket.socket()
            taken.bind(("127.0.0.1", 0))
            try:
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", taken.getsockname()[1] - 1))
                return taken
            except OSError:
                taken.close()
        raise AssertionError("no ephemeral port with a free port below it")

    with taken_after_a_free_port() as taken:
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port - 1), "--brokers", "2", "--no-admin"]) == 1
    err = capsys.readouterr().err
    assert f"broker 1 cannot listen on 127.0.0.1:{port} (--host 127.0.0.1, --port {port - 1}: broker N " \
           "listens on --port + N): Address already in use" in err, err


def test_a_data_dir_that_cannot_be_used_is_not_a_listen_error(tmp_path, capsys):
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("")
    assert main(["serve", "--port", "0", "--no-admin", "--data-dir", str(not_a_dir)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"tenure: cannot use the data dir {not_a_dir} (--data-dir): "), err
    assert "listen" not in err
    inside = tmp_path / "a-file" / "below"
    assert main(["serve", "--port", "0", "--no-admin", "--data-dir", str(inside)]) == 1
    assert f"cannot use the data dir {inside} (--data-dir): Not a directory" in capsys.readouterr().err


def test_a_host_that_does_not_resolve_names_the_flag(capsys):
    assert main(["serve", "--port", "0", "--no-admin", "--host", "no-such-host.invalid"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tenure: cannot listen on no-such-host.invalid:0 (--host no-such-host.invalid, "
                          "--port 0): "), err


def test_serve_help_shows_every_flags_default():
    from tenure.tools.cli import _parser
    parser = _parser()
    serve = next(a for a in parser._subparsers._group_actions[0].choices.items() if a[0] == "serve")[1]
    flags = [a for a in serve._actions if a.option_strings and a.dest != "help"]
    assert len(flags) >= 39
    missing = [a.option_strings[0] for a in flags if "default" not in (a.help or "")]
    assert missing == [], missing
    text = serve.format_help()
    assert "group.min.session.timeout.ms (default 6000)" in " ".join(text.split())


def test_the_demo_prints_a_tables_pattern_that_matches_the_tables(tmp_path):
    """The line `tenure demo` prints after the audit: a shell pattern (bash brace expansion) matching each
    table's Parquet files, and nothing else (the report's own files are not tables)."""
    from tenure.tools.demo import tables_line
    for table in ("generations", "member_map_history"):
        (tmp_path / table).mkdir()
        (tmp_path / table / "part-00000-x.snappy.parquet").write_bytes(b"PAR1")
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "timeline.png").write_bytes(b"")
    (tmp_path / "report.html").write_text("")
    line = tables_line(tmp_path)
    assert line == f"tables (Parquet, a directory each): {tmp_path}/{{generations,member_map_history}}/*.parquet"
    pattern = line.split(": ", 1)[1]
    out = subprocess.run(["bash", "-c", f"ls {pattern}"], capture_output=True, text=True, check=True).stdout.split()
    assert out == [f"{tmp_path}/generations/part-00000-x.snappy.parquet",
                   f"{tmp_path}/member_map_history/part-00000-x.snappy.parquet"]
    assert tables_line(tmp_path / "plots") == f"tables: none in {tmp_path / 'plots'}"


def test_a_ready_file_that_cannot_be_written_names_the_flag(tmp_path, capsys):
    path = tmp_path / "no-such-dir" / "ready.json"
    assert main(["serve", "--port", "0", "--no-admin", "--ready-file", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"tenure: cannot write the ready file {path} (--ready-file): No such file or directory" in err, err
