"""Round trips through the real client libraries, shared by the integration tests."""
from __future__ import annotations

import time

RECORDS = 30


def expected_records(n: int = RECORDS, partitions: int = 3):
    """(partition, key, value, headers) for record i; headers include a binary value."""
    return [(i % partitions, f"k{i}".encode(), f"v{i}".encode(), [("h1", f"x{i}".encode()), ("h2", b"\x00\x01\x02")])
            for i in range(n)]


def by_partition_offsets(consumed):
    """consumed: list of (partition, offset, key, value, headers) -> checks offsets are 0..n-1 per partition."""
    per: dict[int, list[int]] = {}
    for p, o, *_ in consumed:
        per.setdefault(p, []).append(o)
    return {p: sorted(os) for p, os in per.items()}


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    """CreateTopics through confluent-kafka's AdminClient (kept referenced until the answer: a collected
    client destroys its handle and fails the future)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(15)


def confluent_round_trip(bootstrap: str, topic: str, partitions: int = 3, n: int = RECORDS):
    from confluent_kafka import Consumer, Producer, TopicPartition

    create_topic(bootstrap, topic, partitions)
    produced = []
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for part, k, v, h in expected_records(n, partitions):
        p.produce(topic, key=k, value=v, partition=part, headers=h,
                  on_delivery=lambda err, msg: produced.append((err, msg.partition(), msg.offset(), msg.key())))
    assert p.flush(15) == 0
    assert all(err is None for err, *_ in produced), produced
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "manual-assign-unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    consumed = []
    deadline = time.time() + 30
    while len(consumed) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        consumed.append((m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or [])))
    c.close()
    return [(part, off, key) for _, part, off, key in produced], consumed
