"""A large OffsetCommit (more than 1,000 partitions, or a batch that may pass 64 KiB): its records are made and
encoded into their one batch off the loop, then its handler decides on the loop, in one step, on the state as
it is then. The write stays one batch, all or nothing; a commit whose batch is larger than the offsets topic's
`max.message.bytes` is refused whole with UNKNOWN_SERVER_ERROR (-1) and nothing is written or replayed, as
Kafka's log refuses the coordinator's batch (RecordTooLargeException) and its runtime reverts the write.

The offsets topic here takes batches of at most 100,000 bytes (its `max.message.bytes`), so a commit of
3,000 partitions (~135 KB) is too large and one of 1,500 (~67 KB) fits, on the heavy path as both name more
than 1,000 partitions.
"""
from __future__ import annotations

import asyncio

from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetFetchRequest
from kafka.record.default_records import DefaultRecordBatch

from tenure.broker.topics import TopicRegistry
from tenure.coordinator import GroupShard, partition_for
from tenure.coordinator.clock import CoordinatorClock
from tenure.coordinator.group_runtime import GroupRuntime
from tenure.coordinator.loader import iter_batches
from tenure.protocol import records as rec
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.internal_topics import OFFSETS_TOPIC

MAX_BYTES = 100_000
T = OffsetCommitRequest.OffsetCommitRequestTopic
P = T.OffsetCommitRequestPartition


def runtime(topic=None, off_loop=None) -> GroupRuntime:
    if topic is None:
        topic = TopicRegistry().create(OFFSETS_TOPIC, 4, internal=True,
                                       configs={"cleanup.policy": "compact", "max.message.bytes": str(MAX_BYTES)})
    return GroupRuntime(lambda p: GroupShard(partition=p), topic, clock=CoordinatorClock(lambda: 1_000_000),
                        off_loop=off_loop)


def commit(group: str, offsets: dict[tuple[str, int], int], metadata: str = "") -> OffsetCommitRequest:
    topics: dict[str, list] = {}
    for (t, p), off in offsets.items():
        topics.setdefault(t, []).append(P(version=8, partition_index=p, committed_offset=off,
                                          committed_leader_epoch=-1, committed_metadata=metadata))
    return OffsetCommitRequest(version=8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                               group_instance_id=None,
                               topics=[T(version=8, name=t, partitions=ps) for t, ps in topics.items()])


async def call(rt: GroupRuntime, body, version: int = 8):
    req = Request(type(body).API_KEY, version, 1, "test", body, SUPPORTED[type(body).API_KEY])
    ctx = RequestContext(0, version, "test", "/127.0.0.1", 0, api_key=req.api_key)
    return (await rt.handle(req, ctx)).to_dict()


def codes(answer) -> set[int]:
    return {p["error_code"] for t in answer["topics"] for p in t["partitions"]}


def batches(rt: GroupRuntime, group: str) -> list[list]:
    """The batches of the group's offsets partition: the records of each, decoded."""
    plog = rt.offsets_topic.partitions[partition_for(group, rt.partitions)]
    return [[rec.decode(r.key, r.value) for r in DefaultRecordBatch(raw)] for _, raw in iter_batches(plog)]


def wide(n: int, offset: int = 5) -> dict[tuple[str, int], int]:
    return {(f"t{i // 1000}", i % 1000): offset for i in range(n)}


def test_a_commit_whose_batch_is_over_max_message_bytes_is_refused_whole_and_nothing_is_written():
    async def run():
        rt = runtime()
        answer = await call(rt, commit("g", wide(3000)))
        assert codes(answer) == {-1} and sum(len(t["partitions"]) for t in answer["topics"]) == 3000
        assert [t["name"] for t in answer["topics"]] == ["t0", "t1", "t2"]
        assert batches(rt, "g") == [] and rt.committed_offsets("g") == {} and rt.group("g") is None
        # the coordinator keeps serving: a commit that fits is written
        assert codes(await call(rt, commit("g", wide(1500)))) == {0}
        assert len(rt.committed_offsets("g")) == 1500
    asyncio.run(run())


def test_metadata_counts_toward_the_batch_size_below_a_thousand_partitions():
    """600 partitions with 200 bytes of metadata each (~140 KB): refused as Kafka's log would refuse the batch;
    100 of them (~24 KB) are written."""
    async def run():
        rt = runtime()
        assert codes(await call(rt, commit("g", wide(600), "m" * 200))) == {-1}
        assert rt.committed_offsets("g") == {}
        assert codes(await call(rt, commit("g", wide(100), "m" * 200))) == {0}
        assert len(rt.committed_offsets("g")) == 100
    asyncio.run(run())


def test_a_heavy_commit_is_one_batch_and_a_commit_arriving_while_it_is_encoded_comes_first_in_log_and_state():
    """The heavy commit's encoding is held until a small commit to the same group (same partition "t0"-0,
    offset 99) has been answered: the small one is in the log first, the heavy one's batch after it - whole,
    1,500 records - and the state is the log's order: "t0"-0 holds the heavy commit's offset. A coordinator
    loading the log has the same offsets (nothing acknowledged is lost, nothing half written)."""
    async def run():
        release = asyncio.Event()
        started = asyncio.Event()

        async def gated(fn, *args):
            started.set()
            await release.wait()
            return fn(*args)
        rt = runtime(off_loop=gated)
        heavy = asyncio.ensure_future(call(rt, commit("g", wide(1500))))
        await started.wait()
        assert codes(await call(rt, commit("g", {("t0", 0): 99, ("t9", 1): 7}))) == {0}   # answered meanwhile
        assert rt.committed_offsets("g")[("t0", 0)].offset == 99 and len(rt.committed_offsets("g")) == 2
        assert not heavy.done() and len(batches(rt, "g")) == 1
        release.set()
        assert codes(await heavy) == {0}
        written = batches(rt, "g")
        assert [len(b) for b in written] == [2, 1500]
        assert written[1][0].topic == "t0" and written[1][0].partition == 0 and written[1][0].offset == 5
        offsets = rt.committed_offsets("g")
        assert len(offsets) == 1501 and offsets[("t0", 0)].offset == 5 and offsets[("t9", 1)].offset == 7
        fetched = await call(rt, OffsetFetchRequest(version=7, group_id="g", topics=None, require_stable=False), 7)
        assert sum(len(t["partitions"]) for t in fetched["topics"]) == 1501
        again = runtime(rt.offsets_topic)
        again.load()
        assert again.committed_offsets("g") == offsets
    asyncio.run(run())


def test_a_heavy_commit_refused_by_its_group_writes_nothing():
    """The group's rule decides on the loop as for any commit: a generation on an unknown group (v8) is
    ILLEGAL_GENERATION for every partition, whatever the batch would have been."""
    async def run():
        rt = runtime()
        body = commit("g", wide(1500))
        body.generation_id_or_member_epoch = 3
        assert codes(await call(rt, body)) == {22}
        assert batches(rt, "g") == [] and rt.committed_offsets("g") == {}
    asyncio.run(run())


def test_the_heavy_path_answers_as_the_one_step_path():
    """The same commits (a heavy one, metadata too large on some partitions) to a runtime whose heavy path
    runs (default) and, written record by record, to a fresh shard: the same answers and offsets."""
    async def run():
        rt = runtime()
        offsets = wide(1200)
        body = commit("g", offsets, "x")
        body.topics[0].partitions[3].committed_metadata = "y" * 5000     # OFFSET_METADATA_TOO_LARGE (12)
        answer = await call(rt, body)
        assert codes(answer) == {0, 12}
        shard = GroupShard()
        ctx = RequestContext(0, 8, "test", "/127.0.0.1", 0, api_key=8).for_input(1, 1_000_000)
        res = shard.handle(8, ctx, body)
        [(_, direct)] = res.responses
        assert direct.to_dict() == answer
        assert shard.committed_offsets("g") == rt.committed_offsets("g")
        assert [len(b) for b in batches(rt, "g")] == [1199]
    asyncio.run(run())


def txn_commit(group: str, offsets: dict[tuple[str, int], int], producer_id: int = 7):
    from kafka.protocol.producer import TxnOffsetCommitRequest
    TT = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    TP = TT.TxnOffsetCommitRequestPartition
    topics: dict[str, list] = {}
    for (t, p), off in offsets.items():
        topics.setdefault(t, []).append(TP(version=3, partition_index=p, committed_offset=off,
                                           committed_leader_epoch=-1, committed_metadata=""))
    return TxnOffsetCommitRequest(version=3, transactional_id="tx", group_id=group, producer_id=producer_id,
                                  producer_epoch=0, generation_id=-1, member_id="", group_instance_id=None,
                                  topics=[TT(version=3, name=t, partitions=ps) for t, ps in topics.items()])


def test_a_heavy_txn_offset_commit_is_the_producers_one_transactional_batch_or_refused_whole():
    """TxnOffsetCommit as OffsetCommit (Kafka's transactional write is atomic too): 3,000 partitions over the
    limit are refused -1 for each, nothing pending; 1,500 are one transactional batch of producer 7, pending
    until the transaction ends."""
    async def run():
        rt = runtime()
        answer = await call(rt, txn_commit("g", wide(3000)), 3)
        assert codes(answer) == {-1} and sum(len(t["partitions"]) for t in answer["topics"]) == 3000
        assert batches(rt, "g") == [] and rt.shard_for("g").pending_partitions("g") == set()
        assert codes(await call(rt, txn_commit("g", wide(1500)), 3)) == {0}
        plog = rt.offsets_topic.partitions[partition_for("g", rt.partitions)]
        [(_, raw)] = list(iter_batches(plog))
        batch = DefaultRecordBatch(raw)
        assert batch.is_transactional and batch.producer_id == 7 and len(list(DefaultRecordBatch(raw))) == 1500
        assert len(rt.shard_for("g").pending_partitions("g")) == 1500 and rt.committed_offsets("g") == {}
    asyncio.run(run())
