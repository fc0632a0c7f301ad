"""Loading a coordinator's internal partition into its shard: every batch read back (through the storage's one
reader), the latest record of each key decoded and replayed through the shard's `replay` - the same mutator as
when it was written -, offsets committed in a transaction held until their marker. What could not be read is
skipped and reported, never guessed."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from tenure.deferred import deferred
from tenure.gcpause import gc_paused
from tenure.protocol.markers import COMMIT, marker_type
from tenure.protocol.records import OffsetCommitRecord, TransactionalOffsetCommit
from tenure.storage import BatchHeader, Log
from tenure.storage.batch import CONTROL_FLAG, TRANSACTIONAL_FLAG

if TYPE_CHECKING:
    from tenure.storage import reader
else:   # the records of a batch: at the first batch a load reads (a server in memory loads empty partitions)
    reader = deferred("tenure.storage.reader")

log = logging.getLogger("tenure.coordinator")

_offset_of = attrgetter("offset")
_SKIPS_LOGGED = 20                  # unreadable records named one by one at load; the rest counted


@dataclass
class LoadReport:
    """What the load of a coordinator partition read: batches, records, records replayed, groups, and the time."""

    batches: int = 0
    records: int = 0
    replayed: int = 0                       # the latest record of each key
    groups: int = 0
    seconds: float = 0.0
    unknown: dict[int, int] = field(default_factory=dict)       # key version -> records skipped
    undecodable: list[tuple[int, int, str]] = field(default_factory=list)   # (partition, offset, why) skipped

    def skip(self, plog, part: int, offset: int, what: str, reason: str) -> None:
        """A record or batch the loader cannot read: skipped, named (file, byte, offset) in an ERROR line."""
        self.undecodable.append((part, offset, reason))
        if len(self.undecodable) <= _SKIPS_LOGGED:
            log.error("%s: %s, skipped: %s", plog.locate(offset), what, reason)


def iter_batches(plog: Log) -> Iterator[tuple[BatchHeader, bytes]]:
    """(header, batch bytes) of every batch of a partition log (on disk: read by the segment reader, which
    checks each batch again)."""
    return plog.batches(plog.log_start_offset)


class LoadAbandoned(Exception):
    """A load on a worker thread stopped because its runtime closed (the server stops)."""


def replay_partition(plog: Log, part: int, shard, codec, report: LoadReport, end: int | None = None,
                     abandoned: Callable[[], bool] | None = None) -> None:
    """Replay partition `part` (its log `plog`) into `shard` through `shard.replay`, decoding with `codec`,
    reading below offset `end` only (default: all of it). `abandoned` is asked every 1,024 batches: True
    stops the load (`LoadAbandoned`).

    As Kafka's loader: only the latest record of each key counts (records are full-value upserts, so this is
    the state a full replay in log order reaches - the compaction property - without decoding the superseded
    ones). The survivors are replayed in the order of their last write (an offset committed in a transaction
    at its marker), each offset record with its log offset, its place (GroupShard.replay). At a commit marker
    a transaction's record replaces its key's latest record only if it was written after it (Kafka's
    replayEndTransactionMarker: the most recent commit stays); a plain tombstone drops its key from the
    transactions still open (Kafka's replay of a tombstone).
    A codec whose records are not full values (`replay_every_record`: the share coordinator's
    ShareUpdates, deltas over the latest ShareSnapshot) has every record replayed, in log order."""
    every = getattr(codec, "replay_every_record", False)
    replayed_at = getattr(shard, "replayed_at", None)      # a shard that keeps where its records are
    # key -> its latest record (with `offset`, `key`, `value`); where that record was committed in a
    # transaction, `moved` holds its marker's offset: a record counts at the marker's place
    latest: dict[Any, Any] = {}          # (key, offset) for a codec replaying every record
    moved: dict[bytes, int] = {}
    # transactional batches (offsets committed in a transaction): held per producer until its marker,
    # then counted at the marker's place (commit) or dropped (abort); still open at the end: replayed
    # as pending
    pending: dict[int, tuple[int, list]] = {}
    batches = count = 0
    stop = (1 << 63) if end is None else end
    special = CONTROL_FLAG | TRANSACTIONAL_FLAG

    def read(h, raw):
        """The batch's records; None (reported, skipped) for a batch that cannot be read under a valid CRC - written
        so, not damaged on disk."""
        try:
            return reader.batch_records(h, raw)
        except Exception as exc:
            report.skip(plog, part, h.base_offset, f"a batch of {h.records_count} record(s) that cannot be read",
                        f"{type(exc).__name__}: {exc}")
            return None
    # no automatic collection while the load builds its ~one object per record (a collection of the young
    # generation every ~700 of them, and full ones walking the growing state): what survives is moved to the
    # oldest generation at the end without a walk (tenure/gcpause.py)
    with gc_paused():
        for h, raw in iter_batches(plog):
            if h.base_offset >= stop:
                break
            batches += 1
            if not batches & 1023 and abandoned is not None and abandoned():
                raise LoadAbandoned(f"{plog.locate(h.base_offset)}: the load was abandoned (the server stops)")
            attributes = h.attributes
            if not (attributes & special or pending or every):
                # the common case: a plain batch of full-value upserts, no transaction open. Each record
                # replaces its key's latest (a keyless one is taken out again and reported below)
                batch = read(h, raw)
                if batch is None:
                    continue
                count += len(batch)
                for r in batch:                    # the hot loop: one attribute read and one dict store
                    latest[r.key] = r
                if None in latest:
                    del latest[None]
                    for r in batch:
                        if r.key is None:
                            report.skip(plog, part, r.offset, "a record", "record without a key")
                continue
            if attributes & CONTROL_FLAG:
                ended = pending.pop(h.producer_id, None)
                if ended is not None and attributes & TRANSACTIONAL_FLAG and marker_type(raw) == COMMIT:
                    for r in ended[1]:
                        # as Kafka's replay of the marker: the transaction's record counts only if it was
                        # written after the key's latest record (a plain commit, or a tombstone, in between
                        # wins)
                        before = latest.get(r.key)
                        if before is None or before.offset < r.offset:
                            latest[r.key] = r
                            moved[r.key] = h.base_offset
                continue
            batch = read(h, raw)                   # a batch is one coordinator write: all of it or none
            if batch is None:
                continue
            count += len(batch)
            held = pending.setdefault(h.producer_id, (h.producer_epoch, []))[1] \
                if attributes & TRANSACTIONAL_FLAG else None
            for r in batch:
                key = r.key
                if key is None:
                    report.skip(plog, part, r.offset, "a record", "record without a key")
                elif held is None:
                    latest[(key, r.offset) if every else key] = r
                    if pending and r.value is None:     # a tombstone drops the open transactions' offsets of its key
                        for _, records in pending.values():
                            records[:] = [t for t in records if t.key != key]
                else:
                    held.append(r)
        _replay_survivors(plog, part, shard, codec, report, latest, moved, pending, replayed_at)
    report.batches += batches
    report.records += count


def _replay_survivors(plog: Log, part: int, shard, codec, report: LoadReport, latest: dict, moved: dict,
                      pending: dict, replayed_at) -> None:
    """Decode and replay the latest record of each key, in the order of their last write, then the offsets of
    the transactions still open (as pending)."""
    # the survivors in the order of their last write: a record's offset, or its transaction's marker if that
    # is later (a plain write after the marker has a higher offset than it), then the record's offset
    if moved:
        ordered = [r for _, r in sorted(latest.items(),
                                        key=lambda kr: (max(kr[1].offset, moved.get(kr[0], -1)), kr[1].offset))]
    else:
        ordered = sorted(latest.values(), key=_offset_of)      # (a key function in C: no frame per record)
    for r in ordered:
        try:
            record = codec.decode(r.key, r.value)
        except codec.UnknownRecordType as exc:
            report.unknown[exc.key_version] = report.unknown.get(exc.key_version, 0) + 1
            continue
        except Exception as exc:               # a record that does not decode under a valid CRC
            report.skip(plog, part, r.offset, "a record that does not decode", f"{type(exc).__name__}: {exc}")
            continue
        if isinstance(record, OffsetCommitRecord):      # where it is in the log (see GroupShard.replay)
            shard.replay(record, r.offset)
        else:
            shard.replay(record)
        if replayed_at is not None:
            replayed_at(record, r.offset)
        report.replayed += 1
    for pid, (epoch, records) in pending.items():
        for r in records:
            try:
                record = codec.decode(r.key, r.value)
            except Exception as exc:
                report.skip(plog, part, r.offset, "a transactional record that does not decode",
                            f"{type(exc).__name__}: {exc}")
                continue
            shard.replay(TransactionalOffsetCommit(pid, epoch, record), r.offset)


def finish_report(report: LoadReport, topic: str, shards, t0: float) -> LoadReport:
    """Log what a load skipped, count the groups loaded and the time it took."""
    if len(report.undecodable) > _SKIPS_LOGGED:
        log.error("%s: %d more unreadable record(s) or batch(es) skipped (the first %d are named above)",
                  topic, len(report.undecodable) - _SKIPS_LOGGED, _SKIPS_LOGGED)
    for kv, n in sorted(report.unknown.items()):
        log.warning("%s: skipped %d record key(s) of unknown type (key version %d)", topic, n, kv)
    report.groups = len({gid for shard in shards for gid in getattr(shard, "group_ids", list)()})
    report.seconds = time.monotonic() - t0
    return report
