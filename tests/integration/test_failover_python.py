"""Leaders moving under kafka-python 3 and aiokafka 0.14 on a 3-broker tenure.

A static group member (tests/support/groups.py's GroupMember, the client's own consumer on its own
thread) consumes a 3-partition topic while the client's own idempotent producer (kafka-python's
KafkaProducer, enable_idempotence on by default in 3.x; aiokafka's AIOKafkaProducer(enable_idempotence=True))
writes to it on another thread. Midway, partition 0's leader moves (`move_leader`) or its broker stops
(`stop_broker`): the producer gets NOT_LEADER_OR_FOLLOWER or a closed connection, refreshes metadata and
goes on; so does the consumer's fetch. Every record acknowledged is consumed exactly once at consecutive
offsets (none lost, none written twice), and the group's commits before and after the move are there
(the client's own committed() and AdminClient's OffsetFetch agree).
"""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tests.support.failover import committed_by_admin
from tests.support.groups import GroupMember, commit_offsets, committed, wait_for

pytestmark = [pytest.mark.timeout(180)]
PARTITIONS = 3


class ClientProducer:
    """The client's own idempotent producer on a thread, writing `i` values round-robin to every partition
    (about `rate` records/s) until stop(); `acked` holds (partition, offset, value) of every delivery."""

    def __init__(self, client: str, bootstrap: str, topic: str, rate: float = 100) -> None:
        self.client, self.bootstrap, self.topic, self.rate = client, bootstrap, topic, rate
        self.acked: list[tuple[int, int, bytes]] = []
        self.errors: list = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True, name=f"producer-{client}")

    def _main(self) -> None:
        try:
            if self.client == "kafka-python":
                self._kafka_python()
            else:
                asyncio.run(self._aiokafka())
        except BaseException as exc:      # surfaced by stop()
            self.errors.append(exc)

    def _kafka_python(self) -> None:
        from kafka import KafkaProducer
        p = KafkaProducer(bootstrap_servers=self.bootstrap, enable_idempotence=True, acks="all", linger_ms=5,
                          request_timeout_ms=15000, delivery_timeout_ms=60000)
        futures = []
        while not self._stop.is_set():
            v = f"{self.sent}".encode()
            futures.append((v, p.send(self.topic, value=v, partition=self.sent % PARTITIONS)))
            self.sent += 1
            time.sleep(1 / self.rate)
        p.flush(60)
        for v, f in futures:
            md = f.get(60)
            self.acked.append((md.partition, md.offset, v))
        p.close(10)

    async def _aiokafka(self) -> None:
        from aiokafka import AIOKafkaProducer
        p = AIOKafkaProducer(bootstrap_servers=self.bootstrap, enable_idempotence=True, linger_ms=5,
                             request_timeout_ms=15000)
        await p.start()
        try:
            futures = []
            while not self._stop.is_set():
                v = f"{self.sent}".encode()
                futures.append((v, await p.send(self.topic, value=v, partition=self.sent % PARTITIONS)))
                self.sent += 1
                await asyncio.sleep(1 / self.rate)
            for v, f in futures:
                md = await asyncio.wait_for(f, 60)
                self.acked.append((md.partition, md.offset, v))
        finally:
            await p.stop()

    def start(self) -> ClientProducer:
        self._thread.start()
        return self

    def stop(self) -> list[tuple[int, int, bytes]]:
        self._stop.set()
        self._thread.join(90)
        assert not self._thread.is_alive(), "the producer did not finish within 90 s"
        assert not self.errors, self.errors
        assert len(self.acked) == self.sent, (len(self.acked), self.sent)
        return self.acked


def consumed_positions(member: GroupMember) -> dict[int, int]:
    out: dict[int, int] = {}
    for p, o, _ in list(member.records):
        out[p] = max(out.get(p, 0), o + 1)
    return out


@pytest.mark.tenure(brokers=3)
@pytest.mark.parametrize("event", ["move_leader", "stop_broker"])
@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_produce_consume_and_commit_survive_a_leader_move(tenure_server, client, event, record_property):
    st = tenure_server
    topic, group = f"lm-{client}-{event}", f"lm-{client}-{event}"
    st.create_topics({topic: PARTITIONS})
    member = GroupMember(client, st.bootstrap, group, topic, "lm-0", session_timeout_ms=10000,
                         heartbeat_interval_ms=500).start()
    try:
        assert member.wait_assigned(60) == frozenset(range(PARTITIONS))
        settled = len(member.events_copy())         # kafka-python revokes an empty set before its first join
        producer = ClientProducer(client, st.bootstrap, topic).start()
        wait_for(lambda: len(member.records) >= 60, 60, "records consumed before the move")
        before = consumed_positions(member)
        commit_offsets(member, before)

        leader = st.leader_of(topic, 0)
        if event == "move_leader":
            target = (leader + 1) % 3
            st.move_leader(topic, 0, target)
            assert st.leader_of(topic, 0) == target
        else:
            st.stop_broker(leader)
            assert st.leader_of(topic, 0) != leader
        moved_at = producer.sent
        wait_for(lambda: producer.sent >= moved_at + 100, 60, "the producer to go on after the move")
        acked = producer.stop()

        ends: dict[int, int] = {}
        for p, o, _ in acked:
            ends[p] = max(ends.get(p, 0), o + 1)
        wait_for(lambda: consumed_positions(member) == ends, 60, f"every record up to {ends} consumed")
        assert committed(member, range(PARTITIONS)) == {p: before.get(p) for p in range(PARTITIONS)}
        commit_offsets(member, ends)
        assert committed(member, range(PARTITIONS)) == ends
        assert committed_by_admin(st.bootstrap, group, topic, PARTITIONS) == ends

        got = sorted((p, o, v) for p, o, v in member.records)
        assert len(got) == len({(p, o) for p, o, _ in got}), "a record was consumed twice"
        for p in range(PARTITIONS):
            assert [o for q, o, _ in got if q == p] == list(range(ends[p])), f"offsets of partition {p}"
        assert sorted(v for _, _, v in got) == sorted(v for _, _, v in acked), "consumed != acknowledged"
        assert len({v for _, _, v in got}) == len(got), "the idempotent producer wrote a record twice"
        assert member.events_copy()[settled:] == [], f"callbacks during the move: {member.events_copy()}"
        record_property("records", len(acked))
    finally:
        member.stop()
