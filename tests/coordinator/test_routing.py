"""N coordinator shards answer as one coordinator: the same requests to a runtime with 8 offsets partitions
and to one with a single partition get the same answers (requests naming groups of several shards are
split and merged in request order, repeated ids answered once), and each group's state sits in the shard
of its partition only."""
from __future__ import annotations

import asyncio
import random

import pytest
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetFetchRequest
from kafka.record.default_records import DefaultRecordBatch

from tenure.broker.topics import TopicRegistry
from tenure.coordinator import CoordinatorConfig, GroupShard, partition_for
from tenure.coordinator.clock import CoordinatorClock
from tenure.coordinator.group_runtime import GroupRuntime
from tenure.coordinator.loader import iter_batches
from tenure.protocol import records as rec
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.internal_topics import OFFSETS_TOPIC


def runtime(partitions: int) -> GroupRuntime:
    topic = TopicRegistry().create(OFFSETS_TOPIC, partitions, internal=True, configs={"cleanup.policy": "compact"})
    return GroupRuntime(lambda _partition: GroupShard(), topic, clock=CoordinatorClock(lambda: 1_000_000))


async def call(rt: GroupRuntime, body, version: int):
    req = Request(type(body).API_KEY, version, 1, "test", body, SUPPORTED[type(body).API_KEY])
    ctx = RequestContext(0, version, "test", "/127.0.0.1", 0, api_key=req.api_key)
    return (await rt.handle(req, ctx)).to_dict()


def commit(group: str, offsets: dict[int, int]):
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    return OffsetCommitRequest(version=8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                               group_instance_id=None, topics=[T(version=8, name="t", partitions=[
                                   P(version=8, partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                     committed_metadata="") for p, o in offsets.items()])])


def fetch(queries):
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    T = G.OffsetFetchRequestTopics
    return OffsetFetchRequest(version=8, require_stable=False, groups=[
        G(version=8, group_id=g, topics=None if parts is None else [T(version=8, name="t", partition_indexes=parts)])
        for g, parts in queries])


@pytest.mark.parametrize("seed", range(4))
def test_eight_shards_answer_as_one_coordinator(seed):
    r = random.Random(seed)
    groups = [f"g{i}" for i in range(12)]
    names = groups + ["unknown-a", "unknown-b"]

    async def run():
        many, one = runtime(8), runtime(1)
        assert len({partition_for(g, 8) for g in groups}) > 4

        async def both(body, version, *, unordered=False):
            a, b = await call(many, body, version), await call(one, body, version)
            if unordered:
                a["groups"].sort(key=str), b["groups"].sort(key=str)
            assert a == b, body
            return a

        for g in groups:
            await both(commit(g, {p: r.randrange(100) for p in range(r.randrange(1, 4))}), 8)
        for g in groups:
            assert [p for p, s in many.shards.items() if g in s.groups] == [partition_for(g, 8)]
        for _ in range(30):
            k = r.random()
            pick = [r.choice(names) for _ in range(r.randrange(0, 8))]
            if k < 0.4:
                await both(DescribeGroupsRequest(version=5, groups=pick, include_authorized_operations=False), 5)
            elif k < 0.8:
                await both(fetch([(g, r.choice([None, [0], [0, 2]])) for g in pick]), 8)
            elif k < 0.9:
                await both(ListGroupsRequest(version=4, states_filter=r.choice([[], ["Empty"], ["Stable"]])), 4,
                           unordered=True)
            else:
                await both(DeleteGroupsRequest(version=2, groups_names=pick), 2)
                for g in pick:
                    await both(commit(g, {0: 1}), 8)
        assert many.group_ids() == one.group_ids()
        for g in groups:
            assert many.committed_offsets(g) == one.committed_offsets(g)
        # per shard: its partition's log holds its groups' records only, and loading that log into a
        # fresh shard gives the shard's state (the replay invariant, shard by shard)
        for p, plog in enumerate(many.offsets_topic.partitions):
            owners = {partition_for(rec.decode(r.key, r.value).group_id, 8)
                      for _, raw in iter_batches(plog) for r in DefaultRecordBatch(raw)}
            assert owners <= {p}
        again = GroupRuntime(lambda _partition: GroupShard(), many.offsets_topic)
        again.load()
        for p, shard in many.shards.items():
            fresh = again.shards[p]
            assert fresh.group_ids() == shard.group_ids()
            for g in shard.group_ids():
                assert fresh.committed_offsets(g) == shard.committed_offsets(g)
                assert (fresh.group(g).state, fresh.group(g).generation) == \
                    (shard.group(g).state, shard.group(g).generation)

    asyncio.run(run())


def test_timers_of_every_shard_fire_from_one_wheel_and_a_failing_one_is_not_swallowed():
    """Timers of every shard fire from one wheel in (deadline, arming) order; a timer whose handler raises
    reaches advance_clock's caller and stops the runtime (fail-stop): the timers due after it do nothing."""
    from kafka.protocol.consumer.group import JoinGroupRequest

    def join(group: str):
        P = JoinGroupRequest.JoinGroupRequestProtocol
        return JoinGroupRequest(version=8, group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                member_id="", group_instance_id="i", protocol_type="consumer",
                                protocols=[P(version=8, name="range", metadata=b"")])

    async def run():
        topic = TopicRegistry().create(OFFSETS_TOPIC, 8, internal=True, configs={"cleanup.policy": "compact"})
        now = [1_000_000]
        rt = GroupRuntime(lambda p: GroupShard(CoordinatorConfig(initial_rebalance_delay_ms=3000),
                                                           partition=p), topic, clock=CoordinatorClock(lambda: now[0]))
        groups = ["b-group", "a-group", "e-group"]
        assert len({partition_for(g, 8) for g in groups}) == 3
        parked = [asyncio.ensure_future(call(rt, join(g), 8)) for g in groups]   # same deadline, armed in order
        await asyncio.sleep(0)
        assert [k.name for k in rt.timers.due(now[0] + 3000) if k.name.startswith("join/")] == \
            [f"join/{g}" for g in groups]
        failing = rt.shard_for("a-group")
        real = failing.on_timer

        def broken(key, now_ms):
            if key.name == "join/a-group":
                raise RuntimeError("a broken rule")
            return real(key, now_ms)
        failing.on_timer = broken
        with pytest.raises(RuntimeError, match="a broken rule"):
            rt.advance_clock(3000)
        assert rt.clock_offset_ms == 3000 and isinstance(rt.failed, RuntimeError)
        assert (await asyncio.wait_for(parked[0], 5))["error_code"] == 0      # b-group's timer fired first
        await asyncio.sleep(0.05)                       # e-group's timer, due too, comes from the loop: stopped
        assert not parked[1].done() and not parked[2].done()
        rt.close()
        for p in parked:
            p.cancel()

    asyncio.run(run())


def test_unloading_every_partition_answers_each_shards_parked_requests_16_and_stops_the_timers():
    """unload() (the server stopping): every shard's parked JoinGroup is answered NOT_COORDINATOR (16),
    no timer is left, and a request afterwards is answered 16 too."""
    from kafka.protocol.consumer.group import JoinGroupRequest

    P = JoinGroupRequest.JoinGroupRequestProtocol

    async def run():
        topic = TopicRegistry().create(OFFSETS_TOPIC, 8, internal=True, configs={"cleanup.policy": "compact"})
        rt = GroupRuntime(lambda p: GroupShard(CoordinatorConfig(initial_rebalance_delay_ms=3000),
                                                           partition=p), topic, clock=CoordinatorClock(lambda: 1_000_000))
        groups = ["b-group", "a-group", "e-group"]
        parked = [asyncio.ensure_future(call(rt, JoinGroupRequest(
            version=8, group_id=g, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
            group_instance_id="i", protocol_type="consumer", protocols=[P(version=8, name="range", metadata=b"")]),
            8)) for g in groups]
        await asyncio.sleep(0)
        assert len(rt.timers) == 6                      # a join and a session timer per group
        rt.unload()
        assert [(await asyncio.wait_for(p, 5))["error_code"] for p in parked] == [16, 16, 16]
        assert len(rt.timers) == 0 and rt.shards == {}
        assert (await call(rt, commit("a-group", {0: 1}), 8))["topics"][0]["partitions"][0]["error_code"] == 16

    asyncio.run(run())


def test_consumer_groups_live_in_their_shard_and_describe_is_split_and_merged():
    """ConsumerGroupHeartbeat goes to its group's shard; ConsumerGroupDescribe naming groups of several
    shards answers them in request order, the same as one coordinator."""
    from tenure.protocol.consumer_group import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
    groups = [f"cg{i}" for i in range(8)]

    def hb(g):
        return ConsumerGroupHeartbeatRequest(
            group_id=g, member_id=f"m-{g}", member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout_ms=1000, subscribed_topic_names=["t"], subscribed_topic_regex=None,
            server_assignor=None, topic_partitions=[])

    async def run():
        many, one = runtime(8), runtime(1)
        assert len({partition_for(g, 8) for g in groups}) > 3
        for g in groups:
            a, b = await call(many, hb(g), 1), await call(one, hb(g), 1)
            assert a == b and a["error_code"] == 0 and a["member_epoch"] == 1
            assert [p for p, s in many.shards.items() if g in s.groups] == [partition_for(g, 8)]
        asked = list(reversed(groups)) + ["nope"]
        body = ConsumerGroupDescribeRequest(group_ids=asked, include_authorized_operations=False)
        a, b = await call(many, body, 1), await call(one, body, 1)
        assert a == b and [d["group_id"] for d in a["groups"]] == asked
        assert [d["error_code"] for d in a["groups"]] == [0] * len(groups) + [69]

    asyncio.run(run())


def test_list_groups_answers_14_while_a_partition_it_coordinates_loads_and_lists_them_once_loaded():
    """Kafka's ListGroups reads every partition the broker coordinates: one still loading fails the request
    with COORDINATOR_LOAD_IN_PROGRESS (14); a partition coordinated by another broker is left out (16 there)."""
    async def run():
        rt = runtime(4)
        groups = {partition_for(f"g{i}", 4): f"g{i}" for i in range(40)}
        for g in groups.values():
            await call(rt, commit(g, {0: 1}), 8)
        listed = await call(rt, ListGroupsRequest(version=4, states_filter=[]), 4)
        assert listed["error_code"] == 0 and {x["group_id"] for x in listed["groups"]} == set(groups.values())
        rt.defer_load()                                   # every partition loading (reloaded below)
        assert await call(rt, ListGroupsRequest(version=4, states_filter=[]), 4) == {
            "throttle_time_ms": 0, "error_code": 14, "groups": []}
        assert (await call(rt, fetch([(groups[0], None)]), 8))["groups"][0]["error_code"] == 14
        total = await rt.load_deferred()
        assert total.records == len(groups) and not rt.loading
        listed = await call(rt, ListGroupsRequest(version=4, states_filter=[]), 4)
        assert listed["error_code"] == 0 and {x["group_id"] for x in listed["groups"]} == set(groups.values())
        rt.hosted_on = lambda p: 0 if p == 0 else 1       # partitions 1-3 coordinated by broker 1
        rt.begin_move(1)                                  # loading, but not here: broker 0 leaves it out
        ctx_req = ListGroupsRequest(version=4, states_filter=[])
        req = Request(ctx_req.API_KEY, 4, 1, "test", ctx_req, SUPPORTED[ctx_req.API_KEY])
        ctx = RequestContext(0, 4, "test", "/127.0.0.1", 0, api_key=req.api_key, broker_id=0)
        on_broker_0 = (await rt.handle(req, ctx)).to_dict()
        assert on_broker_0["error_code"] == 0 and [x["group_id"] for x in on_broker_0["groups"]] == [groups[0]]
        rt.close()
    asyncio.run(run())


def test_member_requests_go_straight_to_their_groups_shard_and_are_refused_as_any_other():
    """JoinGroup, Heartbeat, LeaveGroup and SyncGroup (`direct_apis`) are routed by their group id straight to
    its shard: a heartbeat of a member of each of 4 shards is answered there, one for a partition still loading
    is answered 14, one for a partition another broker coordinates 16 - as every other request is."""
    from kafka.protocol.consumer.group import HeartbeatRequest, LeaveGroupRequest, SyncGroupRequest

    def ask(rt, body, version, broker=None):
        req = Request(type(body).API_KEY, version, 1, "test", body, SUPPORTED[type(body).API_KEY])
        ctx = RequestContext(0, version, "test", "/127.0.0.1", 0, api_key=req.api_key, broker_id=broker)
        return rt.handle(req, ctx)

    async def run():
        rt = runtime(4)
        assert {11, 12, 13, 14} <= rt.direct_apis
        groups = {partition_for(f"g{i}", 4): f"g{i}" for i in range(40)}
        for g in groups.values():
            await call(rt, commit(g, {0: 1}), 8)         # an Empty group in each shard
        hb = {p: (await ask(rt, HeartbeatRequest(version=4, group_id=g, generation_id=-1, member_id="m",
                                                 group_instance_id=None), 4)).error_code for p, g in groups.items()}
        assert hb == {p: 25 for p in groups}             # UNKNOWN_MEMBER_ID from each group's own shard
        assert (await ask(rt, HeartbeatRequest(version=4, group_id="", generation_id=-1, member_id="m",
                                               group_instance_id=None), 4)).error_code == 24   # INVALID_GROUP_ID
        rt.begin_move(2)                                 # partition 2 loading
        rt.hosted_on = lambda p: 1 if p == 3 else 0      # partition 3 coordinated by broker 1
        loading, elsewhere = groups[2], groups[3]
        assert (await ask(rt, HeartbeatRequest(version=4, group_id=loading, generation_id=-1, member_id="m",
                                               group_instance_id=None), 4, 0)).error_code == 14
        assert (await ask(rt, SyncGroupRequest(version=5, group_id=elsewhere, generation_id=1, member_id="m",
                                               group_instance_id=None, protocol_type="consumer",
                                               protocol_name="range", assignments=[]), 5, 0)).error_code == 16
        left = await ask(rt, LeaveGroupRequest(version=3, group_id=elsewhere, members=[]), 3, 0)
        assert left.error_code == 16
        rt.close()
    asyncio.run(run())
