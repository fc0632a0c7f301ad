"""Real clients (Java kafka-clients 4.3, confluent-kafka, kafka-python) mixing plain and transactional offset
commits of one group and partition (Kafka's replayEndTransactionMarker: at a transaction's commit marker the
most recent committed offset wins, by its record's place in __consumer_offsets; an OffsetDelete in between
drops the transaction's pending offset).
OffsetFetch answers the same before and after a restart (the loader agrees with the live coordinator)."""
from __future__ import annotations

import pytest

from tests.support.clients import create_topic

pytestmark = [pytest.mark.timeout(120), pytest.mark.tenure(data_dir=True)]   # kept across restart()


def committed_by_confluent(bs: str, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
    """OffsetFetch through a confluent-kafka consumer (read_committed: require_stable, so it waits for the
    markers)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in partitions], 30)}
    finally:
        c.close()


def test_confluent_kafka_plain_commit_between_send_offsets_and_commit_transaction_is_kept(tenure_server):
    from confluent_kafka import Consumer, Producer, TopicPartition
    bs, topic, group = tenure_server.bootstrap, "tmo-ck", "tmo-ck-group"
    create_topic(bs, topic, 2)
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": bs, "transactional.id": "tmo-ck-tx"})
    try:
        producer.init_transactions(30)
        consumer.commit(offsets=[TopicPartition(topic, 1, 5)], asynchronous=False)     # plain, before
        producer.begin_transaction()
        producer.produce(topic, value=b"v", partition=0)
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 20), TopicPartition(topic, 1, 25)],
                                             consumer.consumer_group_metadata(), 30)
        consumer.commit(offsets=[TopicPartition(topic, 0, 10)], asynchronous=False)    # plain, in between
        producer.commit_transaction(30)
    finally:
        consumer.close()
    # partition 0: the plain commit was written after the transaction's -> it stays (Kafka's answer);
    # partition 1: the transaction's is the more recent -> it replaces the plain one
    assert committed_by_confluent(bs, group, topic, [0, 1]) == {0: 10, 1: 25}
    tenure_server.restart()
    assert committed_by_confluent(bs, group, topic, [0, 1]) == {0: 10, 1: 25}


def test_kafka_python_offset_delete_between_send_offsets_and_commit_drops_the_transactions_offset(tenure_server):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata, TopicPartition
    bs, topic, group = tenure_server.bootstrap, "tmo-kp", "tmo-kp-group"
    create_topic(bs, topic, 2)
    c = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    p = KafkaProducer(bootstrap_servers=bs, transactional_id="tmo-kp-tx")
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        c.commit({TopicPartition(topic, 0): OffsetAndMetadata(10, "", -1)})
        p.init_transactions()
        p.begin_transaction()
        p.send_offsets_to_transaction({TopicPartition(topic, 0): OffsetAndMetadata(20, "", -1),
                                       TopicPartition(topic, 1): OffsetAndMetadata(21, "", -1)}, group)
        # partition 0 deleted while the transaction holds an offset for it (and a plain one is committed);
        # partition 1 holds only the pending one: its tombstone too drops it
        admin.delete_group_offsets(group, [TopicPartition(topic, 0), TopicPartition(topic, 1)])
        c.commit({TopicPartition(topic, 1): OffsetAndMetadata(7, "", -1)})             # plain, after the delete
        p.commit_transaction()
        listed = {tp.partition: om.offset for tp, om in admin.list_group_offsets(group)[group].items()}
    finally:
        p.close(timeout=5)
        c.close()
        admin.close()
    assert listed == {1: 7}
    assert committed_by_confluent(bs, group, topic, [0, 1]) == {0: -1001, 1: 7}
    tenure_server.restart()
    assert committed_by_confluent(bs, group, topic, [0, 1]) == {0: -1001, 1: 7}


@pytest.mark.java
def test_java_commit_sync_between_send_offsets_to_transaction_and_commit_transaction_is_kept(tenure_server):
    """Java kafka-clients 4.3 (tests/java/TxnMixedCommits.java): commitSync(P1=5); in a transaction
    sendOffsetsToTransaction(P0=20, P1=25); commitSync(P0=10); commitTransaction. Kafka keeps P0=10 (written
    after the transaction's record) and takes P1=25; so does a restart."""
    from tests.support.java import run_java
    bs, topic, group = tenure_server.bootstrap, "tmo-java", "tmo-java-group"
    create_topic(bs, topic, 2)
    [done] = run_java("TxnMixedCommits", bs, topic, group, "tmo-java-tx", timeout=90)
    assert done == {"type": "done", "p0": 10, "p1": 25}
    tenure_server.restart()
    assert committed_by_confluent(bs, group, topic, [0, 1]) == {0: 10, 1: 25}
