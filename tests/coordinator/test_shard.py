"""The shard API: `unload` (another coordinator takes the partition over) and the read-only queries."""
import pytest

from tenure.coordinator import COMPLETING_REBALANCE, PREPARING_REBALANCE, STABLE, CoordinatorConfig, GroupShard

from .harness import Harness, join_err, sync_err

NOT_COORDINATOR = 16


def _holds_nothing(h: Harness) -> None:
    c = h.coordinator
    assert h.outstanding() == [], "a parked request was not answered"
    assert h.timers == {}, f"timers left armed: {sorted(h.timers)}"
    assert c.group_ids() == [] and c.groups == {} and c.offsets == {} and c.static_event_keys == {}
    assert not c._armed, "timers left behind"


@pytest.mark.parametrize("version", range(10))
def test_unload_answers_a_parked_join_16_in_its_versions_shape(version):
    h = Harness(CoordinatorConfig(initial_rebalance_delay_ms=3000))
    if version >= 4:
        mid, t = h.join_dynamic("g", version=version)
    else:
        t = h.join("g", version=version)
        (mid,) = h.g().members
    assert h.parked(t) and h.g().state == PREPARING_REBALANCE
    h.unload()
    assert h.resp(t) == join_err(version, NOT_COORDINATOR, mid)
    _holds_nothing(h)


@pytest.mark.parametrize("version", range(6))
def test_unload_answers_parked_syncs_16_in_their_versions_shape(version):
    h = Harness()
    tokens = [h.join("g", "", i) for i in ("i1", "i2", "i3")]
    h.advance(0)
    ids = [h.resp(t)["member_id"] for t in tokens]
    assert h.g().state == COMPLETING_REBALANCE
    followers = [h.sync("g", mid, 1, iid, version=version) for mid, iid in zip(ids[1:], ("i2", "i3"))]
    assert all(h.parked(t) for t in followers)
    h.unload()
    for t in followers:
        assert h.resp(t) == sync_err(version, NOT_COORDINATOR)
    _holds_nothing(h)


def test_unload_cancels_every_timer_and_drops_every_group():
    h = Harness(CoordinatorConfig(static_registration_timeout_ms=60000, static_expansion_timeout_ms=5000))
    ids = h.form_group(["i1", "i2", None])
    h.commit("g", ids[0], 1, "i1", {"t": [(0, 5)]})
    h.commit("simple", offsets={"t": [(0, 7)]})
    h.advance(10000)                     # i1/i2 go offline (registration timer), the dynamic member expires
    h.join("g", "", "i4")                # an expansion window opens
    h.join_dynamic("other")              # a pending member (KIP-394) with its own timer
    assert h.timers and h.coordinator.groups and h.coordinator.offsets
    h.unload()
    _holds_nothing(h)
    written = len(h.records)
    h.advance(10 ** 7)                   # nothing fires after the unload
    assert len(h.records) == written and h.outstanding() == []


def test_after_unload_a_reload_of_the_log_gives_the_groups_back():
    h = Harness()
    ids = h.form_group(["i1", "i2"])
    h.commit("g", ids[0], 1, "i1", {"t": [(0, 5)]})
    before = h.coordinator.group("g"), h.coordinator.committed_offsets("g")
    h.unload()
    for r in h.unloaded_records:
        h.coordinator.replay(r)
    assert h.coordinator.group("g").members.keys() == before[0].members.keys()
    assert h.coordinator.committed_offsets("g") == before[1]


def test_queries_return_copies():
    h = Harness()
    ids = h.form_group(["i1", None])
    h.commit("g", ids[0], 1, "i1", {"t": [(0, 5), (1, 6)]})
    c = h.coordinator
    assert c.group_ids() == ["g"]
    g = c.group("g")
    assert g == c.groups["g"] and g is not c.groups["g"] and g.state == STABLE
    g.members.clear()
    g.static_members.clear()
    g.generation = 99
    assert list(c.groups["g"].members) == ids and c.groups["g"].static_members == {"i1": ids[0]}
    assert c.groups["g"].generation == 1
    offsets = c.committed_offsets("g")
    assert sorted(offsets) == [("t", 0), ("t", 1)] and offsets[("t", 0)].offset == 5
    offsets.clear()
    assert len(c.offsets["g"]) == 2
    ids_list = c.group_ids()
    ids_list.append("x")
    assert c.group_ids() == ["g"]
    assert c.group("nope") is None and c.committed_offsets("nope") == {}


def test_a_group_copy_owns_every_container_and_member():
    """`ClassicGroup.copy` (a handler's draft) is made without dataclasses.replace: it must still be equal to the
    group and share none of its mutable parts - every field with a container default (one added later too), and
    each member - so a handler's change to the draft leaves the installed group as it was."""
    import dataclasses

    from tenure.coordinator.classic.group import ClassicGroup, Parked
    h = Harness()
    h.form_group(["i1", "i2", None])
    live = h.coordinator.groups["g"]
    live.pending_members.add("p")
    live.offline_since["x"] = 1
    live.joins["j"] = Parked(1, 5)
    live.syncs["s"] = Parked(2, 3)
    draft = live.copy()
    assert type(draft) is ClassicGroup and draft == live and draft is not live
    containers = [f.name for f in dataclasses.fields(ClassicGroup) if f.default_factory is not dataclasses.MISSING]
    assert {"members", "static_members", "pending_members", "pending_sync", "offline_since", "joins",
            "syncs"} <= set(containers)
    for name in containers:
        assert getattr(draft, name) == getattr(live, name) and getattr(draft, name) is not getattr(live, name), name
    for mid, m in live.members.items():
        assert draft.members[mid] == m and draft.members[mid] is not m
    before = dataclasses.replace(live, members={k: dataclasses.replace(m) for k, m in live.members.items()})
    for m in draft.members.values():
        m.assignment, m.session_timeout_ms = b"changed", 1
    draft.generation = 99
    draft.static_members.clear()
    draft.pending_sync.add("q")
    assert live == before and live.generation != 99 and live.static_members


def test_partition_identity():
    assert GroupShard().partition == 0
    assert GroupShard(partition=7).partition == 7


def test_one_routing_table_serves_every_group_api():
    """The shard's one table: the offsets' and admin APIs (ROUTES) and each registered kind's own, no API twice."""
    from tenure.coordinator import GROUP_APIS, ROUTES
    from tenure.coordinator.kinds import KINDS
    c = GroupShard()
    assert GROUP_APIS == frozenset(c.routes) == {8, 9, 11, 12, 13, 14, 15, 16, 28, 42, 47, 68, 69, 76, 77}
    owned = [set(ROUTES)] + [set(kind.apis) for kind in KINDS]
    assert sum(len(o) for o in owned) == len(GROUP_APIS)              # each API has one owner
    assert all(callable(handler) for handler in c.routes.values())
    for kind in c.kinds.all:                   # a kind's records, timers and group values route to it
        assert all(c.kinds.of_record[t] is kind for t in kind.record_types)
        assert all(c.kinds.of_timer[t] is kind for t in kind.timer_keys)
        assert c.kind_of(kind.group_type("g")) is kind


def test_state_transitions_follow_the_table():
    from tenure.coordinator import ALL_STATES, VALID_PREVIOUS, ClassicGroup, IllegalTransition
    for target, sources in VALID_PREVIOUS.items():
        for source in ALL_STATES:
            g = ClassicGroup("g", state=source)
            if source in sources:
                g.transition(target, 5)
                assert (g.state, g.previous_state, g.state_timestamp) == (target, source, 5)
            else:
                with pytest.raises(IllegalTransition):
                    g.transition(target, 5)
                assert g.state == source


def test_expire_session_is_the_session_timer_firing_now():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    c = h.coordinator
    assert c.expire_session("nope", "i1", h.now_ms) is None
    assert c.expire_session("g", "nobody", h.now_ms) is None
    h.join("g", i1, "i1")                                     # parked: not expired (as when its timer fires)
    h._apply(c.expire_session("g", "i1", h.now_ms))
    assert i1 in h.g().members and h.last_result.records == [] and h.timer("heartbeat", "g", i1) is None
    assert c.expire_session("g", "i1", h.now_ms) is None      # no session timer left to fire
    res = c.expire_session("g", "i2", h.now_ms)               # by instance id
    h._apply(res)
    assert res.timers[0].key.name == f"heartbeat/g/{i2}" and res.timers[0].deadline_ms is None
    assert i2 not in h.g().members and h.timer("heartbeat", "g", i2) is None and not c.is_armed(res.timers[0].key)
