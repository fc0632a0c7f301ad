"""A KIP-848 consumer group as each release's coordinator keeps it (KIP-1101, Kafka 4.1): as 4.0 the subscribed
topics' metadata is a ConsumerGroupPartitionMetadata record (type 4: id, name, partition count, no racks) written
before the epoch record when it changes, and the epoch record carries no hash; from 4.1 the epoch record carries
the metadata hash and a type 4 record left by 4.0 gets its tombstone at the next epoch bump. A log written as one
is served as the other, as Kafka's upgrade (and its 4.0 reading a 4.1 log) does."""
from __future__ import annotations

import dataclasses

from tenure.coordinator import CoordinatorConfig
from tenure.protocol import records as wire_records
from tenure.protocol.consumer_group_records import (
    ConsumerGroupMetadataRecord,
    ConsumerGroupPartitionMetadataRecord,
    CurrentAssignmentRecord,
    TargetAssignmentMetadataRecord,
)

from .consumer_harness import ConsumerHarness, Topics

AS_4_0 = CoordinatorConfig(consumer_group_metadata_hash=False)
AS_4_3 = CoordinatorConfig()


class RackTopics(Topics):
    """A topic table whose partitions' replicas have racks (`partition_racks`, as the broker's table has)."""

    def __init__(self, **counts: int) -> None:
        self.racks: dict[str, list[list[str]]] = {}
        super().__init__(**counts)

    def partition_racks(self, topic) -> list[list[str]]:
        return self.racks.get(topic.name, [[] for _ in topic.partitions])

    def move_racks(self, name: str, racks: list[list[str]]) -> None:
        self.racks[name] = racks
        self._changed(name)


def _types(records) -> list[str]:
    out = []
    for r in records:
        name = {ConsumerGroupMetadataRecord: "epoch", ConsumerGroupPartitionMetadataRecord: "partition_metadata",
                TargetAssignmentMetadataRecord: "target_epoch"}.get(type(r))
        if name is not None:
            out.append(name + ("-tombstone" if r.tombstone else ""))
    return out


def _served_as(h: ConsumerHarness, config: CoordinatorConfig) -> ConsumerHarness:
    """The same log loaded by a coordinator of another release (an upgrade or a downgrade)."""
    old = h.coordinator.config
    h.coordinator.config = config
    try:
        return h.failover()
    finally:
        h.coordinator.config = old


def test_as_4_0_the_subscription_metadata_is_a_type_4_record_before_a_hashless_epoch_record():
    h = ConsumerHarness(AS_4_0, topics=Topics(t=6))
    h.cjoin("m")
    recs = h.take_records()
    assert _types(recs)[:2] == ["partition_metadata", "epoch"]
    pm = next(r for r in recs if isinstance(r, ConsumerGroupPartitionMetadataRecord))
    assert pm.topics == ((h.topics.tid("t"), "t", 6),)
    epoch = next(r for r in recs if isinstance(r, ConsumerGroupMetadataRecord))
    assert epoch.metadata_hash == 0
    # on the wire: Kafka 4.0's ConsumerGroupMetadataValue, the epoch alone (no tagged hash)
    assert wire_records.encode(epoch)[1] == bytes.fromhex("0000" "00000001" "00")
    assert h.g().subscription_metadata == pm.topics and h.g().has_subscription_metadata_record
    assert h.g().metadata_hash == 0


def test_as_4_3_no_type_4_record_and_the_epoch_record_carries_the_hash():
    h = ConsumerHarness(AS_4_3, topics=Topics(t=6))
    h.cjoin("m")
    recs = h.take_records()
    assert "partition_metadata" not in _types(recs)
    epoch = next(r for r in recs if isinstance(r, ConsumerGroupMetadataRecord))
    assert epoch.metadata_hash == h.coordinator.topic_hashes.group_hash({"t"}) != 0


def test_as_4_0_added_partitions_write_the_new_metadata_and_bump_once():
    h = ConsumerHarness(AS_4_0, topics=Topics(t=2))
    h.cjoin("m")
    h.settle({"m": None})
    epoch = h.epoch()
    h.take_records()
    h.settle({"m": None})
    assert h.epoch() == epoch and "partition_metadata" not in _types(h.take_records())
    h.topics.add_partitions("t", 4)
    h.settle({"m": None})
    assert h.epoch() == epoch + 1
    recs = h.take_records()
    assert _types(recs)[:2] == ["partition_metadata", "epoch"]
    assert recs[0].topics == ((h.topics.tid("t"), "t", 4),) and h.owned("m") == {"t": [0, 1, 2, 3]}


def _rack_move_bumps(config: CoordinatorConfig) -> bool:
    topics = RackTopics(t=2)
    topics.racks["t"] = [["r1"], ["r2"]]
    h = ConsumerHarness(config, topics=topics)
    h.cjoin("m")
    h.settle({"m": None})
    epoch = h.epoch()
    topics.move_racks("t", [["r2"], ["r1"]])
    h.settle({"m": None})
    return h.epoch() != epoch


def test_a_rack_move_bumps_the_epoch_from_4_1_only():
    # 4.0's TopicMetadata has no racks; KIP-1101's topic hash covers each partition's racks
    assert not _rack_move_bumps(AS_4_0)
    assert _rack_move_bumps(AS_4_3)


def test_as_4_0_a_member_leaving_with_the_last_subscriber_of_a_topic_writes_the_metadata_without_it():
    h = ConsumerHarness(AS_4_0, topics=Topics(t=2, u=2))
    h.cjoin("a", topics=["t"])
    h.cjoin("b", topics=["t", "u"])
    h.settle({"a": None, "b": None})
    h.take_records()
    h.hb("b", -1)
    recs = h.take_records()
    assert _types(recs)[:2] == ["partition_metadata", "epoch"]
    [pm] = [r for r in recs if isinstance(r, ConsumerGroupPartitionMetadataRecord)]
    assert pm.topics == ((h.topics.tid("t"), "t", 2),)


def test_a_4_0_log_served_as_4_3_converts_at_the_next_heartbeat():
    """Kafka 4.1 loading a 4.0 group (GroupMetadataManagerTest): the next heartbeat finds the hash changed (0 in
    the log), bumps the epoch, writes the epoch record with the hash, then the type 4 tombstone, then the target
    assignment; the assignment is unchanged and nothing more is written after."""
    h = ConsumerHarness(AS_4_0, topics=Topics(t=3))
    h.cjoin("m")
    h.settle({"m": None})
    epoch, owned = h.epoch(), h.owned("m")
    up = _served_as(h, AS_4_3)
    g = up.g()
    assert g.group_epoch == epoch and g.has_subscription_metadata_record and g.metadata_hash == 0
    up.take_records()
    m = g.members["m"]
    up.hb("m", m.member_epoch, owned=up.owned("m"))
    recs = up.take_records()
    assert _types(recs) == ["epoch", "partition_metadata-tombstone", "target_epoch"]
    assert recs[0].epoch == epoch + 1 and recs[0].metadata_hash == up.coordinator.topic_hashes.group_hash({"t"})
    assert any(isinstance(r, CurrentAssignmentRecord) for r in recs)
    up.settle({"m": None})
    assert up.owned("m") == owned and not up.g().has_subscription_metadata_record
    up.take_records()
    up.settle({"m": None})
    assert up.epoch() == epoch + 1 and "partition_metadata-tombstone" not in _types(up.take_records())
    # the tombstone is durable: a coordinator loading the log after sees no type 4 record
    assert not up.failover().g().has_subscription_metadata_record


def test_a_4_3_log_served_as_4_0_writes_the_subscription_metadata_at_the_next_heartbeat():
    """Kafka 4.0 reading a 4.1 log: the unknown tagged hash is skipped, the group has no subscription metadata,
    so its next heartbeat writes it (type 4) and bumps the epoch, with a hashless epoch record."""
    h = ConsumerHarness(AS_4_3, topics=Topics(t=3))
    h.cjoin("m")
    h.settle({"m": None})
    epoch = h.epoch()
    down = _served_as(h, AS_4_0)
    assert down.g().metadata_hash != 0 and down.g().subscription_metadata == ()
    down.take_records()
    m = down.g().members["m"]
    down.hb("m", m.member_epoch, owned=down.owned("m"))
    recs = down.take_records()
    assert _types(recs)[:2] == ["partition_metadata", "epoch"]
    assert recs[1].epoch == epoch + 1 and recs[1].metadata_hash == 0
    down.settle({"m": None})
    assert down.owned("m") == {"t": [0, 1, 2]}


def test_deleting_a_group_tombstones_its_type_4_record():
    for config, expected in ((AS_4_0, True), (AS_4_3, False)):
        h = ConsumerHarness(config, topics=Topics(t=1))
        h.cjoin("m")
        h.hb("m", -1)
        h.take_records()
        t = h.delete("g")
        assert h.responses[t]["results"][0]["error_code"] == 0
        types = _types(h.take_records())
        assert ("partition_metadata-tombstone" in types) == expected, (config, types)
        if expected:
            assert types[-2:] == ["partition_metadata-tombstone", "epoch-tombstone"]
        assert "g" not in h.group


def test_the_release_picks_the_mode():
    from tenure.config import ServerConfig
    assert ServerConfig(kafka_version="4.0").coordinator_config().consumer_group_metadata_hash is False
    for name in ("4.1", "4.2", "4.3"):
        assert ServerConfig(kafka_version=name).coordinator_config().consumer_group_metadata_hash is True
    assert ServerConfig().coordinator_config() == dataclasses.replace(ServerConfig().coordinator_config(),
                                                                     consumer_group_metadata_hash=True)


def test_as_4_0_a_classic_group_upgraded_writes_its_subscription_metadata_before_the_epoch_record():
    """Kafka 4.0's createConsumerGroupRecords: the members' subscriptions, the subscription metadata (type 4),
    the hashless epoch record, then the targets and current assignments; the downgrade (the last consumer
    member leaving) tombstones the type 4 record with the rest of the consumer group."""
    from .test_migration import classic_pair, protocols
    h = ConsumerHarness(AS_4_0)
    a, b = classic_pair(h)
    h.take_records()
    t = h.hb("c", 0, instance_id="i3")
    assert h.resp(t)["error_code"] == 0
    recs = h.take_records()
    kinds = _types(recs)
    assert kinds[:3] == ["partition_metadata", "epoch", "target_epoch"], kinds
    [pm, *_] = [r for r in recs if isinstance(r, ConsumerGroupPartitionMetadataRecord)]
    assert pm.topics == ((h.topics.tid("t"), "t", 6),)
    assert all(r.metadata_hash == 0 for r in recs if isinstance(r, ConsumerGroupMetadataRecord))
    for mid, iid in ((a, "i1"), (b, "i2")):
        h.join("g", mid, iid, protocols=protocols(), session=45000)
    h.take_records()
    assert h.resp(h.hb("c", -1, instance_id="i3"))["error_code"] == 0
    kinds = _types(h.take_records())
    assert kinds[-2:] == ["partition_metadata-tombstone", "epoch-tombstone"] and h.group["g"].kind == "classic"
