"""The data-plane APIs one by one, each through a real client where one exercises it (confluent-kafka's
AdminClient, kafka-python) and over the raw wire for the rest, with exact values asserted: DeleteTopics,
CreatePartitions, DescribeCluster, DescribeConfigs, ListOffsets (earliest, latest, by timestamp),
OffsetForLeaderEpoch, FindCoordinator (v0-3 and batched keys from v4), Fetch long polling, topic ids in
Metadata v10+ and Fetch v13+, and auto-creation of topics on Metadata."""
from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
)
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kafka.record import MemoryRecords

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.support.wire import WireClient, build_batch, fetch_request, metadata_request, produce_request

pytestmark = pytest.mark.timeout(120)

ZERO_UUID = uuid.UUID(int=0)
BASE_TS = 1_700_000_000_000

# error codes
NONE = 0
INVALID_REQUEST = 42
UNKNOWN_TOPIC_OR_PARTITION = 3
COORDINATOR_NOT_AVAILABLE = 15
INVALID_TOPIC_EXCEPTION = 17
INVALID_PARTITIONS = 37
INVALID_REPLICA_ASSIGNMENT = 39
UNKNOWN_LEADER_EPOCH = 75
UNKNOWN_TOPIC_ID = 100

# every topic config tenure describes, with its default
TOPIC_DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "segment.bytes": "1073741824",
    "max.message.bytes": "1048588",
    "min.insync.replicas": "1",
    "message.timestamp.type": "CreateTime",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "86400000",
}


# ------------------------------------------------------------------------------------------------ helpers
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def error_code(future) -> int:
    """The Kafka error code a confluent-kafka admin future fails with (0 when it succeeds)."""
    try:
        future.result(15)
    except KafkaException as exc:
        return exc.args[0].code()
    return NONE


def create(bootstrap: str, topic: str, partitions: int, config: dict | None = None) -> None:
    a = admin(bootstrap)     # the handle must outlive the future
    a.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(15)


def server_topic(server: ServerThread, name: str):
    return server.call(lambda: server.server.topics.get(name))


def decode_records(raw: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every record in a Fetch response's records bytes."""
    out = []
    batches = MemoryRecords(raw)
    while (batch := batches.next_batch()) is not None:
        out += [(r.offset, r.timestamp, r.key, r.value) for r in batch]
    return out


def list_offsets_request(topic: str, queries: list[tuple[int, int]], current_leader_epoch: int = -1):
    L = ListOffsetsRequest
    T = L.ListOffsetsTopic
    return L(replica_id=-1, isolation_level=0, timeout_ms=10000, topics=[T(name=topic, partitions=[
        T.ListOffsetsPartition(partition_index=p, current_leader_epoch=current_leader_epoch, timestamp=ts,
                               max_num_offsets=1) for p, ts in queries])])


def epoch_request(topic: str, queries: list[tuple[int, int, int]]):
    """queries: (partition, current_leader_epoch, leader_epoch)."""
    R = OffsetForLeaderEpochRequest
    T = R.OffsetForLeaderTopic
    return R(replica_id=-1, topics=[T(topic=topic, partitions=[
        T.OffsetForLeaderPartition(partition=p, current_leader_epoch=cur, leader_epoch=e) for p, cur, e in queries])])


def fetch_many(topic: str, partitions: list[int], max_wait_ms: int, min_bytes: int, offset: int = 0):
    F = FetchRequest
    T = F.FetchTopic
    return F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20, isolation_level=0,
             session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
             topics=[T(topic=topic, topic_id=None, partitions=[T.FetchPartition(
                 partition=p, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                 log_start_offset=-1, partition_max_bytes=1 << 20) for p in partitions])])


def produce_timestamped(bootstrap: str, topic: str, partition: int, groups: list[list[int]]) -> list[int]:
    """Produce with confluent-kafka one record per timestamp offset (ms after BASE_TS), each group flushed
    before the next (so groups land in separate batches); returns the acknowledged offsets in order."""
    acked = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for group in groups:
        for dt in group:
            p.produce(topic, key=f"t{dt}".encode(), value=b"v", partition=partition, timestamp=BASE_TS + dt,
                      on_delivery=lambda err, msg: acked.append((err, msg.offset())))
        assert p.flush(15) == 0
    assert all(err is None for err, _ in acked), acked
    return [o for _, o in acked]


def wait_until(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class BackgroundFetch:
    """One Fetch on its own connection and thread; `result`/`elapsed` once it has been answered."""

    def __init__(self, server: ServerThread, request, version: int = 12) -> None:
        self.client = WireClient.to(server.bootstrap, timeout=90)
        self.result = None
        self.error: BaseException | None = None
        self.elapsed: float | None = None
        self.thread = threading.Thread(target=self._run, args=(request, version), daemon=True)
        self.thread.start()

    def _run(self, request, version):
        t0 = time.monotonic()
        try:
            self.result = self.client.call(request, version)
        except BaseException as exc:  # reported by join()
            self.error = exc
        self.elapsed = time.monotonic() - t0

    def join(self, timeout: float):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the fetch was not answered within {timeout}s"
        self.client.close()
        if self.error is not None:
            raise self.error
        return self.result


def parked(server: ServerThread, topic: str, partition: int) -> bool:
    """Whether a long-polling Fetch is waiting on this partition (the partition's fetch waiters)."""
    def waiting() -> bool:
        p = server.server.broker.replicas.get(topic, partition)
        return p is not None and bool(p.waiters)
    return server.call(waiting)


# ------------------------------------------------------------------------------------------------ DeleteTopics
def test_delete_topics_with_confluent_admin(tenure_server):
    bs = tenure_server.bootstrap
    a = admin(bs)
    create(bs, "del-a", 2)
    create(bs, "del-b", 1)
    old_id = server_topic(tenure_server, "del-a").topic_id
    assert produce_timestamped(bs, "del-a", 0, [[0, 1, 2]]) == [0, 1, 2]

    results = a.delete_topics(["del-a", "del-b"], operation_timeout=15)
    assert {t: f.result(15) for t, f in results.items()} == {"del-a": None, "del-b": None}
    assert set(a.list_topics(timeout=15).topics) == {"__consumer_offsets"}
    assert server_topic(tenure_server, "del-a") is None
    # deleting what no longer exists
    assert error_code(a.delete_topics(["del-a"])["del-a"]) == UNKNOWN_TOPIC_OR_PARTITION

    # the same name again is a new topic: new id, empty log; the old id is unknown
    create(bs, "del-a", 1)
    new_id = server_topic(tenure_server, "del-a").topic_id
    assert new_id != old_id
    with WireClient.to(bs) as w:
        r = w.call(list_offsets_request("del-a", [(0, -1), (0, -2)]), 8)
        assert [(p.error_code, p.offset) for p in r.topics[0].partitions] == [(0, 0), (0, 0)]
        f = w.call(fetch_request("del-a", 0, 0, topic_id=old_id), 13)
        assert f.responses[0].partitions[0].error_code == UNKNOWN_TOPIC_ID


def test_delete_topics_with_kafka_python_admin(tenure_server):
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic
    from kafka.errors import UnknownTopicOrPartitionError

    a = KafkaAdminClient(bootstrap_servers=tenure_server.bootstrap)
    try:
        a.create_topics([KNewTopic("kp-del", 2, 1)])
        topic_id = server_topic(tenure_server, "kp-del").topic_id
        r = a.delete_topics(["kp-del"])
        assert r == {"topics": [{"name": "kp-del", "topic_id": str(topic_id), "error_code": 0,
                                 "error_message": None}]}
        assert a.list_topics() == ["__consumer_offsets"]
        with pytest.raises(UnknownTopicOrPartitionError):
            a.delete_topics(["kp-del"])
    finally:
        a.close()


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_topics_over_the_wire(tenure_server, wire, version):
    for t in ("w-a", "w-b"):
        tenure_server.call(lambda t=t: tenure_server.server.topics.create(t, 2))
    ids = {t: server_topic(tenure_server, t).topic_id for t in ("w-a", "w-b")}
    D = DeleteTopicsRequest
    if version >= 6:    # by name, by topic id, and an id nobody has
        missing = uuid.uuid4()
        req = D(timeout_ms=10000, topics=[D.DeleteTopicState(name="w-a", topic_id=ZERO_UUID),
                                          D.DeleteTopicState(name=None, topic_id=ids["w-b"]),
                                          D.DeleteTopicState(name=None, topic_id=missing)])
        r = wire.call(req, version)
        assert [(x.name, x.topic_id, x.error_code) for x in r.responses] == [
            ("w-a", ids["w-a"], NONE), ("w-b", ids["w-b"], NONE), (None, missing, UNKNOWN_TOPIC_ID)]
    else:
        r = wire.call(D(timeout_ms=10000, topic_names=["w-a", "w-b", "w-missing"]), version)
        assert [(x.name, x.error_code) for x in r.responses] == [
            ("w-a", NONE), ("w-b", NONE), ("w-missing", UNKNOWN_TOPIC_OR_PARTITION)]
    md = wire.call(metadata_request("w-a", "w-b", auto_create=False), 12)
    assert [(t.name, t.error_code) for t in md.topics] == [("w-a", UNKNOWN_TOPIC_OR_PARTITION),
                                                           ("w-b", UNKNOWN_TOPIC_OR_PARTITION)]


def test_deleting_a_topic_ends_a_long_poll_on_it(tenure_server):
    tenure_server.call(lambda: tenure_server.server.topics.create("del-lp", 1))
    bg = BackgroundFetch(tenure_server, fetch_request("del-lp", 0, 0, max_wait_ms=60000, min_bytes=1))
    wait_until(lambda: parked(tenure_server, "del-lp", 0), what="the fetch to park")
    with WireClient.to(tenure_server.bootstrap) as w:
        r = w.call(DeleteTopicsRequest(timeout_ms=10000, topic_names=["del-lp"]), 5)
        assert r.responses[0].error_code == NONE
    f = bg.join(30)       # far sooner than max_wait_ms
    assert f.responses[0].partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert bg.elapsed < 30


# ------------------------------------------------------------------------------------------------ CreatePartitions
def test_create_partitions_with_confluent_admin(tenure_server):
    bs = tenure_server.bootstrap
    a = admin(bs)
    create(bs, "cp", 2)
    assert produce_timestamped(bs, "cp", 1, [[0, 1, 2]]) == [0, 1, 2]

    assert a.create_partitions([NewPartitions("cp", 5)])["cp"].result(15) is None
    assert sorted(a.list_topics("cp", timeout=15).topics["cp"].partitions) == [0, 1, 2, 3, 4]
    # the new partitions take records from offset 0; the old ones keep theirs
    assert produce_timestamped(bs, "cp", 4, [[0, 1]]) == [0, 1]
    latest = a.list_offsets({TopicPartition("cp", p): OffsetSpec.latest() for p in range(5)})
    assert {tp.partition: f.result(15).offset for tp, f in latest.items()} == {0: 0, 1: 3, 2: 0, 3: 0, 4: 2}

    # validate_only changes nothing; the count can only grow; the topic must exist
    assert a.create_partitions([NewPartitions("cp", 8)], validate_only=True)["cp"].result(15) is None
    assert len(server_topic(tenure_server, "cp").partitions) == 5
    assert error_code(a.create_partitions([NewPartitions("cp", 5)])["cp"]) == INVALID_PARTITIONS
    assert error_code(a.create_partitions([NewPartitions("cp", 3)])["cp"]) == INVALID_PARTITIONS
    assert error_code(a.create_partitions([NewPartitions("cp-missing", 3)])["cp-missing"]) == \
        UNKNOWN_TOPIC_OR_PARTITION
    assert len(server_topic(tenure_server, "cp").partitions) == 5


def test_create_partitions_with_kafka_python_admin(tenure_server):
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewPartitions as KNewPartitions
    from kafka.admin import NewTopic as KNewTopic

    a = KafkaAdminClient(bootstrap_servers=tenure_server.bootstrap)
    try:
        a.create_topics([KNewTopic("kp-cp", 1, 1)])
        r = a.create_partitions({"kp-cp": KNewPartitions(4)})
        assert [(x.name, x.error_code) for x in r.results] == [("kp-cp", NONE)]
        (desc,) = a.describe_topics(["kp-cp"])
        assert [p["partition_index"] for p in desc["partitions"]] == [0, 1, 2, 3]
        assert {(p["leader_id"], p["leader_epoch"], tuple(p["replica_nodes"])) for p in desc["partitions"]} == \
            {(0, 0, (0,))}
    finally:
        a.close()


@pytest.mark.parametrize("version", range(0, 4))
def test_create_partitions_over_the_wire(tenure_server, wire, version):
    tenure_server.call(lambda: tenure_server.server.topics.create("cpw", 1))
    C = CreatePartitionsRequest
    T = C.CreatePartitionsTopic
    r = wire.call(C(timeout_ms=10000, validate_only=False, topics=[
        T(name="cpw", count=3, assignments=None),
        T(name="cpw-missing", count=3, assignments=None)]), version)
    assert [(x.name, x.error_code) for x in r.results] == [("cpw", NONE), ("cpw-missing", UNKNOWN_TOPIC_OR_PARTITION)]
    # a manual replica assignment naming a broker other than node 0 is refused; nothing changes
    r = wire.call(C(timeout_ms=10000, validate_only=False, topics=[
        T(name="cpw", count=4, assignments=[T.CreatePartitionsAssignment(broker_ids=[1])])]), version)
    assert [(x.name, x.error_code, x.error_message) for x in r.results] == [
        ("cpw", INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes broker 1, but no such broker is registered.")]
    md = wire.call(metadata_request("cpw"), 12)
    assert [p.partition_index for p in md.topics[0].partitions] == [0, 1, 2]
    # one naming node 0 (the only broker) is accepted
    r = wire.call(C(timeout_ms=10000, validate_only=False, topics=[
        T(name="cpw", count=4, assignments=[T.CreatePartitionsAssignment(broker_ids=[0])])]), version)
    assert [(x.name, x.error_code) for x in r.results] == [("cpw", NONE)]
    md = wire.call(metadata_request("cpw"), 12)
    assert [p.partition_index for p in md.topics[0].partitions] == [0, 1, 2, 3]


# ------------------------------------------------------------------------------------------------ DescribeCluster
def test_describe_cluster_with_real_clients():
    from kafka.admin import KafkaAdminClient

    with ServerThread(ServerConfig(port=0, cluster_id="tenure-test-cluster")) as s:
        ca = admin(s.bootstrap)
        d = ca.describe_cluster(request_timeout=15).result(15)
        assert d.cluster_id == "tenure-test-cluster"
        assert (d.controller.id, d.controller.host, d.controller.port) == (0, "127.0.0.1", s.port)
        assert [(n.id, n.host, n.port, n.rack) for n in d.nodes] == [(0, "127.0.0.1", s.port, None)]

        a = KafkaAdminClient(bootstrap_servers=s.bootstrap)
        try:
            d = a.describe_cluster()       # kafka-python asks for the authorized operations: it gets them all
            assert set(d.pop("authorized_operations")) == {
                "CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER",
                "DESCRIBE"}
            assert d == {"cluster_id": "tenure-test-cluster", "controller_id": 0,
                         "brokers": [{"broker_id": 0, "host": "127.0.0.1", "port": s.port, "rack": None,
                                      "is_fenced": False}]}      # DescribeCluster v2 (KIP-1073)
        finally:
            a.close()


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster_over_the_wire_advertises_the_configured_host(version):
    with ServerThread(ServerConfig(port=0, advertised_host="localhost")) as s, WireClient.to(
            f"127.0.0.1:{s.port}") as w:
        r = w.call(DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1), version)
        assert (r.error_code, r.cluster_id, r.controller_id) == (NONE, s.server.broker.cluster_id, 0)
        assert [(b.broker_id, b.host, b.port, b.rack) for b in r.brokers] == [(0, "localhost", s.port, None)]
        if version >= 1:
            assert r.endpoint_type == 1
        md = w.call(MetadataRequest(topics=None), 12)
        assert (md.cluster_id, [(b.node_id, b.host, b.port) for b in md.brokers]) == \
            (r.cluster_id, [(0, "localhost", s.port)])


# ------------------------------------------------------------------------------------------------ DescribeConfigs
def test_describe_configs_with_confluent_admin(tenure_server):
    bs = tenure_server.bootstrap
    a = admin(bs)
    create(bs, "dc", 2, {"retention.ms": "1000", "cleanup.policy": "compact"})
    res = ConfigResource(ResourceType.TOPIC, "dc")
    got = {k: (e.value, e.source, e.is_default, e.is_read_only, e.is_sensitive)
           for k, e in a.describe_configs([res])[res].result(15).items()}
    overridden = {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert got == {k: (overridden.get(k, v),
                       (ConfigSource.DYNAMIC_TOPIC_CONFIG if k in overridden else ConfigSource.DEFAULT_CONFIG).value,
                       k not in overridden, False, False)
                   for k, v in TOPIC_DEFAULTS.items()}

    broker = ConfigResource(ResourceType.BROKER, "0")
    got = {k: (e.value, e.source) for k, e in a.describe_configs([broker])[broker].result(15).items()}
    static = ConfigSource.STATIC_BROKER_CONFIG.value
    assert {k: got[k] for k in ("broker.id", "num.partitions", "auto.create.topics.enable",
                                "default.replication.factor", "offsets.topic.replication.factor")} == \
        {"broker.id": ("0", static), "num.partitions": ("1", static), "auto.create.topics.enable": ("true", static),
         "default.replication.factor": ("1", static), "offsets.topic.replication.factor": ("1", static)}

    missing = ConfigResource(ResourceType.TOPIC, "dc-missing")
    assert error_code(a.describe_configs([missing])[missing]) == UNKNOWN_TOPIC_OR_PARTITION


def test_describe_configs_of_the_cluster_default_broker_resource_over_the_wire(tenure_server, wire):
    """The empty broker name is the cluster's default broker configs: as Kafka's ConfigHelper, only those
    altered cluster-wide (none yet, then one); any other id than 0 is refused. (Over the wire: librdkafka's
    AdminClient sends a broker resource to the broker of that id, so it never asks this node about broker 7.)"""
    from kafka.protocol.admin import IncrementalAlterConfigsRequest as I
    D = DescribeConfigsRequest
    req = D(include_synonyms=True, include_documentation=False, resources=[
        D.DescribeConfigsResource(resource_type=4, resource_name="", configuration_keys=None),
        D.DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=None)])
    default, other = wire.call(req, 4).results
    assert (default.error_code, default.configs) == (NONE, [])
    R = I.AlterConfigsResource
    r = wire.call(I(validate_only=False, resources=[R(resource_type=4, resource_name="", configs=[
        R.AlterableConfig(name="log.retention.ms", config_operation=0, value="60000")])]), 1)
    assert r.responses[0].error_code == NONE
    default, other = wire.call(req, 4).results
    assert [(c.name, c.value, c.config_source, [(s.name, s.source) for s in c.synonyms]) for c in default.configs] \
        == [("log.retention.ms", "60000", 3, [("log.retention.ms", 3)])]
    assert (other.error_code, other.configs) == (INVALID_REQUEST, [])
    assert other.error_message == "Unexpected broker id, expected 0 or empty string, but received 1"


def test_describe_configs_with_kafka_python_admin(tenure_server):
    from kafka.admin import ConfigResource as KConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    create(tenure_server.bootstrap, "kp-dc", 1, {"segment.bytes": "1048576"})
    a = KafkaAdminClient(bootstrap_servers=tenure_server.bootstrap)
    try:
        r = a.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "kp-dc")])   # only modified ones
        assert {k: (v["value"], v["config_source"]) for k, v in r["topic"]["kp-dc"].items()} == \
            {"segment.bytes": ("1048576", "DYNAMIC_TOPIC_CONFIG")}
        r = a.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "kp-dc")], config_filter="all")
        assert {k: v["value"] for k, v in r["topic"]["kp-dc"].items()} == {**TOPIC_DEFAULTS, "segment.bytes": "1048576"}
    finally:
        a.close()


@pytest.mark.parametrize("version", range(1, 5))
def test_describe_configs_over_the_wire_filters_by_key(tenure_server, wire, version):
    tenure_server.call(lambda: tenure_server.server.topics.create("dcw", 1, configs={"retention.bytes": "4096"}))
    D = DescribeConfigsRequest
    r = wire.call(D(include_synonyms=False, include_documentation=False, resources=[
        D.DescribeConfigsResource(resource_type=2, resource_name="dcw",
                                  configuration_keys=["retention.bytes", "retention.ms"]),
        D.DescribeConfigsResource(resource_type=4, resource_name="0", configuration_keys=["num.partitions"]),
        D.DescribeConfigsResource(resource_type=2, resource_name="dcw-missing", configuration_keys=None)]), version)
    topic, broker, missing = r.results
    assert (topic.error_code, topic.resource_type, topic.resource_name) == (NONE, 2, "dcw")
    assert sorted((c.name, c.value, c.read_only, c.config_source) for c in topic.configs) == [
        ("retention.bytes", "4096", False, 1), ("retention.ms", "604800000", False, 5)]
    assert [(c.name, c.value, c.config_source) for c in broker.configs] == [("num.partitions", "1", 4)]
    assert (missing.error_code, missing.resource_name, missing.configs) == (UNKNOWN_TOPIC_OR_PARTITION,
                                                                            "dcw-missing", [])


# ------------------------------------------------------------------------------------------------ ListOffsets
# offsets 0-3 in one batch (timestamps +0 .. +3000 ms), 4-6 in a second (+4000 .. +6000), 7-9 in a third
TS_GROUPS = [[0, 1000, 2000, 3000], [4000, 5000, 6000], [7000, 8000, 9000]]


def test_list_offsets_with_confluent_admin(tenure_server):
    bs = tenure_server.bootstrap
    a = admin(bs)
    create(bs, "lo", 2)
    assert produce_timestamped(bs, "lo", 0, TS_GROUPS) == list(range(10))

    def query(partition, spec):
        tp = TopicPartition("lo", partition)
        r = a.list_offsets({tp: spec}, request_timeout=15)[tp].result(15)
        return r.offset, r.timestamp

    assert query(0, OffsetSpec.earliest()) == (0, -1)
    assert query(0, OffsetSpec.latest()) == (10, -1)
    assert query(0, OffsetSpec.for_timestamp(0)) == (0, BASE_TS)
    assert query(0, OffsetSpec.for_timestamp(BASE_TS)) == (0, BASE_TS)
    assert query(0, OffsetSpec.for_timestamp(BASE_TS + 1)) == (1, BASE_TS + 1000)         # inside a batch
    assert query(0, OffsetSpec.for_timestamp(BASE_TS + 3500)) == (4, BASE_TS + 4000)      # between batches
    assert query(0, OffsetSpec.for_timestamp(BASE_TS + 5000)) == (5, BASE_TS + 5000)
    assert query(0, OffsetSpec.for_timestamp(BASE_TS + 9000)) == (9, BASE_TS + 9000)
    assert query(0, OffsetSpec.for_timestamp(BASE_TS + 9001)) == (-1, -1)                 # after the last
    assert query(0, OffsetSpec.max_timestamp()) == (9, BASE_TS + 9000)
    # the empty partition
    assert query(1, OffsetSpec.earliest()) == (0, -1)
    assert query(1, OffsetSpec.latest()) == (0, -1)
    assert query(1, OffsetSpec.for_timestamp(BASE_TS)) == (-1, -1)


def test_max_timestamp_names_the_record_not_the_batch_with_confluent_admin(tenure_server):
    """KIP-734: MAX_TIMESTAMP answers the first record holding the highest timestamp, even when it sits in
    the middle of a batch and later records carry the same timestamp again."""
    bs = tenure_server.bootstrap
    a = admin(bs)
    create(bs, "mx", 1)
    assert produce_timestamped(bs, "mx", 0, [[100, 1500, 9000, 2000, 9000], [3000], [9000]]) == list(range(7))
    tp = TopicPartition("mx", 0)
    r = a.list_offsets({tp: OffsetSpec.max_timestamp()}, request_timeout=15)[tp].result(15)
    assert (r.offset, r.timestamp) == (2, BASE_TS + 9000)


def test_list_offsets_with_kafka_python_consumer(tenure_server):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    create(tenure_server.bootstrap, "lo-kp", 1)
    assert produce_timestamped(tenure_server.bootstrap, "lo-kp", 0, TS_GROUPS) == list(range(10))
    c = KafkaConsumer(bootstrap_servers=tenure_server.bootstrap, enable_auto_commit=False)
    try:
        tp = KTopicPartition("lo-kp", 0)
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 10}
        found = c.offsets_for_times({tp: BASE_TS + 2500})[tp]
        assert (found.offset, found.timestamp) == (3, BASE_TS + 3000)
        assert c.offsets_for_times({tp: BASE_TS + 10_000}) == {tp: None}
    finally:
        c.close()


@pytest.mark.parametrize("version", range(1, 9))
def test_list_offsets_over_the_wire(tenure_server, wire, version):
    tenure_server.call(lambda: tenure_server.server.topics.create("low", 2))
    for group in TS_GROUPS:
        r = wire.call(produce_request("low", 0, build_batch([(b"k", b"v")] * len(group), BASE_TS + group[0])), 9)
        assert r.responses[0].partition_responses[0].error_code == NONE
    # build_batch steps timestamps by 1 ms: offsets 0-3 at +0..+3, 4-6 at +4000..+4002, 7-9 at +7000..+7002 ms
    queries = [(0, -2), (0, -1), (0, BASE_TS + 2), (0, BASE_TS + 500), (0, BASE_TS + 7002), (0, BASE_TS + 7003),
               (1, -2), (1, -1), (1, BASE_TS), (5, -1)]
    r = wire.call(list_offsets_request("low", queries), version)
    got = [(p.partition_index, p.error_code, p.offset, p.timestamp) for p in r.topics[0].partitions]
    assert got == [(0, NONE, 0, -1), (0, NONE, 10, -1), (0, NONE, 2, BASE_TS + 2), (0, NONE, 4, BASE_TS + 4000),
                   (0, NONE, 9, BASE_TS + 7002), (0, NONE, -1, -1),
                   (1, NONE, 0, -1), (1, NONE, 0, -1), (1, NONE, -1, -1), (5, UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
    if version >= 4:
        # the leader epoch of what was found; -1 where nothing was (as Kafka answers)
        assert [p.leader_epoch for p in r.topics[0].partitions] == [0, 0, 0, 0, 0, -1, 0, 0, -1, -1]
        r = wire.call(list_offsets_request("low", [(0, -1)], current_leader_epoch=1), version)
        p = r.topics[0].partitions[0]
        assert (p.error_code, p.offset, p.leader_epoch) == (UNKNOWN_LEADER_EPOCH, -1, -1)
    r = wire.call(list_offsets_request("low-missing", [(0, -1)]), version)
    assert (r.topics[0].name, r.topics[0].partitions[0].error_code) == ("low-missing", UNKNOWN_TOPIC_OR_PARTITION)


# ------------------------------------------------------------------------------------------------ OffsetForLeaderEpoch
@pytest.mark.parametrize("version", range(2, 5))
def test_offset_for_leader_epoch_over_the_wire(tenure_server, wire, version):
    tenure_server.call(lambda: tenure_server.server.topics.create("ofle", 2))
    r = wire.call(produce_request("ofle", 0, build_batch([(b"k", b"v")] * 5)), 9)
    assert r.responses[0].partition_responses[0].base_offset == 0
    queries = [(0, -1, 0),    # the current epoch 0: ends at the log end offset
               (0, 0, 0),     # same, with the current leader epoch checked
               (1, -1, 0),    # an empty partition
               (0, -1, 3),    # an epoch newer than any the log has
               (0, -1, -1),   # no epoch at all
               (0, 1, 0),     # the client believes in a newer leader epoch
               (7, -1, 0)]    # no such partition
    r = wire.call(epoch_request("ofle", queries), version)
    assert r.topics[0].topic == "ofle"
    assert [(e.partition, e.error_code, e.leader_epoch, e.end_offset) for e in r.topics[0].partitions] == [
        (0, NONE, 0, 5), (0, NONE, 0, 5), (1, NONE, 0, 0), (0, NONE, -1, -1), (0, NONE, -1, -1),
        (0, UNKNOWN_LEADER_EPOCH, -1, -1), (7, UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
    r = wire.call(epoch_request("ofle-missing", [(0, -1, 0)]), version)
    assert [(e.error_code, e.end_offset) for e in r.topics[0].partitions] == [(UNKNOWN_TOPIC_OR_PARTITION, -1)]


# ------------------------------------------------------------------------------------------------ FindCoordinator
@pytest.mark.parametrize("version", range(0, 4))
def test_find_coordinator_single_key(tenure_server, wire, version):
    r = wire.call(FindCoordinatorRequest(key="some-group", key_type=0), version)
    assert (r.error_code, r.node_id, r.host, r.port) == (NONE, 0, "127.0.0.1", tenure_server.port)
    if version >= 1:    # key types exist from v1: the one node is the transaction coordinator too
        r = wire.call(FindCoordinatorRequest(key="some-txn", key_type=1), version)
        assert (r.error_code, r.node_id, r.host, r.port) == (NONE, 0, "127.0.0.1", tenure_server.port)
        r = wire.call(FindCoordinatorRequest(key="some-share-group", key_type=2), version)    # Kafka: from v6
        assert (r.error_code, r.node_id) == (INVALID_REQUEST, -1)


@pytest.mark.parametrize("version", range(4, 7))
def test_find_coordinator_batched_keys(tenure_server, wire, version):
    keys = ["g-one", "g-two", "g-three"]
    r = wire.call(FindCoordinatorRequest(key_type=0, coordinator_keys=keys), version)
    assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in r.coordinators] == \
        [(k, NONE, 0, "127.0.0.1", tenure_server.port) for k in keys]
    r = wire.call(FindCoordinatorRequest(key_type=1, coordinator_keys=["t-one", "t-two"]), version)
    assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in r.coordinators] == \
        [(k, NONE, 0, "127.0.0.1", tenure_server.port) for k in ["t-one", "t-two"]]
    r = wire.call(FindCoordinatorRequest(key_type=0, coordinator_keys=[]), version)
    assert r.coordinators == []


# ------------------------------------------------------------------------------------------------ Fetch long poll
def test_fetch_waits_max_wait_ms_when_there_is_no_data(tenure_server, wire):
    tenure_server.call(lambda: tenure_server.server.topics.create("lp-empty", 1))
    t0 = time.monotonic()
    f = wire.call(fetch_request("lp-empty", 0, 0, max_wait_ms=1000, min_bytes=1), 12)
    elapsed = time.monotonic() - t0
    p = f.responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, p.records) == (NONE, 0, b"")
    assert elapsed >= 1.0, f"answered after {elapsed:.3f}s, before max_wait_ms"
    assert elapsed < 6.0
    # min_bytes=0 never waits, whatever max_wait_ms says
    t0 = time.monotonic()
    f = wire.call(fetch_request("lp-empty", 0, 0, max_wait_ms=30000, min_bytes=0), 12)
    assert time.monotonic() - t0 < 10 and f.responses[0].partitions[0].records == b""


def test_fetch_below_min_bytes_waits_max_wait_ms_then_returns_what_there_is(tenure_server, wire):
    tenure_server.call(lambda: tenure_server.server.topics.create("lp-some", 1))
    batch = build_batch([(b"k0", b"v0")])
    wire.call(produce_request("lp-some", 0, batch), 9)
    t0 = time.monotonic()
    f = wire.call(fetch_request("lp-some", 0, 0, max_wait_ms=800, min_bytes=len(batch) + 1), 12)
    elapsed = time.monotonic() - t0
    assert elapsed >= 0.8
    assert [(o, k, v) for o, _, k, v in decode_records(f.responses[0].partitions[0].records)] == [(0, b"k0", b"v0")]


def test_fetch_returns_as_soon_as_a_produce_reaches_min_bytes(tenure_server):
    tenure_server.call(lambda: tenure_server.server.topics.create("lp", 2))
    b1 = build_batch([(b"k1", b"v1")])
    b2 = build_batch([(b"k2", b"v2")])
    # waits on both partitions for more than one batch's worth of bytes, for up to a minute
    bg = BackgroundFetch(tenure_server, fetch_many("lp", [0, 1], max_wait_ms=60000, min_bytes=len(b1) + 1))
    wait_until(lambda: parked(tenure_server, "lp", 0) and parked(tenure_server, "lp", 1),
               what="the fetch to park on both partitions")
    with WireClient.to(tenure_server.bootstrap) as w:
        assert w.call(produce_request("lp", 1, b1), 9).responses[0].partition_responses[0].base_offset == 0
        # one batch is not min_bytes: the fetch woke, found too little, and parked again
        wait_until(lambda: parked(tenure_server, "lp", 1), what="the fetch to park again")
        assert bg.thread.is_alive() and bg.result is None
        assert w.call(produce_request("lp", 0, b2), 9).responses[0].partition_responses[0].base_offset == 0
    f = bg.join(30)
    assert bg.elapsed < 30, "the fetch waited for max_wait_ms although min_bytes was reached"
    got = {p.partition_index: (p.error_code, p.high_watermark,
                               [(o, k, v) for o, _, k, v in decode_records(p.records)])
           for p in f.responses[0].partitions}
    assert got == {0: (NONE, 1, [(0, b"k2", b"v2")]), 1: (NONE, 1, [(0, b"k1", b"v1")])}
    assert not parked(tenure_server, "lp", 0) and not parked(tenure_server, "lp", 1)


# ------------------------------------------------------------------------------------------------ topic ids
def test_topic_ids_in_metadata_and_create_topics(tenure_server, wire):
    C = CreateTopicsRequest
    r = wire.call(C(timeout_ms=10000, validate_only=False, topics=[
        C.CreatableTopic(name="ids", num_partitions=2, replication_factor=1, assignments=[], configs=[])]), 7)
    created_id = r.topics[0].topic_id
    assert created_id == server_topic(tenure_server, "ids").topic_id
    assert created_id not in (None, ZERO_UUID)
    for v in (10, 11, 12):
        md = wire.call(metadata_request("ids"), v)
        assert [(t.name, t.topic_id, t.error_code, len(t.partitions)) for t in md.topics] == [
            ("ids", created_id, NONE, 2)]
    # v12 looks topics up by id; an unknown id is UNKNOWN_TOPIC_ID
    missing = uuid.uuid4()
    M = MetadataRequest
    md = wire.call(M(allow_auto_topic_creation=True, topics=[M.MetadataRequestTopic(name=None, topic_id=created_id),
                                                             M.MetadataRequestTopic(name=None, topic_id=missing)]), 12)
    assert [(t.name, t.topic_id, t.error_code, len(t.partitions)) for t in md.topics] == [
        ("ids", created_id, NONE, 2), (None, missing, UNKNOWN_TOPIC_ID, 0)]
    # a topic that does not exist has the zero id
    md = wire.call(metadata_request("ids-missing", auto_create=False), 12)
    assert [(t.error_code, t.topic_id) for t in md.topics] == [(UNKNOWN_TOPIC_OR_PARTITION, None)]


@pytest.mark.parametrize("version", range(13, 17))
def test_fetch_by_topic_id(tenure_server, wire, version):
    tenure_server.call(lambda: tenure_server.server.topics.create("fid", 1))
    topic_id = server_topic(tenure_server, "fid").topic_id
    wire.call(produce_request("fid", 0, build_batch([(b"a", b"1"), (b"b", b"2")])), 9)
    f = wire.call(fetch_request("fid", 0, 0, topic_id=topic_id), version)
    (t,) = f.responses
    assert t.topic_id == topic_id
    p = t.partitions[0]
    assert (p.error_code, p.high_watermark) == (NONE, 2)
    assert [(o, k, v) for o, _, k, v in decode_records(p.records)] == [(0, b"a", b"1"), (1, b"b", b"2")]
    missing = uuid.uuid4()
    f = wire.call(fetch_request("fid", 0, 0, topic_id=missing), version)
    assert (f.responses[0].topic_id, f.responses[0].partitions[0].error_code) == (missing, UNKNOWN_TOPIC_ID)
    f = wire.call(fetch_request("fid", 3, 0, topic_id=topic_id), version)
    assert f.responses[0].partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_confluent_consumer_fetches_by_topic_id(tenure_server):
    """librdkafka negotiates Fetch v13+ and names the topic by its id; the records come back."""
    from tests.support.clients import confluent_round_trip

    seen = []
    handler = tenure_server.server.handlers[1]

    async def recording_fetch(req, ctx):
        seen.append((req.api_version, [(t.topic, t.topic_id) for t in req.body.topics]))
        return await handler(req, ctx)

    tenure_server.call(lambda: tenure_server.server.handlers.__setitem__(1, recording_fetch))
    produced, consumed = confluent_round_trip(tenure_server.bootstrap, "ck-ids", 2, n=10)
    assert sorted((p, o) for p, o, *_ in consumed) == sorted((p, o) for p, o, _ in produced)
    topic_id = server_topic(tenure_server, "ck-ids").topic_id
    assert seen and all(v >= 13 for v, _ in seen)
    assert {tid for _, topics in seen for _, tid in topics} == {topic_id}


# ------------------------------------------------------------------------------------------------ auto-creation
def test_metadata_auto_creates_with_the_default_partition_count():
    from kafka import KafkaProducer

    with ServerThread(ServerConfig(port=0, default_partitions=3)) as s, WireClient.to(s.bootstrap) as w:
        md = w.call(metadata_request("auto-a"), 12)
        (t,) = md.topics
        assert (t.name, t.error_code, [p.partition_index for p in t.partitions]) == ("auto-a", NONE, [0, 1, 2])
        assert t.topic_id == server_topic(s, "auto-a").topic_id
        md = w.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="auto-v1")]), 1)  # no flag
        assert [(t.name, t.error_code, len(t.partitions)) for t in md.topics] == [("auto-v1", NONE, 3)]
        # the client may say no; an illegal name is never created
        md = w.call(metadata_request("auto-no", "bad name!", auto_create=False), 12)
        assert [(t.name, t.error_code) for t in md.topics] == [("auto-no", UNKNOWN_TOPIC_OR_PARTITION),
                                                               ("bad name!", INVALID_TOPIC_EXCEPTION)]
        md = w.call(metadata_request("bad name!"), 12)
        assert [(t.name, t.error_code) for t in md.topics] == [("bad name!", INVALID_TOPIC_EXCEPTION)]
        assert server_topic(s, "auto-no") is None and server_topic(s, "bad name!") is None

        # real producers create a topic just by producing to it
        p = Producer({"bootstrap.servers": s.bootstrap})
        acked = []
        p.produce("auto-ck", key=b"k", value=b"v", partition=2, on_delivery=lambda e, m: acked.append((e, m.offset())))
        assert p.flush(15) == 0 and acked == [(None, 0)]
        assert len(server_topic(s, "auto-ck").partitions) == 3
        kp = KafkaProducer(bootstrap_servers=s.bootstrap)
        try:
            md_ = kp.send("auto-kp", key=b"k", value=b"v", partition=1).get(15)
            assert (md_.partition, md_.offset) == (1, 0)
            assert kp.partitions_for("auto-kp") == {0, 1, 2}
        finally:
            kp.close()
        # num.partitions as described to admin clients is the same count
        broker = ConfigResource(ResourceType.BROKER, "0")
        a = admin(s.bootstrap)
        cfg = a.describe_configs([broker])[broker].result(15)
        assert (cfg["num.partitions"].value, cfg["auto.create.topics.enable"].value) == ("3", "true")


def test_auto_creation_switched_off():
    with ServerThread(ServerConfig(port=0, default_partitions=3, auto_create_topics=False)) as s, \
            WireClient.to(s.bootstrap) as w:
        for v in (1, 4, 12):    # v1-3 have no flag (always "yes"), from v4 the client says yes
            md = w.call(metadata_request(f"off-{v}"), v)
            assert [(t.name, t.error_code, t.partitions) for t in md.topics] == [
                (f"off-{v}", UNKNOWN_TOPIC_OR_PARTITION, [])]
            assert server_topic(s, f"off-{v}") is None
        a = admin(s.bootstrap)
        md = a.list_topics("off-ck", timeout=15)
        assert md.topics["off-ck"].error.code() == UNKNOWN_TOPIC_OR_PARTITION
        assert server_topic(s, "off-ck") is None
        broker = ConfigResource(ResourceType.BROKER, "0")
        cfg = a.describe_configs([broker])[broker].result(15)
        assert (cfg["num.partitions"].value, cfg["auto.create.topics.enable"].value) == ("3", "false")
        # explicit creation still works, at the default count when none is given
        C = CreateTopicsRequest
        r = w.call(C(timeout_ms=10000, validate_only=False, topics=[
            C.CreatableTopic(name="off-made", num_partitions=-1, replication_factor=-1, assignments=[],
                             configs=[])]), 7)
        assert (r.topics[0].error_code, r.topics[0].num_partitions) == (NONE, 3)


@pytest.mark.parametrize("version", [0, 3, 5])
def test_init_producer_id_for_a_transactional_id_bumps_its_epoch(wire, version):
    from kafka.protocol.producer import InitProducerIdRequest
    fields = dict(transactional_id="some-txn", transaction_timeout_ms=60000)
    if version >= 3:
        fields.update(producer_id=-1, producer_epoch=-1)
    r = wire.call(InitProducerIdRequest(**fields), version)
    assert (r.error_code, r.producer_epoch) == (NONE, 0) and r.producer_id >= 0
    again = wire.call(InitProducerIdRequest(**fields), version)     # the same transactional id: the next epoch
    assert (again.error_code, again.producer_id, again.producer_epoch) == (NONE, r.producer_id, 1)
    r = wire.call(InitProducerIdRequest(**{**fields, "transactional_id": None}), version)
    assert r.error_code == NONE and r.producer_id >= 0
