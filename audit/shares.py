"""Executor side: the share coordinator's records (`__share_group_state`: each share partition's ShareSnapshot and
ShareUpdate records, in log order) folded into one row per record (an offset of a share partition) that was
delivered more than once or archived: share_deliveries.

A share partition's state is its start offset and its in-flight records' (delivery state, delivery count), as
the share coordinator replays it (a snapshot replaces the state, an update moves the start offset - -1: unchanged
- and merges its batches over it; records below the start offset are done). A write names the records whose state
changed - an acknowledgement's records ACKNOWLEDGED or ARCHIVED, a released or expired one AVAILABLE or, at the
delivery limit, ARCHIVED, each with its delivery count - with the start offset as it stood before them (the next
write carries where it moved). An offset is followed from the first record showing it with a delivery count of 2
or more, or archived, to the record whose start offset passes it (or the end of the log). Its final state:
`archived` or `acknowledged` when a record showed it so last, done (`done_time`) at the first record showing it so
- both are terminal - or else at the record whose start offset passed it; `done` when the start offset moved past
it while it was last shown available or acquired (a log whose writes did not name it); `available`/`acquired`
when it is still in flight at the end of the log; `deleted` when the share partition's state was deleted (a
tombstone) first.
"""
from __future__ import annotations

import itertools
import json

# Kafka's RecordState values in a state batch
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
STATE_NAMES = {AVAILABLE: "available", ACQUIRED: "acquired", ACKNOWLEDGED: "acknowledged", ARCHIVED: "archived"}
DONE, DELETED = "done", "deleted"

# share_deliveries columns, in order
DELIVERY_FIELDS = ("group", "topic_id", "topic", "partition", "offset", "delivery_count", "final_state",
                   "first_time", "last_time", "done_time", "log_partition", "log_offset")


def fold_share_deliveries(rows, topics: dict[str, str] | None = None):
    """rows: Spark Rows of `share_state` records (read.py: group, the topic id in `topic`, `topic_partition`,
    `protocol_type` snapshot/update, the start offset in `committed_offset`, the batches as JSON in `metadata`,
    tombstone, the log's `partition`, `offset`, `timestamp`), sorted by (group, topic, topic_partition,
    partition, offset). `topics`: topic id -> name. Yields DELIVERY_FIELDS tuples."""
    names = topics or {}
    key = lambda r: (r.group, r.topic, r.topic_partition)  # noqa: E731
    for (group, topic_id, partition), records in itertools.groupby(rows, key):
        # offset -> [count, state, first time, last time, log partition, log offset, done time]
        tracked: dict[int, list] = {}
        start = 0
        share_partition = (group, topic_id, names.get(topic_id), partition)

        def row(off: int, final: str, done_time, tracked=tracked, share_partition=share_partition) -> tuple:
            count, _, first, last, lp, lo, done = tracked.pop(off)
            return (*share_partition, off, count, final, first, last, done if done is not None else done_time, lp, lo)

        for r in records:
            if r.tombstone:
                if r.protocol_type == "snapshot":       # the share partition's state deleted
                    for off in sorted(tracked):
                        final = STATE_NAMES[tracked[off][1]] if tracked[off][1] in (ACKNOWLEDGED, ARCHIVED) else DELETED
                        yield row(off, final, r.timestamp)
                    start = 0
                continue
            if r.protocol_type == "snapshot" or r.committed_offset >= 0:
                start = r.committed_offset
            for first, last_off, state, count in json.loads(r.metadata):
                terminal = state in (ACKNOWLEDGED, ARCHIVED)
                if count < 2 and state != ARCHIVED:
                    for off in range(max(first, start), last_off + 1):
                        if off in tracked:
                            tracked[off][1] = state
                            if terminal and tracked[off][6] is None:
                                tracked[off][6] = r.timestamp
                    continue
                for off in range(max(first, start), last_off + 1):
                    t = tracked.setdefault(off, [count, state, r.timestamp, r.timestamp, r.partition, r.offset, None])
                    t[0], t[1], t[3], t[4], t[5] = max(t[0], count), state, r.timestamp, r.partition, r.offset
                    if terminal and t[6] is None:
                        t[6] = r.timestamp
            for off in sorted(o for o in tracked if o < start):
                state = tracked[off][1]
                yield row(off, STATE_NAMES[state] if state in (ACKNOWLEDGED, ARCHIVED) else DONE, r.timestamp)
        for off in sorted(tracked):
            yield row(off, STATE_NAMES.get(tracked[off][1], str(tracked[off][1])), None)
