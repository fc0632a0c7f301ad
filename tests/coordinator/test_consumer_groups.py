"""KIP-848 consumer groups in the coordinator: ConsumerGroupHeartbeat's validation, steps, epochs,
reconciliation (revoke first, then assign; never one partition to two members), the rebalance and session
timeouts, leaving, the assignors, the metadata hash, records and restart."""
from __future__ import annotations

import pytest

from tenure.coordinator.consumer.group import STABLE_MEMBER, UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS
from tenure.protocol.consumer_group_records import (
    ConsumerGroupMetadataRecord,
    ConsumerMemberRecord,
    CurrentAssignmentRecord,
    TargetAssignmentMemberRecord,
    TargetAssignmentMetadataRecord,
)
from tenure.protocol.errors import ErrorCode as E

from .consumer_harness import REBALANCE_TIMEOUT, SESSION, ConsumerHarness, Topics


def err(h: ConsumerHarness, token: int) -> int:
    return h.responses[token]["error_code"]


def two_members(h: ConsumerHarness, a_iid=None, b_iid=None) -> None:
    h.cjoin("a", a_iid)
    h.cjoin("b", b_iid)
    h.settle({"a": a_iid, "b": b_iid})


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize("kw, message", [
    (dict(group_id=" "), "GroupId can't be empty."),
    (dict(member_id="", epoch=0), "MemberId can't be empty."),           # v1: the client makes its id
    (dict(member_id="m", epoch=0, instance_id=""), "InstanceId can't be empty."),
    (dict(member_id="m", epoch=0, rack=" "), "RackId can't be empty."),
    (dict(member_id="m", epoch=0, owned={"t": [0]}), "TopicPartitions must be empty when (re-)joining."),
    (dict(member_id="m", epoch=-2), "InstanceId can't be null."),
    (dict(member_id="m", epoch=-3), "MemberEpoch is invalid."),                   # Kafka 4.x's words
])
def test_invalid_requests_answer_42_with_a_message(kw, message):
    h = ConsumerHarness()
    mid, epoch = kw.pop("member_id", "m"), kw.pop("epoch", 0)
    t = h.hb(mid, epoch, **kw)
    assert (err(h, t), h.responses[t]["error_message"]) == (E.INVALID_REQUEST, message)
    assert h.records == [] and "g" not in h.group


def test_first_request_needs_rebalance_timeout_and_subscription():
    h = ConsumerHarness()
    from tenure.protocol.consumer_group import ConsumerGroupHeartbeatRequest as R
    body = R(group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout_ms=-1,
             subscribed_topic_names=["t"], subscribed_topic_regex=None, server_assignor=None, topic_partitions=[])
    assert err(h, h.send(68, 1, body)) == E.INVALID_REQUEST
    body.rebalance_timeout_ms, body.subscribed_topic_names = 1000, None
    t = h.send(68, 1, body)
    assert (err(h, t), h.responses[t]["error_message"]) == (
        E.INVALID_REQUEST, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    # an empty list of names (or an empty regex) is a member subscribed to nothing yet: accepted, as Kafka's
    body.subscribed_topic_names = []
    assert err(h, h.send(68, 1, body)) == 0


def test_v0_lets_the_coordinator_make_the_member_id():
    h = ConsumerHarness()
    t = h.hb("", 0, version=0, client_id="c")
    assert err(h, t) == 0 and h.responses[t]["member_id"] == "c-1"


def test_unknown_assignor_is_112_and_unknown_group_is_69():
    h = ConsumerHarness()
    t = h.hb("m", 0, assignor="sticky")
    assert err(h, t) == E.UNSUPPORTED_ASSIGNOR and "uniform" in h.responses[t]["error_message"]
    assert err(h, h.hb("m", 3, topics=["t"])) == E.GROUP_ID_NOT_FOUND


# ------------------------------------------------------------------ joining, records
def test_first_member_gets_every_partition_with_the_records_kafka_writes():
    h = ConsumerHarness()
    t = h.hb("a", 0)
    r = h.responses[t]
    assert (r["member_id"], r["member_epoch"], r["heartbeat_interval_ms"]) == ("a", 1, 5000)
    assert h.assignment_of(t) == {"t": [0, 1, 2, 3, 4, 5]}
    tid = h.topics.tid("t")
    ghash = h.coordinator.topic_hashes.group_hash({"t"})
    assert ghash != 0
    assert h.take_records() == [
        ConsumerMemberRecord("g", "a", None, None, "client", "/10.0.0.1", ("t",), None, REBALANCE_TIMEOUT, None),
        ConsumerGroupMetadataRecord("g", 1, ghash),
        TargetAssignmentMemberRecord("g", "a", ((tid, (0, 1, 2, 3, 4, 5)),)),
        TargetAssignmentMetadataRecord("g", 1),
        CurrentAssignmentRecord("g", "a", 1, 0, STABLE_MEMBER, ((tid, (0, 1, 2, 3, 4, 5)),), ()),
    ]
    assert h.timer("consumer-session", "g", "a") == h.now_ms + SESSION
    # a plain heartbeat changes nothing and writes nothing; the answer carries no assignment
    t = h.hb("a", 1)
    assert err(h, t) == 0 and h.responses[t]["assignment"] is None and h.take_records() == []


def test_revoke_first_then_assign_never_two_owners():
    h = ConsumerHarness()
    h.cjoin("a")
    t = h.hb("b", 0)
    # b is at the new epoch but its target is still owned by a: nothing yet
    assert (h.responses[t]["member_epoch"], h.assignment_of(t)) == (2, {})
    assert h.group["g"].members["b"].state == UNRELEASED_PARTITIONS
    # a must revoke 3,4,5 first: it stays at epoch 1 holding only 0,1,2
    t = h.hb("a", 1, owned={"t": [0, 1, 2, 3, 4, 5]})
    assert (h.responses[t]["member_epoch"], h.assignment_of(t)) == (1, {"t": [0, 1, 2]})
    assert h.group["g"].members["a"].state == UNREVOKED_PARTITIONS
    assert h.timer("consumer-rebalance", "g", "a") == h.now_ms + REBALANCE_TIMEOUT
    # b retries: still held by a
    t = h.hb("b", 2, owned={})
    assert h.responses[t]["assignment"] is None and h.owned("b") == {}
    # a still reports owning them: unchanged
    assert h.responses[h.hb("a", 1, owned={"t": [0, 1, 2, 3]})]["member_epoch"] == 1
    # a revoked: it moves to epoch 2, its rebalance timer is cancelled; b gets 3,4,5
    t = h.hb("a", 1, owned={"t": [0, 1, 2]})
    assert h.responses[t]["member_epoch"] == 2 and h.timer("consumer-rebalance", "g", "a") is None
    t = h.hb("b", 2, owned={})
    assert h.assignment_of(t) == {"t": [3, 4, 5]}
    assert h.group["g"].state == "Stable"
    owners = [tp for m in h.group["g"].members.values() for tp in
              [(tid, p) for tid, ps in m.assigned.items() for p in ps]]
    assert len(owners) == len(set(owners)) == 6


def test_member_epoch_checks():
    h = ConsumerHarness()
    two_members(h)
    a = h.group["g"].members["a"]
    assert a.member_epoch == 2 and a.previous_member_epoch == 1
    assert err(h, h.hb("a", 3, owned=h.owned("a"))) == E.FENCED_MEMBER_EPOCH          # ahead
    assert err(h, h.hb("a", 0 + 1, owned={"t": [0, 1, 2, 3]})) == E.FENCED_MEMBER_EPOCH   # owns more
    assert err(h, h.hb("a", 1)) == E.FENCED_MEMBER_EPOCH                              # owned not sent
    # a lost response: the previous epoch with owned partitions within the assignment is accepted
    t = h.hb("a", 1, owned={"t": [0, 1]})
    assert err(h, t) == 0 and h.responses[t]["member_epoch"] == 2
    assert err(h, h.hb("zz", 2)) == E.UNKNOWN_MEMBER_ID


def test_epoch_zero_from_a_known_member_id_rejoins_from_its_state():
    """Issue 28 item 3, settled by Kafka's source: since KAFKA-19233 (apache/kafka#21305, January 2026) Kafka's
    getOrMaybeSubscribeDynamicConsumerGroupMember accepts epoch 0 from a member it knows - a fenced member
    rejoins under its member id, as Java 4.x and librdkafka do - and reconciles it from where it is: a Stable
    member gets its epoch and partitions back with no epoch bump and nothing written (Kafka's
    testMemberCanRejoinWithEpochZeroInStableState). Before that change Kafka answered 110 here."""
    h = ConsumerHarness()
    two_members(h)
    before, a = h.epoch(), h.group["g"].members["a"]
    assert (a.member_epoch, a.previous_member_epoch) == (2, 1)
    h.take_records()
    t = h.hb("a", 0)
    assert err(h, t) == 0 and h.responses[t]["member_epoch"] == 2 and h.assignment_of(t) == h.owned("a")
    assert h.epoch() == before and h.take_records() == [] and h.group["g"].members["a"] == a


def test_epoch_zero_while_revoking_counts_as_revoked():
    """Kafka's testMemberCanRejoinWithEpochZeroInUnrevokedPartitionsState: a member with partitions pending
    revocation rejoins owning nothing, so they are revoked and it moves to the target epoch with its target."""
    h = ConsumerHarness()
    h.cjoin("a")
    h.hb("b", 0)
    t = h.hb("a", 1, owned={"t": [0, 1, 2, 3, 4, 5]})
    assert h.group["g"].members["a"].state == UNREVOKED_PARTITIONS and h.responses[t]["member_epoch"] == 1
    t = h.hb("a", 0)
    assert err(h, t) == 0 and h.responses[t]["member_epoch"] == 2 and h.assignment_of(t) == {"t": [0, 1, 2]}
    assert h.group["g"].members["a"].state == STABLE_MEMBER and h.timer("consumer-rebalance", "g", "a") is None
    # b is given the revoked partitions at its next heartbeat: never two owners
    assert h.assignment_of(h.hb("b", 2, owned={})) == {"t": [3, 4, 5]}


def test_epoch_zero_again_after_a_lost_join_response_is_accepted():
    """The lost-response case: the member's epoch-0 answer (epoch 1) was lost and it sends epoch 0 again: it is
    answered its epoch and partitions with no epoch bump and nothing written."""
    h = ConsumerHarness()
    t = h.hb("a", 0)
    assert h.responses[t]["member_epoch"] == 1
    h.take_records()
    t = h.hb("a", 0)
    assert err(h, t) == 0 and h.responses[t]["member_epoch"] == 1
    assert h.assignment_of(t) == {"t": [0, 1, 2, 3, 4, 5]} and h.epoch() == 1 and h.take_records() == []


def test_a_fenced_epoch_says_what_kafka_says():
    """FENCED_MEMBER_EPOCH (110) carries Kafka's message, ending with what the member must do."""
    h = ConsumerHarness()
    two_members(h)
    for epoch, word in ((3, "greater"), (1, "smaller")):
        t = h.hb("a", epoch)
        assert (err(h, t), h.responses[t]["error_message"]) == (
            E.FENCED_MEMBER_EPOCH, f"The consumer group member has a {word} member epoch ({epoch}) than the one "
            f"known by the group coordinator (2). The member must abandon all its partitions and rejoin.")


# ------------------------------------------------------------------ leaving, session, rebalance timeout
def test_leave_tombstones_and_bumps_once():
    h = ConsumerHarness()
    two_members(h)
    h.take_records()
    t = h.hb("b", -1)
    assert (err(h, t), h.responses[t]["member_epoch"], h.responses[t]["heartbeat_interval_ms"]) == (0, -1, 0)
    recs = h.take_records()
    assert recs[:3] == [CurrentAssignmentRecord("g", "b", tombstone=True),
                        TargetAssignmentMemberRecord("g", "b", tombstone=True),
                        ConsumerMemberRecord("g", "b", tombstone=True)]
    assert [r.epoch for r in recs if isinstance(r, ConsumerGroupMetadataRecord)] == [3]
    assert h.timer("consumer-session", "g", "b") is None
    # a's next heartbeat computes the new target and gets every partition back
    t = h.hb("a", 2, owned=h.owned("a"))
    assert h.assignment_of(t) == {"t": [0, 1, 2, 3, 4, 5]} and h.responses[t]["member_epoch"] == 3
    assert err(h, h.hb("b", -1)) == E.UNKNOWN_MEMBER_ID


def test_session_expiry_fences_the_member():
    h = ConsumerHarness()
    two_members(h)
    h.advance(SESSION - 1)
    h.hb("a", 2, owned=h.owned("a"))
    h.advance(1)                                     # b's session is over; a heartbeated
    assert set(h.group["g"].members) == {"a"} and h.epoch() == 3
    h.settle({"a": None})
    assert h.owned("a") == {"t": [0, 1, 2, 3, 4, 5]}


def test_rebalance_timeout_fences_a_member_that_does_not_revoke():
    h = ConsumerHarness()
    h.cjoin("a", rebalance_timeout=20000)
    h.hb("b", 0)
    h.hb("a", 1, owned={"t": [0, 1, 2, 3, 4, 5]})     # told to revoke 3,4,5
    assert h.group["g"].members["a"].state == UNREVOKED_PARTITIONS
    h.advance(19999)
    h.hb("b", 2, owned={})                          # keep b's session; a's too (plain heartbeat, still owning)
    h.hb("a", 1, owned={"t": [0, 1, 2, 3, 4, 5]})
    assert "a" in h.group["g"].members
    h.advance(1)
    assert "a" not in h.group["g"].members
    h.hb("b", 2, owned={})
    h.settle({"b": None})
    assert h.owned("b") == {"t": [0, 1, 2, 3, 4, 5]}


# ------------------------------------------------------------------ assignors and metadata hash
def test_uniform_is_balanced_and_sticky():
    h = ConsumerHarness(topics=Topics(t=7))
    members = {m: None for m in "abc"}
    for m in members:
        h.cjoin(m)
    h.settle(members)
    sizes = sorted(len(h.owned(m)["t"]) for m in members)
    assert sizes == [2, 2, 3]
    before = {m: set(h.owned(m)["t"]) for m in "ab"}
    h.hb("c", -1)
    h.settle({"a": None, "b": None})
    after = {m: set(h.owned(m)["t"]) for m in "ab"}
    assert all(before[m] <= after[m] for m in "ab")         # nobody lost a partition it had
    assert sorted(len(v) for v in after.values()) == [3, 4]


def test_uniform_with_different_subscriptions():
    h = ConsumerHarness(topics=Topics(t=4, u=2))
    h.cjoin("a", topics=["t", "u"])
    h.cjoin("b", topics=["t"])
    h.settle({"a": None, "b": None})
    a, b = h.owned("a"), h.owned("b")
    assert b.get("u") is None and sorted(a.get("t", []) + b["t"]) == [0, 1, 2, 3]
    assert a["u"] == [0, 1] and abs(sum(map(len, a.values())) - len(b["t"])) <= 1


def test_range_assignor_puts_static_members_first_in_instance_order():
    h = ConsumerHarness(topics=Topics(t=5))
    h.cjoin("m1", "z", assignor="range")
    h.cjoin("m2", None, assignor="range")
    h.cjoin("m3", "a", assignor="range")
    h.settle({"m1": "z", "m2": None, "m3": "a"})
    assert (h.target("m3"), h.target("m1"), h.target("m2")) == ({"t": [0, 1]}, {"t": [2, 3]}, {"t": [4]})


def test_added_partitions_bump_once_and_are_assigned_an_unchanged_hash_never_bumps():
    h = ConsumerHarness()
    two_members(h)
    epoch = h.epoch()
    for _ in range(3):
        h.settle({"a": None, "b": None})
    assert h.epoch() == epoch
    h.topics.add_partitions("t", 8)
    h.coordinator.topic_hashes.topics_changed(["t"])
    h.settle({"a": None, "b": None})
    assert h.epoch() == epoch + 1
    assert sorted(h.owned("a")["t"] + h.owned("b")["t"]) == list(range(8))


def test_subscription_change_bumps_assignor_change_alone_does_not():
    h = ConsumerHarness(topics=Topics(t=2, u=2))
    h.cjoin("a")
    e = h.epoch()
    h.hb("a", 1, assignor="range")
    assert h.epoch() == e
    t = h.hb("a", 1, topics=["t", "u"])
    assert h.epoch() == e + 1 and h.assignment_of(t) == {"t": [0, 1], "u": [0, 1]}


# ------------------------------------------------------------------ restart
def test_restart_reloads_the_group_and_members_continue():
    h = ConsumerHarness()
    two_members(h, "ia", None)
    live = h.group["g"].copy()
    h2 = h.failover()
    assert h2.group["g"] == live
    assert h2.timer("consumer-session", "g", "a") == h.now_ms + SESSION
    t = h2.hb("a", 2, instance_id="ia", owned=h.owned("a"))
    assert err(h2, t) == 0 and h2.responses[t]["member_epoch"] == 2 and h2.epoch() == live.group_epoch


def test_topic_hashes_of_topics_no_group_subscribes_to_are_dropped():
    h = ConsumerHarness(topics=Topics(t=2, u=2))
    h.cjoin("a", topics=["t"])
    h.cjoin("b", topics=["u"], group_id="g2")
    cache = h.coordinator.topic_hashes
    assert "t" in cache and "u" in cache
    h.hb("b", -1, group_id="g2")
    assert "t" in cache and "u" not in cache
    h.hb("a", 1, topics=["u"])                       # a moves to u: t is nobody's any more
    assert "u" in cache and "t" not in cache


def test_a_full_group_refuses_a_new_member_with_81():
    from tenure.coordinator import CoordinatorConfig
    h = ConsumerHarness(CoordinatorConfig(max_group_size=1))
    h.cjoin("a")
    t = h.hb("b", 0)
    assert h.responses[t]["error_code"] == E.GROUP_MAX_SIZE_REACHED and "b" not in h.group["g"].members
    assert h.responses[h.hb("a", 0)]["error_code"] == 0           # a known member is not new


def test_a_groups_own_configs_set_its_members_interval_and_session():
    """Issue 28 item 6: the GROUP config resource's consumer.session.timeout.ms and
    consumer.heartbeat.interval.ms (kept by the topic table, checked by the broker) over the server's."""
    h = ConsumerHarness()
    h.topics.dynamic_configs = {"group": {"g": {"consumer.session.timeout.ms": "50000",
                                                "consumer.heartbeat.interval.ms": "6000"}}}
    t = h.hb("a", 0)
    assert h.responses[t]["heartbeat_interval_ms"] == 6000
    assert h.timer("consumer-session", "g", "a") == h.now_ms + 50000
    t = h.hb("b", 0, group_id="other")
    assert h.responses[t]["heartbeat_interval_ms"] == 5000
    assert h.timer("consumer-session", "other", "b") == h.now_ms + SESSION
    # a change applies from the next heartbeat
    h.topics.dynamic_configs["group"]["g"]["consumer.heartbeat.interval.ms"] = "7000"
    t = h.hb("a", 1)
    assert h.responses[t]["heartbeat_interval_ms"] == 7000


def test_large_subscriptions_sent_in_any_order_with_repeats_are_one_shared_sorted_tuple():
    """Three members subscribing the same 2,000 names (one of them, "t", exists): sent sorted, reversed with a
    name twice, and sorted again. Each member keeps the names sorted and once; the members share one tuple (the
    group's union counts it once); each is assigned from "t" alone, as with a one-name subscription."""
    h = ConsumerHarness(topics=Topics(t=6))
    names = sorted([f"n{i:05d}" for i in range(1999)] + ["t"])
    h.cjoin("a", topics=list(names))
    h.cjoin("b", topics=list(reversed(names)) + [names[5]])
    h.cjoin("c", topics=list(names))
    h.settle({"a": None, "b": None, "c": None})
    members = h.group["g"].members
    assert members["a"].subscribed_topic_names == tuple(names)
    assert members["b"].subscribed_topic_names is members["a"].subscribed_topic_names
    assert members["c"].subscribed_topic_names is members["a"].subscribed_topic_names
    owned = [h.owned(m) for m in "abc"]
    assert all(set(o) <= {"t"} for o in owned) and sorted(p for o in owned for p in o.get("t", [])) == list(range(6))
