"""The API with the option on, beyond the seed's example: pause/resume act on both consumers, close()
leaves the clean marker so the next start resumes as a plain consumer, commits split by range."""
from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition

from tenure.catchup import CatchUpConsumer
from tenure.catchup import ranges as R
from tests.catchup.conftest import produce
from tests.support.groups import wait_for

pytestmark = pytest.mark.timeout(120)


def _crashed_at(bootstrap: str, topic: str, group: str, offset: int) -> None:
    """The commit a crashed CatchUpConsumer leaves behind: `offset`, with its running marker."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, offset, metadata=R.marker(R.RUNNING, "w1"))], asynchronous=False)
    c.close()


def _open(bootstrap: str, group: str, topic: str, on_assign=None) -> CatchUpConsumer:
    c = CatchUpConsumer({"bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": "w1",
                         "enable.parallel.rebalance": True, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    c.subscribe([topic], **({"on_assign": on_assign} if on_assign else {}))
    return c


def _drain(c, out: list, seconds: float) -> None:
    import time
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        m = c.poll(0.05)
        if m is not None and m.error() is None:
            out.append(m.offset())


def _recovered_with_five_fresh(bootstrap: str, topic: str, group: str) -> tuple[CatchUpConsumer, list[int]]:
    """30 records, a crash after committing 10, the recovered consumer assigned with its secondary held back,
    then 5 fresh records (30..34); returns the consumer and what it delivered so far."""
    produce(bootstrap, topic, 30)
    _crashed_at(bootstrap, topic, group, 10)
    c = _open(bootstrap, group, topic)
    got: list[int] = []
    try:
        c.pause_secondary()
        wait_for(lambda: _drain(c, got, 0.1) or c.assignment(), 30, "the assignment", interval=0)
        produce(bootstrap, topic, 5)
    except BaseException:
        c.close()
        raise
    return c, got


def test_pause_and_resume_act_on_both_consumers(tenure_server, topic):
    bootstrap, group = tenure_server.bootstrap, "pause-g"
    produce(bootstrap, topic, 30)
    _crashed_at(bootstrap, topic, group, 10)
    assigned = []

    def on_assign(cc, parts):
        cc.pause(parts)                         # both: the main one at 30, the secondary on [10, 30)
        assigned.extend(parts)
    c = _open(bootstrap, group, topic, on_assign)
    try:
        got: list[int] = []
        wait_for(lambda: _drain(c, got, 0.1) or assigned, 30, "the assignment", interval=0)
        assert c.child_consumer_is_alive()
        produce(bootstrap, topic, 5)            # 30..34: fresh
        _drain(c, got, 1.0)
        assert got == []
        c.resume([TopicPartition(topic, 0)])
        wait_for(lambda: _drain(c, got, 0.1) or set(range(10, 35)) <= set(got), 30, "everything", interval=0)
        assert sorted(got) == list(range(10, 35))
    finally:
        c.close()


def test_close_leaves_the_clean_marker_and_the_next_start_resumes_at_the_commit(tenure_server, topic):
    bootstrap, group = tenure_server.bootstrap, "clean-g"
    produce(bootstrap, topic, 20)
    c = _open(bootstrap, group, topic)
    got: list[int] = []
    try:
        wait_for(lambda: _drain(c, got, 0.1) or len(got) >= 20, 30, "the records", interval=0)
        c.commit(offsets=[TopicPartition(topic, 0, 12)], asynchronous=False)
    finally:
        c.close()
    plain = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    [tp] = plain.committed([TopicPartition(topic, 0)], timeout=30)
    plain.close()
    assert (tp.offset, tp.metadata) == (12, R.marker(R.CLEAN, "w1"))
    produce(bootstrap, topic, 3)
    c = _open(bootstrap, group, topic)
    try:
        again: list[int] = []
        wait_for(lambda: _drain(c, again, 0.1) or len(again) >= 11, 30, "the rest", interval=0)
        assert again == list(range(12, 23))     # in order from the commit: no catch-up after a clean stop
        assert not c.child_consumer_is_alive()
    finally:
        c.close()


def test_commits_split_by_range(tenure_server, topic):
    """An offset inside an open token goes to the secondary's checkpoint, any other to the group; the
    checkpoint's text is what docs/catchup.md shows."""
    bootstrap, group = tenure_server.bootstrap, "split-g"
    c, got = _recovered_with_five_fresh(bootstrap, topic, group)
    try:
        c.resume_secondary()
        wait_for(lambda: _drain(c, got, 0.1) or set(range(10, 35)) <= set(got), 30, "everything", interval=0)
        c.commit(offsets=[TopicPartition(topic, 0, 20), TopicPartition(topic, 0, 33)], asynchronous=False)
        assert tenure_server.group(group).offset(topic, 0) == 33
        assert tenure_server.group(f"{group}.catchup").offset(topic, 0) == 20
        assert c.committed([TopicPartition(topic, 0)])[0].offset == 20
        assert c.committed([TopicPartition(topic, 0)])[0].metadata == "tenure.catchup/1 instance=w1 ranges=10-30:20"
        c.commit(offsets=[TopicPartition(topic, 0, 30)], asynchronous=False)
        assert c.committed([TopicPartition(topic, 0)])[0].offset == 33       # the token closed: the group's
    finally:
        c.close()


def test_a_manual_assignment_catches_up_too(tenure_server, topic):
    """assign() (no group membership) takes partitions the same way: after a crash, the main consumer
    starts at the end and the secondary replays the range."""
    bootstrap, group = tenure_server.bootstrap, "manual-g"
    produce(bootstrap, topic, 30)
    _crashed_at(bootstrap, topic, group, 10)
    c = CatchUpConsumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.parallel.rebalance": True,
                         "enable.auto.commit": False})
    try:
        c.pause_secondary()
        c.assign([TopicPartition(topic, 0)])
        produce(bootstrap, topic, 2)
        got: list[int] = []
        wait_for(lambda: _drain(c, got, 0.1) or got, 30, "the fresh records", interval=0)
        assert got and min(got) >= 30
        c.resume_secondary()
        wait_for(lambda: _drain(c, got, 0.1) or set(range(10, 32)) <= set(got), 30, "everything", interval=0)
        assert sorted(got) == list(range(10, 32))
        c.commit(asynchronous=False)
        assert c.committed([TopicPartition(topic, 0)])[0].offset == 32
    finally:
        c.close()


def test_consume_returns_records_of_both_consumers(tenure_server, topic):
    c, got = _recovered_with_five_fresh(tenure_server.bootstrap, topic, "consume-g")   # fresh: 30..34
    try:
        c.resume_secondary()

        def batch():
            got.extend(m.offset() for m in c.consume(num_messages=8, timeout=0.5) if m.error() is None)
            return set(range(10, 35)) <= set(got)
        wait_for(batch, 30, "everything through consume()", interval=0)
        assert sorted(got) == list(range(10, 35))
        assert c.consume(num_messages=5, timeout=0.3) == []
    finally:
        c.close()
