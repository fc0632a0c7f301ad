"""Executor side of the audit: read one segment file of `__consumer_offsets` and turn it into rows.

Runs inside Spark's Python workers (shipped as part of the `tenure` package), so it uses only the
project's own storage and protocol code: `tenure.storage.segments.check_batch` verifies each batch
(length, magic, CRC-32C, offsets moving forward) and `tenure.protocol.records.decode` decodes each
record. Nothing is skipped silently: every batch or record that cannot be read becomes an error row.

A live server may be appending to the newest segment while it is read: the file size is taken once at
the start, a batch that looks torn at that size is re-read a few times while the file grows, and a torn
batch that is still torn at the end of the newest segment is a `torn_tail` row ("not yet written"),
which is reported but is not damage. Any other failed batch is `damage`.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch

from tenure.protocol import records as rec
from tenure.storage.batch import LOG_OVERHEAD
from tenure.storage.segments import SUFFIX, check_batch

OFFSETS_TOPIC = "__consumer_offsets"
_PART_DIR = re.compile(r"^__consumer_offsets-(\d+)$")
_TORN_REREADS = 4
_NO_MIN = -(1 << 63)

# error kinds
DAMAGE = "damage"                  # a batch failing verification (not a tail still being written)
TORN_TAIL = "torn_tail"            # the newest segment ends in an incomplete batch: not yet written
UNDECODABLE = "undecodable"        # a sound batch whose records, or one record, do not decode
UNKNOWN_TYPE = "unknown_type"      # a record key version tenure does not know (a server skips it too)
UNREADABLE = "unreadable"          # the file could not be opened or read (e.g. removed by compaction)


@dataclass(frozen=True)
class Unit:
    """One unit of work: one segment file."""
    partition: int
    path: str
    base_offset: int
    newest: bool          # the partition's newest (active) segment: a torn tail there is not damage


def list_units(data_dir: str, partitions: set[int] | None = None) -> list[Unit]:
    """The segment files of every `__consumer_offsets-<n>/` directory (driver side, cheap: names only)."""
    units = []
    root = Path(data_dir)
    for d in sorted(root.iterdir()):
        m = _PART_DIR.match(d.name)
        if m is None or not d.is_dir():
            continue
        part = int(m.group(1))
        if partitions is not None and part not in partitions:
            continue
        segs = sorted((int(f.stem), f) for f in d.iterdir() if f.suffix == SUFFIX and f.stem.isdigit())
        for i, (base, f) in enumerate(segs):
            units.append(Unit(part, str(f), base, i == len(segs) - 1))
    return units


def _record_row(part, offset, timestamp, record) -> tuple:
    """One row of the `records` schema (see `tenure.audit.job.RECORD_FIELDS`)."""
    g = record.group_id
    if isinstance(record, rec.StaticMemberEventRecord):
        return (part, offset, timestamp, "static_member_event", g, record.tombstone,
                record.group_instance_id, record.cause or None, record.old_member_id, record.new_member_id,
                record.generation, record.timestamp, record.client_id, record.client_host,
                None, None, None, None, None, None,
                None, None, None, None, None)
    if isinstance(record, rec.GroupMetadataRecord):
        members = [(m.member_id, m.group_instance_id, m.client_id, m.client_host) for m in record.members]
        return (part, offset, timestamp, "group_metadata", g, record.tombstone,
                None, None, None, None, None, None, None, None,
                None if record.tombstone else record.generation,
                None if record.tombstone else record.protocol_type,
                record.protocol, record.leader,
                None if record.tombstone else record.current_state_timestamp,
                None if record.tombstone else members,
                None, None, None, None, None)
    return (part, offset, timestamp, "offset_commit", g, record.tombstone,
            None, None, None, None, None, None, None, None,
            None, None, None, None, None, None,
            record.topic, record.partition, None if record.tombstone else record.offset,
            None if record.tombstone else record.commit_timestamp,
            None if record.tombstone else record.metadata)


def _error(unit: Unit, position, offset, kind, reason) -> tuple:
    return ("E", (unit.path, unit.partition, position, offset, kind, reason))


def _read_at(fd: int, size: int, pos: int) -> bytes:
    head = os.pread(fd, LOG_OVERHEAD, pos)
    if len(head) < LOG_OVERHEAD:
        return head
    declared = LOG_OVERHEAD + max(int.from_bytes(head[8:12], "big", signed=True), 0)
    return os.pread(fd, max(min(declared, size - pos), len(head)), pos)


def _torn(buf: bytes) -> bool:
    return len(buf) < LOG_OVERHEAD or len(buf) < LOG_OVERHEAD + int.from_bytes(buf[8:12], "big", signed=True)


def read_unit(unit: Unit):
    """("R", record row) and ("E", error row) tuples of one segment file, in file order."""
    try:
        fd = os.open(unit.path, os.O_RDONLY)
    except OSError as exc:
        yield _error(unit, 0, None, UNREADABLE, f"cannot be opened: {exc}")
        return
    try:
        size = os.fstat(fd).st_size
        pos, expect = 0, unit.base_offset
        while pos < size:
            for _ in range(_TORN_REREADS):
                buf = _read_at(fd, size, pos)
                h, reason = check_batch(buf, 0, len(buf), expect)
                if reason is None or not _torn(buf):
                    break
                grown = os.fstat(fd).st_size
                if grown <= size:
                    break
                size = grown
            if reason is not None:
                offset = h.base_offset if h is not None else None
                # does a sound batch follow (damage confined to this batch)?
                nxt = pos + h.size if h is not None and h.batch_length > 0 else None
                resumes = False
                if nxt is not None and nxt < size:
                    buf2 = _read_at(fd, size, nxt)
                    resumes = check_batch(buf2, 0, len(buf2), _NO_MIN)[1] is None
                if not resumes and unit.newest and _torn(buf):
                    yield _error(unit, pos, offset, TORN_TAIL,
                                 f"{reason}; the newest segment's tail is not (yet) fully written")
                    return
                if resumes:
                    yield _error(unit, pos, offset, DAMAGE, f"{reason}; this batch is skipped")
                    pos = nxt
                    continue
                yield _error(unit, pos, offset, DAMAGE,
                             f"{reason}; the rest of this segment ({size - pos} bytes) cannot be read")
                return
            expect = h.next_offset
            start, pos = pos, pos + h.size
            if h.is_control:
                continue
            try:
                records = list(DefaultRecordBatch(buf))
            except Exception as exc:
                yield _error(unit, start, h.base_offset, UNDECODABLE,
                             f"the batch's records do not decode ({type(exc).__name__}: {exc})")
                continue
            for r in records:
                try:
                    if r.key is None:
                        raise ValueError("record without a key")
                    record = rec.decode(r.key, r.value)
                except rec.UnknownRecordType as exc:
                    yield _error(unit, start, r.offset, UNKNOWN_TYPE, str(exc))
                    continue
                except Exception as exc:
                    yield _error(unit, start, r.offset, UNDECODABLE,
                                 f"record does not decode ({type(exc).__name__}: {exc})")
                    continue
                yield ("R", _record_row(unit.partition, r.offset, r.timestamp, record))
    except OSError as exc:
        yield _error(unit, 0, None, UNREADABLE, f"read failed: {exc}")
    finally:
        os.close(fd)
