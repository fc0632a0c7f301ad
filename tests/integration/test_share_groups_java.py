"""Share groups (KIP-932) with the Java KafkaShareConsumer of kafka-clients 4.3 (tests/java/ShareConsume.java,
one JVM per member): more consumers than partitions all receive and every record is accepted once (implicit
mode); released records come back with higher delivery counts, rejected ones never, and a record released at
every delivery is archived at the limit (explicit mode); a consumer killed (SIGKILL) while holding records
loses them when the locks expire - the clock advanced through the control, never slept - and another consumer
gets them with delivery count 2. confluent-kafka's ShareConsumer does the same in test_share_groups.py."""
from __future__ import annotations

import json
import subprocess
import tempfile
import threading
import time

import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.integration.test_share_groups import done, produce, setup, wait_for
from tests.support.java import _tool, compile_java

pytestmark = [pytest.mark.java, pytest.mark.timeout(240)]

JVM_OPTS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-Xshare:auto"]


@pytest.fixture
def server():
    with ServerThread(ServerConfig(port=0, share_heartbeat_interval_ms=300, initial_rebalance_delay_ms=0)) as s:
        yield s


class ShareJvm:
    """One ShareConsume JVM; its stdout's records as (partition, offset, delivery count, ack)."""

    def __init__(self, st: ServerThread, group: str, topic: str, name: str, **conf) -> None:
        args = [_tool("java"), *JVM_OPTS, "-cp", compile_java(), "ShareConsume", st.bootstrap, group, topic,
                f"client.id={name}", *(f"{k.replace('_', '.')}={v}" for k, v in conf.items())]
        self.name = name
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     text=True, bufsize=1)
        self.events: list[dict] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True, name=f"jvm-{name}").start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("{"):
                with self._lock:
                    self.events.append(json.loads(line))

    def records(self) -> list[tuple[int, int, int, str]]:
        with self._lock:
            return [(e["partition"], e["offset"], e["delivery_count"], e["ack"]) for e in self.events
                    if e["type"] == "record"]

    def errors(self) -> list[dict]:
        with self._lock:
            return [e for e in self.events if e["type"] == "error"]

    def close(self, timeout: float = 40) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("close\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(10)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def dump(self) -> str:
        self._stderr.seek(0)
        return f"{self.name}: {self.events}\n{self._stderr.read().decode(errors='replace')[-3000:]}"


@pytest.fixture
def jvms():
    started: list[ShareJvm] = []

    def start(*args, **kw) -> ShareJvm:
        j = ShareJvm(*args, **kw)
        started.append(j)
        return j
    yield start
    for j in started:
        if j.proc.poll() is None:
            j.kill()


def test_java_share_consumers_outnumbering_partitions_all_receive_each_record_accepted_once(server, jvms):
    st, topic, group = server, "jq", "jq-g"
    setup(st, topic, group)
    members = [jvms(st, group, topic, f"j{i}") for i in range(3)]
    wait_for(lambda: (v := st.share_partition(group, topic, 0)) is not None and len(v["fetching"]) == 3,
             timeout=90, what="3 members fetching")
    total = 0
    for _ in range(40):
        produce(st, topic, range(total, total + 5))
        total += 5
        time.sleep(0.05)
    try:
        wait_for(lambda: done(st, group, topic, total), timeout=60, what="every record accepted")
    except AssertionError:
        raise AssertionError("\n".join(m.dump() for m in members)) from None
    for m in members:
        m.close()
    got = [r for m in members for r in m.records()]
    assert sorted(r[1] for r in got) == list(range(total))          # once each
    assert all(r[2] == 1 for r in got)
    assert all(m.records() for m in members), [len(m.records()) for m in members]
    assert not any(m.errors() for m in members)


def test_java_release_redelivers_reject_never_returns_and_the_limit_archives(server, jvms):
    st, topic, group = server, "jr", "jr-g"
    setup(st, topic, group)
    produce(st, topic, ["again", "bad", "poison", "fine"])
    m = jvms(st, group, topic, "x", ack="accept", release_until=3, reject_offsets=1, release_offsets=2)
    try:
        wait_for(lambda: done(st, group, topic, 4), timeout=90, what="every record done")
    except AssertionError:
        raise AssertionError(m.dump()) from None
    time.sleep(0.5)
    m.close()
    by_offset: dict[int, list[tuple[int, str]]] = {}
    for _, o, n, ack in m.records():
        by_offset.setdefault(o, []).append((n, ack))
    assert by_offset[0] == [(1, "release"), (2, "release"), (3, "accept")]
    assert by_offset[1] == [(1, "release"), (2, "release"), (3, "reject")]
    assert by_offset[2] == [(n, "release") for n in range(1, 6)]       # archived at Kafka's limit of 5
    assert by_offset[3] == [(1, "release"), (2, "release"), (3, "accept")]


def test_java_killed_holders_records_go_to_another_consumer_after_the_lock_expires(server, jvms):
    st, topic, group = server, "jk", "jk-g"
    setup(st, topic, group)
    produce(st, topic, range(6))
    holder = jvms(st, group, topic, "holder", ack="hold")
    wait_for(lambda: holder.records(), timeout=90, what="the holder's records")

    def acquired() -> list[int]:
        return [r["offset"] for r in st.share_partition(group, topic, 0)["records"] if r["state"] == "acquired"]
    # the records the server handed the holder are the ones it prints (the JVM prints a fetched batch one record at a
    # time: the test may look in the middle of it, so it waits for the batch's last line)
    wait_for(lambda: sorted(r[1] for r in holder.records()) == acquired(), timeout=30,
             what="the holder's records to be the acquired ones")
    held = sorted(r[1] for r in holder.records())
    assert held and held == acquired()
    holder.kill()
    other = jvms(st, group, topic, "other", ack="accept")
    wait_for(lambda: (v := st.group(group)) is not None and any(x.client_id == "other" for x in v.members),
             timeout=90, what="the other member")
    time.sleep(1.0)
    assert other.records() == []                  # still held by the killed member's locks
    st.advance_clock(30_001)
    wait_for(lambda: done(st, group, topic, 6), timeout=60, what="the records accepted by the other")
    other.close()
    assert sorted((o, n) for _, o, n, _ in other.records()) == [(o, 2) for o in held]


def test_java_admin_describes_lists_alters_and_deletes_share_group_offsets(server, jvms):
    """Admin.listGroups for share groups (ListGroups v5, type share), describeShareGroups (ShareGroupDescribe),
    listShareGroupOffsets (DescribeShareGroupOffsets v1: start
    offset and lag), alterShareGroupOffsets and deleteShareGroupOffsets (only on an empty group)."""
    from tests.support.java import run_java
    st, topic, group = server, "ja", "ja-g"
    setup(st, topic, group, partitions=2)
    produce(st, topic, range(6), partition=0)
    produce(st, topic, range(4), partition=1)
    m = jvms(st, group, topic, "m")
    wait_for(lambda: done(st, group, topic, 6) and (v := st.share_partition(group, topic, 1)) is not None
             and v["start_offset"] == 4, timeout=90, what="every record accepted")

    def admin(*commands):
        """Each command's answer, the commands run in order by one JVM."""
        args = [x for c in commands for x in ("+", *map(str, c))][1:]
        return run_java("ShareAdmin", st.bootstrap, *args)
    d, offsets, refused, listed = admin(("describe", group), ("offsets", group), ("alter", group, topic, 0, 2),
                                        ("list-share-groups", "-"))
    assert listed["groups"] == [{"group": group, "type": "Share", "protocol": "share", "state": "Stable"}]
    assert (d["state"], len(d["members"])) == ("Stable", 1) and d["group_epoch"] == d["assignment_epoch"] >= 1
    assert d["members"][0]["client_id"] == "m" and d["members"][0]["partitions"] == ["ja-0", "ja-1"]
    assert offsets["partitions"] == [
        {"topic": "ja", "partition": 0, "start_offset": 6, "lag": 0},
        {"topic": "ja", "partition": 1, "start_offset": 4, "lag": 0}]
    assert refused["type"] == "error" and refused["exception"].endswith("GroupNotEmptyException"), refused
    m.close()
    wait_for(lambda: st.group(group).state == "Empty", what="the member gone")
    altered, offsets, deleted, after, unknown = admin(
        ("alter", group, topic, 0, 2), ("offsets", group), ("delete-offsets", group, topic), ("offsets", group),
        ("describe", "nope"))
    assert altered == {"type": "altered"} and deleted == {"type": "deleted"}
    assert offsets["partitions"][0] == {"topic": "ja", "partition": 0, "start_offset": 2, "lag": 4}
    assert after["partitions"] == []
    assert unknown["type"] == "error"


def test_java_consumer_across_a_restart_gets_no_accepted_record_again(tmp_path, jvms):
    """A restart on the data dir while a KafkaShareConsumer runs: the share partition's state comes back from
    __share_group_state (start offset past the accepted records), so the consumer - reconnecting, opening a new
    share session - gets only what is produced after, each record once."""
    cfg = ServerConfig(port=0, data_dir=str(tmp_path), share_heartbeat_interval_ms=300, initial_rebalance_delay_ms=0)
    with ServerThread(cfg) as st:
        setup(st, "jrs", "jrs-g")
        produce(st, "jrs", range(10))
        m = jvms(st, "jrs-g", "jrs", "m")
        wait_for(lambda: done(st, "jrs-g", "jrs", 10), timeout=90, what="the first ten accepted")
        st.restart()
        assert st.share_partition("jrs-g", "jrs", 0)["start_offset"] == 10
        produce(st, "jrs", range(10, 20))
        try:
            wait_for(lambda: done(st, "jrs-g", "jrs", 20), timeout=90, what="the next ten accepted")
        except AssertionError:
            raise AssertionError(m.dump()) from None
        m.close()
    got = [(o, n) for _, o, n, _ in m.records()]
    assert sorted(got) == [(o, 1) for o in range(20)]


def test_java_renew_keeps_records_acquired_and_they_are_accepted_after(server, jvms):
    """AcknowledgeType.RENEW (KIP-1222, ShareAcknowledge/ShareFetch v2): the consumer renews each record's lock,
    gets the same records back with the same delivery count (never redelivered), then accepts them."""
    st, topic, group = server, "jn", "jn-g"
    setup(st, topic, group)
    produce(st, topic, range(3))
    m = jvms(st, group, topic, "r", ack="renew")
    try:
        wait_for(lambda: done(st, group, topic, 3), timeout=90, what="every record accepted after its renewal")
    except AssertionError:
        raise AssertionError(m.dump()) from None
    m.close()
    seen = sorted((o, n, ack) for _, o, n, ack in m.records())
    assert seen == [(o, 1, ack) for o in range(3) for ack in ("accept-renewed", "renew")]


def test_java_admin_finds_the_share_groups_coordinator_in_a_three_broker_cluster(jvms):
    """Three brokers: the share group offset APIs are the group coordinator's (NOT_COORDINATOR, 16, from the
    other brokers, over a socket); the Java Admin client looks the coordinator up and lists, alters and deletes
    the group's share offsets there, as against Kafka."""
    from tenure.protocol.share_group import DescribeShareGroupOffsetsRequest
    from tests.support.java import run_java
    from tests.support.wire import WireClient

    with ServerThread(ServerConfig(port=0, brokers=3, share_heartbeat_interval_ms=300,
                                   initial_rebalance_delay_ms=0)) as st:
        topic, group = "ja3", "ja3-g"
        setup(st, topic, group)
        produce(st, topic, range(5))
        m = jvms(st, group, topic, "m")
        wait_for(lambda: done(st, group, topic, 5), timeout=90, what="every record accepted")
        m.close()
        wait_for(lambda: st.group(group).state == "Empty", what="the member gone")
        coordinator = st.coordinator_of(group)
        D = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
        for broker, addr in enumerate(st.bootstrap.split(",")):
            with WireClient.to(addr) as w:
                g = w.call(DescribeShareGroupOffsetsRequest(groups=[D(group_id=group, topics=None)]), 1).groups[0]
                assert g.error_code == (0 if broker == coordinator else 16), (broker, coordinator)
        offsets, altered, after, deleted, gone = run_java(
            "ShareAdmin", st.bootstrap, "offsets", group, "+", "alter", group, topic, 0, 1, "+", "offsets", group,
            "+", "delete-offsets", group, topic, "+", "offsets", group)
        assert offsets["partitions"] == [{"topic": topic, "partition": 0, "start_offset": 5, "lag": 0}]
        assert altered == {"type": "altered"} and deleted == {"type": "deleted"}
        assert after["partitions"] == [{"topic": topic, "partition": 0, "start_offset": 1, "lag": 4}]
        assert gone["partitions"] == []
