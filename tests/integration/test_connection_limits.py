"""Connections and descriptors (docs/limits.md): `--max-connections`, the descriptor limit raised at start,
accept() failing at the descriptor limit (logged once per burst, the server keeps serving, commits still
fsync), a creation that runs out of descriptors, the budget for buffered partial requests (RSS measured in
a `tenure serve` child) and `connections.max.idle.ms`.

Tests that need a low descriptor limit run `tenure serve` as a child with its own RLIMIT_NOFILE, so this
process is unaffected."""
from __future__ import annotations

import logging
import os
import re
import socket
import struct
import time

import pytest
from kafka.protocol.consumer import OffsetCommitRequest
from kafka.protocol.metadata import ApiVersionsRequest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.integration.test_dataplane_apis import wait_until
from tests.integration.test_partition_limits import create_topics
from tests.support.procs import TenureProcess
from tests.support.wire import WireClient, create_topic, fetch_request, metadata_request, request_bytes

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc (Linux)")]

KAFKA_STORAGE_ERROR = 56
MiB = 1 << 20


def commit(w: WireClient, offset: int) -> int:
    T = OffsetCommitRequest.fields["topics"].data_class
    P = T.fields["partitions"].data_class
    r = w.call(OffsetCommitRequest(group_id="lim-g", generation_id_or_member_epoch=-1, member_id="",
                                   group_instance_id=None, topics=[T(name="lim-t", partitions=[
                                       P(partition_index=0, committed_offset=offset, committed_metadata="")])]), 8)
    return r.topics[0].partitions[0].error_code


def status(pid: int, field: str) -> int:
    """A /proc/PID/status figure in KiB (VmRSS, VmHWM) or a count."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


# ------------------------------------------------------------------------------------------------ max connections
def test_connections_beyond_the_limit_are_closed_at_once_and_logged_once_per_burst(caplog):
    caplog.set_level(logging.INFO, logger="tenure.server")
    with ServerThread(ServerConfig(port=0, max_connections=3, log_window_ms=3000)) as s:
        kept = [WireClient.to(s.bootstrap) for _ in range(3)]
        for c in kept:
            assert c.call(ApiVersionsRequest(), 3).error_code == 0
        t0 = time.monotonic()
        refused = [WireClient.to(s.bootstrap) for _ in range(12)]
        for c in refused:
            assert c.is_closed_by_peer(timeout=5)
            c.close()
        assert time.monotonic() - t0 < 3, "the test needs the 12 inside one log window"
        for c in kept:                                      # the open ones are served as before
            assert c.call(ApiVersionsRequest(), 3).error_code == 0
        assert s.metrics.closed_connections["max_connections"] == 12
        lines = lambda: [r.getMessage() for r in caplog.records if "max-connections" in r.getMessage()
                         or r.getMessage().startswith("max connections:")]
        wait_until(lambda: len(lines()) == 2, what="the summary line at the end of the window")
        assert re.fullmatch(r"closing a new connection from \('127\.0\.0\.1', \d+\): 3 connections are open, "
                            r"as many as --max-connections allows", lines()[0]), lines()
        assert lines()[1] == "max connections: 11 more line(s) like the above suppressed in 3.0s"
        kept.pop().close()                                  # room again: a new connection is served
        wait_until(lambda: s.metrics.connections_open == 2, what="the closed connection to go")
        with WireClient.to(s.bootstrap) as c:
            assert c.call(ApiVersionsRequest(), 3).error_code == 0
        for c in kept:
            c.close()


# ------------------------------------------------------------------------------------------------ per client address
def test_one_client_address_cannot_take_the_whole_budget(caplog):
    """Kafka's max.connections.per.ip and its overrides: a host holding many idle connections (127.0.0.3 here, one
    of loopback's addresses) is held to its share, so a real client from another address still gets in; an
    override raises one address's share, an override of 0 shuts one address out."""
    from tests.support.clients import confluent_round_trip
    caplog.set_level(logging.INFO, logger="tenure.server")
    config = ServerConfig(port=0, max_connections=40, max_connections_per_ip=10, log_window_ms=1000,
                          max_connections_per_ip_overrides="127.0.0.5:15,[127.0.0.4]:0")
    with ServerThread(config) as s:
        hog = [WireClient.to(s.bootstrap, source="127.0.0.3") for _ in range(60)]
        served = [c for c in hog if not c.is_closed_by_peer(timeout=0.3)]
        assert len(served) == 10
        for c in served:
            assert c.call(ApiVersionsRequest(), 3).error_code == 0
        assert s.call(lambda: s.server.listeners[0].connections_from("127.0.0.3")) == 10
        # a real client from another address still gets in, whole budget or not
        produced, consumed = confluent_round_trip(s.bootstrap, "per-ip-t", partitions=2, n=20)
        assert len(produced) == 20 and sorted(produced) == sorted(c[:3] for c in consumed)
        time.sleep(1.1)                                     # a new log window: this address's line is logged
        wider = [WireClient.to(s.bootstrap, source="127.0.0.5") for _ in range(16)]
        assert [c.is_closed_by_peer(timeout=0.2) for c in wider] == [False] * 15 + [True]
        with WireClient.to(s.bootstrap, source="127.0.0.4") as shut_out:
            assert shut_out.is_closed_by_peer(timeout=5)
        wait_until(lambda: s.metrics.closed_connections["max_connections_per_ip"] == 50 + 1 + 1,
                   what="each refused connection counted")          # counted just after its close
        assert s.metrics.closed_connections["max_connections"] == 0
        lines = [r.getMessage() for r in caplog.records if "--max-connections-per-ip" in r.getMessage()]
        assert lines[0] == "closing a new connection from 127.0.0.3: that address has 10 connection(s) open, as " \
                           "many as --max-connections-per-ip allows", lines
        assert "closing a new connection from 127.0.0.5: that address has 15 connection(s) open, as many as " \
               "--max-connections-per-ip-overrides allows" in lines
        served.pop().close()                                # room again for that address
        wait_until(lambda: s.call(lambda: s.server.listeners[0].connections_from("127.0.0.3")) == 9,
                   what="the closed connection to go")
        with WireClient.to(s.bootstrap, source="127.0.0.3") as c:
            assert c.call(ApiVersionsRequest(), 3).error_code == 0
        for c in hog + wider:
            c.close()


def test_per_address_limits_are_checked_at_start():
    with pytest.raises(ValueError, match="--max-connections-per-ip 0 needs --max-connections-per-ip-overrides"):
        ServerConfig(max_connections_per_ip=0)
    with pytest.raises(ValueError, match=r"--max-connections-per-ip-overrides: 'host-without-count' is not HOST:N"):
        ServerConfig(max_connections_per_ip_overrides="127.0.0.1:5,host-without-count")
    with pytest.raises(ValueError, match=r"'h:-1' is not HOST:N"):
        ServerConfig(max_connections_per_ip_overrides="h:-1")
    from tenure.config import parse_ip_overrides
    assert parse_ip_overrides("127.0.0.1:200, [::1]:3,::1:4,localhost:7") == {"127.0.0.1": 200, "::1": 4,
                                                                               "localhost": 7}
    from tenure.tools.cli import main
    assert main(["serve", "--port", "0", "--no-admin", "--max-connections-per-ip-overrides",
                 "no-such-host.invalid:3"]) == 1


# ------------------------------------------------------------------------------------------------ descriptors
def test_the_descriptor_limit_is_raised_to_the_hard_limit_at_start(tmp_path):
    with TenureProcess(tmp_path / "data", nofile=(64, 512)) as srv:
        srv.start()
        limits = open(f"/proc/{srv.proc.pid}/limits").read()
        assert re.search(r"Max open files\s+512\s+512", limits), limits
        err = srv.stderr()
        assert "descriptor limit (RLIMIT_NOFILE) raised from 64 to 512" in err, err
        assert "at most 256 client connection(s) at once (descriptor limit 512)" in err, err
        assert srv.terminate() == 0


def test_at_the_descriptor_limit_the_server_keeps_serving_and_committing(tmp_path):
    """The issue's case: out of descriptors, accept() fails (logged once, not per attempt), yet a commit
    on an open connection is fsynced and answered (no descriptor per fsync) and a CreateTopics that cannot
    open its logs answers KAFKA_STORAGE_ERROR leaving nothing behind; once descriptors are free again new
    connections are served."""
    data = tmp_path / "data"
    # --no-admin: the admin endpoint's background import would take and give back descriptors meanwhile
    # (the admin endpoint at the limit is the next test)
    srv = TenureProcess(data, fsync="always", nofile=(96, 96), extra=("--max-connections", "10000", "--no-admin"))
    with srv:
        srv.start()
        pid = srv.proc.pid
        with WireClient.to(srv.bootstrap) as w:
            create_topic(w, "lim-t")                      # offsets are committed for an existing topic
            assert commit(w, 1) == 0
            flood = []
            try:
                for _ in range(150):                     # more than the server has descriptors for
                    flood.append(socket.create_connection(("127.0.0.1", srv.port), timeout=5))
                wait_until(lambda: "cannot accept connections" in srv.stderr(), what="accept() to fail")
                time.sleep(1.0)                           # ~10 retries at 100 ms
                assert commit(w, 2) == 0                  # fsynced on the segment's own fd, answered
                r = w.call(create_topics(("wide", 200)), 7)   # no descriptor for 200 logs: answered, nothing left
                assert r.topics[0].error_code == KAFKA_STORAGE_ERROR, r.topics[0]
                assert r.topics[0].error_message.startswith("topic 'wide' needs 200 file descriptor(s)")
                assert not [p for p in data.iterdir() if p.name.startswith("wide-")]
                assert commit(w, 3) == 0
                assert srv.running
                err = srv.stderr()
                assert err.count("cannot accept connections") == 1, err[-3000:]
                assert len(err) < 20000, f"{len(err)} bytes of log in ~1s at the limit"
            finally:
                for c in flood:
                    c.close()
            wait_until(lambda: "accepting connections again" in srv.stderr(), what="accepting again")
            wait_until(lambda: open_fds(pid) < 60, what="the flood's connections to close")
        with WireClient.to(srv.bootstrap) as w2:          # served again
            assert w2.call(ApiVersionsRequest(), 3).error_code == 0
            assert w2.call(create_topics(("wide", 20)), 7).topics[0].error_code == 0
        assert srv.terminate() == 0
    assert sorted(p.name for p in data.iterdir() if p.name.startswith("wide-")) == sorted(
        f"wide-{i}" for i in range(20))


def test_a_creation_leaves_descriptors_for_the_logs_or_is_refused(tmp_path):
    """With --data-dir every partition keeps a descriptor open: a creation that would leave fewer than 32
    free answers KAFKA_STORAGE_ERROR before opening anything, so a later commit (or a segment roll) still
    has descriptors."""
    data = tmp_path / "data"
    with TenureProcess(data, fsync="always", nofile=(256, 256), extra=("--no-admin",)) as srv:
        srv.start()
        with WireClient.to(srv.bootstrap) as w:
            create_topic(w, "lim-t")
            r = w.call(create_topics(("too-wide", 300)), 7)
            assert r.topics[0].error_code == KAFKA_STORAGE_ERROR
            assert re.fullmatch(r"topic 'too-wide' needs 300 file descriptor\(s\) \(one per partition log\): \d+ of "
                                r"the limit of 256 are open and 32 are kept free for the logs",
                                r.topics[0].error_message), r.topics[0].error_message
            assert w.call(create_topics(("wide", 150)), 7).topics[0].error_code == 0
            r = w.call(create_topics(("wider", 100)), 7)
            assert r.topics[0].error_code == KAFKA_STORAGE_ERROR, r.topics[0]
            assert 256 - open_fds(srv.proc.pid) >= 32
            assert commit(w, 1) == 0
        assert srv.terminate() == 0
    assert not [p for p in data.iterdir() if p.name.startswith(("too-wide-", "wider-"))]


def test_the_admin_endpoint_at_the_descriptor_limit_logs_once_too(tmp_path):
    """The admin endpoint's accept loop is asyncio's, which reports every failed accept() (thousands of
    lines a second at the limit); the server sends those to its rate-limited line, and once descriptors
    are back the endpoint answers."""
    srv = TenureProcess(tmp_path / "data", nofile=(96, 96), extra=("--max-connections", "10000"))
    with srv:
        srv.start()
        wait_until(lambda: _answers(srv), what="the admin endpoint to answer")
        host, port = srv.admin_url.rsplit("/", 1)[1].rsplit(":", 1)
        flood = []
        try:
            for _ in range(150):                         # the Kafka port takes the server's last descriptors
                flood.append(socket.create_connection(("127.0.0.1", srv.port), timeout=5))
            wait_until(lambda: "cannot accept connections" in srv.stderr(), what="accept() to fail")
            for _ in range(20):                          # then the admin port is asked too
                flood.append(socket.create_connection((host, int(port)), timeout=5))
            time.sleep(1.5)                               # asyncio retries its accept after 1 s
            err = srv.stderr()
            assert "socket.accept() out of system resource" not in err, err[-3000:]
            assert err.count("cannot accept connections") == 1, err[-3000:]
            assert len(err) < 20000, f"{len(err)} bytes of log in ~1.5s at the limit"
        finally:
            for c in flood:
                c.close()
        wait_until(lambda: _answers(srv), what="the admin endpoint to answer again")
        assert srv.terminate() == 0


def _answers(srv: TenureProcess) -> bool:
    try:
        return srv.admin("/groups") is not None
    except OSError:
        return False


# ------------------------------------------------------------------------------------------------ partial requests
def test_partial_requests_stay_within_the_buffer_budget(tmp_path):
    """8 connections each send 16 MiB of a 60 MiB request and stall: with a 24 MiB budget the server
    closes those that would pass it, and its peak RSS grows by far less than the 128 MiB sent."""
    budget = 24 * MiB
    srv = TenureProcess(tmp_path / "data", extra=("--max-buffered-request-bytes", str(budget),
                                                  "--max-frame-bytes", str(64 * MiB), "--log-level", "INFO"))
    with srv:
        srv.start()
        pid = srv.proc.pid
        with WireClient.to(srv.bootstrap) as w:          # warm up: the first request's imports and buffers
            w.call(metadata_request("warm"), 12)
        peak_before = status(pid, "VmHWM")
        chunk = b"\0" * MiB
        conns, closed = [], 0
        for _ in range(8):
            c = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            conns.append(c)
            try:
                c.sendall(struct.pack(">i", 60 * MiB))
                for _ in range(16):
                    c.sendall(chunk)
            except OSError:                               # closed by the server: over the budget
                closed += 1
        time.sleep(1.0)                                   # let the server read what was sent
        growth_mib = (status(pid, "VmHWM") - peak_before) / 1024
        with WireClient.to(srv.bootstrap) as w:           # everyone else is still served
            assert w.call(ApiVersionsRequest(), 3).error_code == 0
        for c in conns:
            c.close()
        err = srv.stderr()
        assert "--max-buffered-request-bytes" in err, err[-3000:]
        assert growth_mib < 64, f"peak RSS grew {growth_mib:.0f} MiB for 128 MiB of partial requests"
        assert srv.terminate() == 0


# ------------------------------------------------------------------------------------------------ idle connections
def test_idle_and_stalled_connections_are_closed_busy_ones_are_not(caplog):
    caplog.set_level(logging.INFO, logger="tenure.server")
    with ServerThread(ServerConfig(port=0, connections_max_idle_ms=1500)) as s:
        silent = WireClient.to(s.bootstrap)
        stalled = WireClient.to(s.bootstrap)
        stalled.send_raw(struct.pack(">i", 100) + b"\0" * 10)   # a request never finished
        talker = WireClient.to(s.bootstrap)
        poller = WireClient.to(s.bootstrap)
        poller.call(metadata_request("idle-t"), 12)
        t0 = time.monotonic()
        # a long poll (3.5 s) outlives the idle time (1.5 s): a connection with a request being served is not idle
        poller.send_raw(request_bytes(fetch_request("idle-t", 0, 0, max_wait_ms=3500, min_bytes=1), 12,
                                      correlation_id=7))
        while time.monotonic() - t0 < 2.5:             # the talker is never idle: 0.1 s gaps
            assert talker.call(ApiVersionsRequest(), 3).error_code == 0
            time.sleep(0.1)
        assert silent.is_closed_by_peer(timeout=5)
        assert stalled.is_closed_by_peer(timeout=5)
        payload = poller.read_frame()                      # answered after its max wait, not closed
        assert struct.unpack(">i", payload[:4])[0] == 7
        assert talker.call(ApiVersionsRequest(), 3).error_code == 0
        assert s.metrics.closed_connections["idle"] == 2
        idle_lines = [r.getMessage() for r in caplog.records if "connections.max.idle.ms" in r.getMessage()]
        assert len(idle_lines) == 2 and all(re.fullmatch(r"connection \d+ from .+: closing: idle for 1500 ms "
                                                         r"\(connections\.max\.idle\.ms\)", m) for m in idle_lines)
        for c in (silent, stalled, talker, poller):
            c.close()
