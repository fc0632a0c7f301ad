"""The share coordinator's APIs - InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
DeleteShareGroupState, ReadShareGroupStateSummary - answered as a Kafka 4.3 broker answers them: by the leader of
the key's __share_group_state partition (NOT_COORDINATOR elsewhere), through the same share coordinator the
broker's own share partitions persist through. Spoken by kafka-clients 4.3's own request and response classes
(tests/java/ShareStateRpc.java) and over a socket with kafka-python's codec and this package's schemas; a state
written through them is what a confluent-kafka ShareConsumer then starts from; CLUSTER_ACTION is needed."""
from __future__ import annotations

import uuid

import pytest

from tenure.config import ServerConfig
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.internal_topics import SHARE_STATE_TOPIC, kafka_uuid, partition_for, share_coordinator_key
from tenure.protocol.share_group import (
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)
from tenure.server import ServerThread
from tests.integration.test_share_groups import ACCEPT, Sharer, done, produce, wait_for
from tests.support.java import run_java
from tests.support.wire import WireClient

pytestmark = pytest.mark.timeout(120)

AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


def _read(group: str, tid: uuid.UUID, partition: int, leader_epoch: int = -1):
    T = ReadShareGroupStateRequest.ReadStateData
    return ReadShareGroupStateRequest(group_id=group, topics=[T(topic_id=tid, partitions=[
        T.PartitionData(partition=partition, leader_epoch=leader_epoch)])])


def _write(group: str, tid: uuid.UUID, partition: int, state_epoch: int, leader_epoch: int, start: int, batches):
    T = WriteShareGroupStateRequest.WriteStateData
    P = T.PartitionData
    return WriteShareGroupStateRequest(group_id=group, topics=[T(topic_id=tid, partitions=[P(
        partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start,
        delivery_complete_count=0, state_batches=[P.StateBatch(first_offset=f, last_offset=last, delivery_state=s,
                                                               delivery_count=n) for f, last, s, n in batches])])])


def _init(group: str, tid: uuid.UUID, partition: int, state_epoch: int, start: int):
    T = InitializeShareGroupStateRequest.InitializeStateData
    return InitializeShareGroupStateRequest(group_id=group, topics=[T(topic_id=tid, partitions=[
        T.PartitionData(partition=partition, state_epoch=state_epoch, start_offset=start)])])


def _delete(group: str, tid: uuid.UUID, partition: int):
    T = DeleteShareGroupStateRequest.DeleteStateData
    return DeleteShareGroupStateRequest(group_id=group, topics=[T(topic_id=tid, partitions=[
        T.PartitionData(partition=partition)])])


def _summary(group: str, tid: uuid.UUID, partition: int, leader_epoch: int = -1):
    T = ReadShareGroupStateSummaryRequest.ReadStateSummaryData
    return ReadShareGroupStateSummaryRequest(group_id=group, topics=[T(topic_id=tid, partitions=[
        T.PartitionData(partition=partition, leader_epoch=leader_epoch)])])


def _part(resp):
    return resp.results[0].partitions[0]


def test_kafka_clients_own_request_classes_drive_the_share_coordinator_on_its_leader():
    """Three brokers: kafka-clients 4.3's request classes, sent to the leader of the key's partition,
    initialize, write (v1), read, summarize (v1) and delete a share partition's state; stale epochs are fenced;
    the same request on another broker is NOT_COORDINATOR."""
    with ServerThread(ServerConfig(port=0, brokers=3)) as st:
        st.create_topics({"rpc": 1})
        tid = st.call(lambda: st.server.topics.get("rpc").topic_id)
        key = share_coordinator_key("rpc-g", tid, 0)
        leader = st.call(lambda: st.server.parts.share_state.start() and
                         st.server.cluster.leader_of(SHARE_STATE_TOPIC, partition_for(key, 50)))
        addrs = st.bootstrap.split(",")
        t = kafka_uuid(tid)
        lines = run_java("ShareStateRpc", addrs[leader],
                         f"init:rpc-g:{t}:0:1:2",
                         f"write:rpc-g:{t}:0:1:3:2:2-3-0-2,4-4-2-1",
                         f"read:rpc-g:{t}:0:3",
                         f"summary:rpc-g:{t}:0:3",
                         f"write:rpc-g:{t}:0:0:3:2:",                 # an older state epoch
                         f"read:rpc-g:{t}:0:1",                       # an older leader epoch
                         f"delete:rpc-g:{t}:0",
                         f"read:rpc-g:{t}:0:3")
        parts = [ln["data"]["results"][0]["partitions"][0] for ln in lines]
        assert [ln["step"] for ln in lines] == ["init", "write", "read", "summary", "write", "read", "delete", "read"]
        assert [p["errorCode"] for p in parts] == [0, 0, 0, 0, E.FENCED_STATE_EPOCH, E.FENCED_LEADER_EPOCH, 0, 0]
        read = parts[2]
        assert (read["stateEpoch"], read["startOffset"]) == (1, 2)
        assert [(b["firstOffset"], b["lastOffset"], b["deliveryState"], b["deliveryCount"])
                for b in read["stateBatches"]] == [(2, 3, AVAILABLE, 2), (4, 4, ACKNOWLEDGED, 1)]
        summary = parts[3]
        assert (summary["stateEpoch"], summary["leaderEpoch"], summary["startOffset"],
                summary["deliveryCompleteCount"]) == (1, 3, 2, 1)
        assert (parts[7]["startOffset"], parts[7]["stateBatches"]) == (-1, [])      # deleted: no state
        other = addrs[(leader + 1) % 3]
        lines = run_java("ShareStateRpc", other, f"read:rpc-g:{t}:0:3", f"init:rpc-g:{t}:0:1:0")
        assert [ln["data"]["results"][0]["partitions"][0]["errorCode"] for ln in lines] == [E.NOT_COORDINATOR] * 2


def test_state_written_over_the_wire_is_where_a_share_consumer_starts_and_bad_requests_get_kafkas_errors():
    """Over a socket (kafka-python's codec): WriteShareGroupState gives a share partition its start offset (3)
    and a record already acknowledged (4); a confluent-kafka ShareConsumer of that group then gets 3 and 5 only,
    and the share coordinator reads back what its own broker wrote. Bad keys: an unknown topic
    UNKNOWN_TOPIC_OR_PARTITION, a negative partition INVALID_REQUEST, an empty group INVALID_GROUP_ID - and the
    connection serves on."""
    with ServerThread(ServerConfig(port=0, share_heartbeat_interval_ms=200, initial_rebalance_delay_ms=0)) as st:
        st.create_topics({"wired": 1})
        produce(st, "wired", range(6))
        tid = st.call(lambda: st.server.topics.get("wired").topic_id)
        with WireClient.to(st.bootstrap) as w:
            assert _part(w.call(_init("wired-g", tid, 0, 0, 3), 0)).error_code == 0
            assert _part(w.call(_write("wired-g", tid, 0, 0, 0, 3, [(4, 4, ACKNOWLEDGED, 1)]), 1)).error_code == 0
            s = _part(w.call(_summary("wired-g", tid, 0), 1))
            assert (s.error_code, s.start_offset, s.delivery_complete_count) == (0, 3, 1)
            assert _part(w.call(_read("wired-g", uuid.uuid4(), 0), 0)).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
            assert _part(w.call(_read("wired-g", tid, -1), 0)).error_code == E.INVALID_REQUEST
            assert _part(w.call(_read("", tid, 0), 0)).error_code == E.INVALID_GROUP_ID
            assert _part(w.call(_delete("other-g", tid, 0), 0)).error_code == 0     # nothing there: done
            c = Sharer(st, "wired-g", "wired", "c", lambda m: ACCEPT)
            try:
                wait_for(lambda: done(st, "wired-g", "wired", 6), what="the share partition done")
            finally:
                c.close()
            assert sorted(r[1] for r in c.got()) == [3, 5]
            r = _part(w.call(_read("wired-g", tid, 0), 0))
            # what the broker wrote since, as Kafka's share partition writes: each acknowledgement's records
            # ACKNOWLEDGED with the start offset as it was before it (3, or 5 when 5 came in a later write);
            # the state read back has every record from that start to the end acknowledged
            states = {o: (b.delivery_state, b.delivery_count) for b in r.state_batches
                      for o in range(b.first_offset, b.last_offset + 1)}
            assert r.error_code == 0 and r.start_offset in (3, 5)
            assert {o: states.get(o) for o in range(r.start_offset, 6)} == {
                o: (ACKNOWLEDGED, 1) for o in range(r.start_offset, 6)} and max(states) == 5


@pytest.mark.tenure(acls=["allow User:ANONYMOUS all topic:*", "allow User:ANONYMOUS all group:*"],
                    topics={"locked": 1})
def test_the_share_coordinator_apis_need_cluster_action(tenure_server, wire):
    tid = tenure_server.call(lambda: tenure_server.server.topics.get("locked").topic_id)
    for req, version in ((_read("g", tid, 0), 0), (_write("g", tid, 0, 0, 0, 0, []), 1), (_init("g", tid, 0, 0, 0), 0),
                         (_delete("g", tid, 0), 0), (_summary("g", tid, 0), 1)):
        assert _part(wire.call(req, version)).error_code == E.CLUSTER_AUTHORIZATION_FAILED


def test_share_state_topic_has_kafkas_delete_policy_and_an_older_compacted_one_is_switched(tmp_path):
    """`__share_group_state` is made with cleanup.policy=delete and retention.ms=-1 (KIP-932: its updates are
    deltas, which compaction would drop); a data dir whose topic an older tenure made compacted is served with
    that policy from its next start, its state read back whole."""
    cfg = ServerConfig(port=0, data_dir=str(tmp_path))
    with ServerThread(cfg) as st:
        st.create_topics({"pol": 1})
        tid = st.call(lambda: st.server.topics.get("pol").topic_id)
        handle = st.server.parts.share_state

        async def writes() -> None:
            await handle.write("pol-g", tid, 0, 0, ((0, 3, 0, 1),))
            await handle.write("pol-g", tid, 0, 0, ((0, 0, ACKNOWLEDGED, 1),))
            await handle.write("pol-g", tid, 0, 0, ((1, 1, 4, 1),))
        st.call(writes)
        configs = lambda: dict(st.call(lambda: st.server.topics.get(SHARE_STATE_TOPIC).configs))  # noqa: E731
        assert configs() == {"cleanup.policy": "delete", "retention.ms": "-1"}
        st.call(lambda: st.server.topics.set_topic_configs(SHARE_STATE_TOPIC, {"cleanup.policy": "compact"}))
        st.restart()
        assert configs() == {"cleanup.policy": "delete", "retention.ms": "-1"}
        assert st.call(lambda: st.server.parts.share_state.read("pol-g", tid, 0)) == (
            0, ((0, 0, ACKNOWLEDGED, 1), (1, 1, 4, 1), (2, 3, 0, 1)))
