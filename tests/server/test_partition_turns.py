"""A read-only answer per partition (ListOffsets, OffsetsForLeaderEpoch) is made `PARTITIONS_PER_TURN` partitions
per loop turn (broker/base.py `per_partition_in_turns`): a request naming 100,000 partitions leaves the loop to the
other clients between turns, and its answer is byte for byte the one a single pass gives."""
from __future__ import annotations

import asyncio

import pytest

from tenure.broker import base
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request, encode_response
from tenure.protocol.context import RequestContext
from tests.server.test_partitions import batch, broker, produce

ListOffsetsRequest, OffsetForLeaderEpochRequest = SUPPORTED[2].request, SUPPORTED[23].request


def list_offsets(version: int, topics):
    T = ListOffsetsRequest.ListOffsetsTopic
    P = T.ListOffsetsPartition
    return ListOffsetsRequest(version=version, replica_id=-1, isolation_level=1, topics=[
        T(version=version, name=name, partitions=[
            P(version=version, partition_index=i, current_leader_epoch=-1, timestamp=ts, max_num_offsets=3)
            for i, ts in parts]) for name, parts in topics])


def leader_epochs(version: int, topics):
    T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    P = T.OffsetForLeaderPartition
    return OffsetForLeaderEpochRequest(version=version, replica_id=-1, topics=[
        T(version=version, topic=name, partitions=[
            P(version=version, partition=i, current_leader_epoch=-1, leader_epoch=e) for i, e in parts])
        for name, parts in topics])


def answer(b, body, version: int) -> tuple[bytes, object]:
    req = Request(type(body).API_KEY, version, 3, "test", body, SUPPORTED[type(body).API_KEY])
    ctx = RequestContext(0, version, "test", "/127.0.0.1", 5_000_000, api_key=req.api_key)
    handler = b.list_offsets if req.api_key == 2 else b.offset_for_leader_epoch
    got = asyncio.run(handler(req, ctx))
    return encode_response(req, got), got


def requests():
    """Every version of both APIs, over a topic with records, an empty partition, a partition and a topic that do
    not exist, every special timestamp, repeats; a topic's partitions long enough to straddle turns."""
    stamps = [-1, -2, -3, -4, 0, 1000, 1002, 5000]
    parts = [(i % 3, stamps[i % len(stamps)]) for i in range(23)] + [(7, -1)]
    offsets = [(v, list_offsets(v, [("lo", parts), ("none", [(0, -1)]), ("lo", [(1, -2)]), ("lo", [])]))
               for v in range(0, SUPPORTED[2].max_version + 1)]
    epochs = [(v, leader_epochs(v, [("lo", [(i % 3, i % 2 - 1) for i in range(17)]), ("none", [(0, 0)])]))
              for v in range(0, SUPPORTED[23].max_version + 1)]
    return offsets + epochs


def test_an_answer_made_in_turns_is_byte_for_byte_the_single_pass_answer(monkeypatch):
    b = broker("lo", partitions=3)
    produce(b, "lo", batch(3))
    produce(b, "lo", batch(2), index=1)
    asked = requests()
    monkeypatch.setattr(base, "PARTITIONS_PER_TURN", 10_000)
    single = [answer(b, body, v)[0] for v, body in asked]
    for size in (1, 4, 10):
        monkeypatch.setattr(base, "PARTITIONS_PER_TURN", size)
        assert [answer(b, body, v)[0] for v, body in asked] == single, size
    _, got = answer(b, asked[1][1], 1)             # v1: the answers are real ones, not all errors
    assert [p.offset for p in got.topics[0].partitions[:3]] == [3, 0, -1]
    assert got.topics[1].partitions[0].error_code == 3 and got.topics[0].partitions[-1].error_code == 3


@pytest.mark.parametrize("api", ["ListOffsets", "OffsetForLeaderEpoch"])
def test_other_work_runs_between_the_turns_of_one_answer(monkeypatch, api):
    """40 partitions, 10 per turn: the loop is left 3 times while the answer is made; the answer is whole."""
    monkeypatch.setattr(base, "PARTITIONS_PER_TURN", 10)
    b = broker("lo", partitions=2)
    if api == "ListOffsets":
        body, version = list_offsets(1, [("lo", [(i % 2, -1) for i in range(40)])]), 1
        handler = b.list_offsets
    else:
        body, version = leader_epochs(4, [("lo", [(i % 2, 0) for i in range(40)])]), 4
        handler = b.offset_for_leader_epoch
    req = Request(type(body).API_KEY, version, 3, "test", body, SUPPORTED[type(body).API_KEY])
    ctx = RequestContext(0, version, "test", "/127.0.0.1", 5_000_000, api_key=req.api_key)

    async def run():
        turns: list[int] = []

        async def other():
            for _ in range(3):
                turns.append(len(turns))
                await asyncio.sleep(0)
        task = asyncio.ensure_future(other())
        got = await handler(req, ctx)
        done_before = len(turns)
        await task
        return got, done_before
    got, done_before = asyncio.run(run())
    assert done_before == 3
    [t] = got.topics
    assert len(t.partitions) == 40 and {p.error_code for p in t.partitions} == {0}


def test_describe_producers_and_delete_records_made_in_turns_answer_as_in_one_pass(monkeypatch):
    """DescribeProducers (read-only) and DeleteRecords (each partition deleted on its own, as Kafka's
    ReplicaManager.deleteRecords) over the same partitions, fresh brokers: with 1, 3 and 10,000 partitions per turn
    the answers are the same bytes and the logs start at the same offsets."""
    DP, DR = SUPPORTED[61].request, SUPPORTED[21].request

    def run(size: int) -> tuple[list[bytes], list[int]]:
        monkeypatch.setattr(base, "PARTITIONS_PER_TURN", size)
        b = broker("dr", partitions=3)
        produce(b, "dr", batch(3, producer_id=7, epoch=0, sequence=0))
        produce(b, "dr", batch(4), index=1)
        out = []
        describe = DP(topics=[DP.TopicRequest(name="dr", partition_indexes=[0, 1, 2, 9, 0]),
                              DP.TopicRequest(name="none", partition_indexes=[0])])
        T, P = DR.DeleteRecordsTopic, DR.DeleteRecordsTopic.DeleteRecordsPartition
        delete = DR(timeout_ms=1000, topics=[
            T(name="dr", partitions=[P(partition_index=0, offset=2), P(partition_index=1, offset=-1),
                                     P(partition_index=2, offset=5), P(partition_index=9, offset=0)]),
            T(name="none", partitions=[P(partition_index=0, offset=0)])])
        for body, version, handler in ((describe, 0, b.describe_producers), (delete, 2, b.delete_records)):
            req = Request(type(body).API_KEY, version, 3, "test", body, SUPPORTED[type(body).API_KEY])
            ctx = RequestContext(0, version, "test", "/127.0.0.1", 5_000_000, api_key=req.api_key)
            out.append(encode_response(req, asyncio.run(handler(req, ctx))))
        return out, [b.replicas.get("dr", i).log_start_offset for i in range(3)]

    single = run(10_000)
    assert single[1] == [2, 4, 0]                      # the deletes happened (partition 2: 5 is past its end)
    assert run(1) == single and run(3) == single


@pytest.mark.parametrize("version", [2, 9, 10])
def test_an_offset_commit_answer_merged_in_turns_is_the_one_merged_in_one_pass(monkeypatch, version):
    """The broker's OffsetCommit gate (offsets_gate.py) over a topic that does not exist, one that does (a
    partition index it lacks refused), repeats: the coordinator's answer for what was kept and the refused
    partitions merged in turns of 1 and 4 partitions give the bytes `merge_commit` gives in one pass."""
    import uuid

    from tenure.broker.offsets_gate import merge_commit, merge_commit_in_turns, request_order, split_commit
    from tenure.broker.topics import TopicRegistry
    Q, R = SUPPORTED[8].request, SUPPORTED[8].response
    QT, QP = Q.OffsetCommitRequestTopic, Q.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    reg = TopicRegistry(1)
    reg.create("have", 3)
    ids = {"have": reg.get("have").topic_id, "none": uuid.uuid4()}
    asked = [("none", [0, 1, 2, 2]), ("have", [0, 5, 2, 1]), ("none", [9])]
    body = Q(version=version, group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
        QT(version=version, name=name, topic_id=ids[name], partitions=[
            QP(version=version, partition_index=i, committed_offset=7, committed_metadata="") for i in parts])
        for name, parts in asked])
    order = request_order(body)
    kept, refused = split_commit(body, reg)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in kept.topics] == [("have", [0, 2, 1])]
    assert refused == {("none", 0): 3, ("none", 1): 3, ("none", 2): 3, ("have", 5): 3, ("none", 9): 3}
    T, P = R.OffsetCommitResponseTopic, R.OffsetCommitResponseTopic.OffsetCommitResponsePartition
    coordinator = R(throttle_time_ms=0, topics=[T(name="have", topic_id=ids["have"], partitions=[
        P(partition_index=i, error_code=0 if i else 12) for i in (0, 2, 1)])])
    req = Request(8, version, 3, "test", body, SUPPORTED[8])
    single = encode_response(req, merge_commit(order, coordinator, refused, R))
    for size in (1, 4):
        monkeypatch.setattr(base, "PARTITIONS_PER_TURN", size)
        got = asyncio.run(merge_commit_in_turns(order, coordinator, refused, R))
        assert encode_response(req, got) == single, size
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in got.topics] == [
        ("none", [(0, 3), (1, 3), (2, 3), (2, 3)]), ("have", [(0, 12), (5, 3), (2, 0), (1, 0)]), ("none", [(9, 3)])]
