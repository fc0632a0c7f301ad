"""Cluster mode on the wire (docs/cluster.md): several brokers in one process, with the project's codec and
kafka-python. Metadata and DescribeCluster show the brokers and racks; FindCoordinator answers the leader of
the group's offsets partition; the wrong broker answers NOT_COORDINATOR / NOT_LEADER_OR_FOLLOWER; leader
epochs fence stale clients; a moved coordinator answers 14 while it loads, then serves the same static map;
a parked JoinGroup is answered 16 when its coordinator unloads; each move is a record in the log."""
from __future__ import annotations

import threading

import pytest
from kafka.protocol.admin.cluster import DescribeClusterRequest
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.group import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

import tenure.coordinator.runtime as runtime_module
from tenure.coordinator import partition_for
from tenure.protocol import records as rec
from tenure.protocol.internal_topics import OFFSETS_TOPIC
from tenure.server import ServerThread
from tests.support.groupwire import commit, join, sync
from tests.support.wire import WireClient, build_batch, produce_request

pytestmark = pytest.mark.timeout(120)


def client(st: ServerThread, broker: int) -> WireClient:
    b = st.brokers()[broker]
    return WireClient(b["host"], b["port"])


def find(c: WireClient, group: str) -> int:
    r = c.call(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
    assert r.coordinators[0].error_code == 0
    return r.coordinators[0].node_id


def groups_on_distinct_coordinators(st: ServerThread, n: int) -> list[str]:
    out, leaders = [], set()
    for i in range(500):
        g = f"g{i}"
        if st.coordinator_of(g) not in leaders:
            leaders.add(st.coordinator_of(g))
            out.append(g)
            if len(out) == n:
                return out
    raise AssertionError("no such groups")


def test_metadata_and_describe_cluster_show_every_broker_with_its_rack():
    with ServerThread(brokers=3, racks="r1,r2,r3") as st:
        assert len(st.bootstrap.split(",")) == 3
        with client(st, 1) as c:
            m = c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t", topic_id=None)],
                                       allow_auto_topic_creation=True), 12)
            assert [(b.node_id, b.port, b.rack) for b in m.brokers] == [
                (b["id"], b["port"], b["rack"]) for b in st.brokers()]
            (p,) = m.topics[0].partitions
            assert p.leader_id == st.leader_of("t", 0) and sorted(p.replica_nodes) == [0, 1, 2]
            assert p.isr_nodes == p.replica_nodes and p.leader_epoch == 0
            d = c.call(DescribeClusterRequest(include_cluster_authorized_operations=False), 0)
            assert [(b.broker_id, b.rack) for b in d.brokers] == [(0, "r1"), (1, "r2"), (2, "r3")]
        st.stop_broker(2)
        with client(st, 0) as c:
            m = c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t", topic_id=None)],
                                       allow_auto_topic_creation=True), 12)
            assert [b.node_id for b in m.brokers] == [0, 1]
            (p,) = m.topics[0].partitions
            assert p.offline_replicas == [2] and 2 not in p.isr_nodes and p.leader_id != 2


def test_find_coordinator_answers_the_leader_of_each_groups_partition_and_others_answer_16():
    with ServerThread(brokers=3) as st:
        groups = groups_on_distinct_coordinators(st, 3)
        with client(st, 0) as c:
            assert [find(c, g) for g in groups] == [st.coordinator_of(g) for g in groups]
            assert len({find(c, g) for g in groups}) == 3
        g = groups[0]
        home = st.coordinator_of(g)
        other = (home + 1) % 3
        with client(st, other) as c:
            assert join(c, g, "", "i-1", "t", session_ms=30000).error_code == 16     # NOT_COORDINATOR
            r = c.call(OffsetFetchRequest(version=8, groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
                version=8, group_id=g, topics=None)], require_stable=False), 8)
            assert r.groups[0].error_code == 16
        with client(st, home) as c:
            assert join(c, g, "", "i-1", "t", session_ms=30000).error_code == 0


def produce(c: WireClient, topic: str, partition: int):
    r = c.call(produce_request(topic, partition, build_batch([(b"k", b"v")])), 9)
    return r.responses[0].partition_responses[0]


def fetch(c: WireClient, topic_id, partition: int, epoch: int):
    T = FetchRequest.FetchTopic
    r = c.call(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                            session_id=0, session_epoch=-1, topics=[T(topic_id=topic_id, partitions=[
                                T.FetchPartition(partition=partition, current_leader_epoch=epoch, fetch_offset=0,
                                                 last_fetched_epoch=-1, log_start_offset=-1,
                                                 partition_max_bytes=1 << 20)])],
                            forgotten_topics_data=[], rack_id=""), 13)
    return r.responses[0].partitions[0]


def test_only_the_leader_serves_a_partition_and_a_stale_leader_epoch_is_fenced():
    with ServerThread(brokers=3) as st:
        st.create_topics({"t": 1})
        leader = st.leader_of("t", 0)
        follower = (leader + 1) % 3
        with client(st, follower) as c:
            assert produce(c, "t", 0).error_code == 6                # NOT_LEADER_OR_FOLLOWER
        topic_id = st.call(lambda: st.server.topics.get("t").topic_id)
        with client(st, leader) as c:
            assert produce(c, "t", 0).error_code == 0
            assert fetch(c, topic_id, 0, 0).error_code == 0
            assert fetch(c, topic_id, 0, 1).error_code == 75         # UNKNOWN_LEADER_EPOCH: newer than ours
        st.move_leader("t", 0, follower)
        with client(st, follower) as c:
            assert fetch(c, topic_id, 0, 0).error_code == 74         # FENCED_LEADER_EPOCH: the client's is old
            ok = fetch(c, topic_id, 0, 1)
            assert ok.error_code == 0 and ok.high_watermark == 1
            assert produce(c, "t", 0).error_code == 0
        with client(st, leader) as c:
            # right epoch, now a follower: Kafka serves a consumer's Fetch v11+ there (KIP-392), not Produce
            assert fetch(c, topic_id, 0, 1).error_code == 0
            assert produce(c, "t", 0).error_code == 6


def stable_static_member(st: ServerThread, c: WireClient, group: str) -> tuple[str, int]:
    j = join(c, group, "", "i-1", "t", session_ms=30000)
    assert j.error_code == 0, j
    assert sync(c, group, j.member_id, j.generation_id, "i-1", {j.member_id: b""}).error_code == 0
    assert commit(c, group, j.member_id, j.generation_id, "i-1", "t", {0: 7}) == {0: 0}
    return j.member_id, j.generation_id


def test_a_moved_coordinator_answers_14_while_it_loads_then_serves_the_same_static_map(monkeypatch):
    with ServerThread(brokers=3, initial_rebalance_delay_ms=0) as st:
        st.create_topics({"t": 1})
        g = "moving"
        home = st.coordinator_of(g)
        to = (home + 1) % 3
        with client(st, home) as c:
            member, generation = stable_static_member(st, c, g)
        release, entered = threading.Event(), threading.Event()
        load = runtime_module.replay_partition

        def held_load(*args):                     # the load (on a worker thread) waits for the test
            entered.set()
            release.wait(30)
            return load(*args)
        monkeypatch.setattr(runtime_module, "replay_partition", held_load)
        mover = threading.Thread(target=lambda: st.move_coordinator(g, to))
        mover.start()
        assert entered.wait(30)
        with client(st, to) as c:
            assert join(c, g, member, "i-1", "t", session_ms=30000).error_code == 14   # COORDINATOR_LOAD_IN_PROGRESS
        with client(st, home) as c:
            assert join(c, g, member, "i-1", "t", session_ms=30000).error_code == 16   # not its coordinator now
        release.set()
        mover.join(30)
        assert st.coordinator_of(g) == to
        view = st.group(g)
        assert view.state == "Stable" and view.generation == generation
        assert view.static_members == {"i-1": member}
        with client(st, to) as c:
            assert find(c, g) == to
            assert commit(c, g, member, generation, "i-1", "t", {0: 9}) == {0: 0}
        part = partition_for(g, 8)
        loads = [r for r in st.call(lambda: decoded(st, part)) if isinstance(r, rec.CoordinatorLoadRecord)]
        assert [(r.offsets_partition, r.broker, r.previous_broker, r.cause, r.leader_epoch) for r in loads] == [
            (part, to, home, "moved", 1)]


def decoded(st: ServerThread, part: int) -> list:
    from kafka.record.default_records import DefaultRecordBatch
    plog = st.server.topics.get(OFFSETS_TOPIC).partitions[part]
    return [rec.decode(r.key, r.value) for _, raw in plog.batches(0) for r in DefaultRecordBatch(raw)]


def test_a_parked_join_group_is_answered_16_when_its_coordinator_unloads():
    with ServerThread(brokers=3, initial_rebalance_delay_ms=20000) as st:
        g = "parked"
        home = st.coordinator_of(g)
        to = (home + 1) % 3
        answer = {}
        with client(st, home) as c:
            def joiner():                         # parks in the initial rebalance delay
                answer["join"] = join(c, g, "", "i-1", "t", session_ms=30000)
            t = threading.Thread(target=joiner)
            t.start()
            st.wait_for_group(g, state="PreparingRebalance", members=None)
            st.move_coordinator(g, to)            # the old coordinator unloads: the parked JoinGroup is answered
            t.join(30)
        assert answer["join"].error_code == 16    # NOT_COORDINATOR: the client looks the coordinator up again
        with client(st, to) as c:
            assert find(c, g) == to
            assert join(c, g, "", "i-1", "t", session_ms=30000, version=4).error_code == 79   # MEMBER_ID_REQUIRED


def test_stopping_a_broker_closes_its_connections_and_its_port():
    with ServerThread(brokers=2) as st:
        c = client(st, 1)
        st.stop_broker(1)
        assert c.is_closed_by_peer()
        c.close()
        with pytest.raises(OSError):
            client(st, 1)
        assert [b["up"] for b in st.brokers()] == [True, False]
        st.start_broker(1)
        with client(st, 1) as c:
            assert find(c, "any") in (0, 1)


def test_kafka_python_sees_the_brokers_and_survives_a_leader_and_coordinator_move():
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    with ServerThread(brokers=3, racks="a,b,c") as st:
        admin = KafkaAdminClient(bootstrap_servers=st.bootstrap)
        cluster = admin.describe_cluster()
        assert sorted((b.get("node_id", b.get("broker_id")), b["rack"]) for b in cluster["brokers"]) == [
            (0, "a"), (1, "b"), (2, "c")]
        admin.close()
        producer = KafkaProducer(bootstrap_servers=st.bootstrap, acks="all", enable_idempotence=True)
        for i in range(5):
            producer.send("kp", b"a%d" % i).get(30)
        st.move_leader("kp", 0, (st.leader_of("kp", 0) + 1) % 3)
        for i in range(5):
            producer.send("kp", b"b%d" % i).get(30)
        producer.close()
        consumer = KafkaConsumer("kp", bootstrap_servers=st.bootstrap, group_id="kpg", group_instance_id="k-1",
                                 auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=10000)
        got = [m.value for m in consumer]
        assert got == [b"a%d" % i for i in range(5)] + [b"b%d" % i for i in range(5)]
        consumer.commit()
        st.move_coordinator("kpg", (st.coordinator_of("kpg") + 1) % 3)
        consumer.commit({TopicPartition("kp", 0): __import__("kafka").OffsetAndMetadata(10, "", -1)})
        assert consumer.committed(TopicPartition("kp", 0)) == 10
        consumer.close()


def test_create_topics_takes_a_replication_factor_up_to_the_brokers():
    from kafka.protocol.admin import CreateTopicsRequest as C
    T = C.CreatableTopic
    with ServerThread(brokers=3) as st, client(st, 0) as c:
        r = c.call(C(topics=[T(name=n, num_partitions=2, replication_factor=f, assignments=[], configs=[])
                             for n, f in (("two", 2), ("four", 4), ("dflt", -1))],
                     timeout_ms=10000, validate_only=False), 5)
        assert [(t.name, t.error_code, t.replication_factor) for t in r.topics] == [
            ("two", 0, 2), ("four", 38, -1), ("dflt", 0, 3)]            # 38: INVALID_REPLICATION_FACTOR
        assert [len(st.call(lambda p=p: st.server.cluster.state("two", p).replicas)) for p in (0, 1)] == [2, 2]


def test_a_restart_on_the_data_dir_goes_on_from_the_leader_epochs_its_clients_saw(tmp_path):
    from kafka.protocol.consumer import OffsetForLeaderEpochRequest as O
    with ServerThread(brokers=3, data_dir=str(tmp_path)) as st:
        st.create_topics({"t": 1})
        for n in range(3):                                  # epochs 0, 1, 2, one record each
            with client(st, st.leader_of("t", 0)) as c:
                assert produce(c, "t", 0).error_code == 0
            if n < 2:
                st.move_leader("t", 0, (st.leader_of("t", 0) + 1) % 3)
        st.restart()
        leader = st.leader_of("t", 0)
        assert st.call(lambda: st.server.cluster.state("t", 0).leader_epoch) == 2
        with client(st, leader) as c:
            T = O.OffsetForLeaderTopic
            r = c.call(O(replica_id=-1, topics=[T(topic="t", partitions=[
                T.OffsetForLeaderPartition(partition=0, current_leader_epoch=2, leader_epoch=e) for e in (1, 2)])]), 4)
            # epoch 1 (before the restart): its end is not before anything a client read; epoch 2: the log end
            assert [(p.error_code, p.leader_epoch, p.end_offset) for p in r.topics[0].partitions] == [
                (0, 1, 3), (0, 2, 3)]


@pytest.mark.tenure(brokers=3, racks="a,b,c")
def test_the_pytest_marker_makes_a_cluster(tenure_server):
    assert [(b["id"], b["rack"], b["up"]) for b in tenure_server.brokers()] == [
        (0, "a", True), (1, "b", True), (2, "c", True)]
    assert tenure_server.bootstrap == ",".join(f"{b['host']}:{b['port']}" for b in tenure_server.brokers())


def test_the_controls_over_http_and_the_command_line(capsys):
    import json

    from tenure.tools.cli import main
    with ServerThread(brokers=3, admin_port=0) as st:
        admin = ["--admin", st.server.admin_address]
        assert main(["broker", "stop", "1", *admin]) == 0
        assert json.loads(capsys.readouterr().out)["up"] is False and not st.brokers()[1]["up"]
        assert main(["broker", "stop", "9", *admin]) == 1
        assert "no broker 9" in capsys.readouterr().err
        assert main(["broker", "start", "1", *admin]) == 0
        capsys.readouterr()
        to = (st.coordinator_of("hg") + 1) % 3
        assert main(["coordinator", "move", "hg", "--to", str(to), *admin]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out == {"group": "hg", "partition": partition_for("hg", 8), "broker": to} and st.coordinator_of("hg") == to
        assert main(["coordinator", "move", "hg", *admin]) == 1          # no --to: the endpoint asks for one
        assert "broker: required" in capsys.readouterr().err
        st.set_broker_unreachable(2, True)
        with pytest.raises(OSError):
            with client(st, 2) as c:
                find(c, "hg")
        st.set_broker_unreachable(2, False)
        st.set_broker_slow(2, 300)
        import time
        with client(st, 2) as c:
            t0 = time.monotonic()
            find(c, "hg")
            assert time.monotonic() - t0 >= 0.3
        assert main(["broker", "list", *admin]) == 0
        assert [b["slow_ms"] for b in json.loads(capsys.readouterr().out)] == [0, 0, 300]


def test_an_acks_0_produce_a_broker_refuses_closes_the_connection():
    """Kafka answers nothing to acks=0 and closes the connection when a partition was refused, so the
    producer refreshes its metadata instead of sending on to a broker that drops its records."""
    from tests.support.wire import request_bytes
    with ServerThread(brokers=2) as st:
        st.create_topics({"t": 1})
        follower = 1 - st.leader_of("t", 0)
        with client(st, follower) as c:
            c.send_raw(request_bytes(produce_request("t", 0, build_batch([(b"k", b"v")]), acks=0), 9, 7))
            assert c.is_closed_by_peer()
        with client(st, 1 - follower) as c:
            c.send_raw(request_bytes(produce_request("t", 0, build_batch([(b"k", b"v")]), acks=0), 9, 7))
            assert find(c, "any") in (0, 1)                 # still open: the leader took it
        assert st.call(lambda: st.server.topics.partition("t", 0).log_end_offset) == 1


def test_a_transaction_goes_on_across_a_move_of_its_coordinator():
    """The transaction coordinator moves as the group one: its shard unloads (its timeouts cancelled), the
    new leader of __transaction_state loads it through replay, and an open transaction commits there."""
    from kafka import KafkaConsumer, KafkaProducer
    with ServerThread(brokers=3) as st:
        st.create_topics({"tx": 1})
        producer = KafkaProducer(bootstrap_servers=st.bootstrap, transactional_id="tx-1")
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("tx", b"one").get(30)
        from tenure.protocol.txn_records import COMPLETE_COMMIT, ONGOING
        home = st.leader_of("__transaction_state", 0)
        before = st.call(lambda: st.server.broker.txn_side.loaded)   # the shard Produce's checks ask
        st.move_leader("__transaction_state", 0, (home + 1) % 3)
        loaded = st.call(lambda: st.server.broker.txn_side.loaded)
        assert loaded is not before and loaded is st.call(lambda: st.server.txn_runtime.shards[0])
        assert loaded.transactions["tx-1"].state == ONGOING                  # read back from the log
        producer.send("tx", b"two").get(30)
        producer.commit_transaction()
        producer.close()
        consumer = KafkaConsumer("tx", bootstrap_servers=st.bootstrap, isolation_level="read_committed",
                                 auto_offset_reset="earliest", consumer_timeout_ms=8000)
        assert [m.value for m in consumer] == [b"one", b"two"]
        consumer.close()
        assert st.call(lambda: st.server.txn_runtime.shards[0].transactions["tx-1"].state) == COMPLETE_COMMIT
