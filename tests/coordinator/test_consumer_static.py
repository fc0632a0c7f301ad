"""Static membership in KIP-848 consumer groups: a member closing with epoch -2 keeps its partitions and
the group epoch; the same instance id rejoining with epoch 0 gets the same partitions back with no epoch bump
and no other member touched; a live duplicate gets 111, a stale member id 82; a member at -2 not back within
its session is fenced and its partitions reassigned in one bump. Static and dynamic members mix."""
from __future__ import annotations

from tenure.coordinator.consumer.group import STABLE_MEMBER
from tenure.protocol.consumer_group_records import (
    ConsumerGroupMetadataRecord,
    ConsumerMemberRecord,
    CurrentAssignmentRecord,
    TargetAssignmentMemberRecord,
)
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.records import EXPIRED, FENCED, JOINED, LEFT, REPLACED, StaticMemberEventRecord

from .consumer_harness import SESSION, ConsumerHarness, Topics

MEMBERS = {"a1": "ia", "b1": "ib", "c1": None}       # two static, one dynamic


def formed(n_partitions: int = 12) -> ConsumerHarness:
    h = ConsumerHarness(topics=Topics(t=n_partitions))
    for mid, iid in MEMBERS.items():
        h.cjoin(mid, iid)
    h.settle(MEMBERS)
    h.take_records()
    return h


def test_static_members_join_with_events():
    h = ConsumerHarness(topics=Topics(t=12))
    h.cjoin("a1", "ia")
    assert [r for r in h.records if isinstance(r, StaticMemberEventRecord)] == [
        StaticMemberEventRecord("g", "ia", JOINED, None, "a1", 0, h.now_ms, "client", "/10.0.0.1")]
    assert h.group["g"].static_members == {"ia": "a1"}


def test_minus_two_keeps_partitions_and_epoch_then_rejoin_gets_them_back_without_a_bump():
    h = formed()
    epoch = h.epoch()
    mine = h.owned("a1")
    others = {m: h.group["g"].members[m] for m in ("b1", "c1")}
    t = h.hb("a1", h.group["g"].members["a1"].member_epoch, instance_id="ia")
    t = h.hb("a1", -2, instance_id="ia")
    assert (h.responses[t]["error_code"], h.responses[t]["member_epoch"]) == (0, -2)
    assert h.epoch() == epoch and h.owned("a1") == mine
    # the others heartbeat on: nobody gets a1's partitions
    h.settle({"b1": "ib", "c1": None})
    assert h.epoch() == epoch and h.owned("a1") == mine
    h.take_records()
    # the restarted process joins with a new member id (KIP-1082: the client makes it) and epoch 0
    t = h.hb("a2", 0, instance_id="ia")
    r = h.responses[t]
    assert (r["error_code"], r["member_id"], r["member_epoch"]) == (0, "a2", epoch)
    assert h.assignment_of(t) == mine and h.epoch() == epoch
    recs = h.take_records()
    assert not [x for x in recs if isinstance(x, ConsumerGroupMetadataRecord)]          # no bump
    touched = {x.member_id for x in recs if hasattr(x, "member_id")}
    assert touched == {"a1", "a2"}                                                      # nobody else
    assert StaticMemberEventRecord("g", "ia", REPLACED, "a1", "a2", epoch, h.now_ms, "client",
                                   "/10.0.0.1") in recs
    assert {m: h.group["g"].members[m] for m in ("b1", "c1")} == others
    assert h.group["g"].static_members == {"ia": "a2", "ib": "b1"}
    assert h.group["g"].members["a2"].state == STABLE_MEMBER
    assert h.timer("consumer-session", "g", "a1") is None
    h.settle({"a2": "ia", "b1": "ib", "c1": None})
    assert h.epoch() == epoch and h.group["g"].state == "Stable"


def test_a_live_duplicate_instance_gets_111_and_changes_nothing():
    h = formed()
    t = h.hb("x9", 0, instance_id="ib")
    assert h.responses[t]["error_code"] == E.UNRELEASED_INSTANCE_ID
    assert "ib" in h.responses[t]["error_message"] and h.take_records() == []
    assert h.group["g"].static_members["ib"] == "b1"


def test_a_stale_member_id_for_a_mapped_instance_gets_82():
    h = formed()
    h.hb("a1", -2, instance_id="ia")
    h.hb("a2", 0, instance_id="ia")
    t = h.hb("a1", 3, instance_id="ia", owned={})
    assert h.responses[t]["error_code"] == E.FENCED_INSTANCE_ID
    assert h.take_records()[-1] == StaticMemberEventRecord("g", "ia", FENCED, "a1", "a2", h.epoch(), h.now_ms,
                                                            "client", "/10.0.0.1")
    assert h.responses[h.hb("zz", 3, instance_id="nope", owned={})]["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.responses[h.hb("a1", -1, instance_id="ia")]["error_code"] == E.FENCED_INSTANCE_ID


def test_minus_two_not_back_within_the_session_is_fenced_and_reassigned_in_one_bump():
    h = formed()
    epoch = h.epoch()
    gone = h.owned("a1")["t"]
    h.hb("a1", -2, instance_id="ia")
    for _ in range(SESSION // 5000 - 1):             # the others keep heartbeating
        h.advance(5000)
        h.settle({"b1": "ib", "c1": None})
    assert "a1" in h.group["g"].members and h.epoch() == epoch
    h.advance(5000)
    assert "a1" not in h.group["g"].members and h.epoch() == epoch + 1
    assert [r for r in h.records if isinstance(r, StaticMemberEventRecord)][-1].cause == EXPIRED
    h.settle({"b1": "ib", "c1": None})
    assert h.epoch() == epoch + 1
    assert sorted(h.owned("b1")["t"] + h.owned("c1")["t"]) == list(range(12))
    assert set(gone) <= set(h.owned("b1")["t"] + h.owned("c1")["t"])


def test_epoch_minus_one_with_an_instance_id_leaves_for_good():
    h = formed()
    epoch = h.epoch()
    t = h.hb("a1", -1, instance_id="ia")
    assert h.responses[t]["member_epoch"] == -1 and h.epoch() == epoch + 1
    recs = h.take_records()
    assert ConsumerMemberRecord("g", "a1", tombstone=True) in recs
    assert StaticMemberEventRecord("g", "ia", LEFT, "a1", None, epoch, h.now_ms, "client", "/10.0.0.1") in recs
    assert "ia" not in h.group["g"].static_members
    # the instance id is free again: a new member with it joins as new (a bump)
    h.hb("a3", 0, instance_id="ia")
    assert h.epoch() == epoch + 2


def test_rolling_restart_of_every_static_member_makes_no_bump():
    members = {f"m{i}": f"i{i}" for i in range(4)}
    h = ConsumerHarness(topics=Topics(t=12))
    for mid, iid in members.items():
        h.cjoin(mid, iid)
    h.settle(members)
    epoch = h.epoch()
    before = {iid: h.owned(mid) for mid, iid in members.items()}
    for _n, (mid, iid) in enumerate(list(members.items())):
        h.hb(mid, -2, instance_id=iid)
        h.advance(1000)
        new = f"{mid}-r"
        t = h.hb(new, 0, instance_id=iid)
        assert h.assignment_of(t) == before[iid]
        del members[mid]
        members[new] = iid
        h.settle(members)
    assert h.epoch() == epoch
    assert {iid: h.owned(mid) for mid, iid in members.items()} == before


def test_restart_with_a_member_at_minus_two_keeps_its_place():
    h = formed()
    h.hb("a1", -2, instance_id="ia")
    mine = h.owned("a1")
    h2 = h.failover()
    assert h2.group["g"].members["a1"].member_epoch == -2
    assert h2.timer("consumer-session", "g", "a1") == h.now_ms + SESSION
    t = h2.hb("a2", 0, instance_id="ia")
    assert h2.assignment_of(t) == mine and h2.epoch() == h.epoch()


def test_the_rejoining_member_may_keep_its_member_id():
    h = formed()
    epoch = h.epoch()
    mine = h.owned("a1")
    h.hb("a1", -2, instance_id="ia")
    t = h.hb("a1", 0, instance_id="ia")
    assert h.responses[t]["error_code"] == 0 and h.assignment_of(t) == mine and h.epoch() == epoch
    assert h.group["g"].members["a1"].member_epoch == epoch
    assert not [r for r in h.take_records() if isinstance(r, (CurrentAssignmentRecord, TargetAssignmentMemberRecord))
                and r.tombstone]


def test_minus_two_does_not_reset_the_session_timer():
    """Kafka writes the -2 and leaves the session timer as the last heartbeat set it."""
    h = formed()
    epoch = h.group["g"].members["a1"].member_epoch
    h.hb("a1", epoch, instance_id="ia", owned=h.owned("a1"))
    deadline = h.timer("consumer-session", "g", "a1")
    h.advance(10000)
    h.hb("a1", -2, instance_id="ia")
    assert h.timer("consumer-session", "g", "a1") == deadline


def test_epoch_zero_from_the_live_holder_itself_is_111_too():
    """Kafka refuses epoch 0 for an instance id whose member is not at -2, whatever the member id."""
    h = formed()
    t = h.hb("a1", 0, instance_id="ia")
    assert h.responses[t]["error_code"] == E.UNRELEASED_INSTANCE_ID and h.take_records() == []
    # Kafka's message, word for word (throwIfInstanceIdIsUnreleased); a static member fenced by 110 that
    # rejoins this way is refused on Kafka too (KAFKA-19233 changed the dynamic members' rule only)
    assert h.responses[t]["error_message"] == ("Static member a1 with instance id ia cannot join the group "
                                               "because the instance id is owned by a1 member.")
