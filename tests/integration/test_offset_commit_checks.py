"""OffsetCommit for topics or partitions that do not exist: Kafka's request handler answers
UNKNOWN_TOPIC_OR_PARTITION (3) for them before the group coordinator sees the request, stores nothing, and
creates no group when nothing else is left. Raw wire, the confluent-kafka AdminClient and the Java Admin's
alterConsumerGroupOffsets."""
from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka.protocol.consumer.group import OffsetCommitRequest

from tests.support.clients import create_topic
from tests.support.groupwire import commit, fetch_all
from tests.support.java import run_java

UNKNOWN = 3


def _commit_many(wire, group: str, offsets: dict[tuple[str, int], int], version: int = 8) -> list[tuple]:
    """One OffsetCommit naming several topics, in the given order; [(topic, partition, error)] as answered."""
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    by_topic: dict[str, list] = {}
    for (t, p), o in offsets.items():
        by_topic.setdefault(t, []).append(P(version=version, partition_index=p, committed_offset=o,
                                            committed_leader_epoch=-1, committed_metadata=""))
    req = OffsetCommitRequest(version=version, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                              group_instance_id=None,
                              topics=[T(version=version, name=t, partitions=ps) for t, ps in by_topic.items()])
    r = wire.call(req, version)
    return [(t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions]


def test_commit_for_an_unknown_topic_is_3_stores_nothing_and_creates_no_group(tenure_server, wire):
    assert commit(wire, "g-none", "", -1, None, "no-such-topic", {0: 5, 1: 6}) == {0: UNKNOWN, 1: UNKNOWN}
    assert tenure_server.group("g-none") is None
    assert fetch_all(wire, ["g-none"]) == {"g-none": {}}
    assert "no-such-topic" not in {t.name for t in tenure_server.server.topics.all()}, "no auto-creation"


@pytest.mark.parametrize("version", [2, 7, 8, 9])
def test_mixed_commit_keeps_the_existing_partitions_in_request_order(tenure_server, wire, version):
    create_topic(tenure_server.bootstrap, "two", 2)
    answer = _commit_many(wire, "g-mixed", {("two", 1): 11, ("ghost", 0): 1, ("two", 5): 15, ("two", 0): 10},
                          version=version)
    assert answer == [("two", 1, 0), ("two", 5, UNKNOWN), ("two", 0, 0), ("ghost", 0, UNKNOWN)]
    assert fetch_all(wire, ["g-mixed"]) == {"g-mixed": {("two", 0): 10, ("two", 1): 11}}
    assert tenure_server.group("g-mixed").state == "Empty"


def test_group_errors_still_apply_to_the_existing_partitions(tenure_server, wire):
    create_topic(tenure_server.bootstrap, "one", 1)
    # generation 3 to an unknown group: the coordinator answers 22 for what reaches it, the broker 3 for the rest
    assert commit(wire, "g-gen", "m", 3, None, "one", {0: 1, 4: 1}, version=8) == {0: 22, 4: UNKNOWN}
    assert tenure_server.group("g-gen") is None


def test_confluent_admin_alter_offsets_of_an_unknown_partition_fails_with_unknown_topic(tenure_server):
    bs = tenure_server.bootstrap
    create_topic(bs, "alter-me", 2)
    admin = AdminClient({"bootstrap.servers": bs})
    ok = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "g-alter", [TopicPartition("alter-me", 0, 7), TopicPartition("alter-me", 1, 8)])])["g-alter"].result(10)
    assert [(tp.partition, tp.offset, tp.error) for tp in ok.topic_partitions] == [(0, 7, None), (1, 8, None)]
    fut = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "g-alter2", [TopicPartition("alter-me", 9, 1)])])["g-alter2"]
    with pytest.raises(Exception) as info:
        res = fut.result(10)
        # some librdkafka versions report partition errors on the partitions instead of failing the future
        errors = [tp.error for tp in res.topic_partitions if tp.error is not None]
        raise AssertionError(errors) if not errors else RuntimeError(str(errors[0]))
    assert "UNKNOWN_TOPIC_OR_PART" in str(info.value), info.value
    assert tenure_server.group("g-alter2") is None


@pytest.mark.java
@pytest.mark.timeout(120)
def test_java_admin_alter_offsets_of_an_unknown_topic_fails_with_unknown_topic(tenure_server):
    bs = tenure_server.bootstrap
    out = run_java("AdminOps", bs, "alter-offsets", "g-java", "no-such-topic", "0=5", timeout=90)
    [alter] = [e for e in out if e["type"].startswith("alter")]
    assert alter["type"] == "alter_error", alter
    assert alter["exception"] == "org.apache.kafka.common.errors.UnknownTopicOrPartitionException", alter
    assert tenure_server.group("g-java") is None
