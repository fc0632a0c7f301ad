"""Executor side of the audit's read stage: read one segment file of `__consumer_offsets` (a unit: the file,
or a piece of it) and turn it into rows. The driver's cheap side of it - listing the segment files,
checking that a partition's read was consistent, finding offset gaps - is listing.py; the task's own
offsets_history part file is offsets_sink.py.

Runs inside Spark's Python workers (shipped as part of the `tenure` package), so it uses only the
project's own storage and protocol code: the server's one segment reader (`tenure.storage.reader`,
`SegmentReader`) reads and verifies each batch (length, magic, CRC-32C, offsets moving forward) and
`tenure.protocol.records.decode` decodes each record - every group kind's, KIP-848 consumer groups' and KIP-932
share groups' included (`tenure.protocol.txn_records` for a `__transaction_state` file,
`tenure.protocol.share_state_records` for a `__share_group_state` file). Nothing is skipped silently: every batch or record that cannot be read
becomes an error row. A transactional batch's offset commits carry its producer id and epoch; a
transactional control batch (a commit or abort marker) is a row of its own. With an `OffsetsSink` the
plain offset commits are written by the task as a Parquet part file of offsets_history (`OffsetsWriter`)
instead of becoming rows.

A live server appends to the newest segment and its log cleaner swaps cleaned segments in (new files,
renames, see `SegmentLog.replace_segments`). The listing records every segment file's identity (device,
inode, size, mtime). A unit reads its file only if the file it opens is the listed one (the newest may
have grown) and only up to the size listed (a batch straddling that size is read whole: it was being
written), so a read is the log as listed; a changed file gives an `unstable` row instead of records. The
driver lists again after the read (`listing.unstable_reason`): a partition whose files changed or that had a
swap under way is read again (docs/audit.md). A batch that looks torn is re-read a few times while the
file grows; one still torn at the end of the newest segment is a `torn_tail` row ("not yet written"),
reported but not damage. Any other failed batch is `damage`.

Besides records ("R") and errors ("E") a unit yields one "I" row (how the read went: the file's status,
its batch count, first and next offset) and "G" rows (offset gaps inside the file above the cleaner
checkpoint); the driver collects those (one per file, gaps are rare) for the checks.
"""
from __future__ import annotations

import functools
import json
import os

from kafka.record.default_records import DefaultRecordBatch

from tenure.broker.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from tenure.protocol import consumer_group_records as cg
from tenure.protocol import records as rec
from tenure.protocol import share_group_records as sg
from tenure.protocol import share_state_records as ss
from tenure.protocol import txn_records
from tenure.protocol.internal_topics import SHARE_STATE_TOPIC
from tenure.protocol.markers import COMMIT, marker_type
from tenure.storage.reader import BadBatch, SegmentReader

from .listing import CHANGED, OK, OPEN_FAILED, Unit, file_id, list_partitions, same_file, split  # noqa: F401 (list_partitions, split: imported from here too, by bench/)
from .offsets_sink import OffsetsSink, OffsetsWriter

# error kinds
DAMAGE = "damage"                  # a batch failing verification (not a tail still being written)
TORN_TAIL = "torn_tail"            # the newest segment ends in an incomplete batch: not yet written
UNDECODABLE = "undecodable"        # a sound batch whose records, or one record, do not decode
UNKNOWN_TYPE = "unknown_type"      # a record key version tenure does not know (a server skips it too)
UNREADABLE = "unreadable"          # the file could not be opened or read (not because it was swapped)
UNSTABLE = "unstable"              # the partition's files kept changing under the read (log cleaner swaps):
                                   # its records are left out, not half read; not damage
NOT_DAMAGE = (TORN_TAIL, UNSTABLE)


def row_partition(t: tuple) -> int:
    """The log partition of any row read_unit yields."""
    return t[1][1] if t[0] == "E" else t[1][0]


def _record_row(part, offset, timestamp, record, producer: tuple[int, int] | None = None) -> tuple:
    """One row of the `records` schema (see `tenure.audit.job.RECORD_SCHEMA`); `producer`: the (id, epoch)
    of the transactional batch an offset commit was written in (TxnOffsetCommit), None for a plain one."""
    if isinstance(record, rec.CoordinatorLoadRecord):     # no group; brokers in the member id columns (fold.py)
        return (part, offset, timestamp, "coordinator_load", None, record.tombstone,
                None, record.cause or None, str(record.previous_broker), str(record.broker), record.leader_epoch,
                record.timestamp, None, None,
                None, None, None, None, None, None,
                None, None, None, None, None, *_NO_TXN)
    g = record.group_id
    if isinstance(record, rec.StaticMemberEventRecord):
        return (part, offset, timestamp, "static_member_event", g, record.tombstone,
                record.group_instance_id, record.cause or None, record.old_member_id, record.new_member_id,
                record.generation, record.timestamp, record.client_id, record.client_host,
                None, None, None, None, None, None,
                None, None, None, None, None, *_NO_TXN)
    if isinstance(record, rec.GroupMetadataRecord):
        members = [(m.member_id, m.group_instance_id) for m in record.members]     # job.MEMBER
        return (part, offset, timestamp, "group_metadata", g, record.tombstone,
                None, None, None, None, None, None, None, None,
                None if record.tombstone else record.generation,
                None if record.tombstone else record.protocol_type,
                record.protocol, record.leader,
                None if record.tombstone else record.current_state_timestamp,
                None if record.tombstone else members,
                None, None, None, None, None, *_NO_TXN)
    if record.tombstone:
        return _commit_row(part, offset, timestamp, g, record.topic, record.partition, None, producer)
    return _commit_row(part, offset, timestamp, g, record.topic, record.partition,
                       (record.offset, record.leader_epoch, record.metadata, record.commit_timestamp), producer)


def _commit_row(part, offset, timestamp, group, topic, partition, value: tuple | None,
                producer: tuple[int, int] | None) -> tuple:
    """An offset commit's row; `value`: its value's fields as `rec.offset_commit_value` gives them (None: a
    tombstone)."""
    txn = _NO_TXN if producer is None else (*producer, None, None)
    if value is None:
        return (part, offset, timestamp, "offset_commit", group, True, *_NO_MEMBER, topic, partition,
                None, None, None, *txn)
    return (part, offset, timestamp, "offset_commit", group, False, *_NO_MEMBER, topic, partition,
            value[0], value[3], value[2], *txn)


_NO_TXN = (None, None, None, None)          # producer_id, producer_epoch, marker, transactional_id
_BLANK = (None,) * 19                       # the record columns from instance_id to metadata
_NO_MEMBER = (None,) * 14                   # the record columns from instance_id to members


def _marker_row(part, h, kind: str) -> tuple:
    """A commit or abort marker (a transactional control batch) of __consumer_offsets, as a record row."""
    return (part, h.base_offset, h.max_timestamp, "txn_marker", None, False, *_BLANK,
            h.producer_id, h.producer_epoch, kind, None)


def _txn_state_row(part, offset, timestamp, record) -> tuple:
    """A __transaction_state record (a transactional id's state) as a record row: the transactional id,
    its producer id and epoch, its state's name in `marker`."""
    return (part, offset, timestamp, "transaction_state", None, record.tombstone, *_BLANK,
            None if record.tombstone else record.producer_id,
            None if record.tombstone else record.producer_epoch,
            None if record.tombstone else record.state_name, record.transactional_id)


# the `records` schema's columns, in order (`tenure.audit.schemas.RECORD_SCHEMA` gives their types)
RECORD_FIELDS = (
    "partition", "offset", "timestamp", "type", "group", "tombstone",
    "instance_id", "cause", "old_member_id", "new_member_id", "event_generation", "event_time", "client_id",
    "client_host", "generation", "protocol_type", "protocol", "leader", "state_timestamp", "members",
    "topic", "topic_partition", "committed_offset", "commit_time", "metadata",
    "producer_id", "producer_epoch", "marker", "transactional_id")
_FIELD = {n: i for i, n in enumerate(RECORD_FIELDS)}


def _row(part, offset, timestamp, type_: str, group, tombstone: bool, **cols) -> tuple:
    """A record row with the named columns set, the others null."""
    row: list = [part, offset, timestamp, type_, group, tombstone, *(None,) * (len(RECORD_FIELDS) - 6)]
    for name, v in cols.items():
        row[_FIELD[name]] = v
    return tuple(row)


def _assignment(a) -> str:
    """An assignment ((topic id, (partition, ...)), ...) as JSON: {"topic id": [partition, ...]}."""
    return json.dumps({str(t): list(ps) for t, ps in a})


# the KIP-848 and KIP-932 group records as rows: the record type's row type and which group kind it is of
_KIND_TYPES = {
    cg.ConsumerGroupMetadataRecord: ("consumer_group_metadata", "consumer"),
    cg.ConsumerGroupPartitionMetadataRecord: ("consumer_partition_metadata", "consumer"),
    cg.ConsumerMemberRecord: ("consumer_member", "consumer"),
    cg.TargetAssignmentMetadataRecord: ("consumer_target", "consumer"),
    cg.TargetAssignmentMemberRecord: ("consumer_target", "consumer"),
    cg.CurrentAssignmentRecord: ("consumer_assignment", "consumer"),
    cg.RegularExpressionRecord: ("consumer_regex", "consumer"),
    sg.ShareGroupMetadataRecord: ("share_group_metadata", "share"),
    sg.ShareMemberRecord: ("share_member", "share"),
    sg.ShareTargetMetadataRecord: ("share_target", "share"),
    sg.ShareTargetMemberRecord: ("share_target", "share"),
    sg.ShareAssignmentRecord: ("share_assignment", "share"),
    sg.ShareIgnoredRecord: ("share_ignored", "share"),
}
KIND_RECORDS = tuple(_KIND_TYPES)


def _kind_row(part, offset, timestamp, r) -> tuple:
    """A KIP-848 consumer group's or a KIP-932 share group's record (docs/audit.md, "the group kinds' records")
    as a record row: its group kind in `protocol_type`; a member's id in `new_member_id` (with its instance id,
    client id and host; the protocol a consumer group's member speaks, `consumer` or `classic`, in `protocol`),
    an epoch in `generation` (the group's, the target assignment's, or a member's current one, its previous one
    in `event_generation`), partitions and subscriptions as JSON in `metadata`."""
    type_, kind = _KIND_TYPES[type(r)]
    row = functools.partial(_row, part, offset, timestamp, type_, r.group_id, r.tombstone, protocol_type=kind)
    if r.tombstone:
        return row(new_member_id=getattr(r, "member_id", None),
                   metadata=json.dumps({"regex": r.regex}) if isinstance(r, cg.RegularExpressionRecord) else None)
    if isinstance(r, (cg.ConsumerGroupMetadataRecord, sg.ShareGroupMetadataRecord)):
        return row(generation=r.epoch)
    if isinstance(r, (cg.TargetAssignmentMetadataRecord, sg.ShareTargetMetadataRecord)):
        return row(generation=r.assignment_epoch)
    if isinstance(r, (cg.TargetAssignmentMemberRecord, sg.ShareTargetMemberRecord)):
        return row(new_member_id=r.member_id, metadata=_assignment(r.partitions))
    if isinstance(r, (cg.CurrentAssignmentRecord, sg.ShareAssignmentRecord)):
        pending = r.pending_revocation if isinstance(r, cg.CurrentAssignmentRecord) else ()
        return row(new_member_id=r.member_id, generation=r.member_epoch, event_generation=r.previous_member_epoch,
                   metadata=json.dumps({"state": r.state, "assigned": json.loads(_assignment(r.assigned)),
                                        "pending_revocation": json.loads(_assignment(pending))}))
    if isinstance(r, cg.ConsumerMemberRecord):
        return row(new_member_id=r.member_id, instance_id=r.instance_id, client_id=r.client_id,
                   client_host=r.client_host, protocol="consumer" if r.classic is None else "classic",
                   metadata=json.dumps({"topics": list(r.subscribed_topic_names),
                                        "regex": r.subscribed_topic_regex}))
    if isinstance(r, sg.ShareMemberRecord):
        return row(new_member_id=r.member_id, client_id=r.client_id, client_host=r.client_host,
                   metadata=json.dumps({"topics": list(r.subscribed_topic_names)}))
    if isinstance(r, cg.ConsumerGroupPartitionMetadataRecord):      # type 4, as Kafka 4.0 writes it
        return row(metadata=json.dumps({"topics": [[str(tid), name, n] for tid, name, n in r.topics]}))
    if isinstance(r, cg.RegularExpressionRecord):
        return row(generation=r.version, event_time=r.timestamp,
                   metadata=json.dumps({"regex": r.regex, "topics": list(r.topics)}))
    return row()        # a record type the server reads and ignores (9, 15)


def _share_state_row(part, offset, timestamp, r: ss.ShareStateRecord) -> tuple:
    """A __share_group_state record (a share partition's ShareSnapshot or ShareUpdate) as a record row: the share
    partition in `topic` (its topic id) and `topic_partition`, `snapshot`/`update` in `protocol_type`, the
    snapshot epoch in `generation`, the start offset in `committed_offset` (-1 in an update: unchanged) and
    the state batches as JSON in `metadata` ([[first, last, delivery state, delivery count], ...])."""
    return _row(part, offset, timestamp, "share_state", r.group_id, r.tombstone, topic=str(r.topic_id),
                topic_partition=r.partition, protocol_type="snapshot" if r.snapshot else "update",
                **({} if r.tombstone else dict(generation=r.snapshot_epoch, committed_offset=r.start_offset,
                                               metadata=json.dumps([list(b) for b in r.batches]))))


ERROR_FIELDS = ("file", "log_partition", "position", "offset", "kind", "reason")
RECORD_COLUMNS = len(RECORD_FIELDS)        # len(_record_row(...)): the `records` schema, partition first
assert 6 + len(_BLANK) + len(_NO_TXN) == RECORD_COLUMNS


def unit_rows(unit: Unit, sink: OffsetsSink | None = None):
    """read_unit as flat rows of one schema (`tenure.audit.job.ROW_SCHEMA`): the row kind, the record
    columns (a record's; else only the log partition), and for the other kinds their payload as JSON -
    so a unit's output becomes one DataFrame, read and decoded once. With a `sink`, the plain offset
    commits (`OffsetsSink`) are not rows: the task writes them as offsets_history's own Parquet part file
    (`OffsetsWriter`, fed straight from the decode), and its "I" row ends with what it wrote (count,
    first and last log time, file); then, in every "I" row, the record rows yielded by type (the driver
    skips the later stages whose input is known to be empty)."""
    blank = (None,) * (RECORD_COLUMNS - 1)
    out = None if sink is None else OffsetsWriter(sink, unit)
    types: dict[str, int] = {}
    try:
        for kind, payload in read_unit(unit, out):
            if kind == "R":
                types[payload[3]] = types.get(payload[3], 0) + 1
                yield (kind, *payload, None)
            elif kind == "E":
                yield (kind, row_partition((kind, payload)), *blank, json.dumps(dict(zip(ERROR_FIELDS, payload, strict=True))))
            else:
                if kind == "I":
                    payload = (*payload, *(out.close() if out is not None else (0, None, None, None)), types)
                yield (kind, row_partition((kind, payload)), *blank, json.dumps(payload))
    finally:
        if out is not None:
            out.abort()


def _error(unit: Unit, position, offset, kind, reason) -> tuple:
    return ("E", (unit.path, unit.partition, position, offset, kind, reason))


def _file_error(unit: Unit, kind, reason):
    """An error of the whole file (it cannot be opened, it changed): one row, from its first piece."""
    if unit.piece == 0:
        yield _error(unit, 0, None, kind, reason)


def read_unit(unit: Unit, out: OffsetsWriter | None = None):
    """("R", record row), ("E", error row), ("G", gap) and one ("I", info) tuple of one segment file. With
    `out`, the plain offset commits go to it instead of being record rows (they count as records read)."""
    info = {"status": OK, "batches": 0, "first": None, "end": None, "from": None, "stop": None,
            "expect": None, "prev_next": None, "ended": False}
    n = {"R": 0, "E": 0, "G": 0}
    for t in _read_unit(unit, info, out):
        n[t[0]] += 1
        yield t
    if out is not None:
        n["R"] += out.seen
    yield ("I", (unit.partition, unit.path, info["status"], info["batches"], info["first"], info["end"],
                 # where the piece began and stopped reading, and the chain's state there (merge_pieces)
                 unit.piece, unit.pieces, info["from"], info["stop"], info["expect"], info["prev_next"],
                 info["ended"], n["R"], n["E"]))


def _read_unit(unit: Unit, info: dict, out: OffsetsWriter | None):
    try:
        fd = os.open(unit.path, os.O_RDONLY)
    except FileNotFoundError as exc:
        if unit.ident is None:
            info["status"] = OPEN_FAILED
            yield from _file_error(unit, UNREADABLE, f"cannot be opened: {exc}")
        else:
            info["status"] = CHANGED
            yield from _file_error(unit, UNSTABLE, "removed since it was listed (a compaction swap); "
                                                  "its records are not read")
        return
    except OSError as exc:
        info["status"] = OPEN_FAILED
        yield from _file_error(unit, UNREADABLE, f"cannot be opened: {exc}")
        return
    try:
        now = file_id(os.fstat(fd))
        if unit.ident is not None and not same_file(unit.ident, now, unit.newest):
            info["status"] = CHANGED
            yield from _file_error(unit, UNSTABLE, "replaced since it was listed (a compaction swap); "
                                                  "its records are not read")
            return
        stop = unit.ident[2] if unit.ident is not None else now[2]    # the file as listed
        limit = stop if unit.end is None else min(stop, unit.end)
        # the project's one segment reader: the batches starting in [start, limit) - a piece's first batch
        # found by walking the batch lengths from the file's start -, each checked (offsets moving forward
        # from the segment's base offset), a torn one re-read while the file grows, past a damaged batch
        # only when a sound one follows it
        reader = SegmentReader(fd, unit.start, limit, align_from=0 if unit.start else None, resync=True,
                               expect_offset=unit.base_offset)
        if reader.done or reader.position >= limit:
            info["stop"] = limit          # no batch starts in [start, limit)
            return
        info["from"] = begin = reader.position
        clean_to = unit.clean_to
        prev_next = None                  # next offset after the previous sound batch (None: unknown)
        expect = reader.expect
        for item in reader:
            info["stop"], info["expect"], info["prev_next"] = item.position, expect, prev_next
            if isinstance(item, BadBatch):
                if item.resumes is None and unit.newest and item.torn:
                    yield _error(unit, item.position, item.offset, TORN_TAIL,
                                 f"{item.reason}; the newest segment's tail is not (yet) fully written")
                    info["ended"] = True
                    return
                prev_next = None          # what the damage hides is not a gap to report
                if item.resumes is not None:
                    yield _error(unit, item.position, item.offset, DAMAGE, f"{item.reason}; this batch is skipped")
                    continue
                info["end"] = None
                yield _error(unit, item.position, item.offset, DAMAGE,
                             f"{item.reason}; the rest of this segment ({reader.size - item.position} bytes) "
                             f"cannot be read")
                info["batches"] += 1      # not an empty segment, whatever it held
                info["ended"] = True
                return
            h, start = item.header, item.position
            if start == begin:
                info["first"] = h.base_offset
            if (prev_next is not None and h.base_offset > prev_next and clean_to is not None
                    and h.base_offset > clean_to):
                yield ("G", (unit.partition, unit.path, start, max(prev_next, clean_to), h.base_offset))
            info["batches"] += 1
            info["end"] = prev_next = expect = h.next_offset
            if h.is_control:
                if h.is_transactional and unit.topic == OFFSETS_TOPIC:
                    yield from _marker(unit, h, item.data)
                continue
            yield from _records(unit, h, item.data, out)
        info["stop"], info["expect"], info["prev_next"] = reader.position, expect, prev_next
    except OSError as exc:
        info["end"] = None
        yield _error(unit, 0, None, UNREADABLE, f"read failed: {exc}")
    finally:
        os.close(fd)


def _marker(unit: Unit, h, data: bytes):
    """The row of a transaction's commit or abort marker (or the error of one that does not decode)."""
    try:
        kind = "commit" if marker_type(data) == COMMIT else "abort"
    except Exception as exc:
        yield _error(unit, h.position, h.base_offset, UNDECODABLE,
                     f"the control batch's marker does not decode ({type(exc).__name__}: {exc})")
        return
    yield ("R", _marker_row(unit.partition, h, kind))


_COMMIT_KEY_VERSIONS = (0, rec.OFFSET_COMMIT_KEY_VERSION)
_COMMIT_KEYS: dict[bytes, tuple[str, str, int]] = {}   # offset commit key bytes -> (group, topic, partition)
_COMMIT_KEYS_MAX = 1 << 16                              # bounded: cleared when full


def _records(unit: Unit, h, data: bytes, out: OffsetsWriter | None = None):
    """The record rows (and the errors of records that do not decode) of one sound batch; with `out`, its
    plain offset commits go to the task's offsets_history part file instead (`OffsetsWriter.add`)."""
    try:
        records = list(DefaultRecordBatch(data))
    except Exception as exc:
        yield _error(unit, h.position, h.base_offset, UNDECODABLE,
                     f"the batch's records do not decode ({type(exc).__name__}: {exc})")
        return
    txn_state = unit.topic == TRANSACTION_STATE_TOPIC
    share_state = unit.topic == SHARE_STATE_TOPIC
    producer = (h.producer_id, h.producer_epoch) if h.is_transactional else None
    part = unit.partition
    keys = _COMMIT_KEYS
    take = None if out is None or producer is not None else out.add    # a transaction's commits stay rows
    for r in records:
        key, k = r.key, None
        try:
            if key is None:
                raise ValueError("record without a key")
            if txn_state:
                yield ("R", _txn_state_row(part, r.offset, r.timestamp, txn_records.decode(key, r.value)))
                continue
            if share_state:
                yield ("R", _share_state_row(part, r.offset, r.timestamp, ss.decode(key, r.value)))
                continue
            # offset commits (most of the log) repeat a few keys: each distinct key is decoded once, and
            # the value straight into its fields (the same decoders rec.decode uses)
            k = keys.get(key)
            if k is None and rec.key_version(key) in _COMMIT_KEY_VERSIONS:
                if len(keys) >= _COMMIT_KEYS_MAX:
                    keys.clear()
                k = keys[key] = rec.offset_commit_key(key)
            if k is not None:
                value = r.value
                v = None if value is None else rec.offset_commit_value(value)
            else:
                record = rec.decode(key, r.value)
        except (rec.UnknownRecordType, txn_records.UnknownRecordType, ss.UnknownRecordType) as exc:
            yield _error(unit, h.position, r.offset, UNKNOWN_TYPE, str(exc))
            continue
        except Exception as exc:
            yield _error(unit, h.position, r.offset, UNDECODABLE,
                         f"record does not decode ({type(exc).__name__}: {exc})")
            continue
        if k is not None:        # a failure to write the part file is the task's, not a record's error
            if take is None or not take(k, r.offset, r.timestamp, v):
                yield ("R", _commit_row(part, r.offset, r.timestamp, k[0], k[1], k[2], v, producer))
        elif isinstance(record, KIND_RECORDS):             # KIP-848 consumer groups', KIP-932 share groups'
            yield ("R", _kind_row(part, r.offset, r.timestamp, record))
        else:
            yield ("R", _record_row(part, r.offset, r.timestamp, record, producer))
