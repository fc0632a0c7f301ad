"""expect_group on a classic group: a test says how many members it starts, and the group's first rebalance
ends as soon as that many have joined, without waiting out the initial delay (J12). Fewer members: the delay
runs as with no expectation, and the Result says so for the log."""
from tenure.coordinator import COMPLETING_REBALANCE, PREPARING_REBALANCE, STABLE, CoordinatorConfig

from .harness import Harness

DELAY = 3000


def _harness(expected: dict[str, int]) -> Harness:
    h = Harness(CoordinatorConfig(initial_rebalance_delay_ms=DELAY))
    h.coordinator.expectations = expected
    return h


def test_the_expected_static_members_end_the_first_join_phase_at_once():
    h = _harness({"g": 3})
    t1, t2 = h.join(instance_id="i1"), h.join(instance_id="i2")
    assert h.parked(t1) and h.parked(t2) and h.g().state == PREPARING_REBALANCE
    t3 = h.join(instance_id="i3")                      # the third: no clock movement at all
    assert [h.resp(t)["generation_id"] for t in (t1, t2, t3)] == [1, 1, 1]
    assert h.g().state == COMPLETING_REBALANCE and h.timer("join") is None
    assert h.take_rebalances() == [("g", "member_joined")]
    assert ("g", "the 3 expected member(s) joined: the first rebalance ends now, without the initial delay") \
        in h.last_result.notes


def test_dynamic_members_count_once_they_rejoin_with_their_ids():
    h = _harness({"g": 2})
    m1, t1 = h.join_dynamic()
    assert h.parked(t1)
    m2, t2 = h.join_dynamic()
    assert h.resp(t1)["generation_id"] == 1 and h.resp(t2)["generation_id"] == 1
    assert {m["member_id"] for m in h.resp(t1)["members"]} == {m1, m2}


def test_a_member_still_in_the_member_id_handshake_is_waited_for():
    """Two joined and the expectation is 2, but a third got MEMBER_ID_REQUIRED and has not rejoined yet: the
    join phase waits for it (Kafka's rule that a pending member is waited for), then ends with all three."""
    h = _harness({"g": 2})
    t1 = h.join(instance_id="i1")
    t0 = h.join("g", "", None, version=9)              # dynamic: 79 and an id, pending
    pending = h.resp(t0)["member_id"]
    t2 = h.join(instance_id="i2")
    assert h.parked(t1) and h.parked(t2)
    t3 = h.join("g", pending, None, version=9)
    assert [h.resp(t)["generation_id"] for t in (t1, t2, t3)] == [1, 1, 1]
    assert len(h.g().members) == 3


def test_fewer_members_than_expected_fall_back_to_the_initial_delay_and_say_so():
    """Two of three expected: the join phase ends when it would with no expectation (the delay, extended
    once because a second member joined within it), and the Result carries the line the log prints."""
    def formed_at(expected: dict[str, int]) -> tuple[int, Harness]:
        h = _harness(expected)
        start = h.now_ms
        t1, t2 = h.join(instance_id="i1"), h.join(instance_id="i2")
        while h.parked(t1):
            h.advance(100)
        assert h.resp(t1)["generation_id"] == 1 and h.resp(t2)["generation_id"] == 1
        return h.now_ms - start, h

    took, h = formed_at({"g": 3})
    assert took == formed_at({})[0] == 2 * DELAY
    assert ("g", "expected 3 member(s), 2 joined within the initial rebalance delay: the rebalance completes "
                 "with them") in h.last_result.notes


def test_a_member_beyond_the_expectation_joins_with_one_more_rebalance():
    h = _harness({"g": 2})
    t1, t2 = h.join(instance_id="i1"), h.join(instance_id="i2")
    m1, m2 = h.resp(t1)["member_id"], h.resp(t2)["member_id"]
    h.resp(h.sync(member_id=m1, instance_id="i1", assignments={m1: b"a", m2: b"b"}))
    h.resp(h.sync(member_id=m2, instance_id="i2"))
    assert h.g().state == STABLE and h.g().generation == 1
    t3 = h.join(instance_id="i3")                      # a Stable group: J9, a rebalance as always
    assert h.parked(t3) and h.g().state == PREPARING_REBALANCE
    r1, r2 = h.join(member_id=m1, instance_id="i1"), h.join(member_id=m2, instance_id="i2")
    assert [h.resp(t)["generation_id"] for t in (r1, r2, t3)] == [2, 2, 2]     # J9: completes once all rejoined
    assert h.take_rebalances() == [("g", "member_joined"), ("g", "member_joined")]


def test_an_expectation_for_another_group_changes_nothing():
    h = _harness({"other": 1})
    t1 = h.join(instance_id="i1")
    h.advance(DELAY - 1)
    assert h.parked(t1)
    h.advance(1)
    assert h.resp(t1)["generation_id"] == 1
