"""Fetch honours the request's max_bytes across all partitions, the first one included: each partition reads
min(its partition_max_bytes, what is left of max_bytes), and only the first partition with data may return one
whole batch beyond that so the consumer progresses (Kafka's ReplicaManager.readFromLog)."""
from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.protocol.consumer import FetchRequest

from tests.support.clients import create_topic
from tests.support.wire import build_batch, produce_request

BATCH_VALUE = 10_000          # one record of 10 kB per batch: batches of ~10.1 kB


def _fill(wire, topic: str, partition: int, batches: int, value_size: int = BATCH_VALUE) -> int:
    for i in range(batches):
        r = wire.call(produce_request(topic, partition, build_batch([(b"k%d" % i, b"x" * value_size)])), 8)
        assert r.responses[0].partition_responses[0].error_code == 0
    return len(build_batch([(b"k0", b"x" * value_size)]))


def _fetch(wire, topic: str, partitions: list[int], max_bytes: int, partition_max_bytes: int, version: int = 12):
    F = FetchRequest
    T = F.FetchTopic
    req = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=0, session_id=0,
            session_epoch=-1, forgotten_topics_data=[], rack_id="",
            topics=[T(topic=topic, topic_id=None, partitions=[T.FetchPartition(
                partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                partition_max_bytes=partition_max_bytes) for p in partitions])])
    r = wire.call(req, version)
    return {p.partition_index: len(p.records or b"") for t in r.responses for p in t.partitions}


def test_request_max_bytes_bounds_the_first_partition_too(tenure_server, wire):
    create_topic(tenure_server.bootstrap, "big", 3)
    size = max(_fill(wire, "big", p, 6) for p in range(3))
    got = _fetch(wire, "big", [0, 1, 2], max_bytes=3 * size + 10, partition_max_bytes=20_000_000)
    assert sum(got.values()) <= 3 * size + 10, got
    assert got == {0: 3 * size, 1: 0, 2: 0}, got


def test_later_partitions_get_what_is_left_in_whole_batches(tenure_server, wire):
    create_topic(tenure_server.bootstrap, "split", 3)
    size = max(_fill(wire, "split", p, 4) for p in range(3))
    got = _fetch(wire, "split", [0, 1, 2], max_bytes=5 * size + size // 2, partition_max_bytes=2 * size)
    assert got == {0: 2 * size, 1: 2 * size, 2: size}, got


def test_the_first_batch_comes_whole_even_when_larger_than_both_limits(tenure_server, wire):
    create_topic(tenure_server.bootstrap, "huge", 2)
    size = _fill(wire, "huge", 0, 2, value_size=50_000)
    _fill(wire, "huge", 1, 2)
    got = _fetch(wire, "huge", [0, 1], max_bytes=1_000, partition_max_bytes=1_000)
    assert got == {0: size, 1: 0}, got


def test_the_lowest_served_version_has_the_same_budget(tenure_server, wire):
    create_topic(tenure_server.bootstrap, "old", 2)
    size = max(_fill(wire, "old", p, 3) for p in range(2))
    got = _fetch(wire, "old", [0, 1], max_bytes=1, partition_max_bytes=10 * size, version=4)
    assert got == {0: size, 1: 0}, got


def test_librdkafka_with_a_partition_max_far_above_fetch_max_reads_everything(tenure_server):
    """fetch.max.bytes 1 MB with max.partition.fetch.bytes 20 MB: an answer over receive.message.max.bytes
    would make librdkafka drop the connection ("Invalid response size") and never read the partition."""
    bs = tenure_server.bootstrap
    create_topic(bs, "wide", 1)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 200_000})
    n, value = 400, b"v" * 10_000                     # ~4 MB in ~20 batches
    for i in range(n):
        p.produce("wide", key=str(i).encode(), value=value, partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bs, "group.id": "wide-reader", "enable.auto.commit": False,
                  "fetch.max.bytes": 1_000_000, "max.partition.fetch.bytes": 20_000_000,
                  "receive.message.max.bytes": 1_000_512, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition("wide", 0, 0)])
        seen: list[int] = []
        errors = []
        deadline = time.monotonic() + 60
        while len(seen) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                errors.append(str(m.error()))
                continue
            seen.append(m.offset())
        assert not errors, errors[:3]
        assert seen == list(range(n))
    finally:
        c.close()
