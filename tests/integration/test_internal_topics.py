"""`__consumer_offsets` is written only by the group coordinator: Produce to it is refused per partition
with INVALID_TOPIC_EXCEPTION (17), as Kafka's ReplicaManager refuses appends to internal topics, and
DeleteTopics and CreatePartitions on it are refused with the same code - by the raw wire and by real
clients. A forged record therefore never reaches the log, so no restart replays it."""
from __future__ import annotations

import pytest

from tenure.config import ServerConfig
from tenure.coordinator import partition_for
from tenure.protocol import records as rec
from tenure.protocol.internal_topics import OFFSETS_TOPIC
from tenure.server import ServerThread
from tests.support.groupwire import fetch_all
from tests.support.wire import WireClient, build_batch, produce_request

pytestmark = pytest.mark.timeout(120)

INVALID_TOPIC_EXCEPTION = 17


def forged_commit(group: str, offset: int) -> bytes:
    key, value = rec.encode(rec.OffsetCommitRecord(group, "t", 0, offset, -1, "", 1_700_000_000_000))
    return build_batch([(key, value)])


def test_a_forged_offset_commit_is_refused_and_never_replayed(tmp_path):
    cfg = ServerConfig(port=0, data_dir=str(tmp_path / "d"), offsets_partitions=3)
    with ServerThread(cfg) as s:
        part = partition_for("victim", 3)
        before = [s.call(lambda i=i: s.server.topics.get(OFFSETS_TOPIC).partitions[i].log_end_offset)
                  for i in range(3)]
        with WireClient.to(s.bootstrap) as c:
            r = c.call(produce_request(OFFSETS_TOPIC, part, forged_commit("victim", 999)), 9)
            (p,) = r.responses[0].partition_responses
            assert (p.index, p.error_code, p.base_offset) == (part, INVALID_TOPIC_EXCEPTION, -1)
            assert p.error_message and OFFSETS_TOPIC in p.error_message
            # every partition of it, even one it does not have, and whatever the acks
            r = c.call(produce_request(OFFSETS_TOPIC, 7, forged_commit("victim", 999), acks=1), 9)
            assert r.responses[0].partition_responses[0].error_code == INVALID_TOPIC_EXCEPTION
        assert [s.call(lambda i=i: s.server.topics.get(OFFSETS_TOPIC).partitions[i].log_end_offset)
                for i in range(3)] == before
        s.restart()
        with WireClient.to(s.bootstrap) as c:
            assert fetch_all(c, ["victim"]) == {"victim": {}}


def test_confluent_kafka_sees_invalid_topic_and_kafka_python_does_not_send(tmp_path):
    from confluent_kafka import KafkaError, Producer
    from kafka import KafkaProducer
    with ServerThread(ServerConfig(port=0)) as s:
        results = []
        p = Producer({"bootstrap.servers": s.bootstrap, "log_level": 3, "message.timeout.ms": 20000})
        p.produce(OFFSETS_TOPIC, key=b"k", value=b"v", partition=0,
                  on_delivery=lambda err, msg: results.append(err))
        assert p.flush(30) == 0
        assert len(results) == 1 and results[0] is not None
        assert results[0].code() == KafkaError.TOPIC_EXCEPTION, results[0]
        # kafka-python does not even send it: Metadata marks the topic internal, and its producer leaves
        # internal topics out of the topics it may write to
        kp = KafkaProducer(bootstrap_servers=s.bootstrap, retries=0, request_timeout_ms=10000)
        try:
            with pytest.raises(ValueError, match="did not assign a partition"):
                kp.send(OFFSETS_TOPIC, key=b"k", value=b"v", partition=0)
        finally:
            kp.close(timeout=5)
        assert s.call(lambda: s.server.topics.get(OFFSETS_TOPIC).partitions[0].log_end_offset) == 0


def test_delete_topics_and_create_partitions_on_it_are_refused(tmp_path):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions
    cfg = ServerConfig(port=0, data_dir=str(tmp_path / "d"), offsets_partitions=2)
    with ServerThread(cfg) as s:
        admin = AdminClient({"bootstrap.servers": s.bootstrap, "log_level": 3})
        for futures in (admin.delete_topics([OFFSETS_TOPIC], operation_timeout=10),
                        admin.create_partitions([NewPartitions(OFFSETS_TOPIC, 4)], validate_only=True),
                        admin.create_partitions([NewPartitions(OFFSETS_TOPIC, 4)])):
            with pytest.raises(KafkaException) as exc:
                futures[OFFSETS_TOPIC].result(20)
            err = exc.value.args[0]
            assert err.code() == KafkaError.TOPIC_EXCEPTION, err
        assert len(s.call(lambda: s.server.topics.get(OFFSETS_TOPIC).partitions)) == 2
        assert sorted(p.name for p in (tmp_path / "d").iterdir() if p.name.startswith(OFFSETS_TOPIC)) == \
            [f"{OFFSETS_TOPIC}-0", f"{OFFSETS_TOPIC}-1"]


def hostile_batch(base_offset: int, records_count: int = 2**31 - 1, value: bytes | None = None) -> bytes:
    """A batch with a valid CRC-32C that cannot be read as what it claims: `records_count` records
    declared (one present), or the one record's value replaced by `value`."""
    import crc32c

    from tenure.storage.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER, HEADER_SIZE
    key, good = rec.encode(rec.OffsetCommitRecord("victim", "t", 0, 1234, -1, "", 1_700_000_000_000))
    raw = bytearray(build_batch([(key, good if value is None else value)]))
    fields = list(HEADER.unpack_from(raw, 0))
    fields[0], fields[-1] = base_offset, records_count
    HEADER.pack_into(raw, 0, *fields)
    raw[CRC_OFFSET:CRC_OFFSET + 4] = crc32c.crc32c(bytes(raw[ATTRIBUTES_OFFSET:])).to_bytes(4, "big")
    assert len(raw) > HEADER_SIZE
    return bytes(raw)


@pytest.mark.parametrize("kind", ["records_count", "value"])
def test_a_crc_valid_batch_the_loader_cannot_read_is_skipped_and_named(tmp_path, caplog, kind):
    """Written straight into the segment file (Produce is refused): the batch continues the log exactly
    and its CRC is valid, so recovery keeps it; the loader cannot read it. The start goes on without it,
    naming the file, byte and offset; every other record loads."""
    import logging

    from tests.support.groupwire import commit
    from tests.support.wire import create_topic
    cfg = ServerConfig(port=0, data_dir=str(tmp_path / "d"), offsets_partitions=1)
    with ServerThread(cfg) as s:
        with WireClient.to(s.bootstrap) as c:
            create_topic(c, "t")
            assert commit(c, "good", "", -1, None, "t", {0: 5}) == {0: 0}
        end = s.call(lambda: s.server.topics.get(OFFSETS_TOPIC).partitions[0].log_end_offset)
    seg = sorted((tmp_path / "d" / f"{OFFSETS_TOPIC}-0").glob("*.log"))[-1]
    position = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(hostile_batch(end) if kind == "records_count" else hostile_batch(end, 1, b"\xff\x00garbage"))
    with caplog.at_level(logging.ERROR, "tenure.coordinator"), ServerThread(cfg) as s:
        report = s.server.load_report
        assert [(p, o) for p, o, _ in report.undecodable] == [(0, end)], report.undecodable
        assert f"{seg} at byte {position} (offset {end})" in caplog.text
        with WireClient.to(s.bootstrap) as c:
            assert fetch_all(c, ["good", "victim"]) == {"good": {("t", 0): 5}, "victim": {}}
            assert commit(c, "good", "", -1, None, "t", {0: 6}) == {0: 0}     # and it writes on after it


def test_the_java_client_sees_invalid_topic_exception(tmp_path):
    from tests.support.java import run_java
    with ServerThread(ServerConfig(port=0, offsets_partitions=2)) as s:
        out = run_java("AdminOps", s.bootstrap, "produce", OFFSETS_TOPIC, "1", "1", timeout=90, check=False)
        errors = [line for line in out if line["type"] == "error"]
        assert errors and errors[0]["root_exception"] == "org.apache.kafka.common.errors.InvalidTopicException", out
        out = run_java("AdminOps", s.bootstrap, "delete-topics", OFFSETS_TOPIC, "--", "create-partitions",
                       OFFSETS_TOPIC, "4", timeout=90)
        assert [(line["type"], line["exception"]) for line in out] == [
            ("topic_delete_error", "org.apache.kafka.common.errors.InvalidTopicException"),
            ("partitions_error", "org.apache.kafka.common.errors.InvalidTopicException")], out
        assert [len(s.call(lambda: s.server.topics.get(OFFSETS_TOPIC).partitions)),
                s.call(lambda: s.server.topics.get(OFFSETS_TOPIC).partitions[0].log_end_offset)] == [2, 0]
