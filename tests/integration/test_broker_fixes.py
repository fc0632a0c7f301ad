"""What librdkafka's own test suite found tenure answering unlike Kafka, with real clients: ListOffsets LATEST
follows the isolation level (librdkafka 0103 do_test_wmark_isolation_level); an empty transactional id is refused
(INVALID_REQUEST); a compacted topic refuses keyless records (librdkafka 0011 record_fail: INVALID_RECORD with
KIP-467's per-record errors); the topic configs a client sees enforced (max.message.bytes,
message.timestamp.type=LogAppendTime, retention with cleanup.policy=delete)."""
from __future__ import annotations

import pytest
from kafka.protocol.producer import InitProducerIdRequest

from tests.support.clients import create_topic

pytestmark = pytest.mark.timeout(120)

INVALID_REQUEST = 42


def test_list_offsets_latest_follows_the_isolation_level(tenure_server):
    """A read_committed consumer's high watermark query answers the last stable offset, a read_uncommitted one's
    the high watermark (librdkafka queries ListOffsets LATEST with its isolation.level)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    bs = tenure_server.bootstrap
    create_topic(bs, "wmark", 1)
    plain = Producer({"bootstrap.servers": bs})
    for i in range(3):
        plain.produce("wmark", value=b"c%d" % i, partition=0)
    plain.flush(10)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "tx-wmark"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce("wmark", value=b"t%d" % i, partition=0)
    p.flush(10)

    def high(isolation: str) -> int:
        c = Consumer({"bootstrap.servers": bs, "group.id": f"wm-{isolation}", "isolation.level": isolation})
        try:
            return c.get_watermark_offsets(TopicPartition("wmark", 0), timeout=10, cached=False)[1]
        finally:
            c.close()

    assert (high("read_committed"), high("read_uncommitted")) == (3, 8)   # the open transaction starts at 3
    p.commit_transaction(30)
    assert (high("read_committed"), high("read_uncommitted")) == (9, 9)   # its commit marker is offset 8


def test_init_producer_id_with_an_empty_transactional_id_is_invalid(tenure_server, wire):
    """Kafka's transaction coordinator refuses an empty transactional id before anything else (no client sends
    one: they treat "" as no transactional id); a null one is an idempotent producer's request."""
    r = wire.call(InitProducerIdRequest(transactional_id="", transaction_timeout_ms=60000), 4)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (INVALID_REQUEST, -1, -1)
    r = wire.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
    assert r.error_code == 0 and r.producer_id >= 0
    r = wire.call(InitProducerIdRequest(transactional_id="t", transaction_timeout_ms=60000), 4)
    assert r.error_code == 0 and r.producer_id >= 0
