"""expect_group on a KIP-848 consumer group: a new group holds its target assignment (an empty one at epoch 1)
while fewer than the expected members are there, then computes it once for all of them, so every member takes
its final partitions with nothing to revoke. A member beyond the expectation joins as in any group; too few
members: the target is computed for them when the initial rebalance delay ends, and the Result says so."""
from __future__ import annotations

from tenure.coordinator import CoordinatorConfig
from tenure.coordinator.consumer.group import STABLE_MEMBER, UNREVOKED_PARTITIONS
from tenure.protocol.consumer_group_records import TargetAssignmentMemberRecord, TargetAssignmentMetadataRecord

from .consumer_harness import ConsumerHarness, Topics

DELAY = 3000


def _harness(expected: dict[str, int], delay: int = DELAY) -> ConsumerHarness:
    h = ConsumerHarness(CoordinatorConfig(initial_rebalance_delay_ms=delay), topics=Topics(t=12))
    h.coordinator.expectations = expected
    return h


def _heartbeat_all(h: ConsumerHarness, mids: list[str]) -> dict[str, dict]:
    """One heartbeat of each member, with what it owns; its answer."""
    out = {}
    for mid in mids:
        m = h.g().members[mid]
        t = h.hb(mid, m.member_epoch, owned=h.owned(mid))
        assert h.responses[t]["error_code"] == 0, h.responses[t]
        out[mid] = h.responses[t]
    return out


def _partitions(answers: dict[str, dict], h: ConsumerHarness) -> list[int]:
    return sorted(p for mid in answers for p in h.owned(mid).get("t", []))


def test_members_before_the_last_expected_one_hold_nothing_at_epoch_1_then_all_get_their_share_at_once():
    h = _harness({"g": 4})
    for mid in ("a", "b", "c"):
        r = h.cjoin(mid)
        assert (r["member_epoch"], r["assignment"]["topic_partitions"]) == (1, [])     # epoch 1, nothing
        assert h.assignment_of(h.hb(mid, 1, owned={})) is None                          # stable there
        assert r["heartbeat_interval_ms"] == 100                   # told to come back soon while it waits
    assert h.epoch() == 3 and h.g().assignment_epoch == 1 and not any(h.g().targets.values())
    assert h.timer("consumer-hold") == 1_000_000 + DELAY
    last = h.cjoin("d")                                  # the fourth: the assignor runs once, at epoch 4
    assert last["member_epoch"] == 4 and h.g().assignment_epoch == 4 and h.timer("consumer-hold") is None
    assert len(h.owned("d")["t"]) == 3
    assert last["heartbeat_interval_ms"] == CoordinatorConfig().consumer_heartbeat_interval_ms
    assert ("g", "the 4 expected member(s) joined: the target assignment is computed once for all of them") \
        in h.last_result.notes
    answers = _heartbeat_all(h, ["a", "b", "c"])         # each takes its final share at its next heartbeat
    assert {mid: r["member_epoch"] for mid, r in answers.items()} == {"a": 4, "b": 4, "c": 4}
    assert all(len(h.owned(mid)["t"]) == 3 for mid in "abcd")
    assert _partitions({m: {} for m in "abcd"}, h) == list(range(12))
    assert all(m.state == STABLE_MEMBER for m in h.g().members.values())
    assert h.g().state == "Stable"
    # no member was ever asked to revoke anything: every assignment record it went through grows
    assert not [r for r in h.records if getattr(r, "state", None) == UNREVOKED_PARTITIONS]
    assert [r.assignment_epoch for r in h.records if isinstance(r, TargetAssignmentMetadataRecord)] == [1, 4]


def test_without_an_expectation_the_same_four_members_revoke_on_the_way():
    """The baseline the expectation removes: the targets are computed at each arrival."""
    h = _harness({})
    for mid in "abcd":
        h.cjoin(mid)
    h.settle({m: None for m in "abcd"})
    assert [r for r in h.records if getattr(r, "state", None) == UNREVOKED_PARTITIONS]
    assert len([r for r in h.records if isinstance(r, TargetAssignmentMetadataRecord)]) == 4


def test_fewer_members_than_expected_get_their_targets_when_the_delay_ends_and_it_is_said():
    h = _harness({"g": 3})
    h.cjoin("a")
    h.cjoin("b")
    assert h.g().assignment_epoch == 1 and h.epoch() == 2
    h.advance(DELAY - 1)
    assert h.g().assignment_epoch == 1
    h.advance(1)
    assert h.g().assignment_epoch == 2 and h.epoch() == 2          # no bump: b's join is the epoch it needs
    assert ("g", "expected 3 member(s), 2 joined within the initial rebalance delay (3000 ms): the target "
                 "assignment is computed for them") in h.last_result.notes
    answers = _heartbeat_all(h, ["a", "b"])
    assert {mid: r["member_epoch"] for mid, r in answers.items()} == {"a": 2, "b": 2}
    assert _partitions(answers, h) == list(range(12))
    assert not [r for r in h.records if getattr(r, "state", None) == UNREVOKED_PARTITIONS]


def test_a_single_member_of_an_expected_three_gets_everything_with_one_epoch_bump():
    h = _harness({"g": 3})
    h.cjoin("a")
    h.advance(DELAY)
    assert h.epoch() == 2 and h.g().assignment_epoch == 2
    assert h.take_rebalances()[-1] == ("g", "consumer expected members did not all join")
    r = _heartbeat_all(h, ["a"])["a"]
    assert r["member_epoch"] == 2 and h.owned("a") == {"t": list(range(12))}


def test_a_member_beyond_the_expectation_joins_with_one_more_epoch_bump():
    h = _harness({"g": 2})
    h.cjoin("a")
    h.cjoin("b")
    _heartbeat_all(h, ["a"])
    assert h.epoch() == 2 and h.g().state == "Stable"
    h.cjoin("c")                                          # as in any group: one bump, a new target
    assert h.epoch() == 3 and h.g().assignment_epoch == 3
    h.settle({m: None for m in "abc"})
    assert _partitions({m: {} for m in "abc"}, h) == list(range(12))
    assert [len(h.owned(m)["t"]) for m in "abc"] == [4, 4, 4]


def test_an_expectation_of_one_and_a_zero_delay_hold_nothing():
    for expected, delay in (({"g": 1}, DELAY), ({"g": 4}, 0)):
        h = _harness(expected, delay)
        r = h.cjoin("a")
        assert r["member_epoch"] == 1 and h.owned("a") == {"t": list(range(12))}
        assert h.timer("consumer-hold") is None


def test_only_a_new_group_is_held():
    """An expectation set on a group that already formed changes nothing: a member joining is assigned at once."""
    h = _harness({})
    h.cjoin("a")
    h.coordinator.expectations = {"g": 3}
    h.cjoin("b")
    assert h.g().assignment_epoch == 2 and h.target("b")
    assert h.timer("consumer-hold") is None


def test_the_hold_is_kafkas_records_and_a_failover_with_the_expectation_waits_again():
    h = _harness({"g": 3})
    h.cjoin("a")
    h.cjoin("b")
    assert [r for r in h.records if isinstance(r, TargetAssignmentMemberRecord)] == []
    other = h.failover()
    other.coordinator.expectations = {"g": 3}
    assert other.g().assignment_epoch == 1 and other.timer("consumer-hold") is None   # expectations set after load
    res = other.coordinator.loaded(other.now_ms)
    other._apply(res)
    assert other.timer("consumer-hold") == other.now_ms + DELAY
    other.cjoin("c")
    assert other.g().assignment_epoch == 3 and len(other.owned("c")["t"]) == 4


def test_a_member_leaving_during_the_hold_is_not_counted_and_the_group_still_waits():
    h = _harness({"g": 3})
    h.cjoin("a")
    h.cjoin("b")
    t = h.hb("b", -1)                                    # b leaves: one bump, still held
    assert h.responses[t]["error_code"] == 0 and h.epoch() == 3 and h.g().assignment_epoch == 1
    h.cjoin("c")
    assert h.g().assignment_epoch == 1                  # two members of an expected three
    h.cjoin("d")
    assert h.g().assignment_epoch == 5 and sorted(h.g().members) == ["a", "c", "d"]
    answers = _heartbeat_all(h, ["a", "c"])
    assert {m: r["member_epoch"] for m, r in answers.items()} == {"a": 5, "c": 5}
    assert _partitions({m: {} for m in "acd"}, h) == list(range(12)) and len(h.owned("d")["t"]) == 4
    assert not [r for r in h.records if getattr(r, "state", None) == UNREVOKED_PARTITIONS]


def test_a_static_member_restarting_during_the_hold_keeps_its_place():
    """Epoch -2 then a new member id with the same instance id: the member is replaced without a bump, and
    the replacement counts once."""
    h = _harness({"g": 2})
    h.cjoin("a", "ia")
    assert h.responses[h.hb("a", -2, instance_id="ia")]["error_code"] == 0
    r = h.cjoin("a2", "ia")
    assert r["member_epoch"] == 1 and h.g().assignment_epoch == 1 and list(h.g().members) == ["a2"]
    h.cjoin("b", "ib")
    assert h.g().assignment_epoch == h.epoch() and sorted(h.g().members) == ["a2", "b"]
    answers = _heartbeat_all(h, ["a2"])
    assert _partitions({"a2": answers["a2"], "b": {}}, h) == list(range(12))


def test_a_group_without_an_expectation_says_nothing_of_one():
    """A group whose first target was empty (its topic did not exist yet) is not a held group: no note."""
    h = ConsumerHarness(CoordinatorConfig(initial_rebalance_delay_ms=DELAY), topics=Topics(t=12))
    h.cjoin("a", topics=["later"])
    h.cjoin("b", topics=["later"])
    assert not [n for n in h.last_result.notes if "expected" in n[1]] and h.timer("consumer-hold") is None


def test_each_arrival_runs_the_delay_again():
    h = _harness({"g": 3})
    h.cjoin("a")
    h.advance(DELAY - 100)
    h.cjoin("b")                                          # the delay runs again from b's join
    assert h.timer("consumer-hold") == h.now_ms + DELAY
    h.advance(DELAY - 1)
    assert h.g().assignment_epoch == 1
    h.advance(1)
    assert h.g().assignment_epoch == 2


def test_an_expectation_set_on_a_group_whose_first_target_was_empty_still_ends_when_the_delay_does():
    """A group formed before the expectation, on a topic that did not exist yet (an empty target at epoch 1),
    looks held: a member joining then arms the delay, so the group cannot wait for ever."""
    topics = Topics(t=12)
    h = ConsumerHarness(CoordinatorConfig(initial_rebalance_delay_ms=DELAY), topics=topics)
    h.cjoin("a", topics=["later"])
    h.coordinator.expectations = {"g": 3}
    h.cjoin("b", topics=["t"])
    assert h.g().assignment_epoch == 1 and h.timer("consumer-hold") == h.now_ms + DELAY
    h.advance(DELAY)
    assert h.g().assignment_epoch == 2 and h.target("b") == {"t": list(range(12))}
