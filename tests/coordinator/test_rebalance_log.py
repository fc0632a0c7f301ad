"""The runtime's rebalance lines (`rebalance started`, `Stable`, `Stable again`) read the group's state, generation
and member count from the shard's own group value: forming a group never builds its read model (which decodes every
member's assignment), and the lines say what they said before."""
from __future__ import annotations

import asyncio
import logging

from kafka.protocol.consumer.group import JoinGroupRequest, SyncGroupRequest

from tenure.broker.topics import TopicRegistry
from tenure.coordinator import GroupShard
from tenure.coordinator.classic import ClassicGroups
from tenure.coordinator.group_runtime import GroupRuntime
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.internal_topics import OFFSETS_TOPIC

INSTANCES = ["a", "b", "c"]


async def call(rt: GroupRuntime, body, version: int) -> dict:
    req = Request(type(body).API_KEY, version, 1, "test", body, SUPPORTED[type(body).API_KEY])
    ctx = RequestContext(0, version, "test", "/127.0.0.1", 0, api_key=req.api_key)
    return (await rt.handle(req, ctx)).to_dict()


def join(instance: str, member_id: str = "") -> JoinGroupRequest:
    P = JoinGroupRequest.JoinGroupRequestProtocol
    return JoinGroupRequest(version=8, group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                            member_id=member_id, group_instance_id=instance, protocol_type="consumer",
                            protocols=[P(version=8, name="range", metadata=b"\x00\x01")])


def sync(instance: str, member_id: str, generation: int, assignments: dict[str, bytes]) -> SyncGroupRequest:
    A = SyncGroupRequest.SyncGroupRequestAssignment
    return SyncGroupRequest(version=5, group_id="g", generation_id=generation, member_id=member_id,
                            group_instance_id=instance, protocol_type="consumer", protocol_name="range",
                            assignments=[A(version=5, member_id=m, assignment=a) for m, a in assignments.items()])


async def form(rt: GroupRuntime, member_ids: dict[str, str]) -> int:
    """Every instance joins (with its member id, if it has one) and syncs; the generation they formed."""
    joined = await asyncio.gather(*(call(rt, join(i, member_ids.get(i, "")), 8) for i in INSTANCES))
    assert all(j["error_code"] == 0 for j in joined), joined
    member_ids.update({i: j["member_id"] for i, j in zip(INSTANCES, joined)})
    generation = joined[0]["generation_id"]
    leader = joined[0]["leader"]
    assignments = {m: bytes(300) for m in member_ids.values()}
    synced = await asyncio.gather(*(call(rt, sync(i, m, generation, assignments if m == leader else {}), 5)
                                    for i, m in member_ids.items()))
    assert all(s["error_code"] == 0 for s in synced), synced
    return generation


def test_rebalance_lines_say_state_generation_and_members_without_building_the_groups_read_model(
        caplog, monkeypatch):
    built = []
    real = ClassicGroups.info

    def counting(g):
        built.append(g.group_id)
        return real(g)
    monkeypatch.setattr(ClassicGroups, "info", staticmethod(counting))
    caplog.set_level(logging.INFO, logger="tenure.coordinator")

    async def run():
        topic = TopicRegistry().create(OFFSETS_TOPIC, 4, internal=True, configs={"cleanup.policy": "compact"})
        rt = GroupRuntime(lambda p: GroupShard(partition=p), topic)
        rt.expect_group("g", 3)                    # the first rebalance ends once the three have joined
        member_ids: dict[str, str] = {}
        assert await form(rt, member_ids) == 1
        rt.force_rebalance("g")                    # a second rebalance, of the formed group
        assert await form(rt, member_ids) == 2
        assert built == []                         # the lines read the shard's own group, no read model
        assert rt.group_info("g").generation == 2 and built == ["g"]   # (inspection still builds it)
        rt.close()

    asyncio.run(run())
    lines = [r for r in caplog.records if r.name == "tenure.coordinator"
             and getattr(r, "event", None) in ("rebalance", "rebalance_done")]
    assert [(r.event, r.getMessage()) for r in lines] == [
        ("rebalance", "group g: rebalance started (cause member_joined; from generation 0, 1 member(s))"),
        ("rebalance_done", f"group g: Stable (generation 1, took {lines[1].took_ms} ms)"),
        ("rebalance", "group g: rebalance started (cause forced; from generation 1, 3 member(s))"),
        ("rebalance_done", f"group g: Stable again (generation 2, took {lines[3].took_ms} ms)")]
    assert [(r.generation, r.members) for r in lines if r.event == "rebalance"] == [(0, 1), (1, 3)]
    assert [(r.state, r.generation) for r in lines if r.event == "rebalance_done"] == [("Stable", 1), ("Stable", 2)]
