"""The generations table's rule, folded per group (`tenure.audit.fold.fold_generations`): which GroupMetadata
records start a generation, the trigger named from the static events before them, how long the rebalance
took and who joined or left. Rows as `job.fold_input` selects them, without Spark."""
from __future__ import annotations

from types import SimpleNamespace

from tenure.audit import fold
from tenure.protocol import records as rec

FIELDS = fold.GENERATION_FIELDS


def gm(offset, generation, members=(), *, group="g", partition=0, tombstone=False, ts=None):
    """A GroupMetadata record's row; members: (member id, instance id or None)."""
    return SimpleNamespace(
        type="group_metadata", group=group, partition=partition, offset=offset,
        timestamp=1000 * offset if ts is None else ts, tombstone=tombstone, instance_id=None, cause=None,
        old_member_id=None, new_member_id=None, event_time=None,
        generation=None if tombstone else generation, protocol_type=None if tombstone else "consumer",
        protocol=None if tombstone else "range", leader=None if tombstone or not members else members[0][0],
        state_timestamp=None if tombstone else 5,
        all_member_ids=None if tombstone else [m for m, _ in members],
        all_instance_ids=None if tombstone else [i for _, i in members])


def ev(offset, cause, *, group="g", partition=0, event_time=None, tombstone=False):
    return SimpleNamespace(
        type="static_member_event", group=group, partition=partition, offset=offset, timestamp=1000 * offset,
        tombstone=tombstone, instance_id="i", cause=cause, old_member_id=None, new_member_id="m",
        event_time=event_time, generation=None, protocol_type=None, protocol=None, leader=None,
        state_timestamp=None, all_member_ids=None, all_instance_ids=None)


def gens(rows):
    return [dict(zip(FIELDS, t)) for t in fold.fold_generations(rows)]


def test_each_trigger_and_who_joined_or_left():
    a, b, d = ("ma", "ia"), ("mb", "ib"), ("md", None)
    rows = [
        ev(1, rec.JOINED, event_time=500), ev(2, rec.JOINED),          # before the first snapshot
        gm(3, 1, [a, b]),
        gm(4, 1, [a, b]),                                              # same generation: no row
        ev(5, rec.FENCED), ev(6, rec.EXPIRED, tombstone=True),         # neither counts
        gm(7, 2, [a, b, d]),                                           # a dynamic member joined
        gm(8, 3, [a, b, d]),                                           # nothing to say why
        ev(9, rec.EXPIRED, event_time=-1), ev(10, rec.LEFT),
        gm(11, 4, [a]),
        ev(12, rec.FORCED_REBALANCE), ev(13, rec.JOINED),
        gm(14, 5, [a, b]),
        gm(15, None, tombstone=True),
        gm(16, 1, [b]),                                                # the group again after its deletion
    ]
    out = gens(rows)
    assert [(g["log_offset"], g["generation"], g["trigger"]) for g in out] == [
        (3, 1, "joined"), (7, 2, "dynamic_membership"), (8, 3, fold.UNKNOWN), (11, 4, "expired+left"),
        (14, 5, rec.FORCED_REBALANCE), (15, None, fold.GROUP_DELETED), (16, 1, "initial")]
    by = {g["log_offset"]: g for g in out}
    # the rebalance ran from the first triggering event (its own time if it has one, else the record's)
    assert by[3]["rebalance_start"] == 500 and by[3]["time"] == 3000
    assert by[11]["rebalance_start"] == 9000                        # event_time -1: the record's time
    assert by[7]["rebalance_start"] == by[7]["time"] == 7000         # no event: no wait
    assert by[3]["joined"] == ["ia (ma)", "ib (mb)"] and by[3]["left"] == []
    assert by[7]["joined"] == ["md"] and by[7]["left"] == []
    assert by[11]["joined"] == [] and by[11]["left"] == ["ib (mb)", "md"]
    assert by[15]["left"] == ["ia (ma)", "ib (mb)"] and by[15]["member_count"] == 0 and by[15]["members"] == []
    assert by[16]["joined"] == ["ib (mb)"]
    assert by[7]["members"] == [a, b, d] and by[7]["member_count"] == 3 and by[7]["leader"] == "ma"
    assert all(g["log_partition"] == 0 and g["group"] == "g" for g in out)


def test_groups_and_partitions_are_folded_apart():
    a = ("ma", "ia")
    rows = [ev(1, rec.REPLACED, group="g1"), gm(2, 1, [a], group="g1"),
            gm(3, 1, [a], group="g2"),                                  # no event of its own: initial
            gm(1, 7, [a], group="g2", partition=1), gm(4, 7, [a], group="g2", partition=1)]
    out = gens(rows)
    assert [(g["group"], g["log_partition"], g["generation"], g["trigger"]) for g in out] == [
        ("g1", 0, 1, "replaced"), ("g2", 0, 1, "initial"), ("g2", 1, 7, "initial")]


def test_coordinator_moves_are_not_generations():
    rows = [gm(1, 1, [("m", "i")]),
            SimpleNamespace(**{**vars(gm(2, 1)), "type": "coordinator_load", "cause": "moved"}),
            gm(3, 1, [("m", "i")])]
    assert [g["log_offset"] for g in gens(rows)] == [1]
