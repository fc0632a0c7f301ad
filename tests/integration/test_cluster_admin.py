"""The admin APIs on a cluster of three brokers (docs/cluster.md, "Admin APIs"), through real admin clients
(Java Admin 4.3 via tests/java/AdminOps.java, confluent-kafka's AdminClient, kafka-python's KafkaAdminClient)
and over the raw wire where a client hides the answer: manual replica assignments placed in the cluster
table, reassignments that move replicas and leaders (ongoing while a target broker is stopped),
preferred/unclean leader elections, and DescribeConfigs answered by each broker for itself."""
from __future__ import annotations

import pytest
from confluent_kafka import ElectionType, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KCR
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeConfigsRequest

from tenure.server import ServerThread
from tests.support.java import run_java
from tests.support.wire import WireClient

pytestmark = pytest.mark.timeout(180)

NONE, INVALID_REQUEST, INVALID_REPLICA_ASSIGNMENT = 0, 42, 39
PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, ELECTION_NOT_NEEDED = 80, 83, 84
INVALID_ASSIGNMENT_EXC = "org.apache.kafka.common.errors.InvalidReplicaAssignmentException"


def admin(st: ServerThread) -> AdminClient:
    return AdminClient({"bootstrap.servers": st.bootstrap})


def java(st: ServerThread, *args) -> list[dict]:
    return run_java("AdminOps", st.bootstrap, *args, timeout=120)


def assigned(topic: str, replicas: list[list[int]]) -> NewTopic:
    return NewTopic(topic, len(replicas), replica_assignment=replicas)


def create_assigned(st: ServerThread, topic: str, replicas: list[list[int]]) -> AdminClient:
    """Create a topic with this manual assignment; the admin client (kept alive by the caller)."""
    a = admin(st)
    a.create_topics([assigned(topic, replicas)])[topic].result(15)
    return a


def kafka_error(future) -> tuple[int, str]:
    with pytest.raises(KafkaException) as info:
        future.result(15)
    err = info.value.args[0]
    return err.code(), err.str()


def table(st: ServerThread, topic: str, partition: int) -> tuple[list[int], list[int], int, int]:
    """(replicas, isr, leader, leader epoch) of a partition in the cluster table."""
    def get():
        s = st.server.cluster.state(topic, partition)
        return list(s.replicas), list(s.isr), s.leader, s.leader_epoch
    return st.call(get)


def seen_by_client(a: AdminClient, topic: str) -> dict[int, tuple[list[int], list[int], int]]:
    """What a client's Metadata shows: partition -> (replicas, isrs, leader)."""
    t = a.list_topics(topic, timeout=15).topics[topic]
    return {p.id: (list(p.replicas), list(p.isrs), p.leader) for p in t.partitions.values()}


# ------------------------------------------------------------------------------------ manual replica assignment
@pytest.mark.tenure(brokers=3)
def test_manual_assignment_is_placed_as_given_with_confluent_and_kafka_python(tenure_server):
    from kafka.admin import NewTopic as KNewTopic
    st = tenure_server
    a = create_assigned(st, "ma", [[2, 0], [1, 2], [0, 1]])
    assert [table(st, "ma", p)[:3] for p in range(3)] == [([2, 0], [2, 0], 2), ([1, 2], [1, 2], 1),
                                                          ([0, 1], [0, 1], 0)]
    assert seen_by_client(a, "ma") == {0: ([2, 0], [2, 0], 2), 1: ([1, 2], [1, 2], 1), 2: ([0, 1], [0, 1], 0)}
    # CreatePartitions with an assignment: placed so too, with as many replicas as the first partition
    a.create_partitions([NewPartitions("ma", 4, replica_assignment=[[1, 0]])])["ma"].result(15)
    assert table(st, "ma", 3)[:3] == ([1, 0], [1, 0], 1)
    assert kafka_error(a.create_partitions([NewPartitions("ma", 5, replica_assignment=[[1]])])["ma"]) == (
        INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes a partition with 1 replica(s), but "
        "this is not consistent with previous partitions, which have 2 replica(s).")
    assert kafka_error(a.create_topics([assigned("ma-bad", [[0, 7]])])["ma-bad"]) == (
        INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes broker 7, but no such broker is "
        "registered.")
    ka = KafkaAdminClient(bootstrap_servers=st.bootstrap)
    try:
        ka.create_topics([KNewTopic("ma-kp", replica_assignments={0: [1, 2, 0], 1: [2, 0, 1]})])
        assert [table(st, "ma-kp", p)[2] for p in range(2)] == [1, 2]
    finally:
        ka.close()
    # a stopped broker is still registered: it may be named, it is just not in sync (the first live one leads)
    st.stop_broker(2)
    a.create_topics([assigned("ma-down", [[2, 1]])])["ma-down"].result(15)
    assert table(st, "ma-down", 0)[:3] == ([2, 1], [1], 1)
    assert kafka_error(a.create_topics([assigned("ma-dead", [[2]])])["ma-dead"]) == (
        INVALID_REPLICA_ASSIGNMENT, "All brokers specified in the manual partition assignment for partition 0 are "
        "fenced or in controlled shutdown.")
    assert st.call(lambda: st.server.topics.get("ma-bad") or st.server.topics.get("ma-dead")) is None


@pytest.mark.tenure(brokers=3)
def test_manual_assignment_checks_with_java_admin(tenure_server):
    st = tenure_server
    out = java(st, "create-assigned", "mj", "1,2;2,0", "--", "create-assigned", "mj-unknown", "0,3", "--",
               "create-assigned", "mj-twice", "1,1", "--", "create-assigned", "mj-uneven", "0,1;2")
    assert out[0] == {"type": "create_assigned", "topic": "mj", "error": None}
    assert [table(st, "mj", p)[:3] for p in range(2)] == [([1, 2], [1, 2], 1), ([2, 0], [2, 0], 2)]
    assert [(o["exception"], o["message"]) for o in out[1:]] == [
        (INVALID_ASSIGNMENT_EXC, "The manual partition assignment includes broker 3, but no such broker is registered."),
        (INVALID_ASSIGNMENT_EXC, "The manual partition assignment includes the broker 1 more than once."),
        (INVALID_ASSIGNMENT_EXC, "The manual partition assignment includes a partition with 1 replica(s), but this "
                                 "is not consistent with previous partitions, which have 2 replica(s).")]


# ------------------------------------------------------------------------------------------------ reassignments
@pytest.mark.tenure(brokers=3)
def test_reassignment_moves_replicas_and_leader_and_waits_for_a_stopped_broker(tenure_server):
    from kafka.structs import TopicPartition as KTP
    st = tenure_server
    create_assigned(st, "rs", [[0, 1]])
    epoch0 = table(st, "rs", 0)[3]
    # all targets up: done at once; the old leader 0 is not in the target, so 2 (first in sync) leads
    out = java(st, "reassign", "rs", "0", "2,1")
    assert out == [{"type": "reassigned", "error": None}, {"type": "ongoing", "count": 0}]
    assert table(st, "rs", 0) == ([2, 1], [1, 2], 2, epoch0 + 1)      # the ISR keeps its order
    # a replica removed while the leader stays still bumps the epoch (Kafka fences the removed replica)
    java(st, "reassign", "rs", "0", "2")
    assert table(st, "rs", 0) == ([2], [2], 2, epoch0 + 2)
    # a target broker stopped: ongoing (target first, then the replicas being removed) until it starts
    st.stop_broker(0)
    out = java(st, "reassign", "rs", "0", "0,1")
    assert out == [{"type": "reassigned", "error": None}, {"type": "ongoing", "count": 1}]
    ka = KafkaAdminClient(bootstrap_servers=st.bootstrap)
    try:
        assert ka.list_partition_reassignments() == {
            KTP("rs", 0): {"replicas": [0, 1, 2], "adding_replicas": [0, 1], "removing_replicas": [2]}}
        assert table(st, "rs", 0)[2] == 2                          # the leader stays until it completes
        st.start_broker(0)
        assert ka.list_partition_reassignments() == {}
        assert table(st, "rs", 0)[:3] == ([0, 1], [1, 0], 0)      # leader 2 removed: the first target in sync
        # cancel: back to the replicas it started from
        st.stop_broker(2)
        ka.alter_partition_reassignments({KTP("rs", 0): [2, 0]})
        assert table(st, "rs", 0)[0] == [2, 0, 1]
        out = java(st, "reassign", "rs", "0", "cancel", "--", "reassign", "rs", "0", "cancel")
        assert out[:2] == [{"type": "reassigned", "error": None}, {"type": "ongoing", "count": 0}]
        assert out[2]["exception"] == "org.apache.kafka.common.errors.NoReassignmentInProgressException"
        assert table(st, "rs", 0)[:3] == ([0, 1], [1, 0], 0)
    finally:
        ka.close()


# ------------------------------------------------------------------------------------------------ elections
@pytest.mark.tenure(brokers=3)
def test_preferred_election_moves_leadership_back_after_start_broker(tenure_server):
    st = tenure_server
    a = create_assigned(st, "el", [[0, 1, 2], [1, 2, 0]])
    st.stop_broker(0)
    assert table(st, "el", 0)[2] == 1
    tp0, tp1 = TopicPartition("el", 0), TopicPartition("el", 1)
    result = a.elect_leaders(ElectionType.PREFERRED, [tp0, tp1]).result(15)
    assert (result[tp0].code(), result[tp1].code()) == (PREFERRED_LEADER_NOT_AVAILABLE, ELECTION_NOT_NEEDED)
    st.start_broker(0)
    epoch = table(st, "el", 0)[3]
    assert table(st, "el", 0)[2] == 1                              # start does not move it back by itself
    out = java(st, "elect", "PREFERRED", "el", "0", "--", "elect", "PREFERRED", "el", "0", "--",
               "elect", "UNCLEAN", "el", "0")
    assert out[0] == {"type": "elected", "error": None}
    assert out[1]["exception"] == out[2]["exception"] == "org.apache.kafka.common.errors.ElectionNotNeededException"
    assert table(st, "el", 0)[2:] == (0, epoch + 1)
    assert seen_by_client(a, "el")[0][2] == 0
    # kafka-python, all partitions: each topic listed with only the partitions an election was needed for
    st.stop_broker(1)
    st.start_broker(1)
    ka = KafkaAdminClient(bootstrap_servers=st.bootstrap)
    try:
        r = ka.elect_leaders(0, {"el": [0, 1]})
        assert [(x.topic, [(p.partition_id, p.error_code) for p in x.partition_result])
                for x in r.replica_election_results] == [("el", [(0, ELECTION_NOT_NEEDED), (1, NONE)])]
        assert table(st, "el", 1)[2] == 1
    finally:
        ka.close()


@pytest.mark.tenure(brokers=3)
def test_unclean_election_with_no_live_replica_and_over_the_wire(tenure_server):
    from kafka.protocol.admin import ElectLeadersRequest as E
    st = tenure_server
    create_assigned(st, "uc", [[2]])
    st.stop_broker(2)
    assert table(st, "uc", 0)[2] == -1
    b0 = st.brokers()[0]
    with WireClient(b0["host"], b0["port"]) as w:
        r = w.call(E(election_type=1, timeout_ms=1000, topic_partitions=[E.TopicPartitions(topic="uc",
                                                                                           partitions=[0])]), 2)
        (p,) = r.replica_election_results[0].partition_result
        assert (p.error_code, p.error_message) == (ELIGIBLE_LEADERS_NOT_AVAILABLE,
                                                   "Eligible topic partition leaders are not available.")
        st.start_broker(2)                          # a leaderless partition gets its broker back as leader
        r = w.call(E(election_type=1, timeout_ms=1000, topic_partitions=None), 2)
        assert all(x.partition_result == [] for x in r.replica_election_results)
    assert table(st, "uc", 0)[2] == 2


# ------------------------------------------------------------------------------------------------ broker configs
@pytest.mark.tenure(brokers=3, racks="ra,rb,rc")
def test_describe_configs_of_each_broker_answers_its_own(tenure_server):
    st = tenure_server
    brokers = st.brokers()
    keys = ["broker.id", "node.id", "broker.rack", "advertised.listeners", "listeners",
            "default.replication.factor"]
    out = java(st, "describe-configs", "broker", "1", *keys, "--", "describe-configs", "broker", "2", *keys)
    for broker, o in zip((1, 2), out):
        b = brokers[broker]
        got = {e["name"]: (e["value"], e["source"]) for e in o["entries"]}
        assert got == {"broker.id": (str(broker), "STATIC_BROKER_CONFIG"),
                       "node.id": (str(broker), "STATIC_BROKER_CONFIG"),
                       "broker.rack": (b["rack"], "STATIC_BROKER_CONFIG"),
                       "advertised.listeners": (f"PLAINTEXT://{b['host']}:{b['port']}", "STATIC_BROKER_CONFIG"),
                       "listeners": (f"PLAINTEXT://{b['host']}:{b['port']}", "STATIC_BROKER_CONFIG"),
                       "default.replication.factor": ("3", "STATIC_BROKER_CONFIG")}
    res = ConfigResource(ResourceType.BROKER, "0")
    a = admin(st)
    got = a.describe_configs([res])[res].result(15)
    assert (got["node.id"].value, got["broker.rack"].value) == ("0", "ra")
    # a per-broker dynamic config is kept for that broker only (confluent sends it to broker 2)
    alter = ConfigResource(ResourceType.BROKER, "2", incremental_configs=[
        ConfigEntry("log.retention.ms", "1234", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([alter])[alter].result(15)
    ka = KafkaAdminClient(bootstrap_servers=st.bootstrap)
    try:
        got = ka.describe_configs([KCR("BROKER", n, {"log.retention.ms": None, "node.id": None}) for n in ("1", "2")],
                                  config_filter="all")["broker"]
    finally:
        ka.close()
    assert {n: {k: (v["value"], v["config_source"]) for k, v in got[n].items()} for n in ("1", "2")} == {
        "1": {"node.id": ("1", "STATIC_BROKER_CONFIG"), "log.retention.ms": (None, "DEFAULT_CONFIG")},
        "2": {"node.id": ("2", "STATIC_BROKER_CONFIG"), "log.retention.ms": ("1234", "DYNAMIC_BROKER_CONFIG")}}
    # a broker asked about another broker's id answers as Kafka's ConfigHelper
    with WireClient(brokers[1]["host"], brokers[1]["port"]) as w:
        R = DescribeConfigsRequest
        r = w.call(R(resources=[R.DescribeConfigsResource(resource_type=4, resource_name=n, configuration_keys=None)
                                for n in ("2", "9", "1")], include_synonyms=False, include_documentation=False), 4)
        assert [(x.error_code, x.error_message) for x in r.results[:2]] == [
            (INVALID_REQUEST, "Unexpected broker id, expected 1 or empty string, but received 2"),
            (INVALID_REQUEST, "Unexpected broker id, expected 1 or empty string, but received 9")]
        assert {c.name: c.value for c in r.results[2].configs}["broker.id"] == "1"


# ------------------------------------------------------------------------------------------------ restarts
def test_replication_factor_assignment_and_reassignment_are_kept_across_a_restart(tmp_path):
    from kafka.structs import TopicPartition as KTP
    cfg = dict(brokers=3, port=0, data_dir=str(tmp_path))
    with ServerThread(**cfg) as st:
        a = admin(st)
        futures = a.create_topics([NewTopic("rf1", 2, replication_factor=1), assigned("man", [[2, 1], [1, 0]])])
        for f in futures.values():
            f.result(15)
        ka = KafkaAdminClient(bootstrap_servers=st.bootstrap)
        try:
            ka.alter_partition_reassignments({KTP("man", 1): [0, 2]})
        finally:
            ka.close()
        before = {(t, p): table(st, t, p)[:3] for t, p in (("rf1", 0), ("rf1", 1), ("man", 0), ("man", 1))}
        assert [len(before["rf1", p][0]) for p in (0, 1)] == [1, 1]
        assert (before["man", 0][0], before["man", 1][0]) == ([2, 1], [0, 2])
    with ServerThread(**cfg) as st:
        after = {(t, p): table(st, t, p)[:3] for t, p in before}
        assert after == before
        a = admin(st)
        a.create_partitions([NewPartitions("rf1", 3)])["rf1"].result(15)
        assert len(table(st, "rf1", 2)[0]) == 1                  # new partitions: the factor asked at creation
        assert seen_by_client(a, "man") == {0: ([2, 1], [2, 1], 2), 1: ([0, 2], [0, 2], 0)}


# ---------------------------------------------------------------------------- Kafka's leader epoch cache
@pytest.mark.tenure(brokers=3)
def test_offsets_for_leader_epoch_drops_epochs_in_which_nothing_was_written(tenure_server):
    """As Kafka's LeaderEpochFileCache.assign: a new epoch starting at the same offset as the previous one
    replaces it (nothing was written in that epoch), so asking for it answers the epoch before it."""
    from kafka.protocol.consumer import OffsetForLeaderEpochRequest as O

    from tests.support.wire import build_batch, produce_request
    st = tenure_server
    st.create_topics({"ec": 1})
    b = st.brokers()[st.leader_of("ec", 0)]
    with WireClient(b["host"], b["port"]) as w:
        r = w.call(produce_request("ec", 0, build_batch([(b"k", b"v")] * 5)), 9)
        assert r.responses[0].partition_responses[0].error_code == NONE
    for _ in range(2):                                      # epochs 1 and 2 start at offset 5, nothing in 1
        st.move_leader("ec", 0, (st.leader_of("ec", 0) + 1) % 3)
    b = st.brokers()[st.leader_of("ec", 0)]
    with WireClient(b["host"], b["port"]) as w:
        T = O.OffsetForLeaderTopic
        r = w.call(O(replica_id=-1, topics=[T(topic="ec", partitions=[
            T.OffsetForLeaderPartition(partition=0, current_leader_epoch=2, leader_epoch=e) for e in (0, 1, 2)])]), 4)
    assert [(p.error_code, p.leader_epoch, p.end_offset) for p in r.topics[0].partitions] == [
        (NONE, 0, 5), (NONE, 0, 5), (NONE, 2, 5)]


@pytest.mark.tenure(brokers=3)
def test_a_follower_serves_a_consumers_fetch_from_version_11_as_kafka(tenure_server):
    """Kafka's FetchParams.fetchOnlyLeader: a consumer's Fetch v11+ carries client metadata (KIP-392), so a
    follower serves it; older versions, and ListOffsets, must go to the leader."""
    from kafka.protocol.consumer.fetch import FetchRequest

    from tests.support.wire import build_batch, produce_request
    st = tenure_server
    st.create_topics({"ff": 1})
    leader = st.leader_of("ff", 0)
    follower = next(r for r in table(st, "ff", 0)[0] if r != leader)
    topic_id = st.call(lambda: st.server.topics.get("ff").topic_id)
    b = st.brokers()[leader]
    with WireClient(b["host"], b["port"]) as w:
        assert w.call(produce_request("ff", 0, build_batch([(b"k", b"v")] * 3)), 9) \
            .responses[0].partition_responses[0].error_code == NONE

    def fetch(w: WireClient, version: int):
        T = FetchRequest.FetchTopic
        r = w.call(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                                session_id=0, session_epoch=-1, topics=[T(
                                    topic_id=topic_id, topic="ff", partitions=[T.FetchPartition(
                                        partition=0, current_leader_epoch=0, fetch_offset=0, last_fetched_epoch=-1,
                                        log_start_offset=-1, partition_max_bytes=1 << 20)])],
                                forgotten_topics_data=[], rack_id=""), version)
        return r.responses[0].partitions[0]
    f = st.brokers()[follower]
    with WireClient(f["host"], f["port"]) as w:
        old, new = fetch(w, 10), fetch(w, 13)
    assert old.error_code == 6                                  # NOT_LEADER_OR_FOLLOWER
    assert (new.error_code, new.high_watermark, new.preferred_read_replica) == (NONE, 3, -1) and new.records


@pytest.mark.tenure(brokers=3)
def test_preferred_election_brings_a_group_coordinator_back_after_start_broker(tenure_server):
    import time

    from tenure.protocol.internal_topics import OFFSETS_TOPIC
    from tests.support.groupwire import join
    st = tenure_server
    group = "g-back"
    part = st.call(lambda: st.server.runtime.partition_of(group))
    preferred = table(st, OFFSETS_TOPIC, part)[0][0]
    assert st.coordinator_of(group) == preferred
    st.stop_broker(preferred)
    st.start_broker(preferred)
    assert st.coordinator_of(group) != preferred
    a = admin(st)
    tp = TopicPartition(OFFSETS_TOPIC, part)
    assert a.elect_leaders(ElectionType.PREFERRED, [tp]).result(15)[tp] is None
    assert st.coordinator_of(group) == preferred
    b = st.brokers()[preferred]
    with WireClient(b["host"], b["port"]) as w:
        for _ in range(100):                        # COORDINATOR_LOAD_IN_PROGRESS (14) while it loads
            j = join(w, group, "", "i-1", "t", session_ms=30000)
            if j.error_code != 14:
                break
            time.sleep(0.1)
        assert j.error_code == NONE


@pytest.mark.tenure(brokers=3)
def test_describe_producers_is_answered_by_any_replica_as_kafka(tenure_server):
    """Kafka's Partition.activeProducerState answers from the local log, which every replica has (leader or
    follower); a broker without a replica answers NOT_LEADER_OR_FOLLOWER."""
    from kafka.protocol.admin import DescribeProducersRequest as D
    st = tenure_server
    create_assigned(st, "dp", [[0, 1]])

    def ask(broker: int):
        b = st.brokers()[broker]
        with WireClient(b["host"], b["port"]) as w:
            r = w.call(D(topics=[D.TopicRequest(name="dp", partition_indexes=[0])]), 0)
        return r.topics[0].partitions[0].error_code
    assert [ask(b) for b in (0, 1, 2)] == [NONE, NONE, 6]
