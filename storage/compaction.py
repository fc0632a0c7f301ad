"""Log compaction for compacted topics (`cleanup.policy=compact`, e.g. `__consumer_offsets`), as Kafka's
log cleaner does it: keep the latest record of each key, keep tombstones for a while, preserve offsets.

The rules, exactly
------------------
Keys are the raw bytes of the record key, whatever the record type (a coordinator key version this
code has never heard of is compacted like any other key).

Cleanable range. The active (newest) segment is never read for the key map nor rewritten. With
`min.compaction.lag.ms` = L > 0 the range also ends at the first non-active segment whose largest
timestamp is > now - L: that segment and every later one are left alone, so a record younger than L is
never removed or rewritten (Kafka's first uncleanable offset). With L = 0 every non-active segment is
cleanable. The range also ends at the first segment holding a transactional data batch whose
transaction has no marker in the range (storage/cleaning.py `resolve`): an open transaction (Kafka's
first unstable offset, read from the log itself, so `__consumer_offsets`' transactional offset commits
count as any partition's do), or one whose marker is still in the active segment (Kafka would clean up
to the first unstable offset here; tenure waits until the marker is in a cleanable segment).

Transactions (Kafka's CleanedTransactionMetadata). A transactional data batch belongs to the next
marker (control batch) of its producer id. Batches of an aborted transaction are removed whole and
their keys supersede nothing; records of a committed transaction are compacted like any record (their
keys are in the key map; a rebuilt batch stays transactional). A marker stays while any data batch of
its transaction is in the log; a pass that finds none stamps it with a delete horizon (as a tombstone's
batch, below) and the first pass at or after the horizon removes it (Kafka removes a COMMIT marker once a
cleaning round traverses none of its data; tenure waits until none is left, so a marker never goes
before its data). A control batch of another type (or whose record does not decode) is kept; one with
no record at all goes (Kafka: it was already cleaned).

Superseded. A record is superseded when a record with the same key has a higher offset inside the
cleanable range. Records in the active or uncleanable segments do not supersede anything (as in Kafka:
its offset map stops at the first uncleanable offset), so a few stale values may wait for a later pass.

A record is kept unless
- it is superseded, or
- it is a tombstone (value null), the latest record of its key, in a batch whose delete horizon H has
  passed (now >= H), and no segment outside the group being rewritten holds a record with that key (so
  no older value can come back once the tombstone is gone).
Records without a key and batches whose records do not decode (e.g. a compression codec that is not
installed; an aborted one is still removed whole) are kept byte for byte and supersede nothing.

Delete horizon (tombstone retention; Kafka's KIP-534). The first pass that rewrites a batch holding a
kept tombstone stamps the batch with H = now + `delete.retention.ms`: attribute bit 6 (0x40) is set and
the batch's base timestamp is H; record timestamps keep their values (their deltas are re-based). So a
tombstone stays in the log at least `delete.retention.ms` after its segment was first cleaned, and the
first pass at or after H removes it. `now` is the `Compactor`'s clock (injectable).

Batches. A batch whose records are all kept, with nothing to stamp, is copied byte for byte. Otherwise it
is rebuilt from its kept records with kafka-python's `DefaultRecordBatchBuilder`, keeping its base
offset and its last offset delta (Kafka's `overrideLastOffset`, so the batch still ends where it ended and
its last sequence is unchanged), partition leader epoch, producer id/epoch/base sequence, timestamp type
and compression codec; the CRC-32C is recomputed. A batch with no record left is dropped. Every kept
record keeps its offset; the log end offset never changes.

Segments. Consecutive segments of the cleanable range are grouped while their total size stays within
`segment_bytes` (Kafka's groupSegmentsBySize); a group is rewritten into one segment named by its first
base offset when it has anything to drop or stamp, or holds more than one segment (a merge). The swap
is `SegmentLog.replace_segments` (crash-safe; see there).

Bounded passes. A pass reads at most `budget` bytes of segment files (to index the keys of segments it
has not seen yet, and to rewrite groups); whole segments and whole groups only, and at least one of
either per pass so it always progresses. The key index of a segment is computed once and kept while
the segment exists (non-active segments do not change), so later passes only read what is new. The
parsing and rebuilding (storage/cleaning.py: the key index, the plan, the rewrite) run through a
caller-supplied runner (a worker thread on the server) and touch no file the log serves from except by
reading it; all directory changes happen on the caller's thread (`Compactor`, here).

Damage. Segments are read through the segment reader (storage/reader.py), which checks every batch: a
batch whose bytes changed on disk since the log was opened stops the pass (`CorruptLogError`, named once
in an ERROR line) and the log is not cleaned again until it is reopened (where recovery finds the damage
too) - it is never rebuilt into a cleaned segment under a new, valid CRC.

Durability. Before a segment's keys may supersede anything it is fsynced (once): an older record is
only dropped when the record that replaces it is on disk.

Cleaner checkpoint. `<data dir>/cleaner-offset-checkpoint` (Kafka's name and text format, storage/
checkpoints.py: a version line `0`, a count line, then `topic partition offset` lines) holds, per
partition, an offset below which the cleaner may have removed records: before a cleaned group is swapped
in, the entry is raised (never lowered) to the base offset of the segment after the group, and the file is
replaced atomically (written, fsynced, renamed, directory fsynced). It is written before the swap's commit
point, so it is an upper bound of what was ever cleaned, even after a crash; a failure to write it
abandons the swap. Offsets at or above it have never been cleaned, so a hole in them is a real gap
(`tenure audit`'s `log_gap`). The file sits next to the partition directories (the parent of
`SegmentLog.dir`).
"""
from __future__ import annotations

import logging
import os
import time
import weakref
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from .batch import parse_batches
from .checkpoints import advance_checkpoint
from .cleaning import CleanStats, Plan, Rewritten, SegmentSummary, plan, rewrite_files, summarize_files
from .files import CLEANED, segment_name
from .segments import CorruptLogError, Segment, SegmentLog, SwapUnfinished

log = logging.getLogger("tenure.storage")

DEFAULT_DELETE_RETENTION_MS = 86_400_000          # Kafka's delete.retention.ms
DEFAULT_MIN_COMPACTION_LAG_MS = 0                 # Kafka's min.compaction.lag.ms
DEFAULT_PASS_BYTES = 4 * 1024 * 1024
_MAX_PASSES = 10_000


@dataclass(frozen=True)
class CompactionPolicy:
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS
    min_compaction_lag_ms: int = DEFAULT_MIN_COMPACTION_LAG_MS

    @classmethod
    def from_configs(cls, config: Callable[[str], str | None]) -> CompactionPolicy:
        """From topic configs (`Topic.config`); an unset or unparsable value takes Kafka's default."""
        def number(name: str, default: int) -> int:
            raw = config(name)
            try:
                return max(int(raw), 0) if raw is not None else default
            except ValueError:
                log.warning("topic config %s=%r is not a number; using %d", name, raw, default)
                return default
        return cls(number("delete.retention.ms", DEFAULT_DELETE_RETENTION_MS),
                   number("min.compaction.lag.ms", DEFAULT_MIN_COMPACTION_LAG_MS))


def is_compacted(cleanup_policy: str | None) -> bool:
    """`cleanup.policy` is `compact` or a list holding it (`compact,delete`)."""
    return cleanup_policy is not None and "compact" in (p.strip() for p in cleanup_policy.split(","))


# ====================================================================== the driver
Work = tuple  # (callable, *args): heavy work a pass hands to its runner


class Compactor:
    """Cleans `SegmentLog`s pass by pass; keeps the key index of every segment it has read.

    `clean` runs a pass inline; `clean_async` runs the heavy parts through `loop.run_in_executor` and the
    rest (reading the segment list, writing the cleaned file, the swap) on the loop. Both take the
    log's own `LogConfig.segment_bytes` for grouping. One pass at a time per log (the server holds a lock)."""

    def __init__(self, clock_ms: Callable[[], int] | None = None, pass_bytes: int = DEFAULT_PASS_BYTES) -> None:
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.pass_bytes = pass_bytes
        self._summaries: weakref.WeakKeyDictionary[Segment, SegmentSummary] = weakref.WeakKeyDictionary()
        self._broken: weakref.WeakSet[SegmentLog] = weakref.WeakSet()

    # ---------------------------------------------------------------- front ends
    def clean(self, plog: SegmentLog, policy: CompactionPolicy = CompactionPolicy(),
              budget: int | None = None) -> CleanStats:
        gen = self._pass(plog, policy, self.pass_bytes if budget is None else budget)
        try:
            work = next(gen)
            while True:
                work = gen.send(work[0](*work[1:]))
        except StopIteration as stop:
            return stop.value
        except (CorruptLogError, OSError, ValueError) as exc:
            return self._pass_failed(plog, exc)

    async def clean_async(self, plog: SegmentLog, policy: CompactionPolicy = CompactionPolicy(),
                          budget: int | None = None, executor=None) -> CleanStats:
        import asyncio
        loop = asyncio.get_running_loop()
        gen = self._pass(plog, policy, self.pass_bytes if budget is None else budget)
        try:
            work = next(gen)
            while True:
                work = gen.send(await loop.run_in_executor(executor, work[0], *work[1:]))
        except StopIteration as stop:
            return stop.value
        except (CorruptLogError, OSError, ValueError) as exc:
            return self._pass_failed(plog, exc)
        finally:
            gen.close()

    def _pass_failed(self, plog: SegmentLog, exc: Exception) -> CleanStats:
        """Called from the `except` of a pass that raised `exc`: a damaged segment marks the log (and
        re-raises); an OS or value error on a log closed meanwhile (topic deletion) is nothing to do;
        anything else is re-raised."""
        if isinstance(exc, CorruptLogError):
            self._damaged(plog, exc)
            raise exc
        if plog.closed:
            return CleanStats()
        raise exc

    def _damaged(self, plog: SegmentLog, exc: CorruptLogError) -> None:
        """A segment's batch failed its check while being cleaned: the log is not cleaned again (a later
        pass would meet the same damage) until it is opened again, where recovery finds it too."""
        self._broken.add(plog)
        log.error("%s: %s; this log is not compacted again until the next open (see `tenure log verify`)",
                  plog.name, exc)

    def clean_fully(self, plog: SegmentLog, policy: CompactionPolicy = CompactionPolicy()) -> CleanStats:
        """Passes without a budget until one finds nothing to do (the offline tool, tests)."""
        total = CleanStats()
        for _ in range(_MAX_PASSES):
            st = self.clean(plog, policy, budget=1 << 62)
            total += st
            if not st.did_work:
                break
        total.more = False
        return total

    # ---------------------------------------------------------------- one pass
    def cleanable(self, plog: SegmentLog, policy: CompactionPolicy, now: int) -> list[Segment]:
        segs = plog.segments[:-1]
        if policy.min_compaction_lag_ms > 0:
            for i, seg in enumerate(segs):
                if seg.max_timestamp > now - policy.min_compaction_lag_ms:
                    return segs[:i]
        return segs

    def _pass(self, plog: SegmentLog, policy: CompactionPolicy, budget: int) -> Generator[Work, Any, CleanStats]:
        st = CleanStats()
        if plog.closed or plog in self._broken:
            return st
        now = self.clock_ms()
        rng: list[Segment] = []
        todo: list[Segment] = []
        for seg in self.cleanable(plog, policy, now):
            if seg not in self._summaries:
                if st.bytes_read and st.bytes_read + seg.size > budget:
                    st.more = True
                    break
                todo.append(seg)
                st.bytes_read += seg.size
            rng.append(seg)
        if todo:
            found = yield (summarize_files, [(seg.path, seg.size) for seg in todo])
            if not self._still_in(plog, rng):
                return st
            for seg, summary in zip(todo, found, strict=True):
                self._summaries[seg] = summary
            st.segments_indexed += len(todo)
        if not rng:
            return st
        p: Plan = yield (plan, [self._summaries[s] for s in rng], [s.size for s in rng],
                          plog.config.segment_bytes, now)
        stamp = now + policy.delete_retention_ms
        for g in p.groups:
            group = rng[g.start:g.end]
            if st.bytes_read and st.bytes_read + g.size > budget:
                st.more = True
                break
            if not self._still_in(plog, group):
                break
            st.bytes_read += g.size
            summaries = [self._summaries[s] for s in group]
            done: Rewritten = yield (rewrite_files, [(s.path, s.size) for s in group], g.changed, summaries,
                                      p.latest, g.droppable, now, stamp, p.txns)
            if not self._still_in(plog, group):
                break
            self._install(plog, group, done)
            st += done.stats
            st.groups_cleaned += 1
            st.segments_before += len(group)
            st.segments_after += 1
            st.bytes_before += g.size
            st.bytes_after += len(done.data)
        return st

    @staticmethod
    def _still_in(plog: SegmentLog, segs: list[Segment]) -> bool:
        """After a wait: the log is open and still holds these segments (nothing swapped them out)."""
        if plog.closed:
            return False
        ids = {id(s) for s in plog.segments[:-1]}
        return all(id(s) in ids for s in segs)

    def _install(self, plog: SegmentLog, group: list[Segment], done: Rewritten) -> None:
        """Write `<base>.log.cleaned`, fsync it, swap it in (on the log's own thread, no wait inside)."""
        headers = parse_batches(done.data)             # verifies every CRC once more before it is served
        cleaned = plog.dir / (segment_name(group[0].base_offset) + CLEANED)
        fd = os.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(done.data)
            written = 0
            while written < len(view):
                written += os.write(fd, view[written:])
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            cleaned.unlink(missing_ok=True)
            raise
        os.close(fd)
        # the checkpoint first: it must cover this group before the group can be seen cleaned on disk
        i = next(j for j, s in enumerate(plog.segments) if s is group[-1])
        try:
            advance_checkpoint(plog.dir, plog.segments[i + 1].base_offset)
        except BaseException:
            cleaned.unlink(missing_ok=True)
            raise
        try:
            seg = plog.replace_segments(group, cleaned, headers)
        except SwapUnfinished:
            self._broken.add(plog)                     # committed on disk, not in memory: stop cleaning it
            log.critical("%s: a compaction swap failed after its commit point; the log keeps serving its old "
                         "segments and is not cleaned again until the next open, which finishes the swap",
                         plog.name)
            raise
        self._summaries[seg] = done.summary
