"""The cleaner and transactional offset commits on a real server (confluent-kafka; OffsetDelete through
kafka-python 3's admin client, confluent-kafka's has none): a transactional
producer's sendOffsetsToTransaction writes a transactional OffsetCommit record into __consumer_offsets, an
OffsetDelete then writes a plain tombstone of the same key; once the cleaner has dropped the tombstone
(delete.retention.ms passed), a restart (the coordinator loads the log again) must not bring the deleted
offset back: the committed transactional record was removed with it, as Kafka's cleaner does."""
from __future__ import annotations

import time

import pytest

from tenure.config import ServerConfig
from tenure.protocol.internal_topics import OFFSETS_TOPIC
from tenure.server import ServerThread

pytestmark = pytest.mark.timeout(180)


def committed(bootstrap: str, group: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=15)[0].offset
    finally:
        c.close()


def test_an_offset_deleted_after_a_transactional_commit_stays_deleted_after_cleaning_and_restart(tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition

    cfg = ServerConfig(port=0, data_dir=str(tmp_path / "data"), segment_bytes=1024, cleaner_interval_ms=0,
                       offsets_partitions=1)
    with ServerThread(cfg) as s:
        s.call(lambda: s.server.topics.create("tx", 1))
        s.call(lambda: s.server.topics.create("filler", 1))
        group = "txg"
        consumer = Consumer({"bootstrap.servers": s.bootstrap, "group.id": group, "enable.auto.commit": False})
        p = Producer({"bootstrap.servers": s.bootstrap, "transactional.id": "tx-offsets"})
        p.init_transactions(15)
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition("tx", 0, 42)], consumer.consumer_group_metadata(), 15)
        p.commit_transaction(15)
        assert committed(s.bootstrap, group, "tx") == 42
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        kadmin = KafkaAdminClient(bootstrap_servers=s.bootstrap)
        try:                                    # OffsetDelete: a plain tombstone of the same key
            kadmin.delete_group_offsets(group, [KTopicPartition("tx", 0)])
        finally:
            kadmin.close()
        assert committed(s.bootstrap, group, "tx") < 0
        # plain commits of another partition of the same group roll the segments holding all of the above
        for i in range(40):
            consumer.commit(offsets=[TopicPartition("filler", 0, i + 1)], asynchronous=False)
        consumer.close()
        res = ConfigResource(ResourceType.TOPIC, OFFSETS_TOPIC, incremental_configs=[
            ConfigEntry("delete.retention.ms", "0", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(15)
        st = s.compact_now()
        st2 = s.compact_now()                  # a later pass: the horizon (now + 0) has passed
        assert st.tombstones_dropped + st2.tombstones_dropped >= 1, (st, st2)
        assert committed(s.bootstrap, group, "tx") < 0
        assert committed(s.bootstrap, group, "filler") == 40
        end = s.call(lambda: s.server.topics.get(OFFSETS_TOPIC).partitions[0].log_end_offset)
    with ServerThread(cfg) as s:                # the coordinator loads the cleaned log
        assert s.call(lambda: s.server.topics.get(OFFSETS_TOPIC).partitions[0].log_end_offset) == end
        assert committed(s.bootstrap, group, "tx") < 0, "the deleted offset came back"
        assert committed(s.bootstrap, group, "filler") == 40


def test_a_compacted_topic_written_in_transactions_reads_the_same_committed_records_after_cleaning(tmp_path):
    """confluent-kafka's transactional producer writes a compacted topic in committed and aborted
    transactions; after the cleaner ran, a read_uncommitted consumer no longer sees the aborted records and a
    read_committed one sees the latest committed value of every key, as before."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    def read(bootstrap: str, isolation: str, end: int) -> list:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{isolation}", "enable.auto.commit": False,
                      "isolation.level": isolation})
        c.assign([TopicPartition("kvt", 0, 0)])
        got: list = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                got.append((m.key(), m.value()))
            pos = c.position([TopicPartition("kvt", 0)])[0].offset
            if pos >= end:
                break
        c.close()
        return got

    cfg = ServerConfig(port=0, data_dir=str(tmp_path / "data"), segment_bytes=1024, cleaner_interval_ms=0)
    with ServerThread(cfg) as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        admin.create_topics([NewTopic("kvt", 1, 1, config={"cleanup.policy": "compact"})])["kvt"].result(15)
        p = Producer({"bootstrap.servers": s.bootstrap, "transactional.id": "kvt-writer", "linger.ms": 0})
        p.init_transactions(15)
        for i in range(30):
            p.begin_transaction()
            for j in range(3):
                p.produce("kvt", key=f"k{(i + j) % 5}".encode(), value=f"v{i}-{j}".encode() * 20, partition=0)
            if i % 3 == 2:
                assert p.flush(15) == 0                  # in the log before the abort (not purged by it)
                p.abort_transaction(15)
            else:
                p.commit_transaction(15)
        for i in range(30, 36):                          # committed ones roll the last abort out of the active segment
            p.begin_transaction()
            p.produce("kvt", key=f"x{i}".encode(), value=b"pad" * 200, partition=0)
            p.commit_transaction(15)
        end = s.call(lambda: s.server.topics.get("kvt").partitions[0].log_end_offset)
        committed_before = read(s.bootstrap, "read_committed", end)
        latest = {}
        for key, value in committed_before:
            latest[key] = value
        st = s.compact_now()
        assert st.groups_cleaned > 0 and st.aborted_batches_dropped > 0, st
        uncommitted = read(s.bootstrap, "read_uncommitted", end)
        assert all(int(v.split(b"-")[0][1:]) % 3 != 2 for key, v in uncommitted if key.startswith(b"k")), \
            "an aborted record is still there"
        committed_after = read(s.bootstrap, "read_committed", end)
        assert len(committed_after) < len(committed_before)
        assert {key: v for key, v in committed_after} == latest
