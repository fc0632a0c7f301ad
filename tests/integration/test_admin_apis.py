"""The admin APIs of a one-node cluster through real admin clients (Java Admin via tests/java/AdminOps.java,
confluent-kafka's AdminClient, kafka-python's KafkaAdminClient) and over the raw wire where a client hides the
answer: manual replica assignments, DescribeConfigs (types, synonyms, documentation, read-only flags, broker and
group resources), AlterConfigs/IncrementalAlterConfigs (validated, persisted), DeleteRecords (persisted),
DescribeLogDirs, DescribeTopicPartitions, ElectLeaders, partition reassignments, and the Kafka version presented."""
from __future__ import annotations

import pytest
from confluent_kafka import ElectionType, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kafka.protocol.admin import AlterConfigsRequest, DescribeTopicPartitionsRequest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.support.clients import create_topic as create
from tests.support.java import run_java
from tests.support.wire import WireClient, build_batch, fetch_request, produce_request

pytestmark = pytest.mark.timeout(180)

NONE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION = 0, 1, 3
INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, INVALID_REQUEST, ELECTION_NOT_NEEDED = 39, 40, 42, 84
NO_SUCH_BROKER = "The manual partition assignment includes broker 1, but no such broker is registered."


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def kafka_error(future) -> tuple[int, str]:
    with pytest.raises(KafkaException) as info:
        future.result(15)
    err = info.value.args[0]
    return err.code(), err.str()


def java(bootstrap: str, *args) -> list[dict]:
    return run_java("AdminOps", bootstrap, *args, timeout=120)


def produce(bootstrap: str, topic: str, partition: int, batches: int, per_batch: int = 2) -> None:
    with WireClient.to(bootstrap) as w:
        for _ in range(batches):
            r = w.call(produce_request(topic, partition, build_batch([(b"k", b"v")] * per_batch)), 9)
            assert r.responses[0].partition_responses[0].error_code == NONE


# ------------------------------------------------------------------------------------ manual replica assignment
def test_manual_replica_assignment_with_confluent_and_kafka_python(tenure_server):
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic
    bs = tenure_server.bootstrap
    a = admin(bs)
    a.create_topics([NewTopic("ra", 2, replica_assignment=[[0], [0]])])["ra"].result(15)
    assert len(tenure_server.server.topics.get("ra").partitions) == 2
    assert kafka_error(a.create_topics([NewTopic("ra-bad", 1, replica_assignment=[[1]])])["ra-bad"]) == \
        (INVALID_REPLICA_ASSIGNMENT, NO_SUCH_BROKER)
    assert tenure_server.server.topics.get("ra-bad") is None
    ka = KafkaAdminClient(bootstrap_servers=bs)
    try:
        ka.create_topics([KNewTopic("ra-kp", replica_assignments={0: [0], 1: [0], 2: [0]})])
        assert len(tenure_server.server.topics.get("ra-kp").partitions) == 3
    finally:
        ka.close()


def test_manual_replica_assignment_with_java_admin(tenure_server):
    out = java(tenure_server.bootstrap, "create-assigned", "ra-j", "0;0;0", "--", "create-assigned", "ra-j2", "0,1",
               "--", "create-assigned", "ra-j3", "0,0")
    assert out[0] == {"type": "create_assigned", "topic": "ra-j", "error": None}
    assert (out[1]["exception"], out[1]["message"]) == (
        "org.apache.kafka.common.errors.InvalidReplicaAssignmentException", NO_SUCH_BROKER)
    assert out[2]["message"] == "The manual partition assignment includes the broker 0 more than once."
    assert len(tenure_server.server.topics.get("ra-j").partitions) == 3
    assert tenure_server.server.topics.get("ra-j2") is None and tenure_server.server.topics.get("ra-j3") is None


# ------------------------------------------------------------------------------------------------ DescribeConfigs
def test_describe_configs_types_synonyms_docs_and_read_only_with_java(tenure_server):
    bs = tenure_server.bootstrap
    create(bs, "dcj", 1, config={"retention.ms": "1000"})
    out = java(bs, "describe-configs", "topic", "dcj", "retention.ms", "cleanup.policy", "--",
               "describe-configs", "broker", "0", "advertised.listeners", "log.dirs", "num.partitions",
               "log.retention.hours", "--", "describe-configs", "group", "any-group")
    topic = {e["name"]: e for e in out[0]["entries"]}
    assert {k: (e["value"], e["source"], e["read_only"], e["type"]) for k, e in topic.items()} == {
        "retention.ms": ("1000", "DYNAMIC_TOPIC_CONFIG", False, "LONG"),
        "cleanup.policy": ("delete", "DEFAULT_CONFIG", False, "LIST")}
    assert [(s["name"], s["value"], s["source"]) for s in topic["retention.ms"]["synonyms"]] == [
        ("retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG"), ("log.retention.hours", "168", "DEFAULT_CONFIG")]
    assert [(s["name"], s["value"], s["source"]) for s in topic["cleanup.policy"]["synonyms"]] == [
        ("log.cleanup.policy", "delete", "DEFAULT_CONFIG")]
    assert all(e["doc"] for e in topic.values())
    broker = {e["name"]: (e["value"], e["source"], e["read_only"], e["type"]) for e in out[1]["entries"]}
    assert broker == {
        "advertised.listeners": (f"PLAINTEXT://{bs}", "STATIC_BROKER_CONFIG", True, "LIST"),
        "log.dirs": (None, "STATIC_BROKER_CONFIG", True, "LIST"),            # in memory: no data dir
        "num.partitions": ("1", "STATIC_BROKER_CONFIG", True, "INT"),
        "log.retention.hours": ("168", "DEFAULT_CONFIG", True, "INT")}
    group = {e["name"]: (e["value"], e["source"], e["type"]) for e in out[2]["entries"]}
    assert group == {
        "consumer.session.timeout.ms": ("45000", "DEFAULT_CONFIG", "INT"),
        "consumer.heartbeat.interval.ms": ("250", "DEFAULT_CONFIG", "INT"),     # the server's default
        "share.session.timeout.ms": ("45000", "DEFAULT_CONFIG", "INT"),
        "share.heartbeat.interval.ms": ("5000", "DEFAULT_CONFIG", "INT"),
        "share.record.lock.duration.ms": ("30000", "DEFAULT_CONFIG", "INT"),
        "share.auto.offset.reset": ("latest", "DEFAULT_CONFIG", "STRING"),
        "share.delivery.count.limit": ("5", "DEFAULT_CONFIG", "INT"),
        "share.partition.max.record.locks": ("2000", "DEFAULT_CONFIG", "INT"),
        "share.isolation.level": ("read_uncommitted", "DEFAULT_CONFIG", "STRING")}


def test_describe_broker_configs_report_the_servers_settings(tmp_path):
    cfg = ServerConfig(port=0, data_dir=str(tmp_path), default_partitions=3, initial_rebalance_delay_ms=250,
                       segment_bytes=1 << 20)
    with ServerThread(cfg) as s:
        res = ConfigResource(ResourceType.BROKER, "0")
        a = admin(s.bootstrap)
        got = {k: (e.value, e.source, e.is_read_only) for k, e in a.describe_configs([res])[res].result(15).items()}
        static = ConfigSource.STATIC_BROKER_CONFIG.value
        for name, value in {"broker.id": "0", "log.dirs": str(tmp_path), "num.partitions": "3",
                            "listeners": f"PLAINTEXT://{s.bootstrap}", "advertised.listeners": f"PLAINTEXT://{s.bootstrap}",
                            "group.initial.rebalance.delay.ms": "250", "log.segment.bytes": str(1 << 20),
                            "offsets.topic.num.partitions": "1"}.items():
            assert got[name] == (value, static, True), name
        assert got["log.retention.ms"] == (None, ConfigSource.DEFAULT_CONFIG.value, False)


# ------------------------------------------------------------------------------------- Alter / IncrementalAlter
def test_incremental_alter_configs_with_confluent_validated_and_persisted(tmp_path):
    cfg = ServerConfig(port=0, data_dir=str(tmp_path))
    with ServerThread(cfg) as s:
        a = admin(s.bootstrap)
        a.create_topics([NewTopic("iac", 1)])["iac"].result(15)
        topic = ConfigResource(ResourceType.TOPIC, "iac", incremental_configs=[
            ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
        a.incremental_alter_configs([topic])[topic].result(15)
        # validate_only changes nothing
        dry = ConfigResource(ResourceType.TOPIC, "iac", incremental_configs=[
            ConfigEntry("retention.ms", "9", incremental_operation=AlterConfigOpType.SET)])
        a.incremental_alter_configs([dry], validate_only=True)[dry].result(15)
        # refused, nothing changes: unknown name, bad value, read-only broker config
        for entry, message in [
                (ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET),
                 "Unknown topic config name: no.such.config"),
                (ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET),
                 "Invalid value soon for configuration retention.ms: Not a number of type LONG")]:
            bad = ConfigResource(ResourceType.TOPIC, "iac", incremental_configs=[entry])
            assert kafka_error(a.incremental_alter_configs([bad])[bad]) == (INVALID_CONFIG, message)
        ro = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
            ConfigEntry("log.dirs", "/elsewhere", incremental_operation=AlterConfigOpType.SET)])
        assert kafka_error(a.incremental_alter_configs([ro])[ro]) == \
            (INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.dirs)")  # Kafka's ConfigException
        # the cluster-wide broker default (resource name ""; librdkafka refuses an empty name: Java Admin)
        assert java(s.bootstrap, "alter-config", "broker", "", "SET", "log.retention.ms", "3600000") == \
            [{"type": "altered_config", "error": None}]

    with ServerThread(ServerConfig(port=0, data_dir=str(tmp_path))) as s:     # kept in the data dir
        a = admin(s.bootstrap)
        res = ConfigResource(ResourceType.TOPIC, "iac")
        got = {k: (e.value, e.source) for k, e in a.describe_configs([res])[res].result(15).items()}
        assert got["retention.ms"] == ("5000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        assert got["cleanup.policy"] == ("delete,compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        a.create_topics([NewTopic("iac2", 1)])["iac2"].result(15)
        res2 = ConfigResource(ResourceType.TOPIC, "iac2")
        got2 = a.describe_configs([res2])[res2].result(15)["retention.ms"]
        assert (got2.value, got2.source) == ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)


def test_alter_configs_with_kafka_python_and_group_configs_with_java(tenure_server, wire):
    from kafka.admin import ConfigResource as KRes
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    bs = tenure_server.bootstrap
    create(bs, "ack", 1, config={"retention.ms": "1000"})
    ka = KafkaAdminClient(bootstrap_servers=bs)
    try:
        # kafka-python's AlterConfigs path sends the other overrides along (AlterConfigs replaces the set)
        ka.alter_configs([KRes(ConfigResourceType.TOPIC, "ack", configs={"segment.bytes": "1048576"})],
                         incremental=False)
        assert tenure_server.server.topics.get("ack").configs == {"retention.ms": "1000", "segment.bytes": "1048576"}
        ka.reset_configs([KRes(ConfigResourceType.TOPIC, "ack", configs={"retention.ms": None})])   # DELETE
        assert tenure_server.server.topics.get("ack").configs == {"segment.bytes": "1048576"}
    finally:
        ka.close()
    # AlterConfigs over the wire: the set given replaces all overrides; a null value is refused
    A = AlterConfigsRequest
    R = A.AlterConfigsResource
    r = wire.call(A(validate_only=False, resources=[
        R(resource_type=2, resource_name="ack", configs=[R.AlterableConfig(name="cleanup.policy", value="compact")]),
        R(resource_type=2, resource_name="ack-missing", configs=[])]), 2)
    assert [(x.resource_name, x.error_code) for x in r.responses] == [("ack", NONE), ("ack-missing", 3)]
    assert tenure_server.server.topics.get("ack").configs == {"cleanup.policy": "compact"}
    r = wire.call(A(validate_only=False, resources=[
        R(resource_type=2, resource_name="ack", configs=[R.AlterableConfig(name="retention.ms", value=None)])]), 2)
    assert r.responses[0].error_code == 42
    assert tenure_server.server.topics.get("ack").configs == {"cleanup.policy": "compact"}
    out = java(bs, "alter-config", "group", "g1", "SET", "consumer.session.timeout.ms", "50000", "--",
               "alter-config", "group", "g1", "SET", "consumer.session.timeout.ms", "x", "--",
               "alter-config", "topic", "ack", "SET", "retention.ms", "7", "validate", "--",
               "alter-config", "group", "g1", "SET", "consumer.session.timeout.ms", "1000", "--",
               "describe-configs", "group", "g1", "consumer.session.timeout.ms")
    assert out[0] == {"type": "altered_config", "error": None}
    assert out[1]["exception"] == "org.apache.kafka.common.errors.InvalidConfigurationException"
    assert out[2] == {"type": "altered_config", "error": None}
    assert out[3]["message"] == \
        "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"
    assert [(e["value"], e["source"]) for e in out[4]["entries"]] == [("50000", "DYNAMIC_GROUP_CONFIG")]
    assert tenure_server.server.topics.get("ack").configs == {"cleanup.policy": "compact"}


# ------------------------------------------------------------------------------------------------ DeleteRecords
def test_delete_records_with_confluent_persisted_across_a_restart(tmp_path):
    cfg = ServerConfig(port=0, data_dir=str(tmp_path), segment_bytes=200)
    with ServerThread(cfg) as s:
        a = admin(s.bootstrap)
        a.create_topics([NewTopic("dr", 1)])["dr"].result(15)
        produce(s.bootstrap, "dr", 0, 5)                         # offsets 0-9, a segment per batch or so
        tp = TopicPartition("dr", 0, 5)
        assert a.delete_records([tp])[tp].result(15).low_watermark == 5
        tp3 = TopicPartition("dr", 0, 3)                            # lower than the start: no change
        assert a.delete_records([tp3])[tp3].result(15).low_watermark == 5
        past = TopicPartition("dr", 0, 11)
        assert kafka_error(a.delete_records([past])[past])[0] == OFFSET_OUT_OF_RANGE
        internal = TopicPartition("__consumer_offsets", 0, 0)       # Kafka refuses internal topics
        assert kafka_error(a.delete_records([internal])[internal])[0] == 17
        earliest = TopicPartition("dr", 0)
        assert a.list_offsets({earliest: OffsetSpec.earliest()})[earliest].result(15).offset == 5
        # by timestamp: every batch holds the same two timestamps; the first record from the log start on
        assert a.list_offsets({earliest: OffsetSpec.for_timestamp(1_700_000_000_000)})[earliest].result(15).offset == 5
        segments = sorted(p.name for p in (tmp_path / "dr-0").iterdir())
        assert segments and int(segments[0].split(".")[0]) > 0          # segments below offset 5 are gone
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\ndr 0 5\n"

    with ServerThread(ServerConfig(port=0, data_dir=str(tmp_path), segment_bytes=200)) as s:
        a = admin(s.bootstrap)
        earliest = TopicPartition("dr", 0)
        assert a.list_offsets({earliest: OffsetSpec.earliest()})[earliest].result(15).offset == 5
        with WireClient.to(s.bootstrap) as w:
            r = w.call(fetch_request("dr", 0, 4), 11)
            assert r.responses[0].partitions[0].error_code == OFFSET_OUT_OF_RANGE
            r = w.call(fetch_request("dr", 0, 5), 11)
            p = r.responses[0].partitions[0]
            assert (p.error_code, p.log_start_offset) == (NONE, 5) and p.records
        tp = TopicPartition("dr", 0, -1)                                # -1: up to the high watermark
        assert a.delete_records([tp])[tp].result(15).low_watermark == 10
        # a deleted and re-created topic starts from 0 again
        a.delete_topics(["dr"])["dr"].result(15)
        a.create_topics([NewTopic("dr", 1)])["dr"].result(15)
        assert a.list_offsets({earliest: OffsetSpec.earliest()})[earliest].result(15).offset == 0


def test_delete_records_with_java_and_kafka_python(tenure_server):
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KTP
    bs = tenure_server.bootstrap
    create(bs, "drj", 2)
    produce(bs, "drj", 0, 3)
    produce(bs, "drj", 1, 3)
    out = java(bs, "delete-records", "drj", "0", "4", "--", "delete-records", "drj", "0", "99")
    tp = TopicPartition("drj", 0)
    a = admin(bs)                                                       # in memory too: by timestamp from 4 on
    assert a.list_offsets({tp: OffsetSpec.for_timestamp(1_700_000_000_000)})[tp].result(15).offset == 4
    assert out[:2] == [{"type": "deleted_records", "low_watermark": 4}, {"type": "earliest", "offset": 4}]
    assert out[2]["exception"] == "org.apache.kafka.common.errors.OffsetOutOfRangeException"
    assert out[3] == {"type": "earliest", "offset": 4}
    ka = KafkaAdminClient(bootstrap_servers=bs)
    try:
        r = ka.delete_records({KTP("drj", 1): 2})
        assert r[KTP("drj", 1)]["low_watermark"] == 2
    finally:
        ka.close()


# ------------------------------------------------------------------------ log dirs, topic partitions, leaders
def test_describe_log_dirs_with_java_and_kafka_python(tmp_path):
    from kafka.admin import KafkaAdminClient
    with ServerThread(ServerConfig(port=0, data_dir=str(tmp_path))) as s:
        create(s.bootstrap, "ld", 2)
        produce(s.bootstrap, "ld", 1, 1)
        size = s.server.topics.partition("ld", 1).size_bytes
        assert size > 0
        (d,) = java(s.bootstrap, "log-dirs")
        assert (d["path"], d["error"]) == (str(tmp_path), None) and d["total"] > 0 and d["usable"] > 0
        parts = {(p["topic"], p["partition"]): (p["size"], p["lag"]) for p in d["partitions"]}
        assert parts[("ld", 0)] == (0, 0) and parts[("ld", 1)] == (size, 0)
        assert ("__consumer_offsets", 0) in parts
        ka = KafkaAdminClient(bootstrap_servers=s.bootstrap)
        try:
            r = ka.describe_log_dirs()
            dirs = r[0] if isinstance(r, dict) and 0 in r else r
            text = repr(dirs)
            assert str(tmp_path) in text and "'ld'" in text
        finally:
            ka.close()


def test_describe_topics_uses_describe_topic_partitions_with_java(tenure_server):
    bs = tenure_server.bootstrap
    create(bs, "dtp", 3)
    seen = []
    original = tenure_server.server.handlers[75]

    async def recording(req, ctx):
        seen.append(req.api_key)
        return await original(req, ctx)
    tenure_server.server.handlers[75] = recording
    (t,) = java(bs, "describe-topics", "dtp")
    assert seen, "the Java Admin did not use DescribeTopicPartitions"
    assert t["partitions"] == [{"partition": i, "leader": 0, "replicas": [0], "isr": [0]} for i in range(3)]
    assert t["internal"] is False


def test_describe_topic_partitions_pages_by_cursor(tenure_server, wire):
    tenure_server.call(lambda: tenure_server.server.topics.create("pa", 3))
    tenure_server.call(lambda: tenure_server.server.topics.create("pb", 2))
    D = DescribeTopicPartitionsRequest
    T = D.TopicRequest
    r = wire.call(D(topics=[T(name="pb"), T(name="pa"), T(name="nope")], response_partition_limit=4, cursor=None), 0)
    assert [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in r.topics] == [
        ("nope", UNKNOWN_TOPIC_OR_PARTITION, []), ("pa", NONE, [0, 1, 2]), ("pb", NONE, [0])]
    assert (r.next_cursor.topic_name, r.next_cursor.partition_index) == ("pb", 1)
    r = wire.call(D(topics=[T(name="pb"), T(name="pa")], response_partition_limit=4,
                    cursor=D.Cursor(topic_name="pb", partition_index=1)), 0)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics] == [("pb", [1])]
    assert r.next_cursor is None
    p = r.topics[0].partitions[0]
    assert (p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) == (0, 0, [0], [0])


def test_elect_leaders_and_reassignments_as_a_one_node_cluster(tenure_server):
    bs = tenure_server.bootstrap
    a = admin(bs)
    a.create_topics([NewTopic("el", 1)])["el"].result(15)
    tp = TopicPartition("el", 0)
    result = a.elect_leaders(ElectionType.PREFERRED, [tp]).result(15)
    assert result[tp].code() == ELECTION_NOT_NEEDED
    out = java(bs, "elect", "PREFERRED", "el", "0", "--", "elect", "UNCLEAN", "el", "0", "--",
               "reassign", "el", "0", "0", "--", "reassign", "el", "0", "0,1", "--", "reassign", "el", "0", "cancel")
    assert out[0]["exception"] == out[1]["exception"] == "org.apache.kafka.common.errors.ElectionNotNeededException"
    assert out[2:4] == [{"type": "reassigned", "error": None}, {"type": "ongoing", "count": 0}]
    assert (out[4]["exception"], out[4]["message"]) == (
        "org.apache.kafka.common.errors.InvalidReplicaAssignmentException", NO_SUCH_BROKER)
    assert out[6]["exception"] == "org.apache.kafka.common.errors.NoReassignmentInProgressException"
    assert out[7] == {"type": "ongoing", "count": 0}


# ------------------------------------------------------------------------------------------------ the version
def test_kafka_python_infers_kafka_4_3(tenure_server):
    from kafka.admin import KafkaAdminClient
    ka = KafkaAdminClient(bootstrap_servers=tenure_server.bootstrap)
    try:
        assert ka._manager.broker_version[:2] == (4, 3)     # DescribeLogDirs v5, 4.3's newest
    finally:
        ka.close()


def test_list_offsets_latest_tiered_has_no_offset(tenure_server, wire):
    from kafka.protocol.consumer import ListOffsetsRequest
    tenure_server.call(lambda: tenure_server.server.topics.create("lt", 1))
    T = ListOffsetsRequest.ListOffsetsTopic
    P = T.ListOffsetsPartition
    r = wire.call(ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=1000, topics=[
        T(name="lt", partitions=[P(partition_index=0, current_leader_epoch=-1, timestamp=-5)])]), 10)
    p = r.topics[0].partitions[0]
    assert (p.error_code, p.offset, p.timestamp, p.leader_epoch) == (NONE, -1, -1, -1)


def test_elect_leaders_and_reassignments_with_kafka_python(tenure_server):
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KTP
    create(tenure_server.bootstrap, "elk", 2)
    ka = KafkaAdminClient(bootstrap_servers=tenure_server.bootstrap)
    try:
        r = ka.elect_leaders(0, {"elk": [0, 1]})
        assert [(x.topic, [(p.partition_id, p.error_code) for p in x.partition_result])
                for x in r.replica_election_results] == [("elk", [(0, ELECTION_NOT_NEEDED), (1, ELECTION_NOT_NEEDED)])]
        r = ka.elect_leaders(1, None)                  # kafka-python names every partition of every topic
        assert r.error_code == NONE
        assert {(x.topic, p.partition_id): p.error_code for x in r.replica_election_results
                for p in x.partition_result} == {("__consumer_offsets", 0): ELECTION_NOT_NEEDED,
                                                 ("elk", 0): ELECTION_NOT_NEEDED, ("elk", 1): ELECTION_NOT_NEEDED}
        ka.alter_partition_reassignments({KTP("elk", 1): [0]})
        assert ka.list_partition_reassignments() == {}
    finally:
        ka.close()


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_over_the_wire(tenure_server, wire, version):
    from kafka.protocol.admin import ElectLeadersRequest as E
    tenure_server.call(lambda: tenure_server.server.topics.create("elw", 1))
    r = wire.call(E(election_type=0, timeout_ms=1000, topic_partitions=None), version)  # all: none needs one
    # as Kafka's controller: every topic listed, none of its partitions (each answered ELECTION_NOT_NEEDED)
    topics = tenure_server.call(lambda: sorted(t.name for t in tenure_server.server.topics.all()))
    assert "elw" in topics
    assert sorted((x.topic, x.partition_result) for x in r.replica_election_results) == [(t, []) for t in topics]
    r = wire.call(E(election_type=0, timeout_ms=1000, topic_partitions=[
        E.TopicPartitions(topic="elw", partitions=[0, 5])]), version)
    assert [(p.partition_id, p.error_code) for p in r.replica_election_results[0].partition_result] == [
        (0, ELECTION_NOT_NEEDED), (5, UNKNOWN_TOPIC_OR_PARTITION)]


@pytest.mark.parametrize("version", [1, 2, 3, 4])
@pytest.mark.parametrize("ask", [True, False])
def test_describe_configs_synonyms_types_and_docs_by_version_over_the_wire(tenure_server, wire, version, ask):
    from kafka.protocol.admin import DescribeConfigsRequest as D
    tenure_server.call(lambda: tenure_server.server.topics.create("dcv", 1, configs={"retention.bytes": "4096"}))
    r = wire.call(D(include_synonyms=ask, include_documentation=ask, resources=[
        D.DescribeConfigsResource(resource_type=2, resource_name="dcv", configuration_keys=["retention.bytes"]),
        D.DescribeConfigsResource(resource_type=32, resource_name="", configuration_keys=None)]), version)
    topic, group = r.results
    (c,) = topic.configs
    assert (c.name, c.value, c.config_source, c.read_only) == ("retention.bytes", "4096", 1, False)
    assert [(s.name, s.value, s.source) for s in c.synonyms] == (
        [("retention.bytes", "4096", 1), ("log.retention.bytes", "-1", 5)] if ask else [])
    if version >= 3:
        assert c.config_type == 5                                        # LONG
        assert (c.documentation is not None) == ask
    assert (group.error_code, group.error_message) == (42, "Group name must not be empty")


def test_group_configs_with_confluent_and_kafka_python(tenure_server):
    from kafka.admin import ConfigResource as KRes
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    a = admin(tenure_server.bootstrap)
    res = ConfigResource(ResourceType.GROUP, "gc")
    got = {k: (e.value, e.source) for k, e in a.describe_configs([res])[res].result(15).items()}
    assert got["consumer.heartbeat.interval.ms"] == ("250", ConfigSource.DEFAULT_CONFIG.value)   # the server's
    alter = ConfigResource(ResourceType.GROUP, "gc", incremental_configs=[
        ConfigEntry("consumer.heartbeat.interval.ms", "6000", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([alter])[alter].result(15)
    got = {k: (e.value, e.source) for k, e in a.describe_configs([res])[res].result(15).items()}
    assert got["consumer.heartbeat.interval.ms"] == ("6000", ConfigSource.GROUP_CONFIG.value)
    ka = KafkaAdminClient(bootstrap_servers=tenure_server.bootstrap)
    try:
        r = ka.describe_configs([KRes(ConfigResourceType.GROUP, "gc")])     # only the altered ones
        assert {k: v["value"] for k, v in r["group"]["gc"].items()} == {"consumer.heartbeat.interval.ms": "6000"}
    finally:
        ka.close()


def test_create_topics_assignment_checks_over_the_wire(tenure_server, wire):
    from kafka.protocol.admin import CreateTopicsRequest as C
    T = C.CreatableTopic
    A = T.CreatableReplicaAssignment

    def create(name, assignments, partitions=-1, factor=-1, validate_only=False):
        r = wire.call(C(timeout_ms=10000, validate_only=validate_only, topics=[T(
            name=name, num_partitions=partitions, replication_factor=factor, configs=[],
            assignments=[A(partition_index=i, broker_ids=b) for i, b in assignments])]), 7)
        t = r.topics[0]
        return t.error_code, t.error_message, t.num_partitions

    assert create("ca", [(0, [0]), (1, [0])], validate_only=True) == (NONE, None, 2)
    assert tenure_server.server.topics.get("ca") is None
    assert create("ca", [(0, [0]), (1, [0])]) == (NONE, None, 2)
    assert create("cb", [(0, [0]), (2, [0])])[:2] == (
        INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence")
    assert create("cb", [(0, [0])], partitions=1)[:2] == (
        42, "A manual partition assignment was specified, but numPartitions was not set to -1.")
    assert create("cb", [(0, [])])[:2] == (
        INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")
    assert tenure_server.server.topics.get("cb") is None
