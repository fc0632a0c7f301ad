"""The cleaner and transactional offset commits on a real server (confluent-kafka; OffsetDelete through
kafka-python 3's admin client, confluent-kafka's has none): a transactional
producer's sendOffsetsToTransaction writes a transactional OffsetCommit record into __consumer_offsets, an
OffsetDelete then writes a plain tombstone of the same key; once the cleaner has dropped the tombstone
(delete.retention.ms passed), a restart (the coordinator loads the log again) must not bring the deleted
offset back: the committed transactional record was removed with it, as Kafka's cleaner does."""
from __future__ import annotations

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
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

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
