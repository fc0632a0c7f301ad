"""Replay is the only mutator: a handler computes its Result from the live state without changing it, and
the shard replays the Result's events only once the handler has returned. So a handler (or timer) that
raises half-way - after it made records, parked or answered requests, armed timers - leaves every piece of
live state as it was: groups, offsets, static-event keys, parked requests, soft state, armed timers."""
import copy

import pytest

from tenure.coordinator import CoordinatorConfig, GroupShard, HeartbeatKey, JoinKey, Result
from tenure.coordinator.classic.rebalance import Rebalance

from .harness import Harness


class Injected(Exception):
    pass


def _boom(*args, **kwargs):
    raise Injected()


def _state(c: GroupShard) -> dict:
    """Everything the shard holds but its configuration and id generator (journal by length)."""
    # the shard's handlers and its routing tables to them: no state of their own
    parts = ("offset_store", "admin", "kinds", "routes")
    # the topic table is the broker's, and the topic-hash cache a cache of it (filled lazily, on any read)
    outside = ("topics", "topic_hashes")
    held = {k: v for k, v in vars(c).items() if k not in ("config", "_new_id", "journal", *parts, *outside)}
    return copy.deepcopy(held) | {"journal": len(c.journal)}


def _stable_pair(h: Harness) -> list[str]:
    ids = h.form_group(["i1", "i2"])
    h.commit("g", ids[0], 1, "i1", {"t": [(0, 5), (1, 6)]})
    return ids


def _raises(h: Harness, monkeypatch, target, name: str, step) -> None:
    before = _state(h.coordinator)
    with monkeypatch.context() as m:
        m.setattr(target, name, _boom)
        with pytest.raises(Injected):
            step()
    assert _state(h.coordinator) == before, "a handler that raised changed live state"
    step()                                  # the same input, not failing, does change it (and the checks pass)
    assert _state(h.coordinator) != before


# each sets a group up and gives the step that will raise: at its last moment (answering) unless told
def _sync_leader(h):
    tokens = [h.join("g", "", i) for i in ("i1", "i2")]
    h.advance(0)
    ids = [h.resp(t)["member_id"] for t in tokens]
    h.sync("g", ids[1], 1, "i2")                                  # parked follower
    return lambda: h.sync("g", ids[0], 1, "i1", assignments={ids[0]: b"a", ids[1]: b"b"})


def _commit(h):
    ids = _stable_pair(h)
    return lambda: h.commit("g", ids[1], 1, "i2", {"t": [(0, 9)], "u": [(3, 1)]})


def _simple_commit(h):
    return lambda: h.commit("simple", offsets={"t": [(0, 1)]})


def _static_join(h):
    _stable_pair(h)
    return lambda: h.join("g", "", "i3")


def _replacement(h):
    _stable_pair(h)
    return lambda: h.join("g", "", "i2")


def _leave(h):
    ids = _stable_pair(h)
    return lambda: h.leave("g", [(ids[0], "i1"), ("", "i2")])


def _delete(h):
    ids = _stable_pair(h)
    h.leave("g", [(ids[0], "i1"), (ids[1], "i2")])
    return lambda: h.delete("g")


def _offset_delete(h):
    ids = _stable_pair(h)
    h.leave("g", [(ids[0], "i1"), (ids[1], "i2")])
    return lambda: h.offset_delete("g", {"t": [0, 1]})


def _fenced_heartbeat(h):
    _stable_pair(h)
    return lambda: h.heartbeat("g", "someone-else", 1, "i1")


RESPOND = (Result, "respond")


@pytest.mark.parametrize("setup, where", [
    (_sync_leader, RESPOND), (_commit, RESPOND), (_simple_commit, RESPOND), (_replacement, RESPOND),
    (_leave, RESPOND), (_delete, RESPOND), (_offset_delete, RESPOND), (_fenced_heartbeat, RESPOND),
    (_static_join, (Rebalance, "rebalance_or_complete")),      # a joiner is parked, not answered
])
def test_a_request_handler_that_raises_changes_nothing(setup, where, monkeypatch):
    h = Harness()
    step = setup(h)
    _raises(h, monkeypatch, *where, step)


def test_a_session_expiry_that_raises_changes_nothing(monkeypatch):
    h = Harness()
    ids = _stable_pair(h)
    h.join("g", ids[0], "i1")                     # PreparingRebalance: i1 parked, i2 owes a join
    key = HeartbeatKey("g", ids[1])
    _raises(h, monkeypatch, Rebalance, "maybe_complete_join", lambda: h.fire(key))


def test_an_initial_delay_extension_that_raises_changes_nothing(monkeypatch):
    h = Harness(CoordinatorConfig(initial_rebalance_delay_ms=3000))
    h.join("g", "", "i1")
    h.advance(1000)
    h.join("g", "", "i2")                         # a new member: the delay is extended when it fires
    _raises(h, monkeypatch, Result, "set_timer", lambda: h.coordinator.on_timer(JoinKey("g"), h.now_ms + 2000))


def test_a_forced_rebalance_that_raises_changes_nothing(monkeypatch):
    h = Harness()
    ids = _stable_pair(h)
    h.sync("g", ids[1], 1, "i2")
    _raises(h, monkeypatch, Rebalance, "prepare_rebalance", h.force_rebalance)


def test_repeated_ids_in_one_request_act_once():
    """The handler reads the state as it was before the request: a group named twice in one DeleteGroups
    is deleted once (the second is unknown), a partition named twice in one OffsetDelete tombstoned once."""
    h = Harness()
    ids = _stable_pair(h)
    h.leave("g", [(ids[0], "i1"), (ids[1], "i2")])
    h.take_records()
    t = h.offset_delete("g", {"t": [0, 0, 1]})
    assert [p["error_code"] for p in h.resp(t)["topics"][0]["partitions"]] == [0, 0, 0]
    assert [(r.topic, r.partition) for r in h.take_records()] == [("t", 0), ("t", 1)]
    t = h.delete("g", "g")
    assert [r["error_code"] for r in h.resp(t)["results"]] == [0, 69]
    assert len([r for r in h.take_records() if getattr(r, "tombstone", False)]) == 3   # 2 events + group
    assert h.coordinator.group_ids() == []
