"""The versions KIP-896 removed in Kafka 4.0, against tenure presenting a release that served them (2.8-3.9), as such a
broker serves them: announced from v0, the messages converted to RecordBatch v2 on append (a modern consumer reads
them: keys, values, timestamps - none for v0 -, offsets). A kafka-python producer pinned to api_version (0, 10)
(Produce v2, magic 1) works end to end against tenure as 2.8; the same bytes at Produce v0 and v1 too. Kafka 4.0+
removed them (KIP-896) yet still announces Produce from v0 (KAFKA-18659): tenure as 4.3 does the same and closes the
connection of a Produce v0-2 request, as a 4.x broker refuses it."""
from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.support.wire import WireClient, request_bytes


def produce_ranges(bootstrap: str) -> tuple[int, int]:
    with WireClient.to(bootstrap) as c:
        r = c.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    return next((k.min_version, k.max_version) for k in r.api_keys if k.api_key == 0)


def consume(bootstrap: str, topic: str, n: int) -> list[tuple]:
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=3000)
    try:
        out = []
        for m in c:
            out.append((m.offset, m.key, m.value, m.timestamp))
            if len(out) == n:
                break
        return out
    finally:
        c.close()


def message_set(magic: int, records, codec: int = 0) -> bytes:
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (k, v, ts) in enumerate(records):
        b.append(i, timestamp=ts, key=k, value=v)
    return bytes(b.build())


def produce_v(c: WireClient, version: int, topic: str, records: bytes) -> tuple[int, int]:
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=records)])])
    [t] = c.call(req, version).responses
    [p] = t.partition_responses
    return p.error_code, p.base_offset


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_kafka_python_pinned_to_0_10_produces_to_tenure_as_2_8(compression):
    with ServerThread(ServerConfig(port=0, kafka_version="2.8")) as s:
        assert produce_ranges(s.bootstrap) == (0, 9)
        s.create_topics({"old": 1})
        p = KafkaProducer(bootstrap_servers=s.bootstrap, api_version=(0, 10), compression_type=compression,
                          max_block_ms=10000)
        try:
            metas = [p.send("old", key=b"k%d" % i, value=b"value-%d" % i, timestamp_ms=5000 + i).get(10)
                     for i in range(5)]
        finally:
            p.close()
        assert [m.offset for m in metas] == [0, 1, 2, 3, 4]
        assert {x.version for x in s.requests("Produce")} == {2}            # message format v1
        assert consume(s.bootstrap, "old", 5) == [(i, b"k%d" % i, b"value-%d" % i, 5000 + i) for i in range(5)]


def test_produce_v0_and_v1_messages_are_converted_on_append():
    with ServerThread(ServerConfig(port=0, kafka_version="3.9")) as s:
        s.create_topics({"fmt": 1})
        with WireClient.to(s.bootstrap) as c:
            assert produce_v(c, 0, "fmt", message_set(0, [(b"a", b"1", None), (None, b"2", None)])) == (0, 0)
            assert produce_v(c, 1, "fmt", message_set(1, [(b"c", b"3" * 300, 7000)], codec=1)) == (0, 2)
            bad = bytearray(message_set(1, [(b"d", b"4", 7001)]))
            bad[-1] ^= 0xFF                                            # its CRC no longer matches
            assert produce_v(c, 2, "fmt", bytes(bad)) == (2, -1)       # CORRUPT_MESSAGE, nothing appended
        assert consume(s.bootstrap, "fmt", 3) == [(0, b"a", b"1", -1), (1, None, b"2", -1), (2, b"c", b"3" * 300, 7000)]
        log = s.call(lambda: s.server.topics.get("fmt").partitions[0])
        assert {h.magic for h, _ in s.call(lambda: list(log.batches()))} == {2}    # the log holds format v2 only


def test_tenure_as_4_3_announces_produce_v0_and_refuses_it():
    with ServerThread(ServerConfig(port=0, kafka_version="4.3")) as s:
        assert produce_ranges(s.bootstrap) == (0, 13)                  # KAFKA-18659, as a 4.3 broker
        s.create_topics({"new": 1})
        with WireClient.to(s.bootstrap) as c:
            c.send_raw(request_bytes(ProduceRequest(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[]), 2))
            assert c.is_closed_by_peer(timeout=5)
        with WireClient.to(s.bootstrap) as c:                         # serving on: v3+ works
            from kafka.record.default_records import DefaultRecordBatchBuilder
            b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                          producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
            b.append(0, timestamp=1, key=b"k", value=b"v", headers=[])
            assert produce_v(c, 3, "new", bytes(b.build())) == (0, 0)


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_kafka_python_consumer_pinned_to_0_10_reads_and_commits_against_tenure_as_2_8(compression):
    """Fetch v2 (format v1, down-converted from the log's v2 batches a current idempotent producer wrote),
    ListOffsets v0, the classic group at JoinGroup v0 / OffsetCommit v2 / OffsetFetch v1."""
    with ServerThread(ServerConfig(port=0, kafka_version="2.8", initial_rebalance_delay_ms=0)) as s:
        s.create_topics({"down": 1})
        p = KafkaProducer(bootstrap_servers=s.bootstrap, compression_type=compression)
        for i in range(5):
            p.send("down", key=b"k%d" % i, value=b"value-%d" % i * 20, timestamp_ms=5000 + i)
        p.flush(10)
        p.close()
        c = KafkaConsumer("down", bootstrap_servers=s.bootstrap, api_version=(0, 10), group_id="g010",
                          auto_offset_reset="earliest", consumer_timeout_ms=5000, enable_auto_commit=False)
        try:
            got = [(m.offset, m.key, m.value, m.timestamp) for m in c]
            c.commit()
        finally:
            c.close()
        assert got == [(i, b"k%d" % i, b"value-%d" % i * 20, 5000 + i) for i in range(5)]
        versions = {(x.api, x.version) for x in s.requests() if x.api in ("Fetch", "ListOffsets", "OffsetCommit")}
        assert versions == {("Fetch", 2), ("ListOffsets", 0), ("OffsetCommit", 2)}
        assert s.group("g010") is not None


def test_fetch_v0_reads_format_v0_and_list_offsets_v0_answers_old_style_offsets():
    from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
    from kafka.record.memory_records import MemoryRecords
    with ServerThread(ServerConfig(port=0, kafka_version="3.0")) as s:
        s.create_topics({"f0": 1})
        with WireClient.to(s.bootstrap) as c:
            assert produce_v(c, 2, "f0", message_set(1, [(b"a", b"1", 10), (b"b", b"2", 11)])) == (0, 0)
            T = FetchRequest.FetchTopic
            r = c.call(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, topics=[
                T(topic="f0", partitions=[T.FetchPartition(partition=0, fetch_offset=1, partition_max_bytes=1 << 20)])]),
                0)
            data = r.responses[0].partitions[0].records
            mr = MemoryRecords(data)
            batch = mr.next_batch()
            got = []
            while batch is not None:
                got += [(r.magic, r.offset, r.key, r.timestamp) for r in batch]
                batch = mr.next_batch()
            assert got == [(0, 1, b"b", None)]                 # format v0 from the fetch offset: no timestamp
            L = ListOffsetsRequest.ListOffsetsTopic
            lo = c.call(ListOffsetsRequest(replica_id=-1, topics=[L(name="f0", partitions=[
                L.ListOffsetsPartition(partition_index=0, timestamp=t, max_num_offsets=n)
                for t, n in ((-1, 1), (-2, 1))])]), 0)
            assert [p.old_style_offsets for p in lo.topics[0].partitions] == [[2], [0]]
    with ServerThread(ServerConfig(port=0, kafka_version="4.0")) as s:       # KIP-896: Fetch v0-3 gone
        with WireClient.to(s.bootstrap) as c:
            c.send_raw(request_bytes(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, topics=[]), 3))
            assert c.is_closed_by_peer(timeout=5)


def test_the_other_versions_kip_896_removed_are_served_as_2_8_and_refused_as_4_0():
    """CreateTopics v0-1, DeleteTopics v0, OffsetForLeaderEpoch v0-1, DescribeConfigs v0, DescribeLogDirs v0,
    DescribeAcls v0 (and CreateAcls/DeleteAcls v0, AlterReplicaLogDirs v0, the same handlers): announced and
    answered by tenure as 2.8 with what those versions carry; closed by tenure as 4.0, as a 4.0 broker."""
    from kafka.protocol.admin import (
        CreateTopicsRequest,
        DeleteTopicsRequest,
        DescribeAclsRequest,
        DescribeConfigsRequest,
        DescribeLogDirsRequest,
    )
    from kafka.protocol.consumer import OffsetForLeaderEpochRequest

    from tenure.protocol.apis import served_apis
    T = CreateTopicsRequest.CreatableTopic
    OT = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    R = DescribeConfigsRequest.DescribeConfigsResource
    removed = {19: 1, 20: 0, 23: 1, 29: 0, 30: 0, 31: 0, 32: 0, 34: 0, 35: 0}     # api key -> newest removed version
    for key, top in removed.items():
        assert served_apis("2.8").specs[key].min_version == 0, key
        assert served_apis("4.0").specs[key].min_version == top + 1, key
    with ServerThread(ServerConfig(port=0, kafka_version="2.8")) as s:
        with WireClient.to(s.bootstrap) as c:
            for v in (0, 1):
                r = c.call(CreateTopicsRequest(topics=[T(name=f"ct{v}", num_partitions=2, replication_factor=1,
                                                         assignments=[], configs=[])],
                                               timeout_ms=5000, validate_only=False), v)
                assert [(t.name, t.error_code) for t in r.topics] == [(f"ct{v}", 0)]
            r = c.call(DeleteTopicsRequest(topic_names=["ct0"], timeout_ms=5000), 0)
            assert [(t.name, t.error_code) for t in r.responses] == [("ct0", 0)]
            assert s.call(lambda: s.server.topics.get("ct0")) is None
            for v in (0, 1):
                r = c.call(OffsetForLeaderEpochRequest(replica_id=-1, topics=[OT(topic="ct1", partitions=[
                    OT.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])]), v)
                [e] = r.topics[0].partitions
                assert (e.error_code, e.end_offset) == (0, 0)
            r = c.call(DescribeConfigsRequest(resources=[R(resource_type=2, resource_name="ct1",
                                                           configuration_keys=["cleanup.policy"])],
                                              include_synonyms=False, include_documentation=False), 0)
            [cfg] = r.results[0].configs
            assert (cfg.name, cfg.value, cfg.is_default) == ("cleanup.policy", "delete", True)
            r = c.call(DescribeLogDirsRequest(topics=None), 0)
            assert "ct1" in {t.name for t in r.results[0].topics}
            r = c.call(DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=3,
                                           principal_filter=None, host_filter=None, operation=1, permission_type=1), 0)
            assert r.error_code == 54                       # SECURITY_DISABLED: no authorizer, as Kafka
    with ServerThread(ServerConfig(port=0, kafka_version="4.0")) as s:
        with WireClient.to(s.bootstrap) as c:
            c.send_raw(request_bytes(DeleteTopicsRequest(topic_names=[], timeout_ms=1000), 0))
            assert c.is_closed_by_peer(timeout=5)


def test_bad_message_sets_are_refused_and_the_server_serves_on():
    """Produce v0-2 records that are no message set: truncated, junk after a legacy magic byte, a batch of
    format v2 under a v1 message - each partition answered with Kafka's error, nothing appended."""
    with ServerThread(ServerConfig(port=0, kafka_version="2.8")) as s:
        s.create_topics({"bad": 1})
        good = message_set(1, [(b"a", b"1", 10)])
        with WireClient.to(s.bootstrap) as c:
            for records in (good[:25], good[:16] + b"\x01" + b"\xff" * 40, b"\x00" * 12 + b"\x00" * 5 + b"\x01"):
                code, offset = produce_v(c, 2, "bad", records)
                assert code in (2, 87) and offset == -1, records
            assert produce_v(c, 2, "bad", good) == (0, 0)          # the same connection serves on
        assert s.call(lambda: s.server.topics.get("bad").partitions[0].log_end_offset) == 1
