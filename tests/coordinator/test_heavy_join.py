"""A KIP-848 join subscribing 1,000 names or more: the member metadata record it is expected to write is made
from the request and encoded off the loop first; the writer takes that encoding only for a record equal to it.
The log holds the same records either way (a coordinator loading it has the same group), and a guess that
misses (a known member rejoining keeps its rack, which the request leaves out) is encoded on the loop as
always."""
from __future__ import annotations

import asyncio
import threading

from kafka.record.default_records import DefaultRecordBatch

from tenure.broker.topics import TopicRegistry
from tenure.coordinator import GroupShard, partition_for
from tenure.coordinator.group_runtime import GroupRuntime
from tenure.coordinator.loader import iter_batches
from tenure.protocol import records as rec
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request
from tenure.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from tenure.protocol.consumer_group_records import ConsumerMemberRecord
from tenure.protocol.context import RequestContext
from tenure.protocol.internal_topics import OFFSETS_TOPIC

NAMES = [f"n{i:05d}" for i in range(1500)] + ["t"]


class CountingCodec:
    """The group coordinator's codec, counting the member records encoded on the loop's thread."""

    def __init__(self, loop_thread: threading.Thread) -> None:
        self.loop_thread = loop_thread
        self.on_loop = 0

    def __getattr__(self, name):
        return getattr(rec, name)

    def encode(self, record):
        if isinstance(record, ConsumerMemberRecord) and threading.current_thread() is self.loop_thread:
            self.on_loop += 1
        return rec.encode(record)


def setup():
    reg = TopicRegistry()
    topic = reg.create(OFFSETS_TOPIC, 4, internal=True, configs={"cleanup.policy": "compact"})
    reg.create("t", 3)
    codec = CountingCodec(threading.current_thread())
    return reg, GroupRuntime(lambda p: GroupShard(partition=p, topics=reg), topic, codec=codec), codec


async def join(rt: GroupRuntime, member: str, names: list[str], rack: str | None = None):
    body = ConsumerGroupHeartbeatRequest(group_id="g", member_id=member, member_epoch=0, rebalance_timeout_ms=60000,
                                         rack_id=rack, subscribed_topic_names=names, topic_partitions=[])
    req = Request(68, 1, 1, "test", body, SUPPORTED[68])
    answer = await rt.handle(req, RequestContext(0, 1, "test", "/127.0.0.1", 0, api_key=68))
    assert answer.error_code == 0, answer
    return answer


def member_records(rt: GroupRuntime) -> list[ConsumerMemberRecord]:
    plog = rt.offsets_topic.partitions[partition_for("g", rt.partitions)]
    out = [rec.decode(r.key, r.value) for _, raw in iter_batches(plog) for r in DefaultRecordBatch(raw)]
    return [r for r in out if isinstance(r, ConsumerMemberRecord)]


def test_a_large_subscriptions_member_record_is_encoded_off_the_loop_and_written_as_encoded_on_it():
    async def run():
        reg, rt, codec = setup()
        await join(rt, "m-1", list(NAMES))
        await join(rt, "m-2", list(reversed(NAMES)) + ["t"])        # the same names, another order, a repeat
        assert codec.on_loop == 0 and rt.writer.ahead == {}
        written = member_records(rt)
        assert [(r.member_id, r.subscribed_topic_names) for r in written] == [
            ("m-1", tuple(sorted(NAMES))), ("m-2", tuple(sorted(NAMES)))]
        assert [r.client_id for r in written] == ["test", "test"] and written[0].rebalance_timeout_ms == 60000
        # the same record bytes as the loop's own encoding: a coordinator loading the log has the same group
        again = GroupRuntime(lambda p: GroupShard(partition=p, topics=reg), rt.offsets_topic)
        again.load()
        assert again.group("g").members == rt.group("g").members
    asyncio.run(run())


def test_a_guess_that_misses_is_encoded_on_the_loop():
    async def run():
        _, rt, codec = setup()
        await join(rt, "m-1", list(NAMES), rack="r1")
        await join(rt, "m-1", list(NAMES) + ["x"])                   # rejoins: keeps rack r1, subscribes one more
        assert codec.on_loop == 1
        last = member_records(rt)[-1]
        assert last.rack_id == "r1" and "x" in last.subscribed_topic_names
        assert rt.writer.ahead == {}
    asyncio.run(run())
