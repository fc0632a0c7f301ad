"""The pure parts of log compaction, run on a worker by the cleaner's passes (storage/compaction.py states
the rules and drives the passes): a segment's key index (`summarize`, a `SegmentSummary`), a pass's plan
(`plan`: the key map of the cleanable range and the groups of segments worth rewriting), and the cleaned
bytes of one group (`rewrite`, each changed batch rebuilt by `rebuild_batch`). They read segment files
through the segment reader (`summarize_files`, `rewrite_files`) and write none; what a pass did adds up in
`CleanStats`."""
from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from .batch import ATTRIBUTES_OFFSET, CONTROL_FLAG, CRC_OFFSET, HEADER, TRANSACTIONAL_FLAG, BatchHeader, parse_batches
from .reader import BadBatch, Batch, SegmentReader
from .recovery import CorruptLogError

log = logging.getLogger("tenure.storage")

DELETE_HORIZON_FLAG = 0x40                        # Kafka's DELETE_HORIZON_FLAG_MASK (KIP-534)
TIMESTAMP_TYPE_FLAG = DefaultRecordBatch.TIMESTAMP_TYPE_MASK
CODEC_MASK = DefaultRecordBatch.CODEC_MASK
_CRC = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")               # a control record's key: version, type (0 ABORT, 1 COMMIT)
ABORT, COMMIT = 0, 1
OTHER, EMPTY = -1, -2                             # a control batch of another type (kept); one with no record
KeyIndex = dict[bytes, tuple[int, bool, int | None]]


@dataclass(frozen=True)
class TxnBatch:
    """A batch of a transaction (transactional data, or a control batch: a transaction marker), as the
    cleaner needs it: the producer, the offsets, for a control batch its type (ABORT, COMMIT, OTHER or EMPTY;
    data: None) and delete horizon, for data the key index of its records (like `SegmentSummary.keys`) and its keyless count (a
    batch whose records do not decode counts them all keyless: it is kept or dropped whole)."""
    producer_id: int
    base_offset: int
    records: int
    marker: int | None
    horizon: int | None
    keys: KeyIndex
    keyless: int


@dataclass(frozen=True)
class SegmentSummary:
    """The key index of one immutable segment: for each key of its non-transactional records, (offset of
    its last record in the segment, is it a tombstone, its batch's delete horizon or None); `records`
    counts every record, `fixed` the non-transactional ones kept whatever happens (keyless or in
    undecodable batches); `txn` the batches of transactions (data and markers) in offset order."""
    keys: KeyIndex
    records: int
    fixed: int
    txn: tuple[TxnBatch, ...] = ()


@dataclass
class CleanStats:
    """What passes did (they add up with `+=`)."""
    segments_indexed: int = 0          # segments whose keys were read for the first time
    groups_cleaned: int = 0            # rewrites swapped in
    segments_before: int = 0           # segments those rewrites replaced ...
    segments_after: int = 0            # ... and produced
    bytes_before: int = 0
    bytes_after: int = 0
    records_before: int = 0
    records_after: int = 0
    tombstones_dropped: int = 0
    batches_stamped: int = 0           # batches given a delete horizon
    batches_rebuilt: int = 0
    batches_dropped: int = 0
    aborted_batches_dropped: int = 0   # data batches of aborted transactions removed
    markers_dropped: int = 0           # transaction markers removed (their transaction's data all gone)
    bytes_read: int = 0                # what the budget counts
    more: bool = False                 # a pass stopped at its budget with work left

    def __iadd__(self, other: CleanStats) -> CleanStats:
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            setattr(self, f.name, (a or b) if isinstance(a, bool) else a + b)
        return self

    @property
    def did_work(self) -> bool:
        return bool(self.segments_indexed or self.groups_cleaned)


def batch_horizon(h: BatchHeader) -> int | None:
    """The batch's delete horizon (its base timestamp when attribute bit 6 is set), else None."""
    return h.first_timestamp if h.attributes & DELETE_HORIZON_FLAG else None


def _records(h: BatchHeader, raw) -> list | None:
    """The batch's records, or None if they do not decode (the batch is then kept as it is)."""
    try:
        return list(DefaultRecordBatch(raw))
    except Exception as exc:      # a codec not installed, or records that do not parse under a valid CRC
        log.warning("batch at offset %d is kept as it is: its records do not decode (%s: %s)",
                    h.base_offset, type(exc).__name__, exc)
        return None


def summarize(batches: Iterable[tuple[BatchHeader, bytes]]) -> SegmentSummary:
    """Index the keys of one segment's batches."""
    keys: KeyIndex = {}
    txn: list[TxnBatch] = []
    records = fixed = 0
    for h, raw in batches:
        if h.is_control:
            recs = _records(h, raw)
            if recs == []:
                marker = EMPTY                 # Kafka: an empty control batch was already cleaned; it goes
            elif recs and recs[0].key and len(recs[0].key) >= 4:
                marker = _CONTROL_KEY.unpack(recs[0].key[:4])[1]
                marker = marker if marker in (ABORT, COMMIT) else OTHER
            else:
                marker = OTHER                 # undecodable or an unknown key: kept
            txn.append(TxnBatch(h.producer_id, h.base_offset, h.records_count, marker, batch_horizon(h), {}, 0))
            records += h.records_count
            continue
        if h.is_transactional:
            recs = _records(h, raw)
            tkeys: KeyIndex = {}
            keyless = h.records_count if recs is None else 0
            for r in recs or ():
                if r.key is None:
                    keyless += 1
                else:
                    tkeys[r.key] = (r.offset, r.value is None, batch_horizon(h))
            txn.append(TxnBatch(h.producer_id, h.base_offset, h.records_count, None, None, tkeys, keyless))
            records += h.records_count
            continue
        recs = _records(h, raw)
        if recs is None:
            records += h.records_count
            fixed += h.records_count
            continue
        horizon = batch_horizon(h)
        for r in recs:
            records += 1
            if r.key is None:
                fixed += 1
            else:
                keys[r.key] = (r.offset, r.value is None, horizon)
    return SegmentSummary(keys, records, fixed, tuple(txn))


def rebuild_batch(h: BatchHeader, kept: list, horizon: int | None) -> bytes:
    """A batch of the records `kept` (kafka-python records of the batch `h`), as Kafka's cleaner
    rebuilds one: same base offset, last offset delta, leader epoch, producer fields, timestamp type and
    codec; with `horizon`, attribute bit 6 and base timestamp = horizon."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=h.attributes & CODEC_MASK,
                                  is_transactional=h.is_transactional,
                                  producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                                  base_sequence=h.base_sequence, batch_size=2 ** 31 - 1)
    if horizon is not None:
        # kafka-python's builder takes the first record's timestamp as the base timestamp unless one is
        # set; with it set, every record's delta is taken from the horizon (and may be negative)
        b._first_timestamp = horizon
        b._max_timestamp = -1
    for r in kept:
        b.append(r.offset - h.base_offset, timestamp=r.timestamp, key=r.key, value=r.value,
                 headers=list(r.headers))
    buf = b.build()
    (_, length, _, magic, _, attributes, _, first_ts, max_ts, pid, epoch, seq, count) = HEADER.unpack_from(buf, 0)
    attributes |= h.attributes & (TIMESTAMP_TYPE_FLAG | TRANSACTIONAL_FLAG | CONTROL_FLAG)
    if horizon is not None:
        attributes |= DELETE_HORIZON_FLAG
    if h.attributes & TIMESTAMP_TYPE_FLAG:        # LogAppendTime: the batch's max timestamp is every record's
        max_ts = h.max_timestamp
    HEADER.pack_into(buf, 0, h.base_offset, length, h.partition_leader_epoch, magic, 0, attributes,
                     h.last_offset_delta, first_ts, max_ts, pid, epoch, seq, count)
    _CRC.pack_into(buf, CRC_OFFSET, crc32c.crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


@dataclass
class _Group:
    start: int                      # indices into the planned range
    end: int
    changed: list[bool]             # per segment: does anything in it change
    droppable: frozenset            # keys whose expired tombstone may go in this group
    size: int


@dataclass
class Txns:
    """What a pass knows of the transactions in its range: the outcome of each data batch (base offset ->
    committed?) and the markers that may go (base offsets: no data of their transaction is left)."""
    committed: dict[int, bool]
    discardable: frozenset


@dataclass
class Plan:
    latest: KeyIndex
    groups: list[_Group]
    txns: Txns
    end: int                        # segments of the range that may be cleaned (the rest waits)


def resolve(summaries: list[SegmentSummary]) -> tuple[Txns, int]:
    """Match each transactional data batch with the marker that ends its transaction (the producer's next
    marker); `end` is the index of the first segment holding a batch whose transaction has no marker in
    the range (Kafka's first unstable offset, or a marker not yet in a cleanable segment): the range is
    cleaned only below it."""
    committed: dict[int, bool] = {}
    discardable = set()
    pending: dict[int, list[tuple[int, int]]] = {}
    for i, s in enumerate(summaries):
        for t in s.txn:
            if t.marker is None:
                pending.setdefault(t.producer_id, []).append((i, t.base_offset))
            elif t.marker in (ABORT, COMMIT):
                data = pending.pop(t.producer_id, [])
                for _, base in data:
                    committed[base] = t.marker == COMMIT
                if not data:
                    discardable.add(t.base_offset)
            elif t.marker == EMPTY:
                discardable.add(t.base_offset)
    end = min((i for data in pending.values() for i, _ in data), default=len(summaries))
    return Txns(committed, frozenset(discardable)), end


def _entries(s: SegmentSummary, txns: Txns) -> Iterator[KeyIndex]:
    """The key indexes that count in the key map: the segment's plain records and its committed data."""
    yield s.keys
    for t in s.txn:
        if t.marker is None and txns.committed.get(t.base_offset):
            yield t.keys


def plan(summaries: list[SegmentSummary], sizes: list[int], segment_bytes: int, now: int) -> Plan:
    """The key map of the range and the groups worth rewriting, in offset order."""
    txns, end = resolve(summaries)
    summaries = summaries[:end]
    latest: KeyIndex = {}
    for s in summaries:
        for index in _entries(s, txns):
            for key, entry in index.items():
                if key not in latest or latest[key][0] < entry[0]:
                    latest[key] = entry
    expired = {k for k, (_, tomb, hz) in latest.items() if tomb and hz is not None and now >= hz}
    holders: dict[bytes, int] = {}             # expired key -> segments holding a record of it
    if expired:
        for s in summaries:
            for k in _held(s) & expired:
                holders[k] = holders.get(k, 0) + 1
    groups: list[_Group] = []
    i = 0
    while i < len(summaries):
        j, total = i + 1, sizes[i]
        while j < len(summaries) and total + sizes[j] <= segment_bytes:
            total += sizes[j]
            j += 1
        droppable = set()
        if expired:
            inside: dict[bytes, int] = {}
            for s in summaries[i:j]:
                for k in _held(s) & expired:
                    inside[k] = inside.get(k, 0) + 1
            droppable = {k for k, n in inside.items() if n == holders[k]}
        changed = []
        for s in summaries[i:j]:
            kept, change = s.fixed, False
            indexes = [s.keys]
            for t in s.txn:
                if t.marker is not None:
                    if t.base_offset in txns.discardable and (t.marker == EMPTY or t.horizon is None
                                                              or now >= t.horizon):
                        change = True          # to stamp or to drop
                    kept += t.records
                elif txns.committed.get(t.base_offset):
                    kept += t.keyless
                    indexes.append(t.keys)
                else:
                    change = True              # aborted: to drop
            for index in indexes:
                for k, entry in index.items():
                    offset, tomb, hz = entry
                    if latest[k][0] != offset:
                        continue
                    if tomb and hz is None:
                        change = True          # to stamp
                    elif tomb and hz is not None and now >= hz and k in droppable:
                        change = True          # to drop
                        continue
                    kept += 1
            changed.append(change or kept < s.records)
        if any(changed) or j - i > 1:
            groups.append(_Group(i, j, changed, frozenset(droppable), total))
        i = j
    return Plan(latest, groups, txns, end)


def _held(s: SegmentSummary) -> set[bytes]:
    """Every key with a record in the segment (transactional ones too, whatever their outcome)."""
    keys = set(s.keys)
    for t in s.txn:
        keys.update(t.keys)
    return keys


@dataclass
class Rewritten:
    data: bytes
    summary: SegmentSummary
    stats: CleanStats


def rewrite(segments: list[Iterable[tuple[BatchHeader, bytes]]], changed: list[bool],
            summaries: list[SegmentSummary], latest: dict, droppable: frozenset, now: int,
            stamp: int, txns: Txns | None = None) -> Rewritten:
    """The cleaned bytes of one group, from the batches of each of its segments (see
    storage/compaction.py for the rules)."""
    txns = txns or Txns({}, frozenset())
    out = bytearray()
    st = CleanStats()
    parts: list[SegmentSummary | tuple[int, int]] = []    # per segment: its summary if copied, else its bytes
    for batches, change, s in zip(segments, changed, summaries, strict=True):
        st.records_before += s.records
        if not change:
            for _, raw in batches:
                out += raw
            parts.append(s)
            continue
        start = len(out)
        for h, raw in batches:
            horizon = batch_horizon(h)
            if h.is_control:
                recs = _records(h, raw)
                if h.base_offset not in txns.discardable:
                    out += raw
                elif recs == [] or (horizon is not None and now >= horizon):
                    st.batches_dropped += 1
                    st.markers_dropped += 1
                elif horizon is None and recs:
                    out += rebuild_batch(h, recs, stamp)
                    st.batches_rebuilt += 1
                    st.batches_stamped += 1
                else:
                    out += raw
                continue
            if h.is_transactional:
                outcome = txns.committed.get(h.base_offset)
                if outcome is False:
                    st.batches_dropped += 1
                    st.aborted_batches_dropped += 1
                    continue
                if outcome is None:            # not in the planned range: never reached (kept as it is)
                    out += raw
                    continue
            recs = _records(h, raw)
            if recs is None:
                out += raw
                continue
            kept = []
            tombstones = False
            for r in recs:
                if r.key is not None:
                    if latest[r.key][0] > r.offset:
                        continue                               # superseded
                    if r.value is None:
                        if horizon is not None and now >= horizon and r.key in droppable:
                            st.tombstones_dropped += 1
                            continue
                        tombstones = True
                kept.append(r)
            new_horizon = stamp if horizon is None and tombstones else horizon
            if len(kept) == len(recs) and new_horizon == horizon:
                out += raw
            elif kept:
                out += rebuild_batch(h, kept, new_horizon)
                st.batches_rebuilt += 1
                st.batches_stamped += new_horizon != horizon
            else:
                st.batches_dropped += 1
        parts.append((start, len(out)))
    data = bytes(out)
    summary = _merge([part if isinstance(part, SegmentSummary) else _summarize_bytes(data[part[0]:part[1]])
                      for part in parts])
    st.records_after = summary.records
    return Rewritten(data, summary, st)


def _summarize_bytes(data: bytes) -> SegmentSummary:
    return summarize((h, data[h.position:h.position + h.size]) for h in parse_batches(data))


def _merge(summaries: list[SegmentSummary]) -> SegmentSummary:
    keys: KeyIndex = {}
    txn: list[TxnBatch] = []
    records = fixed = 0
    for s in summaries:
        keys.update(s.keys)
        txn += s.txn
        records += s.records
        fixed += s.fixed
    return SegmentSummary(keys, records, fixed, tuple(txn))


def _read_segment(path, size: int, sync: bool) -> Iterator[Batch]:
    """The batches of a non-active segment (its first `size` bytes), by path (no fd of the log's is used
    off its thread), through the segment reader: a batch that fails its check raises `CorruptLogError`,
    so damage is never copied into a cleaned segment. With `sync`, the file is fsynced first."""
    with SegmentReader(path, 0, size) as reader:
        if sync:
            os.fsync(reader.fd)
        end = 0
        for item in reader:
            if isinstance(item, BadBatch):
                raise CorruptLogError(Path(path), item.position, item.offset, item.reason)
            end = item.position + item.header.size
            yield item
        if end < size:
            raise OSError(f"{path}: ends at byte {end}, the segment has {size}")


def summarize_files(jobs: list[tuple[Any, int]]) -> list[SegmentSummary]:
    return [summarize(_read_segment(path, size, sync=True)) for path, size in jobs]


def rewrite_files(jobs, changed, summaries, latest, droppable, now, stamp, txns) -> Rewritten:
    return rewrite([_read_segment(path, size, sync=False) for path, size in jobs], changed, summaries, latest,
                   droppable, now, stamp, txns)
