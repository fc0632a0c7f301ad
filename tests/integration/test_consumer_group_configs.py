"""A consumer group's own configs (Kafka's GroupConfig on the GROUP config resource, type 32):
`consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` altered with the Java Admin client
(IncrementalAlterConfigs) and described with it (DescribeConfigs), bounded as Kafka's GroupConfig bounds them
(the broker's group.consumer.min/max.* values, and the session above the interval), kept in the data dir across
a restart, and used by the coordinator: a member of that group is told that interval and given that session,
and a confluent-kafka member of it heartbeats that often, while other groups keep the server's values."""
from __future__ import annotations

import threading
import time

import pytest

from tenure.config import ServerConfig
from tenure.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from tenure.server import ServerThread
from tests.integration.test_admin_apis import java
from tests.support.wire import WireClient

pytestmark = [pytest.mark.java, pytest.mark.timeout(240)]


def join(bootstrap: str, group: str, member: str):
    with WireClient.to(bootstrap) as w:
        r = w.call(ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member, member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout_ms=30000, subscribed_topic_names=["t"], subscribed_topic_regex=None,
            server_assignor=None, topic_partitions=[]), 1)
    assert r.error_code == 0, r
    return r


def described(bootstrap: str, group: str) -> dict[str, tuple[str, str]]:
    (out,) = java(bootstrap, "describe-configs", "group", group, "consumer.session.timeout.ms",
                  "consumer.heartbeat.interval.ms")
    return {e["name"]: (e["value"], e["source"]) for e in out["entries"]}


def test_group_configs_are_bounded_described_kept_and_used(tmp_path):
    cfg = ServerConfig(port=0, data_dir=str(tmp_path), consumer_heartbeat_interval_ms=500,
                       initial_rebalance_delay_ms=0)
    with ServerThread(cfg) as s:
        s.call(s.server.topics.create, "t", 2)
        bs = s.bootstrap
        # a group without its own configs has the server's
        assert described(bs, "cg") == {"consumer.session.timeout.ms": ("45000", "DEFAULT_CONFIG"),
                                       "consumer.heartbeat.interval.ms": ("500", "DEFAULT_CONFIG")}
        out = java(bs, "alter-config", "group", "cg", "SET", "consumer.heartbeat.interval.ms", "6000", "--",
                   "alter-config", "group", "cg", "SET", "consumer.session.timeout.ms", "50000", "--",
                   "alter-config", "group", "cg", "SET", "consumer.heartbeat.interval.ms", "20000", "--",
                   "alter-config", "group", "cg", "SET", "consumer.session.timeout.ms", "44000", "--",
                   "alter-config", "group", "cg", "SET", "consumer.heartbeat.interval.ms", "100")
        assert [o.get("error") for o in out[:2]] == [None, None], out
        assert [o["message"] for o in out[2:]] == [
            "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms",
            "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
            "consumer.heartbeat.interval.ms must be greater than or equal to "
            "group.consumer.min.heartbeat.interval.ms"], out
        assert described(bs, "cg") == {"consumer.session.timeout.ms": ("50000", "DYNAMIC_GROUP_CONFIG"),
                                       "consumer.heartbeat.interval.ms": ("6000", "DYNAMIC_GROUP_CONFIG")}
        # the coordinator uses them: the interval it tells the group's members, the session it gives them
        assert join(bs, "cg", "m-1").heartbeat_interval_ms == 6000
        assert join(bs, "other", "m-2").heartbeat_interval_ms == 500
        sessions = {g: [m.session_timeout_ms for m in s.group(g).members] for g in ("cg", "other")}
        assert sessions == {"cg": [50000], "other": [45000]}
        # the session timer runs on the group's session: still there at 46 s, gone after 50 s
        s.advance_clock(46000)
        assert [m.member_id for m in s.group("cg").members] == ["m-1"] and s.group("other").members == ()
        s.advance_clock(5000)
        assert s.group("cg").members == ()
    # kept in the data dir: a restarted server has them
    with ServerThread(cfg) as s:
        assert described(s.bootstrap, "cg")["consumer.heartbeat.interval.ms"] == ("6000", "DYNAMIC_GROUP_CONFIG")
        assert join(s.bootstrap, "cg", "m-3").heartbeat_interval_ms == 6000
        # deleting the override gives the server's value back
        (out,) = java(s.bootstrap, "alter-config", "group", "cg", "DELETE", "consumer.heartbeat.interval.ms", "")
        assert out.get("error") is None, out
        assert join(s.bootstrap, "cg", "m-4").heartbeat_interval_ms == 500


def test_the_session_must_stay_above_the_interval():
    """Kafka's GroupConfig checks the group's whole set: with a server whose bounds take in 6 s sessions, a
    heartbeat interval of 10 s over the default 6 s session is refused."""
    cfg = ServerConfig(port=0, consumer_session_timeout_ms=6000, initial_rebalance_delay_ms=0)
    with ServerThread(cfg) as s:
        out = java(s.bootstrap, "alter-config", "group", "g", "SET", "consumer.heartbeat.interval.ms", "10000", "--",
                   "alter-config", "group", "g", "SET", "consumer.session.timeout.ms", "6000")
        assert out[0]["message"] == "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
        assert out[1].get("error") is None, out


def test_a_confluent_member_heartbeats_at_its_groups_interval():
    """Two librdkafka members (group.protocol=consumer) of two groups for 3 s: the one whose group sets a 6 s
    interval heartbeats about once (its join), the other at the server's 300 ms about ten times."""
    from confluent_kafka import Consumer
    with ServerThread(ServerConfig(port=0, consumer_heartbeat_interval_ms=300, initial_rebalance_delay_ms=0)) as s:
        s.call(s.server.topics.create, "t", 1)
        (out,) = java(s.bootstrap, "alter-config", "group", "slow", "SET", "consumer.heartbeat.interval.ms", "6000")
        assert out.get("error") is None, out
        counts: dict[str, int] = {}

        def run(group: str, stop: threading.Event) -> None:
            c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": group, "group.protocol": "consumer",
                          "client.id": group})
            c.subscribe(["t"])
            try:
                while not stop.is_set():
                    c.poll(0.05)
            finally:
                c.close()

        def heartbeats() -> int:
            return sum(n for (api, _), n in s.server.metrics.requests.items() if api == "ConsumerGroupHeartbeat")

        for group in ("slow", "fast"):
            stop = threading.Event()
            t = threading.Thread(target=run, args=(group, stop), daemon=True)
            t.start()
            deadline = time.monotonic() + 30
            while (s.group(group) is None or not s.group(group).members) and time.monotonic() < deadline:
                time.sleep(0.05)
            before = heartbeats()
            time.sleep(3)
            counts[group] = heartbeats() - before
            stop.set()
            t.join(30)
        assert counts["slow"] <= 2 and counts["fast"] >= 6, counts
