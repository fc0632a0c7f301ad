"""What librdkafka's own test suite found tenure answering unlike Kafka, with real clients: ListOffsets LATEST
follows the isolation level (librdkafka 0103 do_test_wmark_isolation_level); an empty transactional id is refused
(INVALID_REQUEST); a compacted topic refuses keyless records (librdkafka 0011 record_fail: INVALID_RECORD with
KIP-467's per-record errors); the topic configs a client sees enforced (max.message.bytes,
message.timestamp.type=LogAppendTime, retention with cleanup.policy=delete)."""
from __future__ import annotations

import pytest
from kafka.protocol.producer import InitProducerIdRequest

from tests.support.clients import create_topic
from tests.support.wire import build_batch, produce_request

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


def test_a_compacted_topic_refuses_keyless_records_with_their_errors(tenure_server, wire):
    """librdkafka 0011 record_fail: every record of a batch holding a keyless one fails with INVALID_RECORD; on the
    wire Kafka names the keyless records (KIP-467: batch index and message) and sums them up."""
    from confluent_kafka import KafkaError, Producer
    bs = tenure_server.bootstrap
    create_topic(bs, "compacted", 1, {"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": bs, "linger.ms": 200, "batch.num.messages": 100, "enable.idempotence": False,
                  "retries": 0})
    results: list = []
    p.produce("compacted", key=b"k0", value=b"v0", partition=0, on_delivery=lambda e, m: results.append((0, e)))
    p.produce("compacted", value=b"keyless", partition=0, on_delivery=lambda e, m: results.append((1, e)))
    p.produce("compacted", key=b"k2", value=b"v2", partition=0, on_delivery=lambda e, m: results.append((2, e)))
    assert p.flush(15) == 0
    errors = dict(results)
    assert all(e is not None and e.code() == KafkaError.INVALID_RECORD for e in errors.values()), errors
    # confluent-kafka's delivery report carries the code only: the per-record errors, on the wire (Produce v9)
    batch = build_batch([(b"a", b"1"), (None, b"2"), (b"c", b"3"), (None, b"4")])
    r = wire.call(produce_request("compacted", 0, batch), 9).responses[0].partition_responses[0]
    msg = "Compacted topic cannot accept message without key in topic partition compacted-0"
    assert (r.error_code, r.base_offset) == (87, -1)
    assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] == [(1, msg), (3, msg)]
    assert r.error_message == ("One or more records have been rejected due to 2 record errors in total, and only "
                               f"showing the first three errors at most: [RecordError(batchIndex=1, message='{msg}'), "
                               f"RecordError(batchIndex=3, message='{msg}')]")
    # keyed records go in; nothing of the refused batch was written
    p.produce("compacted", key=b"k", value=b"v", partition=0, on_delivery=lambda e, m: results.append((3, e)))
    assert p.flush(15) == 0 and dict(results)[3] is None
    end = tenure_server.call(lambda: tenure_server.server.topics.partition("compacted", 0).log_end_offset)
    assert end == 1


def test_a_topics_max_message_bytes_refuses_a_larger_batch(tenure_server):
    from confluent_kafka import KafkaError, Producer
    bs = tenure_server.bootstrap
    create_topic(bs, "small", 1, {"max.message.bytes": "2000"})
    p = Producer({"bootstrap.servers": bs, "compression.type": "none", "retries": 0})
    results: list = []
    p.produce("small", value=b"x" * 3000, partition=0, on_delivery=lambda e, m: results.append(e))
    assert p.flush(15) == 0                                            # a batch of its own
    p.produce("small", value=b"y" * 100, partition=0, on_delivery=lambda e, m: results.append(e))
    assert p.flush(15) == 0
    assert results[0] is not None and results[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, results
    assert results[1] is None, results


def test_log_append_time_topic_stamps_the_brokers_time(tenure_server):
    """message.timestamp.type=LogAppendTime: the broker's clock replaces the producer's timestamps (the batch is
    marked LogAppendTime, its max timestamp the append time), which Produce answers and consumers read."""
    import time

    from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
    bs = tenure_server.bootstrap
    create_topic(bs, "appended", 1, {"message.timestamp.type": "LogAppendTime"})
    create_topic(bs, "created", 1)
    p = Producer({"bootstrap.servers": bs})
    before = int(time.time() * 1000)
    for topic in ("appended", "created"):
        for i in range(3):
            p.produce(topic, value=b"v%d" % i, partition=0, timestamp=1_000_000 + i)
    assert p.flush(15) == 0
    after = int(time.time() * 1000)
    seen = {}
    for topic in ("appended", "created"):
        c = Consumer({"bootstrap.servers": bs, "group.id": f"ts-{topic}", "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, 0)])
        msgs = []
        deadline = time.time() + 15
        while len(msgs) < 3 and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                msgs.append(m.timestamp())
        c.close()
        seen[topic] = msgs
    assert {kind for kind, _ in seen["appended"]} == {TIMESTAMP_LOG_APPEND_TIME}
    assert all(before <= ts <= after for _, ts in seen["appended"]), (before, seen["appended"], after)
    assert seen["created"] == [(TIMESTAMP_CREATE_TIME, 1_000_000 + i) for i in range(3)]


def test_produce_answers_the_log_append_time(tenure_server, wire):
    tenure_server.call(lambda: tenure_server.server.topics.create("appended-wire", 1,
                                                                  configs={"message.timestamp.type": "LogAppendTime"}))
    now = tenure_server.call(lambda: tenure_server.server.runtime.clock_ms())
    r = wire.call(produce_request("appended-wire", 0, build_batch([(b"k", b"v")], base_timestamp=5)), 9)
    p = r.responses[0].partition_responses[0]
    assert p.error_code == 0 and now <= p.log_append_time_ms <= now + 10_000
    r = wire.call(produce_request("appended-wire", 0, build_batch([(b"k", b"v")])), 9)    # each append: its time
    assert r.responses[0].partition_responses[0].log_append_time_ms >= p.log_append_time_ms


RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@pytest.mark.parametrize("selector", [RACK_AWARE, None])
def test_rack_aware_replica_selector_sends_a_consumer_to_its_racks_replica(selector):
    """replica.selector.class=RackAwareReplicaSelector (KIP-392): the leader answers a consumer with client.rack
    whose rack holds another in-sync replica with preferred_read_replica and no records; librdkafka moves its
    fetches there and consumes everything. Without the selector the leader serves it."""
    import logging
    import time

    from confluent_kafka import Consumer, Producer, TopicPartition

    from tenure.config import ServerConfig
    from tenure.server import ServerThread
    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    rk = logging.getLogger(f"tenure-test-rack-{selector}")
    rk.addHandler(Capture())
    rk.setLevel(logging.DEBUG)
    with ServerThread(ServerConfig(port=0, brokers=3, racks=("r0", "r1", "r2"),
                                   replica_selector_class=selector)) as s:
        s.create_topics({"racked": 1})
        st = s.call(lambda: s.server.cluster.state("racked", 0))
        other = next(b for b in st.replicas if b != st.leader)         # a follower, in rack r<id>
        p = Producer({"bootstrap.servers": s.bootstrap})
        for i in range(5):
            p.produce("racked", value=b"r%d" % i, partition=0)
        assert p.flush(10) == 0
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "g", "client.rack": f"r{other}",
                      "debug": "fetch", "logger": rk})
        c.assign([TopicPartition("racked", 0, 0)])
        got: list[bytes] = []
        deadline = time.time() + 20
        while len(got) < 5 and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        c.close()
        assert got == [b"r%d" % i for i in range(5)]
        moved = [m for m in lines if "preferred replica updated" in m]
        if selector:
            assert f"migrating from broker {st.leader} to {other}" in moved[0], moved
            configs = s.call(lambda: s.server.static_configs())
            assert configs["replica.selector.class"] == RACK_AWARE
        else:
            assert moved == []


def _low_high(bs: str, topic: str) -> tuple[int, int]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    finally:
        c.close()


def _wait_low(bs: str, topic: str, low: int, timeout: float = 10) -> tuple[int, int]:
    import time
    deadline = time.time() + timeout
    got = _low_high(bs, topic)
    while got[0] != low and time.time() < deadline:
        time.sleep(0.1)
        got = _low_high(bs, topic)
    return got


@pytest.mark.tenure(retention_check_interval_ms=100)
def test_retention_ms_removes_what_is_older_and_earliest_follows(tenure_server):
    """cleanup.policy=delete with retention.ms: the records older than it go at the next check (in memory the log
    is one segment: it goes when its newest record is that old), the log start offset moves and ListOffsets'
    earliest follows; newer records stay. A topic without the config keeps everything (7 days)."""
    import time

    from confluent_kafka import Producer
    bs = tenure_server.bootstrap
    create_topic(bs, "short", 1, {"retention.ms": "60000"})
    create_topic(bs, "kept", 1)
    p = Producer({"bootstrap.servers": bs})
    old = int(time.time() * 1000) - 3_600_000               # an hour ago
    for topic in ("short", "kept"):
        for i in range(5):
            p.produce(topic, value=b"old%d" % i, partition=0, timestamp=old + i)
    assert p.flush(10) == 0
    assert _wait_low(bs, "short", 5) == (5, 5)
    p.produce("short", value=b"new", partition=0)
    assert p.flush(10) == 0
    time.sleep(0.5)                                           # several checks: the new record stays
    assert _low_high(bs, "short") == (5, 6) and _low_high(bs, "kept") == (0, 5)


@pytest.mark.tenure(retention_check_interval_ms=100, data_dir=True, segment_bytes=1024)
def test_retention_bytes_removes_the_oldest_segments(tenure_server):
    """retention.bytes on disk: the oldest segments go while the log stays at least that big without them; their
    files are removed and the log start offset moves to the first segment kept."""
    from confluent_kafka import Producer
    bs = tenure_server.bootstrap
    create_topic(bs, "sized", 1, {"retention.bytes": "2000"})
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0, "compression.type": "none"})
    for i in range(12):
        p.produce("sized", value=b"%03d" % i + b"x" * 400, partition=0)
        assert p.flush(10) == 0                               # one batch each: ~2 per 1 KiB segment
    import os
    import time

    log = tenure_server.call(lambda: tenure_server.server.topics.partition("sized", 0))

    def spans():
        return tenure_server.call(log.segment_spans)
    deadline = time.time() + 10
    while sum(s[2] for s in spans()) - 2000 >= spans()[0][2] and time.time() < deadline:
        time.sleep(0.1)
    kept = spans()
    total = sum(s[2] for s in kept)
    assert 2000 <= total and total - 2000 < kept[0][2], kept     # Kafka's rule: no segment more could go
    files = sorted(f for f in os.listdir(log.dir) if f.endswith(".log"))
    assert files[0] == f"{kept[0][0]:020d}.log" and len(files) == len(kept), (files, kept)
    low, high = _low_high(bs, "sized")
    assert high == 12 and low == kept[0][0] > 0, (low, kept)
