"""The per-group fold and the share deliveries fold on crafted logs of the other group kinds (no Spark): rows
made by the read stage's own row builders from the project's record classes, as `tables.fold_input` selects
them. A KIP-848 group deleted (its intervals and a `group_deleted` generation; a later incarnation's events are
its own), a downgrade where one member leaves (its interval ends at its `left` event, the other's goes on
through the conversion), and share partitions whose state records show archived, redelivered-then-accepted,
still in flight and deleted records."""
from __future__ import annotations

import uuid
from types import SimpleNamespace

from tenure.audit import fold, read, shares
from tenure.protocol import consumer_group_records as cg
from tenure.protocol import records as rec
from tenure.protocol import share_state_records as ss

from .logs import member

TID = uuid.UUID("00000000-0000-0000-0000-0000000000aa")


def rows(records) -> list[SimpleNamespace]:
    """(record, log time) pairs at offsets 0, 1, ... of partition 0, as the fold's rows."""
    out = []
    for offset, (r, ts) in enumerate(records):
        if isinstance(r, read.KIND_RECORDS):
            t = read._kind_row(0, offset, ts, r)
        elif isinstance(r, ss.ShareStateRecord):
            t = read._share_state_row(0, offset, ts, r)
        else:
            t = read._record_row(0, offset, ts, r)
        d = dict(zip(read.RECORD_FIELDS, t, strict=True))
        ms = d.pop("members") or []
        out.append(SimpleNamespace(**d, all_member_ids=[m for m, _ in ms], all_instance_ids=[i for _, i in ms]))
    return out


def history(records) -> list[dict]:
    return sorted((dict(zip(fold.HISTORY_FIELDS, h)) for h in fold.fold_member_map(rows(records))),
                  key=lambda h: (h["valid_from_offset"], h["member_id"] or ""))


def generations(records) -> list[dict]:
    return [dict(zip(fold.GENERATION_FIELDS, g)) for g in fold.fold_generations(rows(records))]


def ev(cause, iid, old, new, t, gen=1):
    return rec.StaticMemberEventRecord("g", iid, cause, old, new, gen, t, "c", "/h")


def cmember(mid, iid, classic=False, tombstone=False):
    c = cg.ClassicMemberMetadata(45000, (("range", b"s"),)) if classic else None
    return cg.ConsumerMemberRecord("g", mid, iid, None, "c", "/h", ("t",), None, 300000, None, c, tombstone)


def assigned(mid, epoch):
    return cg.CurrentAssignmentRecord("g", mid, epoch, max(epoch - 1, 0), 0, ((TID, (0,)),))


def test_a_deleted_consumer_group_and_its_next_incarnation():
    log = [(ev(rec.JOINED, "i0", None, "m0", 100), 100), (cmember("m0", "i0"), 100),
           (cg.ConsumerGroupMetadataRecord("g", 1), 100), (assigned("m0", 1), 100),
           # DeleteGroups (an empty group in Kafka; here the member's records go with it)
           (cg.CurrentAssignmentRecord("g", "m0", tombstone=True), 200), (cmember("m0", None, tombstone=True), 200),
           (cg.ConsumerGroupMetadataRecord("g", tombstone=True), 200),
           (ev(rec.JOINED, "i0", None, "m1", 300), 300), (cmember("m1", "i0"), 300),
           (cg.ConsumerGroupMetadataRecord("g", 1), 300), (assigned("m1", 0), 300), (assigned("m1", 1), 310)]
    h = history(log)
    assert [(x["member_id"], x["start_cause"], x["valid_from_offset"], x["end_cause"], x["valid_to_offset"],
             x["from_generation"], x["to_generation"], x["group_type"]) for x in h] == [
        ("m0", "joined", 0, "group_deleted", 5, 1, 1, "consumer"),        # generations: its member epochs
        ("m1", "joined", 7, None, None, 1, None, "consumer")]
    g = generations(log)
    assert [(x["generation"], x["trigger"], x["members"], x["left"], x["group_type"]) for x in g] == [
        (1, "joined", [("m0", "i0")], [], "consumer"),
        (None, "group_deleted", [], ["i0 (m0)"], "consumer"),
        (1, "joined", [("m1", "i0")], [], "consumer")]


def test_a_downgrade_keeps_the_classic_members_interval_and_ends_the_leavers():
    upgrade = [(rec.GroupMetadataRecord("g", "consumer", 3, "range", "m1", 50, (member("m1", "i1"),)), 50),
               # the upgrade (classic tombstone, the members' records, the same generation as epoch), then i0 joins
               (rec.GroupMetadataRecord("g", tombstone=True), 100), (cmember("m1", "i1", classic=True), 100),
               (cg.ConsumerGroupMetadataRecord("g", 3), 100), (assigned("m1", 3), 100),
               (ev(rec.JOINED, "i0", None, "m0", 100, 3), 100), (cmember("m0", "i0"), 100),
               (cg.ConsumerGroupMetadataRecord("g", 4), 100), (assigned("m0", 4), 100)]
    downgrade = [(ev(rec.LEFT, "i0", "m0", None, 200, 4), 200),
                 (cg.CurrentAssignmentRecord("g", "m0", tombstone=True), 200), (cmember("m0", None, tombstone=True), 200),
                 (cg.CurrentAssignmentRecord("g", "m1", tombstone=True), 200), (cmember("m1", None, tombstone=True), 200),
                 (cg.ConsumerGroupMetadataRecord("g", tombstone=True), 200),
                 (rec.GroupMetadataRecord("g", "consumer", 4, "range", "m1", 200, (member("m1", "i1"),)), 200)]
    h = history(upgrade + downgrade)
    got = [(x["instance_id"], x["member_id"], x["start_cause"], x["valid_from_offset"], x["end_cause"],
            x["valid_to_offset"], x["from_generation"], x["to_generation"], x["group_type"]) for x in h]
    assert got == [
        ("i1", "m1", "unknown", 0, None, None, 3, None, "classic"),          # one interval through both conversions
        (None, None, "converted", 1, "to_consumer", 3, 3, 3, "consumer"),
        ("i0", "m0", "joined", 5, "left", 9, 4, 4, "consumer"),
        (None, None, "converted", 14, "to_classic", 15, 4, 4, "classic")]
    g = generations(upgrade + downgrade)
    assert [(x["generation"], x["trigger"], x["joined"], x["left"], x["group_type"]) for x in g] == [
        (3, "initial", ["i1 (m1)"], [], "classic"),
        (4, "joined", ["i0 (m0)"], [], "consumer")]      # the downgrade keeps generation 4: no row, no deletion


def test_share_deliveries_from_snapshots_and_updates():
    def st(snapshot, start, batches, t, tombstone=False, partition=0):
        return ss.ShareStateRecord("sg", TID, partition, snapshot, 0, 1, 0, start, tuple(batches), tombstone), t
    log = [st(True, 0, [(0, 9, 0, 1)], 10),
           st(False, -1, [(0, 0, 0, 2), (1, 1, 2, 1)], 20),       # 0 redelivered; 1 accepted
           st(False, -1, [(0, 0, 0, 3), (2, 2, 0, 2)], 30),       # 0 again; 2 redelivered
           st(False, -1, [(0, 0, 4, 5), (2, 2, 2, 2)], 40),       # 0 archived at the limit (as Kafka writes it); 2 accepted
           st(False, 3, [(3, 3, 0, 2)], 50),                      # the start moves past 0-2; 3 redelivered
           st(False, 5, [], 60),                                  # the start moves past 3 while it was available
           st(False, -1, [(6, 6, 0, 3)], 70),                     # 6 still in flight at the end
           st(True, 0, [(0, 1, 0, 2)], 80, partition=1),          # another share partition, then deleted
           st(True, 0, [], 90, tombstone=True, partition=1)]
    got = [dict(zip(shares.DELIVERY_FIELDS, r))
           for r in shares.fold_share_deliveries(rows(log), {str(TID): "t"})]
    assert [(r["partition"], r["offset"], r["delivery_count"], r["final_state"], r["first_time"], r["last_time"],
             r["done_time"], r["log_offset"]) for r in got] == [
        (0, 0, 5, "archived", 20, 40, 40, 3),           # done when shown archived (terminal), not when passed
        (0, 2, 2, "acknowledged", 30, 40, 40, 3),
        (0, 3, 2, "done", 50, 50, 60, 4),
        (0, 6, 3, "available", 70, 70, None, 6),
        (1, 0, 2, "deleted", 80, 80, 90, 7),
        (1, 1, 2, "deleted", 80, 80, 90, 7)]
    assert {(r["group"], r["topic"], r["topic_id"]) for r in got} == {("sg", "t", str(TID))}


def test_a_consumer_groups_fenced_duplicate_and_replacement_are_reported_as_the_classic_kinds():
    """The consumer kind writes the static events the classic kind writes: a second process with i0's instance
    id replaces m0 and the first one's next heartbeat is fenced - the same intervals, events and anomaly."""
    log = [(ev(rec.JOINED, "i0", None, "m0", 100), 100), (cmember("m0", "i0"), 100),
           (cg.ConsumerGroupMetadataRecord("g", 1), 100), (assigned("m0", 1), 100),
           (cg.CurrentAssignmentRecord("g", "m0", tombstone=True), 200), (cmember("m0", None, tombstone=True), 200),
           (ev(rec.REPLACED, "i0", "m0", "m1", 200), 200), (cmember("m1", "i0"), 200), (assigned("m1", 1), 200),
           (ev(rec.FENCED, "i0", "m0", "m1", 300), 300)]
    out = list(fold.fold_groups(rows(log), fold.Checks()))
    h = sorted((dict(zip(fold.HISTORY_FIELDS, t[1])) for t in out if t[0] == "h"), key=lambda x: x["valid_from_offset"])
    assert [(x["member_id"], x["start_cause"], x["valid_from_offset"], x["end_cause"], x["valid_to_offset"])
            for x in h] == [("m0", "joined", 0, "replaced", 6), ("m1", "replaced", 6, None, None)]
    anomalies = [dict(zip(fold.ANOMALY_FIELDS, t[3])) for t in out if t[0] == "a"]
    assert [(a["kind"], a["instance_id"], a["count"], a["first_time"]) for a in anomalies] == [
        ("fenced_duplicate_instance", "i0", 1, 300)]


def test_a_group_deleted_and_created_again_with_the_same_member_id_is_two_intervals():
    """Only a conversion (a tombstone followed by the other kind's records) carries an interval over a group
    tombstone: the same kind coming back after a deletion starts new intervals, even for the same pair."""
    log = [(ev(rec.JOINED, "i0", None, "m0", 100), 100), (cmember("m0", "i0"), 100),
           (cg.ConsumerGroupMetadataRecord("g", 1), 100),
           (cg.ConsumerGroupMetadataRecord("g", tombstone=True), 200),
           (cmember("m0", "i0"), 300), (cg.ConsumerGroupMetadataRecord("g", 1), 300)]
    assert [(x["member_id"], x["valid_from_offset"], x["end_cause"], x["valid_to_offset"])
            for x in history(log)] == [("m0", 0, "group_deleted", 3), ("m0", 4, None, None)]
    classic = [(rec.GroupMetadataRecord("g", "consumer", 1, "range", "m0", 100, (member("m0", "i0"),)), 100),
               (rec.GroupMetadataRecord("g", tombstone=True), 200),
               (rec.GroupMetadataRecord("g", "consumer", 1, "range", "m0", 300, (member("m0", "i0"),)), 300)]
    assert [(x["member_id"], x["valid_from_offset"], x["end_cause"], x["valid_to_offset"])
            for x in history(classic)] == [("m0", 0, "group_deleted", 1), ("m0", 2, None, None)]
