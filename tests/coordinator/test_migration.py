"""Online migration between the classic and the consumer protocol (coordinator/migration.py,
coordinator/consumer/classic_members.py), rule by rule as Kafka 4.x's GroupMetadataManager serves it: the
upgrade by a ConsumerGroupHeartbeat, classic members inside a consumer group (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, their timers, static replacement, fencing), the downgrade, the policy, and replay. The harness checks
after every input that each record round-trips Kafka's bytes and that replaying the records gives the live
groups."""
from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from tenure.coordinator import CoordinatorConfig
from tenure.protocol.consumer_group_records import (
    ClassicMemberMetadata,
    ConsumerGroupMetadataRecord,
    ConsumerMemberRecord,
    CurrentAssignmentRecord,
    TargetAssignmentMemberRecord,
    TargetAssignmentMetadataRecord,
)
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.records import GroupMetadataRecord

from .consumer_harness import ConsumerHarness

_SUB_TP = ConsumerProtocolSubscription.fields["owned_partitions"].data_class
_ASG_TP = ConsumerProtocolAssignment.fields["assigned_partitions"].data_class
SESSION_MS = 12000      # a classic member's own session timeout (the harness's default is 10000)


def sub(topics=("t",), owned: dict[str, list[int]] | None = None, version: int = 3) -> bytes:
    """A classic consumer's JoinGroup metadata (the consumer protocol's Subscription)."""
    return bytes(ConsumerProtocolSubscription(
        topics=list(topics), user_data=None, generation_id=-1, rack_id=None,
        owned_partitions=[_SUB_TP(topic=t, partitions=ps) for t, ps in (owned or {}).items()]).encode(version=version))


def asg(parts: dict[str, list[int]], version: int = 3) -> bytes:
    return bytes(ConsumerProtocolAssignment(assigned_partitions=[_ASG_TP(topic=t, partitions=ps)
                                                                 for t, ps in parts.items()],
                                            user_data=None).encode(version=version))


def parts_of(raw: bytes) -> dict[str, list[int]]:
    a = ConsumerProtocolAssignment.decode(bytes(raw))
    return {t.topic: sorted(t.partitions) for t in a.assigned_partitions}


def protocols(owned=None, topics=("t",)):
    return (("range", sub(topics, owned)),)


def classic_pair(h: ConsumerHarness) -> list[str]:
    """A Stable static classic group "g" (generation 1): i1 holds t-0..2, i2 t-3..5."""
    return h.form_group(["i1", "i2"], protocols=protocols(),
                        assignments={0: asg({"t": [0, 1, 2]}), 1: asg({"t": [3, 4, 5]})})


def upgraded(h: ConsumerHarness) -> tuple[list[str], int]:
    """classic_pair upgraded by a consumer-protocol member "c" (instance i3). (classic ids, heartbeat token)."""
    ids = classic_pair(h)
    t = h.hb("c", 0, instance_id="i3")
    assert h.resp(t)["error_code"] == 0, h.resp(t)
    return ids, t


# ---------------------------------------------------------------- upgrade
def test_a_consumer_heartbeat_upgrades_a_classic_group_with_kafkas_records():
    h = ConsumerHarness()
    a, b = classic_pair(h)
    h.take_records()
    h.take_rebalances()
    t = h.hb("c", 0, instance_id="i3")
    recs = h.take_records()
    tid = h.topics.tid("t")
    cm = ClassicMemberMetadata(10000, (("range", sub()),))       # the harness's session timeout
    conversion = [
        GroupMetadataRecord("g", tombstone=True),
        ConsumerMemberRecord("g", a, "i1", None, "client", recs[1].client_host, ("t",), None, 30000, None, cm),
        ConsumerMemberRecord("g", b, "i2", None, "client", recs[2].client_host, ("t",), None, 30000, None, cm),
        ConsumerGroupMetadataRecord("g", 1, recs[3].metadata_hash),
        TargetAssignmentMemberRecord("g", a, ((tid, (0, 1, 2)),)),
        TargetAssignmentMemberRecord("g", b, ((tid, (3, 4, 5)),)),
        TargetAssignmentMetadataRecord("g", 1),
        CurrentAssignmentRecord("g", a, 1, 1, 0, ((tid, (0, 1, 2)),), ()),
        CurrentAssignmentRecord("g", b, 1, 1, 0, ((tid, (3, 4, 5)),), ()),
    ]
    assert recs[:len(conversion)] == conversion
    assert recs[3].metadata_hash == h.coordinator.topic_hashes.group_hash({"t"}) != 0
    # then the heartbeat proceeds: the new member joins, one epoch bump, a new target for the three
    g = h.group["g"]
    assert g.kind == "consumer" and g.group_epoch == 2 and set(g.members) == {a, b, "c"}
    assert h.resp(t)["member_epoch"] == 2
    assert sorted(p for ps in (h.target(m) for m in (a, b, "c")) for p in ps["t"]) == list(range(6))
    # the classic members keep what they hold until they rejoin; the newcomer waits for its partitions
    assert h.owned(a) == {"t": [0, 1, 2]} and h.owned(b) == {"t": [3, 4, 5]} and h.owned("c") == {}
    assert g.members[a].classic == cm and g.members["c"].classic is None
    # their sessions are the consumer group's timers now, at their own classic session timeout
    assert h.timer("heartbeat", "g", a) is None
    assert h.timer("consumer-session", "g", a) == h.now_ms + 10000
    assert h.take_rebalances() == [("g", "consumer member joined")]


def test_the_upgrade_answers_parked_joins_and_syncs_rebalance_in_progress():
    h = ConsumerHarness()
    a, b = classic_pair(h)
    j = h.join("g", a, "i1", protocols=protocols({"t": [0, 1, 2]}))     # a rebalance: a's join is parked
    assert h.parked(j)
    h.hb("c", 0, instance_id="i3")
    assert h.resp(j)["error_code"] == E.REBALANCE_IN_PROGRESS
    assert h.group["g"].kind == "consumer" and h.timer("join", "g") is None


@pytest.mark.parametrize("policy", ["downgrade", "disabled"])
def test_no_upgrade_unless_the_policy_allows_it(policy):
    h = ConsumerHarness(CoordinatorConfig(consumer_migration_policy=policy))
    classic_pair(h)
    t = h.hb("c", 0, instance_id="i3")
    assert h.resp(t)["error_code"] == E.GROUP_ID_NOT_FOUND
    assert h.resp(t)["error_message"] == "Group g is not a consumer group"   # Kafka 4.x's words
    assert h.group["g"].kind == "classic"


def test_no_upgrade_of_a_group_of_another_protocol_type_or_past_the_size_limit():
    h = ConsumerHarness()
    j = h.join("w", "", "i1", protocol_type="connect", protocols=(("default", b"worker"),))
    h.advance(0)
    mid = h.resp(j)["member_id"]
    h.sync("w", mid, 1, "i1", protocol_type="connect", protocol_name="default", assignments={mid: b"x"})
    assert h.group["w"].state == "Stable"
    t = h.hb("c", 0, group_id="w")
    assert h.resp(t)["error_code"] == E.GROUP_ID_NOT_FOUND and h.group["w"].kind == "classic"
    h2 = ConsumerHarness(CoordinatorConfig(max_group_size=2))
    classic_pair(h2)
    t = h2.hb("c", 0, instance_id="i3")
    assert h2.resp(t)["error_code"] == E.GROUP_MAX_SIZE_REACHED      # 2 fit, the newcomer does not
    assert h2.group["g"].kind == "classic"


def test_a_non_zero_epoch_to_a_classic_group_is_not_an_upgrade():
    h = ConsumerHarness()
    classic_pair(h)
    t = h.hb("c", 3)
    assert h.resp(t)["error_code"] == E.GROUP_ID_NOT_FOUND and h.group["g"].kind == "classic"


# ---------------------------------------------------------------- classic members in a consumer group
def test_a_classic_member_is_told_to_rejoin_and_gets_its_share_through_join_and_sync():
    h = ConsumerHarness()
    (a, b), _ = upgraded(h)
    # heartbeat at its old generation: REBALANCE_IN_PROGRESS (the group epoch is ahead), the join timer armed
    t = h.heartbeat("g", a, 1, "i1")
    assert h.resp(t)["error_code"] == E.REBALANCE_IN_PROGRESS
    assert h.timer("consumer-join", "g", a) == h.now_ms + 30000           # its rebalance timeout
    # an eager member rejoins owning nothing: it is at epoch 2 with what is free of its target
    j = h.join("g", a, "i1", protocols=protocols(), session=SESSION_MS)
    r = h.resp(j)
    assert (r["error_code"], r["generation_id"], r["leader"], r["members"], r["protocol_name"]) == (0, 2, "", [], "range")
    assert h.timer("consumer-join", "g", a) is None and h.timer("consumer-sync", "g", a) == h.now_ms + 30000
    s = h.sync("g", a, 2, "i1")
    assert h.resp(s)["error_code"] == 0 and h.timer("consumer-sync", "g", a) is None
    assert parts_of(h.resp(s)["assignment"]) == h.target(a)
    assert h.group["g"].members[a].classic.session_timeout_ms == SESSION_MS
    assert h.timer("consumer-session", "g", a) == h.now_ms + SESSION_MS
    assert h.resp(h.heartbeat("g", a, 2, "i1"))["error_code"] == 0


def test_a_cooperative_classic_member_revokes_then_rejoins_for_the_rest():
    h = ConsumerHarness()
    (a, b), _ = upgraded(h)
    target_a = h.target(a)["t"]
    # it rejoins owning 0..2: what is not its target any more is to be revoked (UNREVOKED), it keeps the rest
    j = h.join("g", a, "i1", protocols=protocols({"t": [0, 1, 2]}))
    assert h.resp(j)["generation_id"] == 1
    assert h.group["g"].members[a].state == 1
    s = h.sync("g", a, 1, "i1")                      # unrevoked: sync answers (Kafka: no rejoin until revoked)
    assert h.resp(s)["error_code"] == 0 and parts_of(h.resp(s)["assignment"]) == {"t": sorted(set(target_a) & {0, 1, 2})}
    assert h.resp(h.heartbeat("g", a, 1, "i1"))["error_code"] == E.REBALANCE_IN_PROGRESS
    j = h.join("g", a, "i1", protocols=protocols({"t": sorted(set(target_a) & {0, 1, 2})}))
    assert h.resp(j)["generation_id"] == 2 and h.group["g"].members[a].state == 0


def test_a_new_dynamic_classic_member_gets_member_id_required_then_joins():
    h = ConsumerHarness()
    upgraded(h)
    j = h.join("g", "", None, protocols=protocols())
    r = h.resp(j)
    assert r["error_code"] == E.MEMBER_ID_REQUIRED and r["member_id"]
    assert r["member_id"] not in h.group["g"].members                 # nothing kept before the second join
    j2 = h.join("g", r["member_id"], None, protocols=protocols())
    assert h.resp(j2)["error_code"] == 0 and h.resp(j2)["generation_id"] == 3
    assert h.group["g"].group_epoch == 3 and h.group["g"].members[r["member_id"]].classic is not None


def test_classic_requests_get_kafkas_errors():
    h = ConsumerHarness()
    (a, b), _ = upgraded(h)
    assert h.resp(h.heartbeat("g", "nobody", 1))["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.resp(h.heartbeat("g", a, 7, "i1"))["error_code"] == E.ILLEGAL_GENERATION
    assert h.resp(h.heartbeat("g", "other", 1, "i1"))["error_code"] == E.FENCED_INSTANCE_ID
    assert h.resp(h.heartbeat("g", b, 1, "i9"))["error_code"] == E.UNKNOWN_MEMBER_ID
    # a consumer-protocol member speaking the classic protocol: unknown to it
    assert h.resp(h.heartbeat("g", "c", 2))["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.resp(h.sync("g", "c", 2))["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.resp(h.sync("g", a, 1, "i1", protocol_name="roundrobin"))["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.resp(h.sync("g", a, 1, "i1"))["error_code"] == E.REBALANCE_IN_PROGRESS     # group epoch ahead
    # bad JoinGroups: another protocol type, no protocol in common
    assert h.resp(h.join("g", a, "i1", protocols=protocols(), protocol_type="connect"))["error_code"] == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert h.resp(h.join("g", a, "i1", protocols=(("roundrobin", sub()),)))["error_code"] == \
        E.INCONSISTENT_GROUP_PROTOCOL
    # Kafka's deserializeSubscription throws IllegalStateException: UNKNOWN_SERVER_ERROR, the group untouched
    assert h.resp(h.join("g", a, "i1", protocols=(("range", b"\x00"),)))["error_code"] == E.UNKNOWN_SERVER_ERROR
    assert h.resp(h.join("g", "nobody", "i1", protocols=protocols()))["error_code"] == E.FENCED_INSTANCE_ID
    assert h.group["g"].kind == "consumer" and len(h.group["g"].members) == 3


@pytest.mark.parametrize("timer", ["consumer-join", "consumer-sync", "consumer-session"])
def test_a_classic_member_missing_its_join_sync_or_session_deadline_is_fenced(timer):
    h = ConsumerHarness()
    (a, b), _ = upgraded(h)
    if timer == "consumer-join":
        h.heartbeat("g", a, 1, "i1")                        # told to rejoin, never does
    elif timer == "consumer-sync":
        h.join("g", a, "i1", protocols=protocols(), session=SESSION_MS)   # joins, never syncs
    h.take_rebalances()
    key = next(k for k in h.timers if k.kind == timer and k.member_id == a)
    h.fire(key)
    g = h.group["g"]
    assert a not in g.members and g.kind == "consumer" and g.group_epoch == 3
    assert h.take_rebalances() == [("g", "consumer member expired")]


def test_leave_group_removes_classic_members_with_one_epoch_bump():
    h = ConsumerHarness()
    (a, b), _ = upgraded(h)
    t = h.leave("g", [(a, "i1"), ("", "i9")])
    assert [m["error_code"] for m in h.resp(t)["members"]] == [0, E.UNKNOWN_MEMBER_ID]
    assert a not in h.group["g"].members and h.group["g"].group_epoch == 3
    t = h.leave("g", b, version=2)                          # v0-2: one member, its code is the answer's
    assert h.resp(t)["error_code"] == 0 and h.group["g"].kind == "consumer"


def test_a_consumer_heartbeat_takes_over_a_static_classic_member_without_a_rebalance():
    """The upgrade of a static member: a classic member sends no leave, so its instance id is taken over at
    once (no UNRELEASED_INSTANCE_ID), with its partitions and no epoch bump (same subscription)."""
    h = ConsumerHarness()
    (a, b), _ = upgraded(h)
    epoch = h.group["g"].group_epoch
    t = h.hb("a2", 0, instance_id="i1")
    assert h.resp(t)["error_code"] == 0 and h.resp(t)["member_epoch"] == epoch
    g = h.group["g"]
    assert a not in g.members and g.members["a2"].classic is None and g.group_epoch == epoch
    assert h.owned("a2") == h.target("a2")


# ---------------------------------------------------------------- downgrade
def test_the_last_consumer_member_leaving_downgrades_and_starts_a_rebalance():
    h = ConsumerHarness()
    (a, b), _ = upgraded(h)
    for mid, iid in ((a, "i1"), (b, "i2")):          # both catch up with the consumer group
        h.join("g", mid, iid, protocols=protocols(), session=SESSION_MS)
    targets = {m: h.target(m) for m in (a, b)}
    h.take_records()
    h.take_rebalances()
    t = h.hb("c", -1, instance_id="i3")
    assert h.resp(t)["error_code"] == 0
    recs = h.take_records()
    assert recs[-1] == GroupMetadataRecord(           # Stable at the group epoch, no bump for the leave
        "g", "consumer", 2, "range", a, recs[-1].current_state_timestamp,
        tuple(recs[-1].members))
    assert ConsumerGroupMetadataRecord("g", tombstone=True) in recs
    c = h.group["g"]
    assert c.kind == "classic" and c.state == "PreparingRebalance" and c.generation == 2
    assert {m.member_id: parts_of(m.assignment) for m in c.members.values()} == targets
    assert {m.session_timeout_ms for m in c.members.values()} == {SESSION_MS}
    assert h.take_rebalances() == [("g", "downgraded_to_classic")]
    # classic rules from here: a heartbeat is told to rejoin, the rejoins make generation 3
    assert h.resp(h.heartbeat("g", a, 2, "i1"))["error_code"] == E.REBALANCE_IN_PROGRESS
    j1 = h.join("g", a, "i1", protocols=protocols())
    j2 = h.join("g", b, "i2", protocols=protocols())
    assert h.resp(j1)["generation_id"] == h.resp(j2)["generation_id"] == 3


def test_a_fenced_last_consumer_member_downgrades_too():
    h = ConsumerHarness()
    (a, b), _ = upgraded(h)
    h.fire(next(k for k in h.timers if k.kind == "consumer-session" and k.member_id == "c"))
    assert h.group["g"].kind == "classic" and set(h.group["g"].members) == {a, b}


def test_no_downgrade_when_the_policy_forbids_it_or_nobody_is_left():
    h = ConsumerHarness(CoordinatorConfig(consumer_migration_policy="upgrade"))
    (a, b), _ = upgraded(h)
    h.hb("c", -1, instance_id="i3")
    assert h.group["g"].kind == "consumer" and set(h.group["g"].members) == {a, b}
    h2 = ConsumerHarness()
    h2.hb("c", 0)
    h2.hb("c", -1)
    assert h2.group["g"].kind == "consumer" and h2.group["g"].is_empty()


def test_a_static_leave_keeps_the_consumer_group_and_a_classic_replacement_downgrades_without_a_rebalance():
    """The roll back of a static member: the consumer member closes (-2), its classic successor joins with the
    same instance id, replaces it, and - all members classic now - the group becomes a Stable classic group
    with the partitions where they were."""
    h = ConsumerHarness()
    (a, b), _ = upgraded(h)
    for mid, iid in ((a, "i1"), (b, "i2")):
        h.join("g", mid, iid, protocols=protocols(), session=SESSION_MS)
    h.hb("c", h.group["g"].members["c"].member_epoch, instance_id="i3")
    h.hb("c", -2, instance_id="i3")
    assert h.group["g"].kind == "consumer"
    c_target = h.target("c")
    h.take_rebalances()
    j = h.join("g", "", "i3", protocols=protocols())
    new = h.resp(j)["member_id"]
    assert h.resp(j)["error_code"] == 0 and new != "c"
    cg = h.group["g"]
    assert cg.kind == "classic" and cg.state == "Stable" and h.take_rebalances() == []
    assert cg.static_members["i3"] == new and parts_of(cg.members[new].assignment) == c_target
    s = h.sync("g", new, cg.generation, "i3")
    assert h.resp(s)["error_code"] == 0 and parts_of(h.resp(s)["assignment"]) == c_target


# ---------------------------------------------------------------- replay
def test_a_migrated_group_survives_a_failover():
    h = ConsumerHarness()
    (a, b), _ = upgraded(h)
    h.join("g", a, "i1", protocols=protocols(), session=SESSION_MS)
    other = h.failover()
    g = other.group["g"]
    assert g.kind == "consumer" and g.members[a].classic == ClassicMemberMetadata(SESSION_MS, (("range", sub()),))
    assert other.timer("consumer-session", "g", a) == other.now_ms + SESSION_MS
    assert other.resp(other.heartbeat("g", a, g.members[a].member_epoch, "i1"))["error_code"] in (0, E.REBALANCE_IN_PROGRESS)
    # and back: downgraded after the failover, replayed again
    other.hb("c", -1, instance_id="i3")
    again = other.failover()
    assert again.group["g"].kind == "classic" and set(again.group["g"].members) == {a, b}


def test_the_policy_flag_is_kafkas():
    from tenure.config import ServerConfig
    assert ServerConfig().coordinator_config().consumer_migration_policy == "bidirectional"
    assert ServerConfig(consumer_migration_policy="disabled").coordinator_config().consumer_migration_policy == \
        "disabled"


def test_a_classic_member_commits_with_its_generation_at_any_version():
    """Kafka's ConsumerGroup.validateOffsetCommit: a classic member commits at any OffsetCommit version with its
    generation (= its member epoch; another is ILLEGAL_GENERATION); a consumer-protocol member needs v9+."""
    h = ConsumerHarness()
    (a, b), _ = upgraded(h)

    def codes(t):
        return [p["error_code"] for x in h.resp(t)["topics"] for p in x["partitions"]]
    assert codes(h.commit("g", a, 1, "i1", {"t": [(0, 5)]}, version=8)) == [0]
    assert h.coordinator.committed_offsets("g")[("t", 0)].offset == 5
    assert codes(h.commit("g", a, 2, "i1", {"t": [(0, 6)]}, version=8)) == [E.ILLEGAL_GENERATION]
    assert codes(h.commit("g", "c", 2, "i3", {"t": [(3, 1)]}, version=8)) == [E.UNSUPPORTED_VERSION]
    assert codes(h.commit("g", "c", 2, "i3", {"t": [(3, 1)]}, version=9)) == [0]


def test_describe_shows_classic_members_as_classic():
    """ConsumerGroupDescribe v1's MemberType (KIP-1099): 0 for a classic-protocol member, 1 for a consumer one;
    the inspection read model gives a classic member its own session timeout."""
    h = ConsumerHarness()
    (a, b), _ = upgraded(h)
    h.join("g", a, "i1", protocols=protocols(), session=SESSION_MS)
    (d,) = h.resp(h.describe_consumer("g"))["groups"]
    assert {m["member_id"]: m["member_type"] for m in d["members"]} == {a: 0, b: 0, "c": 1}
    info = h.coordinator.group_info("g")
    assert {m.member_id: m.session_timeout_ms for m in info.members} == {a: SESSION_MS, b: 10000, "c": 45000}
