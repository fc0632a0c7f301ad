"""Crash injection, seeded random rounds: the main consumer abandoned (no close, as a killed process
leaves it), the secondary dropped without a commit, both, the main consumer's session expired by tenure
(`expire_session`), clean restarts, interleaved with produce, poll and every kind of commit.

Invariants, for every partition: `committed()` never claims an offset whose predecessors were not all
processed; at the end the union of processed offsets covers [0, end) - at-least-once."""
from __future__ import annotations

import os
import random
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from tenure.catchup import CatchUpConsumer
from tests.catchup.conftest import produce
from tests.support.groups import wait_for

pytestmark = pytest.mark.timeout(180)
PARTITIONS = 2
ROUNDS = 36
BUDGET_S = 45
REFUSED = {KafkaError._NO_OFFSET, KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION,
           KafkaError.REBALANCE_IN_PROGRESS, KafkaError.FENCED_INSTANCE_ID}          # no new round starts after this: bounded on a loaded machine


class App:
    """The application: processes (records) whatever poll() returns, commits when told."""

    def __init__(self, server, topic: str, group: str):
        self.server, self.topic, self.group = server, topic, group
        self.processed = {p: set() for p in range(PARTITIONS)}
        self.last = {}                  # partition -> last message processed (for commit(message=...))
        self.refused = 0
        self.catching_up = 0            # records delivered while a secondary consumer was running
        self.c = self._new()

    def _new(self) -> CatchUpConsumer:
        c = CatchUpConsumer({"bootstrap.servers": self.server.bootstrap, "group.id": self.group,
                             "group.instance.id": "w1", "enable.parallel.rebalance": True,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                             "max.poll.interval.ms": 10000, **({"debug": "cgrp"} if os.environ.get("CATCHUP_DEBUG") else {})})
        c.subscribe([self.topic])
        return c

    def poll(self, n: int) -> None:
        for _ in range(n):
            m = self.c.poll(0.05)
            if m is not None and m.error() is None:
                self.processed[m.partition()].add(m.offset())
                self.last[m.partition()] = m
                self.catching_up += self.c.child_consumer_is_alive()

    def check_committed(self) -> None:
        for tp in self.c.committed([TopicPartition(self.topic, p) for p in range(PARTITIONS)], timeout=30):
            if tp.offset >= 0:
                missing = set(range(tp.offset)) - self.processed[tp.partition]
                assert not missing, f"committed() says {tp.offset} on {tp.partition}, unprocessed: {sorted(missing)[:10]}"

    def commit(self, **kw) -> None:
        """A commit the group may refuse (the member was expired or replaced: its generation is gone) or
        that has nothing to say: the application carries on, as with a plain consumer."""
        try:
            self.c.commit(asynchronous=False, **kw)
        except KafkaException as e:
            assert e.args[0].code() in REFUSED, e
            self.refused += 1

    def crash_main(self) -> None:
        self.last.clear()
        # The dead process's handles go away before its successor starts: a close still in flight could
        # otherwise finish a JoinGroup after the successor's and fence it (a zombie, not this test's subject).
        self.c._abandon().join(15)
        self.c = self._new()

    def restart_clean(self) -> None:
        self.c.close()
        self.c = self._new()


def _end(server, topic, p) -> int:
    return server.call(lambda: server.server.topics.partition(topic, p).log_end_offset)


def test_random_crashes_lose_nothing_and_committed_never_overclaims(tenure_server, record_property):
    topic, group = "prop", "prop-g"
    tenure_server.call(lambda: tenure_server.server.topics.create(topic, PARTITIONS))
    rnd = random.Random(int(os.environ.get("CATCHUP_SEED", "15")))
    app = App(tenure_server, topic, group)
    actions = {"produce": 0, "poll": 0, "commit": 0, "crash_main": 0, "crash_secondary": 0, "crash_both": 0,
               "expire_session": 0, "clean_restart": 0}
    started = time.monotonic()
    rounds = 0
    try:
        for rounds in range(1, ROUNDS + 1):  # noqa: B007 - the count is read after the loop
            if time.monotonic() - started > BUDGET_S:
                break
            for _ in range(rnd.randint(1, 4)):
                a = rnd.choices(list(actions), weights=[4, 6, 4, 2, 2, 1, 1, 1])[0]
                actions[a] += 1
                if a == "produce":
                    for p in range(PARTITIONS):
                        produce(tenure_server.bootstrap, topic, rnd.randint(0, 25), partition=p)
                elif a == "poll":
                    app.poll(rnd.randint(1, 40))
                elif a == "commit":
                    kind = rnd.choice(["all", "message", "offsets"])
                    if kind == "all":
                        app.commit()
                    elif app.last:
                        m = app.last[rnd.choice(sorted(app.last))]
                        if kind == "message":
                            app.commit(message=m)
                        else:
                            app.commit(offsets=[TopicPartition(m.topic(), m.partition(), m.offset() + 1)])
                    app.last.clear()
                elif a == "crash_main":
                    app.crash_main()
                elif a == "crash_secondary":
                    app.c._restart_secondary()
                elif a == "crash_both":
                    if app.c._sec is not None:
                        app.c._restart_secondary()   # the secondary goes first, the main one right after
                    app.crash_main()
                elif a == "expire_session":
                    tenure_server.expire_session(group, "w1")
                elif a == "clean_restart":
                    app.restart_clean()
                app.check_committed()
        # Drain: everything produced is processed, then one commit makes committed() the log end.
        ends = {p: _end(tenure_server, topic, p) for p in range(PARTITIONS)}

        def drained():
            app.poll(10)
            return all(set(range(ends[p])) <= app.processed[p] for p in range(PARTITIONS))
        wait_for(drained, 60, "every produced offset processed", interval=0)
        app.poll(10)
        app.commit()
        app.check_committed()
        final = {tp.partition: tp.offset for tp in
                 app.c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)}
        assert final == ends, (final, ends)
    finally:
        app.c.close()
    record_property("rounds", rounds)
    record_property("records", sum(ends.values()))
    record_property("commits_refused", app.refused)
    record_property("records_while_catching_up", app.catching_up)
    for k, v in actions.items():
        record_property(k, v)
    assert actions["crash_main"] and actions["crash_secondary"] and actions["expire_session"]
    assert app.catching_up, "no crash ever opened a catch-up range: the test exercised nothing"
