"""Executor side: fold one group's records (in log order) into member-map intervals.

The map `group.instance.id -> member.id` that a restart restores is the one in the group's latest
GroupMetadata record (that is what `GroupShard.replay` rebuilds), so an interval of
member_map_history opens at the first GroupMetadata snapshot that shows (instance -> member) and closes
at the first snapshot that no longer does (or at the group's tombstone). The static-member event records
give each interval its cause and its precise time: the start is the latest `joined`/`replaced` event
naming that member id as the new one, the end the latest `replaced`/`expired`/`left`/`removed`/...
event naming it as the old one. When that event is no longer in the log (compacted away) the cause is
`unknown` and the snapshot's offset and time stand in. Events that never reach a snapshot (a member
replaced again before its rebalance finished, or the last changes of a log ending mid-rebalance) are in
static_events but open no interval.

`last_seen_offset` is the last GroupMetadata record that still showed the pair: with an end event the
member id was certainly mapped over [valid_from_offset, valid_to_offset); without one (unknown, or a
group tombstone) only over [valid_from_offset, last_seen_offset], the end lying somewhere after.

Intervals are kept per (instance, member id), not per instance: a snapshot listing one instance with two
member ids opens (or keeps open) an interval for each, so member_map_history shows the overlap and the
`concurrent_member_ids` anomaly (two intervals of one instance with different member ids overlapping in
log order) can find it, as it finds a member id that joined while another was still mapped.

A coordinator move (a CoordinatorLoad record of the group's offsets partition, in cluster mode) is a row of
its own in the group's history, in log order beside the member ids: instance and member id empty,
start_cause `coordinator_moved`, end_cause the move's cause (`broker_stopped`, `moved`, ...), from_broker
and to_broker the brokers, the group's generation then in from/to_generation (a static group keeps it).

The other group kinds (docs/audit.md, "The group kinds"): a KIP-848 member id is mapped to its instance id from
its member record to that record's tombstone (its generations: its member epochs, from its current-assignment
records); a share group's members have no instance id (its membership is in generations). A group tombstone
followed by the other kind's records is a conversion (online migration): the intervals it would end and that
those records show again go on, and the conversion is a `converted` row of its own.

The function runs over each partition of rows sorted by (group, partition, offset) (`in_arrow`: Spark's
`mapInArrow`); it holds one group's open intervals at a time.

`fold_groups` is the audit's one pass per group: it runs `fold_member_map` and `fold_generations` over one
group's rows (held as a list while the group is folded), keeps the rows inside the --since/--until window
(`Checks`), works out the group's anomalies from them (`group_anomalies`), adds them to the task's counts
for the summary, and, for the task's most active groups, what report.html draws of them (`group_drawing`).

`fold_catchup_ranges` does the same for the catch-up consumer's checkpoints (its companion group's
OffsetCommit metadata): one (group, topic, partition)'s commits in log order are folded by
`tenure.catchup.ranges.history` into one row per range token, holding only that partition's open tokens.
"""
from __future__ import annotations

import bisect
import collections
import dataclasses
import itertools
import json
from collections.abc import Callable, Iterable

from tenure.catchup import ranges as R
from tenure.protocol import records as rec

START_CAUSES = frozenset({rec.JOINED, rec.REPLACED})
END_CAUSES = frozenset({rec.REPLACED, rec.EXPIRED, rec.REGISTRATION_EXPIRED, rec.SYNC_EXPIRED, rec.GROUP_FULL,
                        rec.LEFT, rec.REMOVED})
UNKNOWN = "unknown"
GROUP_DELETED = "group_deleted"
COORDINATOR_MOVED = "coordinator_moved"

# member_map_history columns, in order
HISTORY_FIELDS = (
    "group", "instance_id", "member_id", "log_partition",
    "valid_from_offset", "valid_from_time", "valid_to_offset", "valid_to_time",
    "start_cause", "end_cause", "from_generation", "to_generation",
    "snapshot_from_offset", "snapshot_to_offset", "last_seen_offset", "from_broker", "to_broker", "group_type",
)


# the group kinds (`group_type`), and the record types of each: its group metadata (the epoch or generation) and
# its members
CLASSIC, CONSUMER, SHARE = "classic", "consumer", "share"
KIND_OF = {"group_metadata": CLASSIC, "consumer_group_metadata": CONSUMER, "consumer_member": CONSUMER,
           "share_group_metadata": SHARE, "share_member": SHARE}
METADATA_TYPES = frozenset({"group_metadata", "consumer_group_metadata", "share_group_metadata"})
MEMBER_TYPES = frozenset({"consumer_member", "share_member"})
CONVERTED = "converted"             # a history row: the group changed kind (online migration), to_<kind> its end


class _GroupFold:
    def __init__(self, group: str, partition: int) -> None:
        self.group = group
        self.partition = partition
        self.open: dict[tuple[str, str], dict] = {}          # (instance id, member id) -> open interval
        self.start_ev: dict[tuple[str, str], tuple[str, int, int]] = {}
        self.end_ev: dict[tuple[str, str], tuple[str, int, int]] = {}
        self.generation: int | None = None                    # of the latest snapshot, or the group epoch
        self.kind: str | None = None                          # the group's kind (classic, consumer, share)
        # intervals a tombstone ended, unless the same write re-lists them (a conversion between kinds):
        # (instance id, member id) -> (offset, time, generation, cause when no end event)
        self.pending: dict[tuple[str, str], tuple[int, int, int | None, str]] = {}
        # a group tombstone not yet settled: its offset and time, the group's kind and generation before it
        self.converting: tuple[int, int, str, int | None] | None = None
        self.epochs: dict[str, int] = {}                      # a KIP-848 member id -> its latest member epoch
        self.provisional: set[tuple[str, str]] = set()        # intervals opened by a member record, no epoch yet

    def _row(self, **cols) -> tuple:
        return tuple(cols.get(f) for f in HISTORY_FIELDS)

    def moved(self, r) -> tuple:
        """A coordinator move's row (a coordinator_load record: brokers in old/new_member_id, see
        tenure.audit.read)."""
        time = r.event_time if r.event_time is not None and r.event_time >= 0 else r.timestamp
        return self._row(group=self.group, instance_id=None, member_id=None, log_partition=self.partition,
                         valid_from_offset=r.offset, valid_from_time=time, valid_to_offset=r.offset, valid_to_time=time,
                         start_cause=COORDINATOR_MOVED, end_cause=r.cause, from_generation=self.generation,
                         to_generation=self.generation, snapshot_from_offset=None, snapshot_to_offset=None,
                         last_seen_offset=r.offset, from_broker=int(r.old_member_id), to_broker=int(r.new_member_id),
                         group_type=self.kind)

    def event(self, r) -> None:
        if r.tombstone or r.instance_id is None:
            return
        when = (r.offset, r.event_time if r.event_time is not None and r.event_time >= 0 else r.timestamp)
        if r.cause in START_CAUSES and r.new_member_id is not None:
            self.start_ev[(r.instance_id, r.new_member_id)] = (r.cause, *when)
        if r.cause in END_CAUSES and r.old_member_id is not None:
            self.end_ev[(r.instance_id, r.old_member_id)] = (r.cause, *when)

    def _close(self, key: tuple[str, str], offset: int, time: int, generation, default_cause: str) -> tuple:
        self.provisional.discard(key)
        row = self.open.pop(key)
        cause, eoff, etime = self.end_ev.pop(key, (default_cause, offset, time))
        row.update(valid_to_offset=eoff, valid_to_time=etime, end_cause=cause, to_generation=generation,
                   snapshot_to_offset=offset)
        return tuple(row[f] for f in HISTORY_FIELDS)

    def _open(self, key: tuple[str, str], r, generation) -> None:
        iid, mid = key
        cause, eoff, etime = self.start_ev.pop(key, (UNKNOWN, r.offset, r.timestamp))
        self.open[key] = dict(group=self.group, instance_id=iid, member_id=mid, log_partition=self.partition,
                              valid_from_offset=eoff, valid_from_time=etime, valid_to_offset=None,
                              valid_to_time=None, start_cause=cause, end_cause=None,
                              from_generation=generation, to_generation=None,
                              snapshot_from_offset=r.offset, snapshot_to_offset=None,
                              last_seen_offset=r.offset, from_broker=None, to_broker=None,
                              group_type=KIND_OF.get(r.type, self.kind))

    def _listed(self, key: tuple[str, str], r, generation) -> None:
        """A record showing (instance, member id) mapped: its open interval goes on (also one a tombstone of the
        same write ended: a conversion), else one opens."""
        self.pending.pop(key, None)
        if key in self.open:
            self.open[key]["last_seen_offset"] = r.offset
        else:
            self._open(key, r, generation)
            if r.type in MEMBER_TYPES:
                self.provisional.add(key)

    def assignment(self, r) -> None:
        """A KIP-848 member's current assignment: its member epoch (0: none yet or fenced, -2: a static member
        away) - the first one above 0 is the from_generation of an interval its member record opened, the
        latest its to_generation."""
        if r.tombstone or r.generation is None or r.generation <= 0:
            return
        self.epochs[r.new_member_id] = r.generation
        for key in [k for k in self.provisional if k[1] == r.new_member_id]:
            self.open[key]["from_generation"] = r.generation
            self.provisional.discard(key)

    def settle(self, r=None) -> list[tuple]:
        """What the tombstones before `r` (a group metadata record, a coordinator move, or the end of the group's
        rows: None) ended and nothing re-listed: their intervals close where the tombstone was; a group
        tombstone followed by the other kind's records is a conversion (a history row)."""
        out = [self._close_pending(key) for key in sorted(self.pending) if key in self.open]
        self.pending.clear()
        if self.converting is not None:
            offset, time, was, generation = self.converting
            self.converting = None
            now = None if r is None else KIND_OF.get(r.type)
            if now is not None and now != was and not r.tombstone:
                out.append(self._row(group=self.group, log_partition=self.partition, valid_from_offset=offset,
                                     valid_from_time=time, valid_to_offset=r.offset, valid_to_time=r.timestamp,
                                     start_cause=CONVERTED, end_cause=f"to_{now}", from_generation=generation,
                                     to_generation=r.generation, last_seen_offset=r.offset, group_type=now))
            else:               # a deletion: the events before it were the deleted group's
                self.start_ev = {k: v for k, v in self.start_ev.items() if v[1] > offset}
                self.end_ev = {k: v for k, v in self.end_ev.items() if v[1] > offset}
        return out

    def _end_all(self, r, cause: str) -> None:
        """A group tombstone: every open interval ends here unless the same write re-lists it."""
        for key in self.open:
            self.pending.setdefault(key, (r.offset, r.timestamp, None, cause))
        for key, (o, t, g, _) in list(self.pending.items()):
            self.pending[key] = (o, t, g, cause)
        if self.converting is None:
            self.converting = (r.offset, r.timestamp, KIND_OF[r.type], self.generation)
        self.generation = None

    def member(self, r) -> list[tuple]:
        """A KIP-848 member record (its subscription: the member is in the group until its tombstone) or a share
        group's (no instance id: no interval)."""
        self.kind = KIND_OF[r.type]
        if r.tombstone:
            for key in self.open:
                if key[1] == r.new_member_id:
                    self.pending.setdefault(key, (r.offset, r.timestamp, self.generation, UNKNOWN))
            return []
        out = []
        if r.instance_id is not None:
            key = (r.instance_id, r.new_member_id)
            if key in self.pending and not self._crossing(r):       # ended, and back: a new interval
                out.append(self._close_pending(key))
            self._listed(key, r, self.generation)
        return out

    def _crossing(self, r) -> bool:
        """Whether `r` follows a group tombstone of the other kind: a conversion, which re-lists its members."""
        return self.converting is not None and self.converting[2] != KIND_OF[r.type]

    def _close_pending(self, key: tuple[str, str]) -> tuple:
        offset, time, generation, cause = self.pending.pop(key)
        return self._close(key, offset, time, self.epochs.pop(key[1], generation), cause)

    def metadata(self, r) -> list[tuple]:
        """A KIP-848 or share group's metadata record (its epoch), or its tombstone (the group deleted, or
        converted to a classic group if a GroupMetadata record follows)."""
        if r.tombstone:
            self._end_all(r, GROUP_DELETED)
            return []
        out = self.settle(r)
        self.kind = KIND_OF[r.type]
        self.generation = r.generation
        return out

    def snapshot(self, r) -> list[tuple]:
        if r.tombstone:
            self._end_all(r, GROUP_DELETED)
            return []
        # the snapshot's static members (instance id, member id), in its order, each pair once
        snap = dict.fromkeys((i, m) for i, m in zip(r.all_instance_ids or (), r.all_member_ids or (), strict=True)
                             if i is not None)
        if self._crossing(r):                           # a conversion's snapshot re-lists what the tombstones ended
            for key in snap:
                self.pending.pop(key, None)
        out = self.settle(r)
        self.kind = CLASSIC
        self.generation = r.generation
        for key in sorted(self.open):
            if key not in snap:
                out.append(self._close(key, r.offset, r.timestamp, r.generation, UNKNOWN))
        for key in snap:
            self._listed(key, r, r.generation)
        return out

    def finish(self) -> list[tuple]:
        out = self.settle()
        return out + [tuple(self.open[key][f] for f in HISTORY_FIELDS) for key in sorted(self.open)]


# generations columns, in order
GENERATION_FIELDS = ("group", "generation", "time", "protocol_type", "protocol", "leader", "member_count", "members",
                     "trigger", "rebalance_start", "joined", "left", "log_partition", "log_offset", "state_timestamp",
                     "group_type")
SUBSCRIPTION_CHANGED = "subscription_changed"      # a KIP-848 or share group's epoch bump: a member's subscription
TOPICS_CHANGED = "topics_changed"                  # ... or neither members nor subscriptions (topics, regexes)


def _who(member_id: str, instance_id: str | None) -> str:
    """A member as people name it: `instance id (member id)` for a static member, else the member id."""
    return member_id if instance_id is None else f"{instance_id} ({member_id})"


class _Generations:
    """fold_generations' state for one (group, partition)."""

    def __init__(self) -> None:
        self.prev = None                  # the previous group metadata record (None: none, or a deletion since)
        self.before: list[tuple] = []     # its members (member id, instance id)
        self.subs_before: dict = {}       # and a KIP-848 or share group's subscriptions then
        self.members: dict[str, tuple] = {}    # a KIP-848 or share group's members: member id -> (instance, subscription)
        self.causes: set[str] = set()
        self.first_event: int | None = None
        self.held: tuple | None = None    # a group tombstone not yet settled, with the causes before it

    def event(self, r) -> None:
        if not r.tombstone and r.cause is not None and r.cause != rec.FENCED:
            self.causes.add(r.cause)
            t = r.event_time if r.event_time is not None and r.event_time >= 0 else r.timestamp
            self.first_event = t if self.first_event is None or t < self.first_event else self.first_event

    def member(self, r) -> None:
        if r.tombstone:
            self.members.pop(r.new_member_id, None)
        else:
            self.members[r.new_member_id] = (r.instance_id, r.metadata)

    def _settle(self, r) -> list[tuple]:
        """A held tombstone, at the next group metadata record `r` (None: the end): one of the other kind (not a
        tombstone) makes it a conversion - no row, its causes carry on -, else it was a deletion."""
        if self.held is None:
            return []
        t, causes, first = self.held
        self.held = None
        if r is not None and not r.tombstone and KIND_OF[r.type] != KIND_OF[t.type]:
            self.causes |= causes
            self.first_event = _min((self.first_event, first))
            return []
        was = {_who(*m) for m in self.before}
        row: tuple = (t.group, None, t.timestamp, t.protocol_type, None, None, 0, [], GROUP_DELETED,
               t.timestamp if first is None else min(first, t.timestamp), [], sorted(was), t.partition, t.offset,
               None, KIND_OF[t.type])
        self.prev, self.before, self.subs_before = None, [], {}
        return [row]

    def metadata(self, r) -> list[tuple]:
        if r.tombstone:
            out: list[tuple] = self._settle(r) if self.held is not None else []
            self.held = (r, self.causes, self.first_event)
            self.causes, self.first_event = set(), None
            return out
        out = self._settle(r)
        kind = KIND_OF[r.type]
        if kind == CLASSIC:
            members = list(zip(r.all_member_ids or (), r.all_instance_ids or (), strict=True))
            subs: dict = {}
        else:
            members = [(m, i) for m, (i, _) in sorted(self.members.items())]
            subs = {m: sub for m, (_, sub) in self.members.items()}
        if self.prev is None or r.generation != self.prev.generation:
            if rec.FORCED_REBALANCE in self.causes:
                trigger = rec.FORCED_REBALANCE
            elif self.causes:
                trigger = "+".join(sorted(self.causes))
            elif self.prev is None:
                trigger = "initial"
            elif sorted(m for m, _ in members) != sorted(m for m, _ in self.before):
                trigger = "dynamic_membership"
            elif kind == CLASSIC:
                trigger = UNKNOWN
            else:
                trigger = SUBSCRIPTION_CHANGED if subs != self.subs_before else TOPICS_CHANGED
            now, was = {_who(*m) for m in members}, {_who(*m) for m in self.before}
            out.append((r.group, r.generation, r.timestamp, r.protocol_type, r.protocol, r.leader, len(members),
                        members, trigger, r.timestamp if self.first_event is None else min(self.first_event, r.timestamp),
                        sorted(now - was), sorted(was - now), r.partition, r.offset, r.state_timestamp, kind))
        self.prev, self.before, self.subs_before = r, members, subs
        self.causes, self.first_event = set(), None
        return out


def fold_generations(rows):
    """rows: as `fold_member_map` takes them (a snapshot's members, all of them, as `all_member_ids` and
    `all_instance_ids`; a KIP-848 or share group's member records). Yields generations tuples
    (GENERATION_FIELDS): one per new generation - a group metadata record (GroupMetadata, or a KIP-848 or
    share group's epoch) whose generation differs from the group's previous one's, or the first one, or the
    first after a deletion - and one per group tombstone that is a deletion (one followed by the other kind's
    records is a conversion between classic and consumer: no row, the generation goes on). Its members: a
    GroupMetadata record's, or the member records not tombstoned by then. Its trigger comes from the static
    events (not tombstones, not `fenced`) between the previous group metadata record and this one:
    `forced_rebalance` if one was, else their causes joined with `+`; without any, `initial` for a first
    generation, `dynamic_membership` when the member ids changed, else for a classic group `unknown`, for a
    KIP-848 or share group `subscription_changed` when a member's subscription did, else `topics_changed`
    (the subscribed topics' partitions, or a regular expression's resolution). The rebalance ran from the
    first of those events (its own time, else the record's) to the record."""
    key = None
    st = _Generations()
    for r in rows:
        if (r.group, r.partition) != key:
            yield from st._settle(None)
            key, st = (r.group, r.partition), _Generations()
        if r.type == "static_member_event":
            st.event(r)
        elif r.type in MEMBER_TYPES:
            st.member(r)
        elif r.type in METADATA_TYPES:
            yield from st.metadata(r)
    yield from st._settle(None)


def fold_member_map(rows):
    """rows: Spark Rows of group_metadata / static_member_event records, and the coordinator_load records of
    each group's partition (given the group), sorted by (group, partition, offset); a snapshot's members as
    `all_member_ids` and `all_instance_ids` (two arrays, in the record's order). Yields member_map_history
    tuples (HISTORY_FIELDS)."""
    cur: _GroupFold | None = None
    for r in rows:
        if cur is None or cur.group != r.group or cur.partition != r.partition:
            if cur is not None:
                yield from cur.finish()
            cur = _GroupFold(r.group, r.partition)
        if r.type == "static_member_event":
            cur.event(r)
        elif r.type == "coordinator_load":
            yield from cur.settle(r)
            yield cur.moved(r)
        elif r.type in MEMBER_TYPES:
            yield from cur.member(r)
        elif r.type == "consumer_assignment":
            cur.assignment(r)
        elif r.type == "group_metadata":
            yield from cur.snapshot(r)
        elif r.type in METADATA_TYPES:
            yield from cur.metadata(r)
    if cur is not None:
        yield from cur.finish()


# ------------------------------------------------------------------------------ one pass per group
EXPIRY_CAUSES = frozenset({rec.EXPIRED, rec.REGISTRATION_EXPIRED, rec.SYNC_EXPIRED})
# anomalies columns, in order
ANOMALY_FIELDS = ("kind", "group", "instance_id", "count", "first_time", "last_time", "detail")
# fold_groups' output: a tag, then one of a member_map_history row, a generations row, an anomaly, the task's
# counts or one drawn group (JSON); the others null
FOLD_TAGS = ("h", "g", "a", "s", "r")


@dataclasses.dataclass(frozen=True)
class Checks:
    """The --since/--until window (ms since the epoch, None: unbounded) and the anomaly thresholds."""
    since: int | None = None
    until: int | None = None
    storm_k: int = 5
    storm_window_ms: int = 60_000
    expiry_n: int = 2
    churn_n: int = 4

    def keeps(self, t) -> bool:
        """A time inside the window (a null time never is, as in a SQL filter)."""
        if self.since is None and self.until is None:
            return True
        return t is not None and (self.since is None or t >= self.since) and (self.until is None or t < self.until)

    def keeps_interval(self, h: tuple) -> bool:
        """A member_map_history row that overlaps the window: it starts before --until, and it is still open
        or ends at or after --since."""
        start, end = h[_H_FROM_TIME], h[_H_TO_TIME]
        if self.since is not None and end is not None and end < self.since:
            return False
        return self.until is None or (start is not None and start < self.until)


_H = {n: i for i, n in enumerate(HISTORY_FIELDS)}
_H_FROM_TIME, _H_TO_TIME = _H["valid_from_time"], _H["valid_to_time"]


def _min(xs):
    xs = [x for x in xs if x is not None]
    return min(xs) if xs else None


def _max(xs):
    xs = [x for x in xs if x is not None]
    return max(xs) if xs else None


def _concurrent(group: str, hist: list[tuple], checks: Checks) -> list[tuple]:
    """Two member ids certainly mapped to one instance over overlapping stretches of one offsets partition:
    each interval is certain over [valid_from_offset, end), end = its end event's offset, or without one
    (unknown, group_deleted, still open) last_seen_offset + 1. Replacements (one event ends the old id where
    it starts the new) and compaction (which only removes records) never make an overlap. Intervals sorted
    by start: a later one overlaps an earlier one iff it starts before both ends."""
    by: dict[tuple, list] = {}
    for h in hist:
        iid, mid = h[_H["instance_id"]], h[_H["member_id"]]
        if iid is None or mid is None:
            continue
        end = h[_H["valid_to_offset"]] if h[_H["end_cause"]] in END_CAUSES else h[_H["last_seen_offset"]] + 1
        by.setdefault((h[_H["log_partition"]], iid), []).append(
            (h[_H["valid_from_offset"]], end, mid, h[_H["valid_from_time"]]))
    found: dict[str, list] = {}
    for (_, iid), ivs in by.items():
        ivs.sort(key=lambda x: x[0])
        for i, (_a_from, a_to, a_mid, a_time) in enumerate(ivs):
            for b_from, b_to, b_mid, b_time in ivs[i + 1:]:
                if b_from >= a_to:
                    break
                if b_from >= b_to or a_mid == b_mid:
                    continue
                lo, hi = sorted((a_mid, b_mid))
                t = _max((a_time, b_time))
                if checks.keeps(t):
                    found.setdefault(iid, []).append(
                        (t, f"{lo}+{hi} at offsets {b_from}..{min(a_to, b_to) - 1}"))
    return [("concurrent_member_ids", group, iid, len(ps), _min(t for t, _ in ps), _max(t for t, _ in ps),
             "member ids mapped at once: " + "; ".join(sorted(p for _, p in ps)))
            for iid, ps in found.items()]


def group_anomalies(group: str, hist: list[tuple], gens: list[tuple], events: list, checks: Checks) -> list[tuple]:
    """The anomalies of one group (ANOMALY_FIELDS tuples), from its rows inside the window: member_map_history
    and generations tuples, static_member_event records (`fold_input` rows)."""
    out = _concurrent(group, hist, checks)
    fenced: dict = {}
    expiring: dict = {}
    for e in events:
        if e.tombstone:
            continue
        if e.cause == rec.FENCED:
            fenced.setdefault(e.instance_id, []).append(e)
        elif e.cause in EXPIRY_CAUSES:
            expiring.setdefault(e.instance_id, []).append(e)
    for iid, es in fenced.items():
        ids = ",".join(sorted({e.old_member_id for e in es if e.old_member_id is not None}))
        out.append(("fenced_duplicate_instance", group, iid, len(es), _min(e.event_time for e in es),
                    _max(e.event_time for e in es), f"requests fenced (FENCED_INSTANCE_ID) from member ids: {ids}"))
    for iid, es in expiring.items():
        if len(es) >= checks.expiry_n:
            out.append(("repeated_expiry", group, iid, len(es), _min(e.event_time for e in es),
                        _max(e.event_time for e in es), f"expired at least {checks.expiry_n} times"))
    churn: dict = {}
    for h in hist:
        churn.setdefault(h[_H["instance_id"]], []).append(h)
    for iid, hs in churn.items():
        n = len({h[_H["member_id"]] for h in hs if h[_H["member_id"]] is not None})
        if n >= checks.churn_n:
            out.append(("instance_churn", group, iid, n, _min(h[_H_FROM_TIME] for h in hs),
                        _max(h[_H_FROM_TIME] for h in hs), f"at least {checks.churn_n} member ids"))
    # more than storm_k rebalances within storm_window_ms: each generation counts those at most the window
    # before it (and any at its very time)
    times = sorted(g[2] for g in gens if g[1] is not None and g[2] is not None)
    storm = [(bisect.bisect_right(times, t) - bisect.bisect_left(times, t - checks.storm_window_ms), t)
             for t in times]
    storm = [(n, t) for n, t in storm if n > checks.storm_k]
    if storm:
        out.append(("rebalance_storm", group, None, max(n for n, _ in storm), min(t for _, t in storm),
                    max(t for _, t in storm),
                    f"more than {checks.storm_k} rebalances within {checks.storm_window_ms} ms"))
    return out


class _Counts:
    """What the summary counts, over the rows inside the window, for the groups of one task (a group's rows
    are all in one task: the counts of all tasks add up)."""
    def __init__(self) -> None:
        self.intervals: collections.Counter = collections.Counter()    # (start, end, is a member id) -> rows
        self.groups = self.instances = self.generations = 0
        self.gen_first = self.gen_last = None
        self.events: dict = {}                                          # (cause, tombstone) -> [n, first, last]

    def add(self, hist: list[tuple], gens: list[tuple], events: list) -> None:
        members = [h for h in hist if h[_H["instance_id"]] is not None]
        for h in hist:
            self.intervals[(h[_H["start_cause"]], h[_H["end_cause"]], h[_H["instance_id"]] is not None)] += 1
        self.groups += bool(members or gens)
        self.instances += len({h[_H["instance_id"]] for h in members})
        self.generations += sum(g[1] is not None for g in gens)
        self.gen_first = _min((self.gen_first, *(g[2] for g in gens)))
        self.gen_last = _max((self.gen_last, *(g[2] for g in gens)))
        for e in events:
            n, a, b = self.events.get((e.cause, e.tombstone), (0, None, None))
            self.events[(e.cause, e.tombstone)] = (n + 1, _min((a, e.timestamp)), _max((b, e.timestamp)))

    def json(self) -> str:
        return json.dumps(dict(intervals=[[*k, n] for k, n in self.intervals.items()], groups=self.groups,
                               instances=self.instances, generations=self.generations, gen_first=self.gen_first,
                               gen_last=self.gen_last, events=[[*k, *v] for k, v in self.events.items()]))


# what report.html draws, bounded whatever the log's size: the most active groups (generations + member ids),
# in each the instances with the most churn, the latest rows of each table, the latest marks
MAX_GROUPS = 10        # groups drawn (the most active); the others are named in a sentence
MAX_LANES = 20         # instances drawn per group (the most churn)
MAX_ROWS = 300         # rows per table and per group (the latest)
MAX_MARKS = 2000       # event marks per group
MARK_CAUSES = frozenset({rec.FENCED, rec.EXPIRED, rec.REGISTRATION_EXPIRED, rec.SYNC_EXPIRED, rec.LEFT, rec.REMOVED,
                         rec.GROUP_FULL})
# the drawing's tables' columns, in order
DRAWN_INTERVALS = ("group", "instance_id", "member_id", "valid_from_time", "valid_to_time", "start_cause", "end_cause",
                   "from_generation", "to_generation", "valid_from_offset")
DRAWN_MARKS = ("group", "instance_id", "cause", "old_member_id", "time")
DRAWN_GENERATIONS = ("group", "generation", "time", "rebalance_start", "trigger", "member_count", "joined", "left",
                     "log_offset")
_G = {n: i for i, n in enumerate(GENERATION_FIELDS)}


def _nulls_first(x):
    return (x is not None, x if x is not None else "")


def activity(hist: list[tuple], gens: list[tuple]) -> int:
    """How active a group is, for choosing the groups drawn: its generations and member ids."""
    return len(gens) + sum(h[_H["instance_id"]] is not None for h in hist)


def group_drawing(group: str, hist: list[tuple], gens: list[tuple], events: list) -> dict:
    """What report.html draws of one group, from its rows inside the window: its lanes (the MAX_LANES
    instances with the most member ids, then the most marks), how many instances it has, its lanes' latest
    intervals and marks, its latest generations (in log order), and its time span. JSON-able."""
    members = [h for h in hist if h[_H["instance_id"]] is not None]
    live = [e for e in events if not e.tombstone]
    marks = [e for e in live if e.cause in MARK_CAUSES]
    ids, n_marks = collections.Counter(h[_H["instance_id"]] for h in members), collections.Counter(
        e.instance_id for e in marks)
    instances = set(ids) | set(n_marks)
    lanes = sorted(instances, key=lambda i: (-ids[i], -n_marks[i], _nulls_first(i)))[:MAX_LANES]
    on = set(lanes)
    ivs = sorted((h for h in members if h[_H["instance_id"]] in on),
                 key=lambda h: (-h[_H["valid_from_offset"]], h[_H["instance_id"]], h[_H["member_id"]]))[:MAX_ROWS * 4]
    ms = sorted((e for e in marks if e.instance_id in on), key=lambda e: -e.offset)[:MAX_MARKS]
    gs = sorted(sorted(gens, key=lambda g: -g[_G["log_offset"]])[:MAX_ROWS], key=lambda g: g[_G["log_offset"]])
    firsts = [h[_H_FROM_TIME] for h in members] + [g[_G["time"]] for g in gens] + [e.timestamp for e in live]
    lasts = [h[_H_TO_TIME] for h in members] + [g[_G["time"]] for g in gens] + [e.timestamp for e in live]
    kinds = sorted({g[_G["group_type"]] for g in gens} | {h[_H["group_type"]] for h in hist} - {None})
    return dict(group=group, activity=activity(hist, gens), lanes=lanes, instances=len(instances), kinds=kinds,
                intervals=[[h[_H[c]] for c in DRAWN_INTERVALS] for h in ivs],
                marks=[[group, e.instance_id, e.cause, e.old_member_id,
                        e.event_time if e.event_time is not None and e.event_time >= 0 else e.timestamp] for e in ms],
                gens=[[g[_G[c]] for c in DRAWN_GENERATIONS] for g in gs],
                first=_min(firsts), last=_max(lasts))


def fold_groups(rows, checks: Checks):
    """`fold_input`'s rows (one group's rows together, in log order) folded in one pass: per group, its
    member_map_history rows (`fold_member_map`) and generations (`fold_generations`) inside the window, its
    anomalies (`group_anomalies`); at the end the task's counts (`_Counts`) and what report.html would draw of
    its MAX_GROUPS most active groups (`group_drawing`). Yields (tag, history row, generation, anomaly, JSON)
    tuples, one of the four set (FOLD_TAGS). Holds one group's rows at a time."""
    counts = _Counts()
    drawn: list[tuple] = []            # the task's MAX_GROUPS most active groups: (-activity, group, drawing)
    for group, group_rows in itertools.groupby(rows, key=lambda r: r.group):
        grows = list(group_rows)
        hist = [h for h in fold_member_map(grows) if checks.keeps_interval(h)]
        gens = [g for g in fold_generations(grows) if checks.keeps(g[2])]
        events = [r for r in grows if r.type == "static_member_event" and checks.keeps(r.timestamp)]
        yield from (("h", h, None, None, None) for h in hist)
        yield from (("g", None, g, None, None) for g in gens)
        yield from (("a", None, None, a, None) for a in group_anomalies(group, hist, gens, events, checks))
        counts.add(hist, gens, events)
        rank = (-activity(hist, gens), group)
        if rank[0] and (len(drawn) < MAX_GROUPS or rank < drawn[-1][:2]):
            drawn = sorted([*drawn, (*rank, group_drawing(group, hist, gens, events))])[:MAX_GROUPS]
    yield ("s", None, None, None, counts.json())
    yield from (("r", None, None, None, json.dumps(d)) for *_, d in drawn)


# catchup_ranges columns, in order
RANGE_FIELDS = ("group", "topic", "partition", "lo", "hi", "opened", "closed", "processed", "merged_into",
                "owed_from", "owed_to", "instance_id", "last_checkpoint", "log_partition")


def fold_catchup_ranges(rows):
    """rows: Spark Rows (group, topic, partition, metadata, time, log_partition, log_offset) of OffsetCommit
    records, sorted by (group, topic, partition, log_partition, log_offset). Yields catchup_ranges tuples
    (RANGE_FIELDS). Commits that are not checkpoints, or hold a malformed token, are skipped."""
    for (group, topic, partition), commits in itertools.groupby(rows, lambda r: (r.group, r.topic, r.partition)):
        last: dict = {}
        instance: dict[tuple[int, int], str | None] = {}
        for h in R.history(_checkpoints(commits, last, instance)):
            merged = None if h.merged_into is None else f"{h.merged_into[0]}-{h.merged_into[1]}"
            owed = h.owed or (None, None)
            yield (group, topic, partition, h.lo, h.hi, h.opened_ms, h.closed_ms,
                   h.closed_ms if merged is None else None, merged, *owed, instance.get((h.lo, h.hi)),
                   last["time"], last["log_partition"])


def _checkpoints(commits, last: dict, instance: dict[tuple[int, int], str | None]):
    """(time, metadata) of each checkpoint among one (group, topic, partition)'s commits, for `R.history`;
    as it goes, `instance` gets the instance id that wrote each token and `last` the latest checkpoint's time
    and log partition."""
    for r in commits:
        try:
            tokens = R.decode(r.metadata)
        except ValueError:          # not written by the consumer
            continue
        if tokens is None:
            continue
        who = next((f[len("instance="):] for f in r.metadata.split(" ") if f.startswith("instance=")), None)
        instance.update(((t.lo, t.hi), who) for t in tokens)
        last.update(time=r.time, log_partition=r.log_partition)
        yield r.time, r.metadata


def in_arrow(fold, schema):
    """`fold` (rows in, tuples out) as a function for Spark's `mapInArrow`: the partition's Arrow record batches
    become rows with the columns as attributes, the tuples it yields Arrow record batches of `schema` (a
    pyarrow schema). Arrow both ways: the JVM's side of pickled rows cost more than the fold itself."""
    def run(batches):
        import pyarrow as pa
        out: list[tuple] = []

        def rows():
            make: Callable[[Iterable], tuple] | None = None
            for b in batches:
                if make is None:
                    # a row class of the batch's columns: typeshed types namedtuple() as type[tuple], without _make
                    make = collections.namedtuple("Row", b.schema.names, rename=True)._make  # type: ignore[attr-defined]
                yield from map(make, zip(*(c.to_pylist() for c in b.columns), strict=True))

        def batch():
            cols = list(zip(*out, strict=True))
            out.clear()
            return pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(cols, schema, strict=True)],
                                              schema=schema)

        for t in fold(rows()):
            out.append(t)
            if len(out) >= BATCH_ROWS:
                yield batch()
        if out:
            yield batch()
    return run


BATCH_ROWS = 10_000
