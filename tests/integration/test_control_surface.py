"""The control surface for out-of-process use: a real `tenure serve` process with --admin-port, driven by
`tenure fault ...` / `tenure groups ...` and plain HTTP, while a real client (confluent-kafka) uses it;
Prometheus metrics; a restart through the endpoint; JSON log lines."""
from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tenure.tools.cli import main
from tests.support.groups import wait_for
from tests.support.procs import TenureProcess

pytestmark = pytest.mark.timeout(180)


def http(url: str, method: str = "GET", data: dict | None = None):
    req = urllib.request.Request(url, method=method, data=None if data is None else json.dumps(data).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def metrics(url: str) -> dict:
    """{(name, labels as a sorted tuple): value} of the exposition."""
    status, body = http(url + "/metrics")
    assert status == 200
    out = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


KINDS = ("classic", "consumer")
# what each group kind counts for one static member joining, then its session expiring: the rebalance causes
# and the session the member has (a consumer group member's is the server's group.consumer.session.timeout.ms)
JOINED = {"classic": "member_joined", "consumer": "consumer member joined"}
EXPIRED = {"classic": "session_expired", "consumer": "consumer member expired"}
SESSION_MS = {"classic": 30000, "consumer": 45000}


@pytest.fixture
def proc(tmp_path):
    p = TenureProcess(tmp_path / "data", extra=("--admin-port", "0", "--min-session-timeout-ms", "1000",
                                               "--consumer-heartbeat-interval-ms", "250", "--log-format", "json"))
    with p:
        p.start()
        yield p
        assert p.terminate() == 0


def consume_static(bootstrap: str, group: str, topic: str, instance: str, kind: str = "classic") -> Consumer:
    """One record produced to `topic`, then a static consumer of a group of that kind (classic, or KIP-848
    consumer: group.protocol=consumer, whose session is the server's) subscribed until it has an assignment."""
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(topic, b"v")
    assert p.flush(10) == 0
    # fetch.wait.max.ms short: librdkafka sends FindCoordinator on the connection its long-poll Fetch holds, and
    # a broker answers one request per connection at a time (Kafka mutes the channel; so does tenure). After an
    # injected NOT_COORDINATOR, an answer later than librdkafka's 100 ms retry backoff makes the new coordinator's
    # address arrive while the retried commit waits, and librdkafka fails that commit with its own transport error
    # and looks the coordinator up again, round after round, until the session expires (librdkafka issue 3645:
    # "endless 'broker has no address yet'"); seen here under a loaded CI machine with the default 500 ms.
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": instance,
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 50}
    conf.update({"session.timeout.ms": SESSION_MS[kind]} if kind == "classic" else {"group.protocol": "consumer"})
    c = Consumer(conf)
    c.subscribe([topic])
    wait_for(lambda: (c.poll(0.2), c.assignment())[1], 30, "an assignment")
    return c


@pytest.mark.parametrize("kind", KINDS)
def test_faults_inspection_and_metrics_over_http_and_the_cli(proc, capsys, kind):
    """Every group kind alike (issue 28: GET /metrics answered 500 once a consumer group had members)."""
    admin = proc.admin_url.removeprefix("http://")
    c = consume_static(proc.bootstrap, "cs-g", "cs-t", "i-1", kind)
    closed = False
    try:
        # a fault through the CLI: the next OffsetCommit is answered NOT_COORDINATOR (16) ...
        assert main(["fault", "--admin", admin, "fail", "OffsetCommit", "NOT_COORDINATOR"]) == 0
        rule = json.loads(capsys.readouterr().out)
        assert (rule["action"], rule["api"], rule["error"], rule["error_name"], rule["remaining"]) == \
            ("fail", "OffsetCommit", 16, "NOT_COORDINATOR", 1)
        assert main(["fault", "--admin", admin, "list"]) == 0
        assert [r["id"] for r in json.loads(capsys.readouterr().out)] == [rule["id"]]
        # ... which librdkafka treats as retriable: it finds the coordinator again and the commit lands
        c.commit(offsets=[TopicPartition("cs-t", 0, 1)], asynchronous=False)
        assert main(["fault", "--admin", admin, "list"]) == 0
        assert json.loads(capsys.readouterr().out) == []
        m = metrics(proc.admin_url)
        assert m[("tenure_faults_injected_total", (("action", "fail"), ("api", "OffsetCommit")))] == 1
        assert m[("tenure_requests_total", (("api", "OffsetCommit"), ("error", "NOT_COORDINATOR")))] == 1
        assert m[("tenure_requests_total", (("api", "OffsetCommit"), ("error", "NONE")))] >= 1
        assert m[("tenure_rebalances_total", (("cause", JOINED[kind]), ("group", "cs-g")))] == 1
        assert m[("tenure_static_member_events_total", (("cause", "joined"), ("group", "cs-g")))] == 1
        assert m[("tenure_group_members", (("group", "cs-g"), ("kind", "static")))] == 1
        assert m[("tenure_groups", (("state", "Stable"),))] >= 1
        assert m[("tenure_connections", ())] >= 1
        assert m[("tenure_log_size_bytes", (("partition", "0"), ("topic", "cs-t")))] > 0
        assert m[("tenure_log_end_offset", (("partition", "0"), ("topic", "__consumer_offsets")))] >= 2
        assert m[("tenure_fsync_seconds_count", ())] >= 1          # --data-dir with --fsync batch

        # delay and clear through the CLI
        assert main(["fault", "--admin", admin, "delay", "Heartbeat", "50"]) == 0
        capsys.readouterr()
        assert main(["fault", "--admin", admin, "clear", "Heartbeat"]) == 0
        assert json.loads(capsys.readouterr().out) == {"removed": 1}

        # groups through the CLI
        assert main(["groups", "--admin", admin, "describe", "cs-g"]) == 0
        g = json.loads(capsys.readouterr().out)
        assert g["kind"] == kind and g["static_members"].keys() == {"i-1"} and g["offsets"][0]["offset"] == 1
        assert [(mem["group_instance_id"], mem["session_timeout_ms"], mem["assignment"]) for mem in g["members"]] \
            == [("i-1", SESSION_MS[kind], {"cs-t": [0]})]
        assert main(["groups", "--admin", admin, "list"]) == 0
        header, row = capsys.readouterr().out.splitlines()
        assert header.split()[:3] == ["GROUP", "KIND", "STATE"] and row.split()[:3] == ["cs-g", kind, "Stable"]

        # advance the clock past the session of a member that stopped heartbeating: it goes now
        c.close()                                               # static: no LeaveGroup (consumer: epoch -2)
        closed = True
        advance = SESSION_MS[kind] + 1000
        assert main(["fault", "--admin", admin, "advance-clock", str(advance)]) == 0
        out = json.loads(capsys.readouterr().out)
        timer = "heartbeat" if kind == "classic" else "consumer-session"
        assert out["advanced_ms"] == advance and any(k.startswith(timer) for k in out["fired"]), out
        assert proc.admin("/groups/cs-g")["members"] == []
        assert proc.admin("/groups/cs-g")["rebalance_causes"] == {JOINED[kind]: 1, EXPIRED[kind]: 1}
        m = metrics(proc.admin_url)
        assert m[("tenure_group_members", (("group", "cs-g"), ("kind", "static")))] == 0
        assert m[("tenure_rebalances_total", (("cause", EXPIRED[kind]), ("group", "cs-g")))] == 1
    finally:
        if not closed:
            c.close()


def test_expire_errors_and_bad_requests(proc, capsys):
    admin = proc.admin_url.removeprefix("http://")
    assert main(["fault", "--admin", admin, "expire", "nope", "i-1"]) == 1
    assert "GROUP_ID_NOT_FOUND (69)" in capsys.readouterr().err
    assert main(["fault", "--admin", admin, "fail", "NoSuchApi", "15"]) == 1
    assert "unknown API" in capsys.readouterr().err
    assert main(["fault", "--admin", admin, "fail", "Metadata", "15"]) == 1
    assert "no whole-request error answer" in capsys.readouterr().err
    status, body = http(proc.admin_url + "/faults", "POST", None)
    assert status == 400
    status, body = http(proc.admin_url + "/clock/advance", "POST", {"ms": -5})
    assert status == 400 and json.loads(body)["error"] == "INVALID_REQUEST"
    req = urllib.request.Request(proc.admin_url + "/faults", method="POST", data=b"{not json",
                                 headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    assert err.value.code == 400
    # the Kafka side is unaffected by all that
    p = Producer({"bootstrap.servers": proc.bootstrap})
    p.produce("still-up", b"x")
    assert p.flush(10) == 0


@pytest.mark.parametrize("kind", KINDS)
def test_restart_through_the_endpoint_keeps_port_state_and_the_ready_line(proc, capsys, kind):
    admin = proc.admin_url.removeprefix("http://")
    c = consume_static(proc.bootstrap, "rt-g", "rt-t", "i-1", kind)
    try:
        c.commit(offsets=[TopicPartition("rt-t", 0, 1)], asynchronous=False)
        gen = proc.admin("/groups/rt-g")["generation"]
        assert main(["fault", "--admin", admin, "restart"]) == 0
        assert json.loads(capsys.readouterr().out)["restarting"] is True
        wait_for(lambda: "restarted on" in proc.stderr(), 30, "the restart")
        wait_for(lambda: _get(proc, "/health") == {"status": "ok"}, 30, "the endpoint back")
        g = proc.admin("/groups/rt-g")
        assert (g["generation"], g["offsets"][0]["offset"], list(g["static_members"])) == (gen, 1, ["i-1"])
        # the client carries on against the restarted server, in the same generation
        c.commit(offsets=[TopicPartition("rt-t", 0, 1)], asynchronous=False)
        assert proc.admin("/groups/rt-g")["generation"] == gen
        assert proc._lines.qsize() == 0            # still exactly one "tenure listening" line on stdout
    finally:
        c.close()


def _get(proc, path):
    try:
        return proc.admin(path)
    except (urllib.error.URLError, OSError):
        return None


def test_json_log_lines(proc):
    lines = [ln for ln in proc.stderr().splitlines() if ln.strip()]
    assert lines
    records = [json.loads(ln) for ln in lines]          # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= r.keys() for r in records)
    assert any(r["logger"] == "tenure.server" and re.match(r"admin endpoint on http://", r["message"])
               for r in records)
