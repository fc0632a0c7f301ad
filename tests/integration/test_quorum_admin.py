"""The admin APIs on the cluster's metadata and log dirs, with Java 4.3's Admin and kafka-python 3: DescribeQuorum
(every broker a combined voter, the controller leading; a stopped controller moves the leadership and its epoch),
AlterReplicaLogDirs (the one log dir: done; another: LOG_DIR_NOT_FOUND; no replica here: REPLICA_NOT_AVAILABLE),
ListConfigResources (KIP-1142: topics, brokers, broker loggers, configured groups; an unknown type refused)."""
from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, TopicPartitionReplica
from kafka.protocol.admin import DescribeQuorumRequest, ListConfigResourcesRequest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.support.java import run_java

pytestmark = pytest.mark.timeout(180)

UNKNOWN_TOPIC_OR_PARTITION, REPLICA_NOT_AVAILABLE, UNSUPPORTED_VERSION, LOG_DIR_NOT_FOUND = 3, 9, 35, 57


@pytest.fixture
def cluster(tmp_path):
    with ServerThread(ServerConfig(port=0, brokers=3, data_dir=str(tmp_path / "data"))) as s:
        s.create_topics({"qt": 1})
        yield s, str(tmp_path / "data")


def test_kafka_python_describes_the_quorum_and_it_follows_the_controller(cluster):
    s, _ = cluster
    admin = KafkaAdminClient(bootstrap_servers=s.bootstrap)
    try:
        q = admin.describe_metadata_quorum()
        part = q["topics"][0]["partitions"][0]
        assert (q["topics"][0]["topic_name"], part["leader_id"], part["leader_epoch"], part["error"]) == (
            "__cluster_metadata", 0, 1, None)
        hw = part["high_watermark"]
        assert hw > 0 and [(v["replica_id"], v["log_end_offset"]) for v in part["current_voters"]] == [
            (0, hw), (1, hw), (2, hw)]
        assert part["observers"] == [] and [n["node_id"] for n in q["nodes"]] == [0, 1, 2]
    finally:
        admin.close()
    s.stop_broker(0)                               # the controller goes: node 1 leads, a new epoch, more records
    admin = KafkaAdminClient(bootstrap_servers=s.bootstrap)
    try:
        part = admin.describe_metadata_quorum()["topics"][0]["partitions"][0]
        assert (part["leader_id"], part["leader_epoch"]) == (1, 2) and part["high_watermark"] > hw
        assert [(v["replica_id"], v["log_end_offset"]) for v in part["current_voters"]][0] == (0, -1)
    finally:
        admin.close()


def test_describe_quorum_of_another_partition_and_config_resources_of_an_unknown_type(cluster):
    s, _ = cluster
    from tests.support.wire import WireClient
    T = DescribeQuorumRequest.TopicData
    with WireClient.to(f"127.0.0.1:{s.port}") as w:
        r = w.call(DescribeQuorumRequest(topics=[T(topic_name="qt", partitions=[T.PartitionData(partition_index=0)])]),
                   2)
        p = r.topics[0].partitions[0]
        assert (r.error_code, p.error_code, p.error_message) == (
            0, UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        r = w.call(ListConfigResourcesRequest(resource_types=[2, 99]), 1)       # 99: no such type
        assert (r.error_code, r.config_resources) == (UNSUPPORTED_VERSION, [])
        r = w.call(ListConfigResourcesRequest(), 0)                           # v0: client metrics only: none
        assert (r.error_code, r.config_resources) == (0, [])


def test_kafka_python_alters_replica_log_dirs_and_lists_config_resources(cluster):
    s, data = cluster
    s.call(lambda: s.server.cluster.reassign("qt", 0, [0, 1]))             # broker 2 holds no replica of qt-0
    admin = KafkaAdminClient(bootstrap_servers=s.bootstrap)
    try:
        got = admin.alter_replica_log_dirs({TopicPartitionReplica("qt", 0, 0): data,
                                            TopicPartitionReplica("qt", 0, 2): data})
        assert {(t.broker_id, e.errno) for t, e in got.items()} == {(0, 0), (2, REPLICA_NOT_AVAILABLE)}
        got = admin.alter_replica_log_dirs({TopicPartitionReplica("qt", 0, 1): "/elsewhere"})
        assert [e.errno for e in got.values()] == [LOG_DIR_NOT_FOUND]
        s.call(lambda: s.server.topics.set_dynamic_configs("group", "g1", {"consumer.session.timeout.ms": "50000"}))
        listed = admin.list_config_resources()
        assert listed == {"topic": ["__consumer_offsets", "qt"], "broker": ["0", "1", "2"],
                          "broker_logger": ["0", "1", "2"], "group": ["g1"]}
        assert admin.list_config_resources(["TOPIC"]) == {"topic": ["__consumer_offsets", "qt"]}
    finally:
        admin.close()


@pytest.mark.java
def test_java_admin_describes_the_quorum_alters_log_dirs_and_lists_config_resources(cluster):
    s, data = cluster
    out = run_java("QuorumAdmin", s.bootstrap, data, "qt", timeout=120)
    quorum, dirs, resources = out
    assert (quorum["type"], quorum["leader"], quorum["epoch"], quorum["observers"], quorum["nodes"]) == (
        "quorum", 0, 1, 0, [0, 1, 2])
    assert [v["id"] for v in quorum["voters"]] == [0, 1, 2]
    assert all(v["log_end"] == quorum["high_watermark"] > 0 for v in quorum["voters"])
    assert dirs == {"type": "log_dirs", "error": None,
                    "wrong_dir_error": "org.apache.kafka.common.errors.LogDirNotFoundException"}
    assert resources["topics"] == ["__consumer_offsets", "qt"]
    assert resources["resources"] == ["TOPIC:__consumer_offsets", "TOPIC:qt", "BROKER:0", "BROKER:1", "BROKER:2",
                                      "BROKER_LOGGER:0", "BROKER_LOGGER:1", "BROKER_LOGGER:2"]
