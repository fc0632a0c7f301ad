"""Coordinator moves in the audit: a cluster's CoordinatorLoad records show in the member-map history of
every group of the moved offsets partition, beside its member ids, with the brokers and the cause."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from tenure.audit import fold, job, read
from tenure.protocol import records as rec

pytestmark = pytest.mark.timeout(180)


def row(type_, offset, **kw):
    base = dict(type=type_, group="g", partition=3, offset=offset, timestamp=1000 + offset, tombstone=False,
                instance_id=None, cause=None, old_member_id=None, new_member_id=None, event_time=None,
                generation=None, instance_ids=None, member_ids=None)
    return SimpleNamespace(**{**base, **kw})


def test_a_coordinator_load_record_is_a_row_of_the_group_history_with_its_brokers():
    load = rec.CoordinatorLoadRecord(3, broker=2, previous_broker=1, cause="broker_stopped", leader_epoch=4,
                                     timestamp=1500)
    assert rec.decode(*rec.encode(load)) == load
    r = read._record_row(3, 7, 1500, load)
    assert len(r) == read.RECORD_COLUMNS and r[3:5] == ("coordinator_load", None)
    m = dict(instance_ids=["i-1"], member_ids=["m-1"])       # a snapshot's static members, as the job selects them
    rows = [row("static_member_event", 0, instance_id="i-1", cause=rec.JOINED, new_member_id="m-1", event_time=900),
            row("group_metadata", 1, generation=1, **m),
            row("coordinator_load", 7, cause=r[7], old_member_id=r[8], new_member_id=r[9], event_time=r[11]),
            row("group_metadata", 8, generation=1, **m)]
    out = [dict(zip(fold.HISTORY_FIELDS, t)) for t in fold.fold_member_map(rows)]
    moved = [h for h in out if h["start_cause"] == fold.COORDINATOR_MOVED]
    assert [(h["from_broker"], h["to_broker"], h["end_cause"], h["from_generation"], h["valid_from_offset"],
             h["valid_from_time"], h["instance_id"]) for h in moved] == [(1, 2, "broker_stopped", 1, 7, 1500, None)]
    member = [h for h in out if h["instance_id"] == "i-1"]
    assert [(h["member_id"], h["start_cause"], h["valid_to_offset"], h["from_broker"]) for h in member] == [
        ("m-1", rec.JOINED, None, None)]                      # the static member's interval goes on


def test_the_audit_of_a_cluster_shows_its_coordinator_moves(spark, tmp_path):
    from tenure.server import ServerThread
    from tests.integration.test_cluster import client, stable_static_member
    data = tmp_path / "data"
    with ServerThread(brokers=3, data_dir=str(data), initial_rebalance_delay_ms=0) as st:
        st.create_topics({"t": 1})
        g = "audited"
        first = st.coordinator_of(g)
        with client(st, first) as c:
            member, generation = stable_static_member(st, c, g)
        second = (first + 1) % 3
        st.move_coordinator(g, second)
        st.stop_broker(second)
        third = st.coordinator_of(g)
        assert st.group(g).generation == generation
    tables, _ = job.build(spark, job.Options(str(data), str(tmp_path / "out"), group=g, report=False))
    rows = [r.asDict() for r in tables["member_map_history"].orderBy("valid_from_offset").collect()]
    moves = [(r["from_broker"], r["to_broker"], r["end_cause"], r["from_generation"]) for r in rows
             if r["start_cause"] == fold.COORDINATOR_MOVED]
    assert moves == [(first, second, "moved", generation), (second, third, "broker_stopped", generation)]
    assert [(r["instance_id"], r["member_id"], r["valid_to_offset"]) for r in rows if r["instance_id"]] == [
        ("i-1", member, None)]
