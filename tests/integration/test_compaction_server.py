"""The log cleaner on a real server: confluent-kafka consumers commit offsets many times into a
__consumer_offsets of small segments while the background cleaner compacts it; after a restart on the same
data dir every committed offset is there. Also `tenure log compact` offline, and a user compacted topic."""
from __future__ import annotations

import re
import threading
import time

import pytest

from tenure.config import ServerConfig
from tenure.protocol.internal_topics import OFFSETS_TOPIC
from tenure.server import ServerThread
from tenure.tools.cli import main
from tests.support.groups import wait_for

pytestmark = pytest.mark.timeout(240)

TOPIC = "ct"
PARTITIONS = 3


def offsets_log(s: ServerThread):
    return s.server.topics.get(OFFSETS_TOPIC).partitions[0]


def log_shape(s: ServerThread) -> tuple[int, int, int, int]:
    """(segments, bytes, log start, log end) of __consumer_offsets-0, read on the server's loop."""
    def read():
        plog = offsets_log(s)
        return len(plog.segments), plog.size_bytes, plog.log_start_offset, plog.log_end_offset
    return s.call(read)


def committed(bootstrap: str, group: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=15)
        return {tp.partition: tp.offset for tp in got if tp.offset >= 0}
    finally:
        c.close()


def committer(bootstrap: str, group: str, rounds: int, last: dict, errors: list, *, static: bool) -> None:
    """A subscribed consumer (so its group has members and GroupMetadata records) committing explicit
    offsets for every partition, synchronously, `rounds` times; `last` holds what was acknowledged."""
    from confluent_kafka import Consumer, TopicPartition
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "log_level": 3}
    if static:
        conf["group.instance.id"] = f"{group}-instance"
    def join():
        c = Consumer(conf)
        c.subscribe([TOPIC])
        deadline = time.monotonic() + 60            # commit as a member of the current generation
        while not c.assignment():
            assert time.monotonic() < deadline, "no assignment"
            c.poll(0.05)
        return c
    try:
        c = join()
        for n in range(1, rounds + 1):
            c.poll(0.01)
            offs = [TopicPartition(TOPIC, p, n * 10 + p) for p in range(PARTITIONS)]
            c.commit(offsets=offs, asynchronous=False)
            last.update({p: n * 10 + p for p in range(PARTITIONS)})
            if static and n % 40 == 0:              # restart the static member: new GroupMetadata and events
                c.close()
                c = join()
        c.close()
    except Exception as exc:                        # reported by the test thread
        errors.append(f"{group}: {exc!r}")


def test_offsets_committed_while_the_cleaner_runs_are_all_there_after_a_restart(tmp_path):
    data = str(tmp_path / "data")
    cfg = ServerConfig(port=0, data_dir=data, segment_bytes=1024, cleaner_interval_ms=20,
                       cleaner_pass_bytes=16 * 1024, min_session_timeout_ms=1000)
    groups = [f"cg-{i}" for i in range(4)]
    last: dict[str, dict[int, int]] = {g: {} for g in groups}
    errors: list[str] = []
    with ServerThread(cfg) as s:
        s.call(lambda: s.server.topics.create(TOPIC, PARTITIONS))
        threads = [threading.Thread(target=committer, args=(s.bootstrap, g, 150, last[g], errors),
                                    kwargs={"static": i % 2 == 0}) for i, g in enumerate(groups)]
        for t in threads:
            t.start()
        # the cleaner swaps segments while the clients are committing
        wait_for(lambda: s.call(lambda: s.server.cleaner_stats.groups_cleaned) >= 20, 120,
                 "the background cleaner to compact segments during the commits")
        during = s.call(lambda: s.server.cleaner_stats.groups_cleaned)
        for t in threads:
            t.join(180)
        assert not errors, errors
        assert during >= 20
        for g in groups:
            assert last[g] == {p: 1500 + p for p in range(PARTITIONS)}
            assert committed(s.bootstrap, g) == last[g]
        st = s.compact_now()
        segments, size, start, end = log_shape(s)
        appended = s.call(lambda: offsets_log(s).bytes_written)
        assert start == 0 and end > 4 * 150 * PARTITIONS
        assert size < appended / 5, (size, appended)          # compaction kept the log small
        assert st.groups_cleaned >= 0
    with ServerThread(cfg) as s:                               # restart on the same data dir
        assert log_shape(s)[3] == end, "the log end offset survives compaction and restart"
        for g in groups:
            assert committed(s.bootstrap, g) == last[g]
            view = s.call(lambda g=g: s.server.runtime.group(g))
            assert view is not None


def test_tenure_log_compact_offline_and_refused_on_a_live_dir(tmp_path, capsys):
    data = tmp_path / "data"
    cfg = ServerConfig(port=0, data_dir=str(data), segment_bytes=1024, cleaner_interval_ms=0)
    last: dict[int, int] = {}
    errors: list[str] = []
    with ServerThread(cfg) as s:
        s.call(lambda: s.server.topics.create(TOPIC, PARTITIONS))
        committer(s.bootstrap, "offline-g", 60, last, errors, static=False)
        assert not errors, errors
        assert main(["log", "compact", str(data)]) == 1          # the server holds the data dir's lock
        assert "in use by another tenure process" in capsys.readouterr().err
        before = log_shape(s)
    assert main(["log", "compact", str(data)]) == 0
    out = capsys.readouterr().out.splitlines()
    line = next(x for x in out if x.startswith(f"{OFFSETS_TOPIC}-0: "))
    m = re.fullmatch(rf"{OFFSETS_TOPIC}-0: (\d+) segment\(s\), (\d+) record\(s\), (\d+) byte\(s\) -> (\d+) "
                     r"segment\(s\), (\d+) record\(s\), (\d+) byte\(s\); \d+ tombstone\(s\) dropped", line)
    assert m, line
    seg_b, rec_b, bytes_b, seg_a, rec_a, bytes_a = map(int, m.groups())
    assert (seg_b, bytes_b) == (before[0], before[1])
    assert seg_a < seg_b and rec_a < rec_b and bytes_a < bytes_b
    assert out[-1].startswith(f"{data}: {rec_b} record(s), {bytes_b} byte(s) -> {rec_a} record(s), {bytes_a} byte(s)")
    assert not any(x.startswith(f"{TOPIC}-") for x in out), "a delete-policy topic is not compacted"
    assert main(["log", "verify", str(data)]) == 0
    capsys.readouterr()
    with ServerThread(cfg) as s:
        assert log_shape(s)[3] == before[3]
        assert committed(s.bootstrap, "offline-g") == last == {p: 600 + p for p in range(PARTITIONS)}


def test_a_user_compacted_topic_keeps_the_latest_value_per_key(tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    cfg = ServerConfig(port=0, data_dir=str(tmp_path / "data"), segment_bytes=1024, cleaner_interval_ms=0)
    with ServerThread(cfg) as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        admin.create_topics([NewTopic("kv", 1, 1, config={"cleanup.policy": "compact"})])["kv"].result(15)
        p = Producer({"bootstrap.servers": s.bootstrap, "linger.ms": 0})
        for i in range(400):
            p.produce("kv", key=f"k{i % 10}".encode(), value=f"v{i}".encode() * 8, partition=0)
            if i % 20 == 0:
                p.flush(15)
        p.produce("kv", key=b"k3", value=None, partition=0)       # a tombstone (kept: 1 day retention)
        assert p.flush(15) == 0
        st = s.compact_now()
        assert st.groups_cleaned > 0
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "kv-reader", "enable.auto.commit": False})
        c.assign([TopicPartition("kv", 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not got or got[-1][0] < 400):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.key(), m.value()))
        c.close()
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets)) and offsets[-1] == 400
    latest = {}
    for _o, key, value in got:
        latest[key] = value
    assert latest == {**{f"k{i}".encode(): f"v{390 + i}".encode() * 8 for i in range(10)}, b"k3": None}
    assert len(got) < 100, "superseded values were removed"
