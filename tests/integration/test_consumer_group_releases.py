"""KIP-1101 by release, with a real client: a confluent-kafka 2.16 consumer (group.protocol=consumer) in a group
on tenure as Kafka 4.0 leaves ConsumerGroupPartitionMetadata records (type 4) and hashless epoch records in
__consumer_offsets, as Kafka 4.0 does; the same data dir served as 4.3 (an upgrade) while the consumer stays up
converts the group at its next heartbeat - the epoch record with the metadata hash, then the type 4 tombstone -
and the consumer keeps its partitions and reads on. `tenure log dump --json` shows the records."""
from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, Producer

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tenure.tools.cli import main

pytestmark = pytest.mark.timeout(180)


def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(values):
        p.produce(topic, v.encode(), partition=i % 2)
    assert p.flush(30) == 0


def _read(c: Consumer, n: int, deadline_s: float = 60) -> list[str]:
    got: list[str] = []
    end = time.monotonic() + deadline_s
    while len(got) < n and time.monotonic() < end:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value().decode())
    return got


def _dump(data_dir, capsys, group: str) -> list[dict]:
    capsys.readouterr()
    assert main(["log", "dump", str(data_dir), "--topic", "__consumer_offsets", "--group", group, "--json"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]


def _kinds(rows: list[dict]) -> list[tuple[str, bool]]:
    return [(r["type"], r["tombstone"]) for r in rows
            if r["type"] in ("consumer_group_metadata", "consumer_group_partition_metadata")]


def test_a_consumer_group_as_4_0_then_served_as_4_3_with_confluent_kafka(tmp_path, capsys):
    data = tmp_path / "data"
    conf = dict(consumer_heartbeat_interval_ms=200, initial_rebalance_delay_ms=0, data_dir=str(data))
    s = ServerThread(ServerConfig(port=0, kafka_version="4.0", **conf)).start()
    port = s.port
    c = None
    try:
        s.create_topics({"rel": 2})
        _produce(s.bootstrap, "rel", [f"a{i}" for i in range(6)])
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "gr", "group.protocol": "consumer",
                      "auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 200})
        c.subscribe(["rel"])
        assert sorted(_read(c, 6)) == sorted(f"a{i}" for i in range(6))
        epoch_as_4_0 = s.group("gr").generation
        s.stop()
        as_4_0 = _dump(data, capsys, "gr")
        kinds = _kinds(as_4_0)
        # Kafka 4.0: the subscription metadata (type 4) written before the first epoch record, which has no hash
        assert kinds[:2] == [("consumer_group_partition_metadata", False), ("consumer_group_metadata", False)]
        pm = next(r for r in as_4_0 if r["type"] == "consumer_group_partition_metadata")
        assert pm["key_version"] == 4 and [t[1:] for t in pm["value"]["topics"]] == [["rel", 2]]
        assert all(r["value"]["metadata_hash"] == 0 for r in as_4_0 if r["type"] == "consumer_group_metadata"
                   and not r["tombstone"])

        # the same data dir served as 4.3, the consumer still up: it reconnects and heartbeats
        s = ServerThread(ServerConfig(port=port, kafka_version="4.3", **conf)).start()
        _produce(s.bootstrap, "rel", [f"b{i}" for i in range(4)])
        assert sorted(_read(c, 4)) == sorted(f"b{i}" for i in range(4))
        g = s.group("gr")
        assert g.generation >= epoch_as_4_0 + 1
    finally:
        if c is not None:
            c.close()
        s.stop()
    after = _dump(data, capsys, "gr")[len(as_4_0):]
    kinds = _kinds(after)
    # Kafka 4.1+: at the first bump, the epoch record with the metadata hash, then the type 4 tombstone
    first = kinds.index(("consumer_group_metadata", False))
    assert kinds[first + 1] == ("consumer_group_partition_metadata", True), kinds
    assert kinds.count(("consumer_group_partition_metadata", True)) == 1
    assert ("consumer_group_partition_metadata", False) not in kinds
    bumps = [r for r in after if r["type"] == "consumer_group_metadata" and not r["tombstone"]]
    assert bumps[0]["value"]["epoch"] == epoch_as_4_0 + 1 and bumps[0]["value"]["metadata_hash"] != 0
    # the consumer's close() leaves: the group subscribes to nothing, whose hash is 0
    assert bumps[-1]["value"]["metadata_hash"] == 0


def test_as_4_0_added_partitions_reach_a_confluent_kafka_consumer_through_the_subscription_metadata(tmp_path, capsys):
    """As 4.0 the rebalance trigger is the subscription metadata (type 4): partitions added to the subscribed
    topic (confluent-kafka's AdminClient create_partitions) write a new type 4 record and bump the group epoch
    once; the consumer is assigned the new partitions and reads from them."""
    from confluent_kafka.admin import AdminClient, NewPartitions
    with ServerThread(ServerConfig(port=0, kafka_version="4.0", consumer_heartbeat_interval_ms=200,
                                   initial_rebalance_delay_ms=0, data_dir=str(tmp_path / "d"))) as s:
        s.create_topics({"grow": 2})
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "gg", "group.protocol": "consumer",
                      "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500})
        try:
            c.subscribe(["grow"])
            end = time.monotonic() + 30
            while len(c.assignment()) < 2 and time.monotonic() < end:
                c.poll(0.2)
            assert sorted(p.partition for p in c.assignment()) == [0, 1]
            epoch = s.group("gg").generation
            admin = AdminClient({"bootstrap.servers": s.bootstrap})
            for f in admin.create_partitions([NewPartitions("grow", 4)]).values():
                f.result(30)
            p = Producer({"bootstrap.servers": s.bootstrap})
            for part in (2, 3):
                p.produce("grow", f"new{part}".encode(), partition=part)
            assert p.flush(30) == 0
            got = _read(c, 2)
            assert sorted(got) == ["new2", "new3"]
            assert sorted(p.partition for p in c.assignment()) == [0, 1, 2, 3]
            assert s.group("gg").generation == epoch + 1
        finally:
            c.close()
    rows = _dump(tmp_path / "d", capsys, "gg")
    metadata = [[t[1:] for t in r["value"]["topics"]] for r in rows
                if r["type"] == "consumer_group_partition_metadata" and not r["tombstone"]]
    # joined (2 partitions), grown (4), and the consumer's close(): its leave leaves no subscribed topic
    assert metadata == [[["grow", 2]], [["grow", 4]], []]
