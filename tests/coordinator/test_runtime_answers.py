"""When the coordinator runtime answers: at once, or after the writes before it are durable.

An answer whose input wrote no records (a heartbeat) still waits while a write of the runtime awaits durability,
as Kafka's coordinator runtime defers a write operation that produced no records behind the pending writes
(CoordinatorRuntime's deferred event queue of each partition); it waits for its partition's writes, not for other
answers waiting so, nor for other partitions' writes: once
the writes are durable, the next heartbeat is answered at once even while an earlier one's wait has not ended
(before, every answer waited for the one before it, so a steady flow of heartbeats after one commit all went
through a durability wait). `handle_now` answers without a coroutine when it can, else gives a future.
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterable

from kafka.protocol.consumer.group import HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest, SyncGroupRequest

from tenure.broker.topics import TopicRegistry
from tenure.coordinator import GroupShard, partition_for
from tenure.coordinator.clock import CoordinatorClock
from tenure.coordinator.group_runtime import GroupRuntime
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.errors import ErrorCode
from tenure.protocol.internal_topics import OFFSETS_TOPIC
from tenure.storage.log import Log


class GatedWriter:
    """A PartitionWriter over an internal topic's logs whose `durable` returns at once while `open`, else waits
    for a gate the test opens (`gates`: each waiting call's logs and its future, in call order)."""

    durable_needed = True

    def __init__(self, topic) -> None:
        self.topic = topic
        self.open = True
        self.gates: list[tuple[list[Log], asyncio.Future]] = []

    def append(self, topic: str, index: int, batch: bytes) -> Log:
        plog = self.topic.partitions[index]
        plog.append(batch)
        return plog

    async def durable(self, logs: Iterable[Log]) -> None:
        if self.open:
            return
        gate = asyncio.get_running_loop().create_future()
        self.gates.append((list(logs), gate))
        await gate


def request(body, version: int) -> tuple[Request, RequestContext]:
    key = type(body).API_KEY
    return (Request(key, version, 1, "test", body, SUPPORTED[key]),
            RequestContext(0, version, "test", "/127.0.0.1", 0, api_key=key, broker_id=0))


def runtime(partitions: int = 4) -> tuple[GroupRuntime, GatedWriter]:
    topic = TopicRegistry().create(OFFSETS_TOPIC, partitions, internal=True, configs={"cleanup.policy": "compact"})
    writer = GatedWriter(topic)
    rt = GroupRuntime(lambda p: GroupShard(partition=p), topic, clock=CoordinatorClock(lambda: 1_000_000),
                      hosted_on=lambda p: 0, partition_writer=writer)
    return rt, writer


async def static_member(rt: GroupRuntime, gid: str, iid: str) -> tuple[str, int]:
    """One static member's group formed (expect_group: no initial delay): its member id and generation."""
    rt.expect_group(gid, 1)
    P = JoinGroupRequest.JoinGroupRequestProtocol
    join = await rt.handle(*request(JoinGroupRequest(
        group_id=gid, session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id="", group_instance_id=iid,
        protocol_type="consumer", protocols=[P(name="range", metadata=b"")], reason=None), 9))
    sync = await rt.handle(*request(SyncGroupRequest(
        group_id=gid, generation_id=join.generation_id, member_id=join.member_id, group_instance_id=iid,
        protocol_type="consumer", protocol_name="range", assignments=[]), 5))
    assert join.error_code == 0 and sync.error_code == 0
    return join.member_id, join.generation_id


def heartbeat(gid: str, mid: str, iid: str, generation: int) -> tuple[Request, RequestContext]:
    return request(HeartbeatRequest(group_id=gid, generation_id=generation, member_id=mid, group_instance_id=iid), 4)


def commit(gid: str, mid: str, iid: str, generation: int) -> tuple[Request, RequestContext]:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    return request(OffsetCommitRequest(
        group_id=gid, generation_id_or_member_epoch=generation, member_id=mid, group_instance_id=iid,
        topics=[T(name="t", partitions=[T.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=7, committed_leader_epoch=-1, committed_metadata="")])]), 8)


async def turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_a_heartbeat_waits_for_the_writes_before_it_and_not_for_the_answers_waiting_so():
    async def run():
        rt, writer = runtime()
        mid, gen = await static_member(rt, "g", "i")
        offsets_log = rt.offsets_topic.partitions[partition_for("g", rt.partitions)]
        writer.open = False
        committed = asyncio.ensure_future(rt.handle(*commit("g", mid, "i", gen)))
        await turns()
        assert not committed.done() and len(writer.gates) == 1           # the commit waits for its records
        first = rt.handle_now(*heartbeat("g", mid, "i", gen))
        assert isinstance(first, asyncio.Future)                         # behind the commit's write
        await turns()
        assert not first.done() and len(writer.gates) == 2
        assert writer.gates[1][0] == [offsets_log]                       # it waits for the log written
        writer.gates[0][1].set_result(None)                              # the commit is durable
        await turns()
        assert committed.done() and committed.result().topics[0].partitions[0].error_code == 0
        assert not first.done()                                          # its own wait is not over yet
        # no write awaits durability now: the next heartbeat is answered at once, not behind the first
        second = rt.handle_now(*heartbeat("g", mid, "i", gen))
        assert not isinstance(second, asyncio.Future) and second.error_code == 0
        assert len(writer.gates) == 2
        writer.gates[1][1].set_result(None)
        await turns()
        assert first.done() and first.result().error_code == 0
        rt.close()
    asyncio.run(run())


def test_an_answer_waiting_for_durability_is_in_what_a_stop_waits_for():
    async def run():
        rt, writer = runtime()
        mid, gen = await static_member(rt, "g", "i")
        writer.open = False
        committed = asyncio.ensure_future(rt.handle(*commit("g", mid, "i", gen)))
        await turns()
        waiting = rt.handle_now(*heartbeat("g", mid, "i", gen))
        await turns()
        assert isinstance(waiting, asyncio.Future) and len(rt._syncing) == 2 and len(rt._writing) == 1
        for _, gate in writer.gates:
            gate.set_result(None)
        await turns()
        assert committed.done() and waiting.done() and not rt._syncing and not rt._writing and not rt._waiting
        rt.close()
    asyncio.run(run())


def test_handle_now_answers_at_once_or_gives_a_future():
    async def run():
        rt, writer = runtime()
        mid, gen = await static_member(rt, "g", "i")
        answer = rt.handle_now(*heartbeat("g", mid, "i", gen))           # answered at once: the answer itself
        assert not isinstance(answer, asyncio.Future) and answer.error_code == 0
        wrong = rt.handle_now(*heartbeat("g", mid, "i", gen + 1))
        assert wrong.error_code == ErrorCode.ILLEGAL_GENERATION
        # a JoinGroup that parks (a new member: the group rebalances) gives a future, answered later
        P = JoinGroupRequest.JoinGroupRequestProtocol
        parked = rt.handle_now(*request(JoinGroupRequest(
            group_id="g2", session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id="",
            group_instance_id="j", protocol_type="consumer", protocols=[P(name="range", metadata=b"")],
            reason=None), 9))
        assert isinstance(parked, asyncio.Future) and not parked.done()
        rt.advance_clock(3000)                                           # the initial delay ends
        await turns()
        assert parked.done() and parked.result().error_code == 0 and not rt._waiting
        # a request outside direct_apis (an OffsetCommit) is run by `handle`: a future of its answer
        committed = rt.handle_now(*commit("g", mid, "i", gen))
        assert isinstance(committed, asyncio.Future)
        assert (await committed).topics[0].partitions[0].error_code == 0
        # a partition not coordinated here: refused at once
        rt.unload(partition_for("g", rt.partitions))
        refused = rt.handle_now(*heartbeat("g", mid, "i", gen))
        assert refused.error_code == ErrorCode.NOT_COORDINATOR
        rt.close()
    asyncio.run(run())


def test_a_waiting_answer_whose_caller_gives_up_is_forgotten():
    async def run():
        rt, writer = runtime()
        P = JoinGroupRequest.JoinGroupRequestProtocol
        parked = rt.handle_now(*request(JoinGroupRequest(
            group_id="g", session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id="",
            group_instance_id="j", protocol_type="consumer", protocols=[P(name="range", metadata=b"")],
            reason=None), 9))
        assert isinstance(parked, asyncio.Future) and len(rt._waiting) == 1
        parked.cancel()                                                  # the client went away
        await turns()
        assert not rt._waiting
        rt.advance_clock(3000)                                           # its answer goes nowhere
        rt.close()
    asyncio.run(run())


def test_a_heartbeat_waits_only_for_the_writes_of_its_own_partition():
    async def run():
        rt, writer = runtime()
        names = [f"g{i}" for i in range(20)]
        a = names[0]
        b = next(n for n in names if partition_for(n, rt.partitions) != partition_for(a, rt.partitions))
        ma, ga = await static_member(rt, a, "ia")
        mb, gb = await static_member(rt, b, "ib")
        writer.open = False
        committed = asyncio.ensure_future(rt.handle(*commit(a, ma, "ia", ga)))
        await turns()
        assert not committed.done() and len(writer.gates) == 1
        other = rt.handle_now(*heartbeat(b, mb, "ib", gb))                # another partition's: nothing to wait for
        assert not isinstance(other, asyncio.Future) and other.error_code == 0
        same = rt.handle_now(*heartbeat(a, ma, "ia", ga))                 # the commit's partition: behind its write
        assert isinstance(same, asyncio.Future)
        await turns()
        assert writer.gates[1][0] == [rt.offsets_topic.partitions[partition_for(a, rt.partitions)]]
        for _, gate in writer.gates:
            gate.set_result(None)
        await turns()
        assert committed.done() and same.done() and same.result().error_code == 0 and not rt._in_flight
        rt.close()
    asyncio.run(run())
