"""The seed's example (KIP-333): 70 committed, a crash at 100 (the process killed: no close), the log at
120 on recovery. The recovered consumer serves fresh data at once while [70, 120) is replayed by the
secondary consumer, every offset in [70, 120) is delivered, nothing below 70 again."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, TopicPartition

from tenure.catchup import CatchUpConsumer
from tests.catchup.conftest import produce
from tests.support.groups import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.timeout(120)


def _crash_at_100(bootstrap: str, topic: str, group: str, mode: str = "on") -> None:
    """A worker process commits 70, processes 0..99, and is killed."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.catchup_worker", bootstrap, topic, group,
                             "worker-1", "70", "100", mode], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "at 100", line
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)


def _pump(c, delivered: list[int], done, what: str, timeout: float = 30) -> None:
    """Poll (0.1 s at a time) until done(), recording every delivered offset."""
    def step():
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            delivered.append(m.offset())
        return done()
    wait_for(step, timeout, what, interval=0)


def _consumer(bootstrap: str, group: str, mode: str, **extra):
    config = {"bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": "worker-1",
              "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000, **extra}
    if mode == "plain":
        return Consumer(config)
    return CatchUpConsumer({**config, "enable.parallel.rebalance": mode == "on"})


@pytest.mark.parametrize("commits", ["explicit", "auto"])
def test_fresh_records_first_the_lag_replayed_nothing_below_the_commit(tenure_server, topic, commits):
    bootstrap, group = tenure_server.bootstrap, f"seed-{commits}"
    produce(bootstrap, topic, 100)                      # 0..99
    _crash_at_100(bootstrap, topic, group)
    produce(bootstrap, topic, 20)                       # 100..119: the log is at 120 on recovery
    assert tenure_server.group(group).offset(topic, 0) == 70

    auto = {"enable.auto.commit": True, "auto.commit.interval.ms": 100} if commits == "auto" else {}
    c = _consumer(bootstrap, group, "on", **auto)
    try:
        c.pause_secondary()                             # hold the catch-up back: fresh data must not wait
        assigned = []
        c.subscribe([topic], on_assign=lambda _c, ps: assigned.extend(ps))
        delivered: list[int] = []
        _pump(c, delivered, lambda: assigned, "the assignment")
        assert [(p.partition, p.offset) for p in assigned] == [(0, 120)]     # the main consumer starts at the end
        assert c.child_consumer_is_alive()
        assert c.committed([TopicPartition(topic, 0)])[0].offset == 70        # [70, 120) not processed yet
        assert tenure_server.group(group).offset(topic, 0) == 120             # the main group's commit moved on

        produce(bootstrap, topic, 1)                    # offset 120, after recovery
        _pump(c, delivered, lambda: 120 in delivered, "the fresh record")
        assert delivered == [120], delivered             # delivered while the whole range is still owed
        assert c.committed([TopicPartition(topic, 0)])[0].offset == 70

        c.resume_secondary()
        _pump(c, delivered, lambda: set(range(70, 121)) <= set(delivered), "the range [70, 120)")
        for _ in range(5):                              # nothing else comes
            m = c.poll(0.1)
            assert m is None or m.error() is not None, m.offset()
        assert min(delivered) == 70 and sorted(delivered) == list(range(70, 121))   # each exactly once here
        if commits == "explicit":
            c.commit(asynchronous=False)
        else:       # what poll() returned is committed at a later poll, once the interval has passed
            wait_for(lambda: c.poll(0.05) is None and c.committed([TopicPartition(topic, 0)])[0].offset == 121,
                     10, "the auto-commit of both logs", interval=0)
        assert c.committed([TopicPartition(topic, 0)])[0].offset == 121
        owed = tenure_server.group(f"{group}.catchup")
        assert owed.offset(topic, 0) == 120             # the secondary's checkpoint: its range closed
    finally:
        c.close()
    assert c.child_consumer_is_alive() is False


@pytest.mark.parametrize("mode", ["plain", "off"])
def test_with_the_option_off_a_crash_replays_in_order_as_a_plain_consumer(tenure_server, topic, mode):
    """The same crash with `enable.parallel.rebalance` off (or absent) and with a plain confluent-kafka
    Consumer: the recovered consumer restarts at the commit and delivers 70..120 in order, one consumer,
    no companion group; commit and committed are the group's own."""
    bootstrap, group = tenure_server.bootstrap, f"off-{mode}"
    produce(bootstrap, topic, 100)
    _crash_at_100(bootstrap, topic, group, mode)
    produce(bootstrap, topic, 20)
    c = _consumer(bootstrap, group, mode)
    try:
        assigned = []
        c.subscribe([topic], on_assign=lambda _c, ps: assigned.extend(ps))
        delivered: list[int] = []
        _pump(c, delivered, lambda: assigned, "the assignment")
        produce(bootstrap, topic, 1)
        _pump(c, delivered, lambda: 120 in delivered, "the fresh record")
        assert delivered == list(range(70, 121))        # in order, the lag first
        assert c.position([TopicPartition(topic, 0)])[0].offset == 121
        c.commit(asynchronous=False)
        assert c.committed([TopicPartition(topic, 0)])[0].offset == 121
        assert c.committed([TopicPartition(topic, 0)])[0].metadata in (None, "")
        if mode == "off":
            assert not c.child_consumer_is_alive()
    finally:
        c.close()
    assert tenure_server.group(f"{group}.catchup") is None
