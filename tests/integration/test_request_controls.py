"""The test controls a step beyond fault rules, against real clients: request hooks (`on_request`), the
request capture (`requests`) and network faults (`network`), each through the pytest plugin's
`tenure_server` (a ServerThread) - and the admin endpoint's /requests and /network.

No sleeping out session timeouts: where a session matters the coordinator's clock is moved
(`advance_clock`) while the partitioned member stays silent.
"""
from __future__ import annotations

import json
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from kafka import KafkaProducer

from tenure.control.hooks import HookError
from tenure.protocol.errors import ErrorCode
from tests.support.groups import GroupMember, wait_for

pytestmark = pytest.mark.timeout(120)


def create_topic(server, name: str, partitions: int) -> None:
    server.call(lambda: server.server.topics.create(name, partitions))


def produce(server, topic: str, values: list[bytes], partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    for v in values:
        p.produce(topic, v, partition=partition)
    assert p.flush(20) == 0


def dynamic_consumer(server, group: str, client_id: str) -> Consumer:
    return Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "client.id": client_id,
                     "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})


def poll_value(c: Consumer, timeout: float = 30.0) -> bytes:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            return m.value()
    raise AssertionError("no record consumed")


# ------------------------------------------------------------------------------------------- hooks
def test_a_hook_answers_the_second_join_with_rebalance_in_progress_and_librdkafka_recovers(tenure_server):
    """The group's second JoinGroup (a dynamic member's join with the member id MEMBER_ID_REQUIRED gave it)
    is answered REBALANCE_IN_PROGRESS by the hook; librdkafka joins again, gets its partition and consumes.
    The capture shows the three joins and their answers."""
    create_topic(tenure_server, "hk-t", 1)
    produce(tenure_server, "hk-t", [b"one"])
    joins = []

    def second_join_rebalances(call):
        joins.append(call.request.member_id)
        if len(joins) == 2:
            return call.error("REBALANCE_IN_PROGRESS")
        return None

    c = dynamic_consumer(tenure_server, "hk-g", "hk-c")
    try:
        with tenure_server.on_request("JoinGroup", second_join_rebalances, group="hk-g") as hook:
            c.subscribe(["hk-t"])
            assert poll_value(c) == b"one"
        assert hook.calls == len(joins) == 3 and hook.answered == 1
        got = tenure_server.requests(api="JoinGroup", group="hk-g")
        assert [e.error for e in got] == [ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.REBALANCE_IN_PROGRESS, 0]
        assert joins[0] == "" and joins[1] == joins[2] != ""       # it kept its member id
        assert tenure_server.group("hk-g").member(joins[2]).assignment == {"hk-t": [0]}
        assert all(e.client_id == "hk-c" for e in got)
    finally:
        c.close()


def _second_join_rebalances():
    seen: list[str] = []

    def hook(call):
        seen.append(call.request.member_id)
        return call.error("REBALANCE_IN_PROGRESS") if len(seen) == 2 else None
    return hook


def test_kafka_python_recovers_from_a_rebalance_in_progress_answer_to_its_second_join(tenure_server):
    create_topic(tenure_server, "hkp-t", 2)
    produce(tenure_server, "hkp-t", [b"one"], partition=1)
    m = GroupMember("kafka-python", tenure_server.bootstrap, "hkp-g", "hkp-t", name="hkp-c")
    with tenure_server.on_request("JoinGroup", _second_join_rebalances(), group="hkp-g") as hook:
        m.start()
        try:
            assert m.wait_assigned(30) == {0, 1}
            wait_for(lambda: (1, 0, b"one") in m.records, 30, "the record")
        finally:
            m.stop()
    assert hook.answered == 1 and hook.calls >= 3
    codes = [e.error for e in tenure_server.requests(api="JoinGroup", group="hkp-g")]
    assert codes[:3] == [ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.REBALANCE_IN_PROGRESS, 0]


def test_aiokafka_surfaces_a_rebalance_in_progress_answer_to_its_join_to_the_application(tenure_server):
    """aiokafka 0.14 does not retry a JoinGroup answered REBALANCE_IN_PROGRESS, as Java's client does (it
    logs "Unexpected error in join group" and the error comes out of the consumer's start()); a consumer
    started again joins."""
    create_topic(tenure_server, "hka-t", 1)
    m = GroupMember("aiokafka", tenure_server.bootstrap, "hka-g", "hka-t", name="hka-c")
    with tenure_server.on_request("JoinGroup", _second_join_rebalances(), group="hka-g") as hook:
        m.start()
        wait_for(lambda: m.closed.is_set(), 30, "aiokafka to give up")
    assert hook.answered == 1 and "RebalanceInProgressError" in repr(m.crash)
    again = GroupMember("aiokafka", tenure_server.bootstrap, "hka-g", "hka-t", name="hka-c").start()
    try:
        assert again.wait_assigned(30) == {0}
    finally:
        again.stop()


def test_hook_filters_delay_drop_and_a_rewritten_answer(tenure_server):
    """A hook filtered on client id and topic: a delayed Metadata, a dropped Produce (the connection is
    closed, kafka-python reconnects and resends), and an answer changed on its way out (a Metadata
    answer with the topic's partitions hidden, which kafka-python sees)."""
    create_topic(tenure_server, "hf-t", 2)
    dropped = []

    def drop_first_produce(call):
        if not dropped:
            dropped.append(call.ctx.connection_id)
            return call.drop()
        return None

    p = KafkaProducer(bootstrap_servers=tenure_server.bootstrap, client_id="hf-p", retries=5,
                      enable_idempotence=False)
    try:
        with tenure_server.on_request("Produce", drop_first_produce, topic="hf-t", client_id="hf-p") as hook, \
                tenure_server.on_request("Produce", drop_first_produce, topic="other") as unused:
            p.send("hf-t", b"v", partition=1).get(30)
        assert hook.calls == 2 and hook.answered == 1 and unused.calls == 0
        produces = tenure_server.requests(api="Produce", client_id="hf-p")
        assert [e.outcome for e in produces] == ["closed", "answered"]
        assert produces[0].connection == dropped[0] != produces[1].connection       # a new connection

    finally:
        p.close(5)

    def slow(call):
        call.delay(300)

    with tenure_server.on_request("Metadata", slow, client_id="hf-slow") as delayed:
        t0 = time.monotonic()
        s = KafkaProducer(bootstrap_servers=tenure_server.bootstrap, client_id="hf-slow")
        try:
            assert s.partitions_for("hf-t") == {0, 1}
        finally:
            s.close(5)
        assert time.monotonic() - t0 >= 0.3 and delayed.calls >= 1
    assert min(e.duration_ms for e in tenure_server.requests(api="Metadata", client_id="hf-slow")) >= 300

    def hide_partitions(call):
        def rewrite(answer):
            for t in answer.topics:
                if t.name == "hf-t":
                    t.partitions = t.partitions[:1]
        call.on_response(rewrite)

    with tenure_server.on_request("Metadata", hide_partitions, client_id="hf-q"):
        q = KafkaProducer(bootstrap_servers=tenure_server.bootstrap, client_id="hf-q")
        try:
            assert q.partitions_for("hf-t") == {0}
        finally:
            q.close(5)


def test_a_raising_hook_is_reported_at_the_end_of_its_block_and_the_server_serves_on(tenure_server):
    create_topic(tenure_server, "hr-t", 1)

    def broken(call):
        raise KeyError("not in my table")

    with pytest.raises(HookError, match="broken on Produce.*KeyError") as info:
        with tenure_server.on_request("Produce", broken):
            produce(tenure_server, "hr-t", [b"a", b"b"])         # answered as if there were no hook
    assert isinstance(info.value.__cause__, KeyError)
    assert tenure_server.hooks.hooks() == () and tenure_server.hooks.errors == []
    produced = tenure_server.requests(api="Produce")
    assert produced and all(e.error == 0 and e.outcome == "answered" for e in produced)
    c = Consumer({"bootstrap.servers": tenure_server.bootstrap, "group.id": "hr-g", "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["hr-t"])
        assert poll_value(c) == b"a"
    finally:
        c.close()

    def wrong_type(call):
        return "not a response"

    with pytest.raises(HookError, match="TypeError"):
        with tenure_server.on_request("Metadata", wrong_type):
            produce(tenure_server, "hr-t", [b"c"])


# ------------------------------------------------------------------------------------------- capture
@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_capture_shows_a_static_restart_sent_joingroup_with_its_instance_id_and_no_leavegroup(tenure_server, client):
    create_topic(tenure_server, "cap-t", 2)
    a = GroupMember(client, tenure_server.bootstrap, "cap-g", "cap-t", "cap-a").start()
    try:
        assert a.wait_assigned(30) == {0, 1}
        tenure_server.wait_for_group("cap-g", members=1)
        mark = tenure_server.capture.last_seq
        with tenure_server.no_rebalance("cap-g"):
            a.stop()
            a = GroupMember(client, tenure_server.bootstrap, "cap-g", "cap-t", "cap-a").start()
            assert a.wait_assigned(30) == {0, 1}
        restart = tenure_server.requests(group="cap-g", since=mark)
        assert tenure_server.requests(api="LeaveGroup", group="cap-g") == []
        joins = [e for e in restart if e.api == "JoinGroup"]
        assert len(joins) == 1 and joins[0].group_instance_id == "cap-a" and joins[0].error == 0
        assert joins[0].client_id == "cap-a" and joins[0].member_id == ""    # a new process: no member id yet
        assert joins[0].response.member_id == tenure_server.group("cap-g").static_members["cap-a"]
        assert {e.api for e in restart} >= {"FindCoordinator", "JoinGroup", "SyncGroup"}
    finally:
        a.stop()


def test_capture_is_a_bounded_ring_queryable_and_written_as_json_lines(tmp_path):
    from tenure.server import ServerThread
    with ServerThread(capture_requests=5) as server:
        p = KafkaProducer(bootstrap_servers=server.bootstrap, client_id="ring")
        try:
            for i in range(6):
                p.send("ring-t", str(i).encode()).get(10)
        finally:
            p.close(5)
        kept = server.requests()
        assert len(kept) == 5 and [e.seq for e in kept] == list(range(server.capture.last_seq - 4,
                                                                       server.capture.last_seq + 1))
        assert [e.api for e in server.requests(api="Produce")] == ["Produce"] * len(server.requests(api=0))
        produce = server.requests(api="Produce")[-1]
        assert produce.summary() == {"topics": ["ring-t"]} and produce.request is None     # records not kept
        out = tmp_path / "requests.jsonl"
        assert server.capture.write_jsonl(out, api="Produce", bodies=True) == len(server.requests(api="Produce"))
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert rows and rows[-1]["api"] == "Produce" and rows[-1]["client_id"] == "ring"
        assert rows[-1]["outcome"] == "answered" and rows[-1]["error_name"] == "NONE"
        assert rows[-1]["response"]["responses"][0]["name"] == "ring-t"
        with pytest.raises(ValueError, match="unknown API"):
            server.requests(api="NoSuchApi")
    with ServerThread(capture_requests=0) as server:
        KafkaProducer(bootstrap_servers=server.bootstrap).close(5)
        assert server.requests() == []


# ------------------------------------------------------------------------------------------- network
def _static_pair(server, group: str, topic: str):
    a = GroupMember("confluent", server.bootstrap, group, topic, "a", session_timeout_ms=6000,
                    heartbeat_interval_ms=300).start()
    b = GroupMember("confluent", server.bootstrap, group, topic, "b", session_timeout_ms=6000,
                    heartbeat_interval_ms=300).start()
    wait_for(lambda: len(a.assignment | b.assignment) == 4 and a.assignment and b.assignment, 30, "two members")
    server.wait_for_group(group, members=2)
    return a, b


def _advance(server, total_ms: int, live: tuple[str, ...], step_ms: int = 1500) -> None:
    """Move the coordinator's clock `total_ms` ahead in steps; after each, wait until every `live` member (by
    client id) has heartbeated again (a live member's session restarts at each heartbeat; a silent one's runs
    out), however long the machine takes to let it."""
    for _ in range(total_ms // step_ms):
        mark = server.capture.last_seq
        server.advance_clock(step_ms)
        wait_for(lambda mark=mark: all(server.requests(api="Heartbeat", client_id=c, since=mark) for c in live), 30,
                 f"a heartbeat of {live} after the clock step")


@pytest.mark.tenure(brokers=2, topics={"np-t": 4})
def test_a_static_member_partitioned_from_its_coordinator_longer_than_its_session_is_fenced_once(tenure_server):
    a, b = _static_pair(tenure_server, "np-g", "np-t")
    coordinator = tenure_server.coordinator_of("np-g")
    try:
        before = tenure_server.rebalances("np-g")
        a_events, b_events = len(a.events_copy()), len(b.events_copy())
        mark = tenure_server.capture.last_seq
        with tenure_server.network.partition(client_id="a", broker=coordinator) as cut:
            _advance(tenure_server, 7500, ("b",))      # 7.5 s of coordinator time: past a's 6 s session
            wait_for(lambda: b.assignment == {0, 1, 2, 3}, 30, "b to take a's partitions")
            g = tenure_server.group("np-g")
            assert set(g.static_members) == {"b"} and g.state == "Stable"
            assert tenure_server.rebalances("np-g") == before + 1                  # one rebalance ...
            assert g.rebalance_causes.get("session_expired") == 1                  # ... for the expiry
            assert a.events_copy()[a_events:] == []                                # a heard nothing
            assert tenure_server.requests(client_id="a", broker=coordinator, since=mark) == []
            assert cut.applied >= 1
        # healed: a's held heartbeat reaches the coordinator, which no longer knows it; it joins again
        wait_for(lambda: any(kind == "assign" for kind, _ in a.events_copy()[a_events:]) and a.assignment
                 and len(a.assignment | b.assignment) == 4 and not a.assignment & b.assignment, 30, "a back")
        after = tenure_server.requests(client_id="a", broker=coordinator, since=mark)
        beats = [e for e in after if e.api == "Heartbeat"]
        assert beats and beats[0].error == ErrorCode.UNKNOWN_MEMBER_ID
        moved = [ps for kind, ps in b.events_copy()[b_events:] if kind == "assign"]
        assert moved[0] == {0, 1, 2, 3}                     # the partitions moved to b once, then back
        assert tenure_server.rebalances("np-g") == before + 2
    finally:
        a.stop(), b.stop()


@pytest.mark.tenure(brokers=2, topics={"ns-t": 4})
def test_a_partition_shorter_than_the_session_changes_nothing(tenure_server):
    a, b = _static_pair(tenure_server, "ns-g", "ns-t")
    coordinator = tenure_server.coordinator_of("ns-g")
    try:
        assigned = (a.assignment, b.assignment)
        with tenure_server.no_rebalance("ns-g"):
            mark = tenure_server.capture.last_seq
            with tenure_server.network.partition(client_id="a", broker=coordinator):
                _advance(tenure_server, 3000, ("b",))  # 3 s of coordinator time: within a's 6 s session
                assert tenure_server.requests(client_id="a", broker=coordinator, since=mark) == []
            wait_for(lambda: any(e.api == "Heartbeat" and e.error == 0 for e in
                                 tenure_server.requests(client_id="a", since=mark)), 10, "a's heartbeats")
        assert (a.assignment, b.assignment) == assigned
        assert set(tenure_server.group("ns-g").static_members) == {"a", "b"}
    finally:
        a.stop(), b.stop()


@pytest.mark.tenure(brokers=3, topics={"lat-t": 3})
def test_latency_on_one_broker_and_an_idempotent_producer_keeps_its_order(tenure_server):
    slow = tenure_server.leader_of("lat-t", 1)
    tenure_server.network.delay(100, broker=slow)
    p = Producer({"bootstrap.servers": tenure_server.bootstrap, "enable.idempotence": True, "linger.ms": 2,
                  "max.in.flight.requests.per.connection": 5, "batch.num.messages": 20, "client.id": "lat-p"})
    acked: dict[int, list[int]] = {0: [], 1: [], 2: []}
    for i in range(300):
        p.produce("lat-t", str(i).encode(), partition=i % 3,
                  on_delivery=lambda err, m: err is None and acked[m.partition()].append(int(m.value())))
        p.poll(0)
    assert p.flush(60) == 0
    assert all(acked[q] == list(range(q, 300, 3)) for q in acked)        # acknowledged in order
    c = Consumer({"bootstrap.servers": tenure_server.bootstrap, "group.id": "lat-g", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        from confluent_kafka import TopicPartition
        c.assign([TopicPartition("lat-t", q, 0) for q in range(3)])
        got: dict[int, list[int]] = {0: [], 1: [], 2: []}
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < 300 and time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got[m.partition()].append(int(m.value()))
        assert got == {q: list(range(q, 300, 3)) for q in range(3)}           # stored in order, once
    finally:
        c.close()
    slow_produces = tenure_server.requests(api="Produce", broker=slow, client_id="lat-p")
    fast_produces = [e for e in tenure_server.requests(api="Produce", client_id="lat-p") if e.broker != slow]
    assert slow_produces and min(e.duration_ms for e in slow_produces) >= 100
    assert fast_produces and min(e.duration_ms for e in fast_produces) < 100


def test_a_connection_reset_after_n_bytes_and_lost_answers_are_what_kafka_python_sees(tenure_server):
    create_topic(tenure_server, "rs-t", 1)
    p = KafkaProducer(bootstrap_servers=tenure_server.bootstrap, client_id="rs-p", retries=5,
                      request_timeout_ms=2000, enable_idempotence=False)
    try:
        p.send("rs-t", b"warm").get(10)
        tenure_server.network.reset(after_bytes=20, count=1, client_id="rs-p")
        p.send("rs-t", b"after a reset").get(30)              # the client reconnects and resends
        assert tenure_server.metrics.closed_connections["network_reset"] == 1
        # the answers to this connection's source port are lost: the request times out, the client closes
        # it and resends on a new connection (another port), which is answered
        port = int(tenure_server.requests(client_id="rs-p")[-1].peer.rsplit(":", 1)[1])
        rule = tenure_server.network.loss("out", port=port)
        mark = tenure_server.capture.last_seq
        t0 = time.monotonic()
        p.send("rs-t", b"answer lost").get(30)
        assert time.monotonic() - t0 >= 2                      # request_timeout_ms
        produced = tenure_server.requests(api="Produce", client_id="rs-p", since=mark)
        assert len(produced) == 2 and produced[0].connection != produced[1].connection
        assert rule.applied == 1
        tenure_server.network.heal(rule)
        p.send("rs-t", b"healed").get(30)
    finally:
        p.close(5)
    assert tenure_server.network.rules() == [r for r in tenure_server.network.rules() if r.fault == "reset"]


# ------------------------------------------------------------------------------------------- admin endpoint
def _admin(server, method: str, path: str, body: dict | None = None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{server.admin_port}{path}", data=data, method=method,
                                 headers={} if method == "GET" else {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.mark.tenure(admin_port=0)
def test_the_admin_endpoint_serves_the_capture_and_the_network_rules(tenure_server):
    p = KafkaProducer(bootstrap_servers=tenure_server.bootstrap, client_id="adm-p")
    try:
        p.send("adm-t", b"x").get(10)
        status, rows = _admin(tenure_server, "GET", "/requests?api=Produce&client_id=adm-p")
        assert status == 200 and [r["api"] for r in rows] == ["Produce"]
        assert rows[0]["summary"] == {"topics": ["adm-t"]} and "request" not in rows[0]
        status, rows = _admin(tenure_server, "GET", "/requests?api=Produce&bodies=true")
        assert status == 200 and rows[0]["response"]["responses"][0]["name"] == "adm-t"
        assert _admin(tenure_server, "GET", "/requests?api=Nope")[0] == 400
        assert _admin(tenure_server, "GET", "/requests?broker=x")[0] == 400
        assert _admin(tenure_server, "GET", "/requests?colour=red")[0] == 400
        status, rule = _admin(tenure_server, "POST", "/network", {"fault": "delay", "ms": 200, "client_id": "adm-p"})
        assert status == 201 and rule["fault"] == "delay" and rule["ms"] == 200
        t0 = time.monotonic()
        p.send("adm-t", b"y").get(10)
        assert time.monotonic() - t0 >= 0.4                     # 200 ms each way
        for bad in ({"fault": "delay"}, {"fault": "flood"}, {"fault": "loss", "direction": "both"},
                    {"fault": "partition", "ms": 5}, {"fault": "reset", "after_bytes": -1},
                    {"fault": "partition", "port": 70000}, {"fault": "partition", "colour": 1}):
            status, err = _admin(tenure_server, "POST", "/network", bad)
            assert status == 400, (bad, err)
        assert [r["id"] for r in _admin(tenure_server, "GET", "/network")[1]] == [rule["id"]]
        assert _admin(tenure_server, "DELETE", f"/network?rule={rule['id']}") == (200, {"removed": 1})
        assert _admin(tenure_server, "GET", "/network") == (200, [])
        status, cleared = _admin(tenure_server, "DELETE", "/requests")
        assert status == 200 and cleared["removed"] >= 3
    finally:
        p.close(5)


@pytest.mark.tenure(admin_port=0)
def test_the_network_and_requests_subcommands(tenure_server, capsys):
    from tenure.tools.cli import main
    admin = f"127.0.0.1:{tenure_server.admin_port}"
    p = KafkaProducer(bootstrap_servers=tenure_server.bootstrap, client_id="cli-p")
    try:
        p.send("cli-t", b"x").get(10)
        capsys.readouterr()
        assert main(["requests", "list", "--admin", admin, "--api", "Produce", "--client-id", "cli-p"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].split("\t")[:3] == ["seq", "api", "version"] and len(lines) == 2
        assert lines[1].split("\t")[1] == "Produce" and lines[1].split("\t")[3] == "cli-p"
        assert main(["requests", "list", "--admin", admin, "--api", "NoSuchApi"]) == 1
        assert "unknown API" in capsys.readouterr().err
        assert main(["network", "--admin", admin, "reset", "0", "--client-id", "cli-p", "--count", "1"]) == 0
        assert main(["network", "--admin", admin, "delay", "50", "--broker", "0", "--direction", "out"]) == 0
        assert main(["network", "--admin", admin, "loss", "sideways"]) == 1
        assert main(["network", "--admin", admin, "partition", "--port", "70000"]) == 1
        capsys.readouterr()
        assert main(["network", "--admin", admin, "list"]) == 0
        rules = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [(r["fault"], r.get("count"), r.get("ms")) for r in rules] == [("reset", 1, None), ("delay", None, 50)]
        p.send("cli-t", b"y").get(30)                   # reset once, then sent again on a new connection
        assert tenure_server.metrics.closed_connections["network_reset"] == 1
        assert main(["network", "--admin", admin, "heal", str(rules[0]["id"])]) == 0
        assert main(["network", "--admin", admin, "heal"]) == 0
        assert tenure_server.network.rules() == []
        assert main(["requests", "clear", "--admin", admin]) == 0
    finally:
        p.close(5)


def test_a_bandwidth_limit_slows_a_large_produce_and_a_partitioned_broker_times_a_new_client_out(tenure_server):
    create_topic(tenure_server, "bw-t", 1)
    tenure_server.network.bandwidth(200_000, direction="in", client_id="bw-p")
    p = Producer({"bootstrap.servers": tenure_server.bootstrap, "client.id": "bw-p", "linger.ms": 0,
                  "message.max.bytes": 1_000_000})
    t0 = time.monotonic()
    p.produce("bw-t", b"x" * 400_000, partition=0)
    assert p.flush(30) == 0
    assert time.monotonic() - t0 >= 1.5                          # 400 KB at 200 KB/s
    tenure_server.network.heal()
    assert tenure_server.requests(api="Produce", client_id="bw-p")[-1].error == 0
    with tenure_server.network.partition(broker=0) as cut:
        late = Producer({"bootstrap.servers": tenure_server.bootstrap, "client.id": "late"})
        t0 = time.monotonic()
        with pytest.raises(KafkaException):                     # accepted, then silence: a timeout
            late.list_topics(timeout=1.0)
        assert time.monotonic() - t0 >= 1 and cut.applied >= 1
        assert tenure_server.requests(client_id="late") == []
    assert "bw-t" in late.list_topics(timeout=10).topics         # healed: the same client gets its answer
    assert tenure_server.requests(client_id="late")
