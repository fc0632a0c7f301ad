"""The on-disk partition log: Kafka segment files of RecordBatch v2, behind the same `Log` interface.

A partition is a directory `<data-dir>/<topic>-<partition>/` of segment files named by their base
offset (`00000000000000000000.log`), each a plain concatenation of RecordBatch v2 batches exactly as
Kafka writes them, so Kafka's own tools and any RecordBatch reader can parse them. The newest segment
is the active one (appends go there); a new one is rolled when the active segment would pass
`segment_bytes` or is older than `segment_ms`.

Each segment file is a `Segment` (storage/segment_file.py) with a sparse in-memory offset index (one entry
every `index_interval_bytes`, as Kafka's .index), rebuilt while the segment is verified at open; a read
finds the segment by base offset, the nearest index entry, then walks batch headers from there.

Recovery at open verifies every batch with the checks of storage/recovery.py (length, magic, CRC-32C, and a
base offset continuing the previous batch exactly, except where the cleaner left gaps: see `scan_segment`,
`gaps_below`). Damage at the end of the newest segment - a torn write or a corrupt last batch with nothing
valid after it - is cut off and logged with what was cut. Damage anywhere else is never skipped: opening
raises `CorruptLogError` naming the file, byte position and offset. After a clean stop (`trusted_end`: the
log's recovery point, given by `DataDir` when it found the clean-shutdown marker) a segment with sound index
files is trusted up to its last index entry and only the batches after it are verified (storage/cleanshut.py).
After an unclean stop (`flushed_to`: the recovery point `DataDir` last checkpointed while the server ran) the
same is done for each segment wholly below it - as Kafka's LogLoader recovers only the segments from the one
holding the recovery point on - and every batch of the rest is verified.

Durability is the caller's choice: `append` writes to the OS (a process crash loses nothing that
was appended); `flush` fsyncs every segment written since the last flush (and the directory when a
segment file was created), for the fsync policies in `storage.durability`. A roll, whatever the policy, hands
`on_roll` (set by `DataDir`; unset: nothing) a job that fsyncs every segment below the new one, writes their
index files and then raises the recovery point to the new segment's base offset - Kafka's
`flushUptoOffsetExclusive(newSegment.baseOffset)`, scheduled at each roll.
"""
from __future__ import annotations

import bisect
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .batch import BatchHeader, first_record_with_max_timestamp, offset_at_or_after, parse_batches, read_header, restamp
from .checkpoints import LOG_START_CHECKPOINT, advance_checkpoint
from .cleanshut import (
    INDEX_MIN_BYTES,
    SegmentIndex,
    index_older_than,
    read_index,
    remove_index,
    remove_orphans,
    write_index,
)
from .files import CLEANED, MERGING, SUFFIX, SWAP, fsync_dir, partition_dir_name, segment_name  # noqa: F401 (partition_dir_name: imported from here too)
from .reader import BadBatch, SegmentReader
from .recovery import CorruptLogError, Damage, gaps_below, scan_segment, segment_gap
from .segment_file import Segment

log = logging.getLogger("tenure.storage")


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 100 * 1024 * 1024      # Kafka's offsets.topic.segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000      # Kafka's log.roll.ms default (7 days)
    index_interval_bytes: int = 4096            # Kafka's index.interval.bytes
    index_files_min_bytes: int = INDEX_MIN_BYTES  # a clean stop writes index files for segments this large


class SwapUnfinished(OSError):
    """`replace_segments` failed after its commit point: the files are mid-swap (the next open finishes
    the swap) while the log object still serves the old segments."""


class SegmentLog:
    """A partition log on disk (see the module docstring). Implements `storage.Log`."""

    def __init__(self, directory: str | os.PathLike, config: LogConfig = LogConfig(),
                 name: str | None = None, defer_cut: bool = False, trusted_end: int | None = None,
                 flushed_to: int | None = None) -> None:
        self.dir = Path(directory)
        self.config = config
        self.name = name or self.dir.name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.segments: list[Segment] = []
        self._dirty: set[Segment] = set()
        self._dir_dirty = False
        self.truncated: list[Damage] = []          # what recovery cut off, for the caller to report
        self._defer_cut = defer_cut
        self._pending_cuts: list[Damage] = []      # found by recovery, not cut yet (defer_cut)
        self.bytes_written = 0                     # appended since open (a counter, for sync bookkeeping)
        self.bytes_synced = 0                      # of those, covered by a finished fsync
        self.closed = False                        # set by close(): a cleaner holding this log stops
        self.start_floor = 0                       # DeleteRecords' log start offset (the data dir checkpoints it)
        self.recovery_point = 0                    # every offset below it is fsynced (advanced by each flush)
        self.scanned = 0                           # non-empty segments verified batch by batch at open
        self.trusted = 0                           # segments trusted up to their last index entry
        # a roll's flush job (see `roll`): DataDir runs it on its flusher thread; None: no roll flush
        self.on_roll: Callable[[Callable[[], None]], None] | None = None
        self._index_lock = threading.Lock()        # index files written (roll flush) vs removed (swap, deletion)
        self._point_lock = threading.Lock()        # the recovery point is raised from several threads
        self._recover(trusted_end, flushed_to)

    # ------------------------------------------------------------------ recovery
    def _recover(self, trusted_end: int | None = None, flushed_to: int | None = None) -> None:
        self._finish_interrupted_swap()
        entries = list(self.dir.iterdir())
        files = sorted(p for p in entries if p.suffix == SUFFIX and p.stem.isdigit())
        gaps = gaps_below(self.dir, int(files[-1].stem)) if files else 0
        remove_orphans(self.dir, entries)
        clean = trusted_end is not None
        self._open_segments(files, gaps, clean, None if clean else flushed_to)
        if clean and self.trusted and self.log_end_offset != trusted_end:
            # the files changed after the clean stop (or its index files disagree with them): verify it all
            log.warning("%s: log end offset %d is not the recovery point %s of the clean stop; verifying every "
                        "batch", self.name, self.log_end_offset, trusted_end)
            for seg in self.segments:
                seg.close()
            self.segments, self._pending_cuts, self.trusted, self.scanned = [], [], 0, 0
            self._open_segments(files, gaps, False, None)
            clean = False
        if not self.segments:
            self.segments.append(Segment(self.dir / segment_name(0), 0, self.config.index_interval_bytes))
            self._dir_dirty = True
        self.active.sealed = False                 # appends go there: its roll flushes it and writes its index
        if clean and self.trusted and not self._pending_cuts:
            known = self.log_end_offset            # the clean stop fsynced it all
        else:                                      # only what the last checkpoint names was fsynced
            known = min(flushed_to or 0, self.log_end_offset)
            if flushed_to is not None and flushed_to > self.log_end_offset:
                log.warning("%s: the log ends at offset %d, below its checkpointed recovery point %d: records "
                            "fsynced before the stop are gone", self.name, self.log_end_offset, flushed_to)
        unsynced = [seg for seg in self.segments if seg.size and seg.next_offset > known]
        if unsynced:                               # what is on disk was read back, not known to be fsynced:
            self._dirty.update(unsynced)           # the first flush covers it and advances the recovery point
            self.recovery_point = known
        else:
            self.recovery_point = self.log_end_offset
        if not self._defer_cut:
            self.finish_recovery()

    def _open_segments(self, files: list[Path], gaps: int, trust_all: bool, flushed_to: int | None) -> None:
        """Open the segment files in order. `trust_all` (a clean stop): each segment with sound index files is
        trusted up to its last index entry; `flushed_to` (an unclean stop's checkpointed recovery point): so is
        each segment wholly below it (the next segment starts at or below it); everything else is verified."""
        expect = 0
        for i, p in enumerate(files):
            trust = trust_all or (flushed_to is not None and i + 1 < len(files) and int(files[i + 1].stem) <= flushed_to)
            base = int(p.stem)
            problem = segment_gap(base, expect, gaps) if i else None
            if problem is not None:
                for earlier in self.segments:
                    earlier.close()
                raise CorruptLogError(p, 0, base, problem)
            seg = Segment(p, base, self.config.index_interval_bytes)
            start, first, size, trusted = 0, base, os.fstat(seg.fd).st_size, False
            if trust:
                index = read_index(p, base, size)
                if isinstance(index, SegmentIndex) and not trust_all and index_older_than(p):
                    index = "its index files are older than the segment file"
                if isinstance(index, SegmentIndex):
                    seg.load_index(index.offsets, index.positions, index.max_timestamp, index.max_timestamp_batch)
                    start, first, trusted = index.positions[-1], index.offsets[-1], True
                    self.trusted += 1
                    seg.sealed = True              # below the recovery point, with its index files on disk
                elif size >= self.config.index_files_min_bytes:
                    log.info("%s: verifying %s after a%s stop: %s", self.name, p.name,
                             " clean" if trust_all else "n unclean (below the recovery point)", index)
            if not trusted and size:
                self.scanned += 1
            _, damage = scan_segment(p, first, on_batch=lambda h, seg=seg: seg.add(h, h.position), gaps_below=gaps,
                                     start=start)
            last = i == len(files) - 1
            if damage is not None:
                if not last or damage.valid_after:
                    seg.close()
                    for earlier in self.segments:
                        earlier.close()
                    raise CorruptLogError(damage.path, damage.position, damage.offset,
                                          damage.reason + ("; valid batches follow it" if damage.valid_after
                                                           else "; it is not in the newest segment"))
                self._pending_cuts.append(damage)
            self.segments.append(seg)
            expect = max(seg.next_offset, base)

    def write_index_files(self) -> int:
        """At a clean stop, after the last flush: write the index files of each segment of at least
        `index_files_min_bytes` and remove those of smaller ones (storage/cleanshut.py), except where a roll's
        flush already did (sealed segments); how many were written."""
        written, changed = 0, False
        for seg in self.segments:
            if seg.sealed:                         # its roll's flush (or the last stop) wrote them: current
                continue
            if seg.size >= self.config.index_files_min_bytes and write_index(
                    seg.path, seg.base_offset, seg.index_offsets, seg.index_positions, seg.max_timestamp,
                    seg.max_timestamp_batch):
                written += 1
            elif remove_index(seg.path):
                changed = True
        if written or changed:                    # the new (or removed) names made durable
            fsync_dir(self.dir)
        return written

    def finish_recovery(self) -> None:
        """Cut the damaged tail recovery found (at once, unless opened with defer_cut=True: then the
        caller first opens every log - so a refusal elsewhere changes no file - and calls this)."""
        cuts, self._pending_cuts = self._pending_cuts, []
        for damage in cuts:
            p = damage.path
            cut = p.stat().st_size - damage.position
            log.warning("%s: recovery cut %d byte(s) from %s at byte %d (offset %s): %s", self.name, cut,
                        p.name, damage.position, damage.offset, damage.reason)
            if remove_index(p):                    # its entries past the cut would point into new appends
                fsync_dir(self.dir)
            with open(p, "r+b") as f:
                f.truncate(damage.position)
                f.flush()
                os.fsync(f.fileno())
            self.truncated.append(damage)

    # ------------------------------------------------------------------ the Log interface
    @property
    def log_start_offset(self) -> int:
        return max(self.segments[0].base_offset, min(self.start_floor, self.log_end_offset))

    def segment_spans(self) -> list[tuple[int, int, int, int]]:
        return [(s.base_offset, s.next_offset, s.size, s.max_timestamp) for s in self.segments if s.size]

    def advance_start(self, offset: int) -> int:
        """DeleteRecords (see storage.Log): raise the start floor; delete the segments wholly below it (never
        the active one). The floor is written to the data dir's log-start-offset-checkpoint first."""
        if offset > self.start_floor:
            advance_checkpoint(self.dir, offset, LOG_START_CHECKPOINT)     # durable before anything goes
            self.start_floor = offset
            while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
                with self._index_lock:
                    seg = self.segments.pop(0)
                    self._dirty.discard(seg)
                    seg.close()
                    seg.path.unlink()
                    remove_index(seg.path)
                self._dir_dirty = True
        return self.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    def append(self, records: bytes, leader_epoch: int = 0) -> tuple[int, list[BatchHeader]]:
        if self._pending_cuts:                     # never append after a damaged tail still in the file
            self.finish_recovery()
        buf = bytearray(records)
        headers = parse_batches(buf, verify_crc=False)
        base = self.log_end_offset
        self._maybe_roll(len(buf))
        seg = self.active
        next_offset = base
        stamped: list[BatchHeader] = []
        for h in headers:
            restamp(buf, h.position, next_offset, leader_epoch)
            sh = read_header(buf, h.position)
            stamped.append(sh)
            next_offset = sh.next_offset
        start = seg.size
        view = memoryview(buf)
        written = 0
        try:
            while written < len(buf):
                written += os.write(seg.fd, view[written:])
        except OSError:
            if written:                            # never leave half a batch behind (e.g. disk full)
                try:
                    os.ftruncate(seg.fd, start)
                except OSError:
                    log.error("%s: could not cut a partial write back to byte %d of %s", self.name, start,
                              seg.path.name)
            raise
        for sh in stamped:
            seg.add(sh, start + sh.position)
        self._dirty.add(seg)
        self.bytes_written += len(buf)
        return base, [BatchHeader(start + sh.position, *astuple_tail(sh)) for sh in stamped]

    def _maybe_roll(self, incoming: int) -> None:
        seg = self.active
        if seg.size == 0:
            return
        too_big = seg.size + incoming > self.config.segment_bytes
        too_old = (time.monotonic() - seg.created) * 1000 >= self.config.segment_ms
        if too_big or too_old:
            self.roll()

    def roll(self) -> Segment:
        """Start a new active segment at the log end offset (the old one stays dirty until flushed), and hand
        `on_roll` the flush of everything below it (`take_roll_flush`)."""
        base = self.log_end_offset
        if self.active.size == 0:
            return self.active
        seg = Segment(self.dir / segment_name(base), base, self.config.index_interval_bytes)
        self.segments.append(seg)
        self._dir_dirty = True
        if self.on_roll is not None:
            self.on_roll(self.take_roll_flush())
        return seg

    def take_roll_flush(self) -> Callable[[], None]:
        """Claim, on the appending thread, the segments below the active one not yet known to be fsynced with
        their index files on disk; returns the blocking job (for a worker thread) that fsyncs them, writes their
        index files (a segment of `index_files_min_bytes` or more; a smaller one loses stale ones), fsyncs the
        directory and raises the recovery point to the active segment's base offset, or to the first segment
        below it a job (queued, or failed) has not sealed: Kafka's flush at a roll, whatever the flush policy.
        The segments stay dirty: the policy's own flush still covers them."""
        segs = [s for s in self.segments[:-1] if not (s.sealed or s.claimed) and s.hold()]
        for s in segs:                             # a burst of rolls: each segment in one job only
            s.claimed = True
        directory, min_bytes = self.dir, self.config.index_files_min_bytes

        def run() -> None:
            try:
                for s in segs:
                    os.fsync(s.fd)
                for s in segs:
                    with self._index_lock:         # not while a swap or a deletion removes its files
                        if not any(s is t for t in list(self.segments)):
                            continue
                        if s.size >= min_bytes:
                            write_index(s.path, s.base_offset, s.index_offsets, s.index_positions,
                                        s.max_timestamp, s.max_timestamp_batch)
                        else:
                            remove_index(s.path)
                fsync_dir(directory)
            except BaseException:
                for s in segs:                     # the next roll claims them again
                    s.claimed = False
                raise
            finally:
                for s in segs:
                    s.release()
            for s in segs:
                s.sealed = True
            now = list(self.segments)              # up to the first segment no job has sealed (yet)
            self._raise_recovery_point(next((s.base_offset for s in now[:-1] if not s.sealed), now[-1].base_offset))
        return run

    def _raise_recovery_point(self, offset: int) -> None:
        with self._point_lock:                     # never lowered by a slower thread's older value
            if offset > self.recovery_point:
                self.recovery_point = offset

    def _segment_for(self, offset: int) -> int:
        bases = [s.base_offset for s in self.segments]
        return max(bisect.bisect_right(bases, offset) - 1, 0)

    def read(self, offset: int, max_bytes: int) -> bytes:
        i = self._segment_for(offset)
        while i < len(self.segments):
            seg = self.segments[i]
            start = None
            end = 0
            for h, pos in seg.headers_from(seg.position_for(offset)):
                if start is None:
                    if h.last_offset < offset:
                        continue
                    start = pos
                elif pos + h.size - start > max_bytes:
                    break
                end = pos + h.size
            if start is not None:
                return seg.pread(end - start, start)
            i += 1                               # the offset is past this segment (e.g. compacted away)
        return b""

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        for seg in self.segments:
            if seg.max_timestamp < timestamp:
                continue
            start = self.log_start_offset
            for h, pos in seg.headers_from(0):
                if h.max_timestamp >= timestamp and h.last_offset >= start:
                    found = offset_at_or_after(seg.pread(h.size, pos), h, timestamp, start)
                    if found is not None:
                        return found
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        best = None
        for seg in self.segments:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        for h, pos in best.headers_from(best.position_for(best.max_timestamp_batch)):
            if h.base_offset == best.max_timestamp_batch:
                return first_record_with_max_timestamp(best.pread(h.size, pos), h)
        raise AssertionError(f"{self.name}: the batch at {best.max_timestamp_batch} holding the max timestamp "
                             f"is not in its segment")

    def batches(self, start_offset: int = 0) -> Iterator[tuple[BatchHeader, bytes]]:
        """Every batch holding an offset from `start_offset` on, as (header with its position in its segment,
        bytes), each checked again by the segment reader; one that fails (the file changed under the log
        since it was verified at open) raises `CorruptLogError`."""
        for seg in self.segments[self._segment_for(start_offset):]:
            for item in SegmentReader(seg.fd, seg.position_for(start_offset), seg.size):
                if isinstance(item, BadBatch):
                    raise CorruptLogError(seg.path, item.position, item.offset, item.reason)
                h = item.header
                if h.base_offset + h.last_offset_delta >= start_offset:
                    yield item

    def locate(self, offset: int) -> str:
        """Where the batch holding `offset` is: "<segment file> at byte <position> (offset <offset>)"."""
        seg = self.segments[self._segment_for(offset)]
        for h, pos in seg.headers_from(seg.position_for(offset)):
            if h.last_offset >= offset:
                return f"{seg.path} at byte {pos} (offset {offset})"
        return f"{seg.path} (offset {offset})"

    @property
    def dirty(self) -> bool:
        return bool(self._dirty) or self._dir_dirty

    def flush(self) -> None:
        """fsync every segment written since the last flush, and the directory if it changed."""
        self.take_sync()()

    def take_sync(self):
        """Claim what the next fsync must cover; returns the blocking call that fsyncs it.

        Called on the thread that appends (so no append can slip between the claim and the set it
        clears); the returned call may run on a worker thread."""
        # held, not duplicated: the fsync needs no new descriptor (so it works at the descriptor limit),
        # and a segment closed meanwhile (`replace_segments`, `close`) keeps its fd until the fsync ran.
        # The directory's fsync opens it, but only after a segment file was created (a roll).
        segs = [seg for seg in self._dirty if seg.hold()]
        self._dirty = set()
        dir_too, self._dir_dirty = self._dir_dirty, False
        directory = self.dir
        target = self.bytes_written
        end = self.log_end_offset

        def do_sync() -> None:
            try:
                for seg in segs:
                    os.fsync(seg.fd)
                if dir_too:
                    fsync_dir(directory)
                self.bytes_synced = max(self.bytes_synced, target)
                self._raise_recovery_point(end)
            finally:
                for seg in segs:
                    seg.release()
        return do_sync

    # ------------------------------------------------------------------ compaction: swapping cleaned segments in
    # A cleaned segment (written by storage/compaction.py) replaces consecutive non-active segments with
    # base offsets b0 < b1 < ... < bk. Steps, each made durable (directory fsync) before the next:
    #   1. <b0>.log.cleaned               the cleaned segment, written and fsynced by the caller
    #   2. <bi>.log -> <bi>.log.merging   for i >= 1: the segments merged into b0's
    #   3. <b0>.log.cleaned -> <b0>.log.swap   the commit point
    #   4. unlink every <bi>.log.merging
    #   5. <b0>.log.swap -> <b0>.log      an atomic replace of the original b0
    # Recovery (`_finish_interrupted_swap`, at open) reads the leftovers: a .swap means committed, so it
    # finishes 4 and 5; no .swap means not committed, so .merging files are renamed back and .cleaned ones
    # deleted. A crash at any point leaves the old segments or the new one, never a mix.

    def replace_segments(self, old: list[Segment], cleaned: Path, headers: list[BatchHeader]) -> Segment:
        """Swap the cleaned segment file `cleaned` (`<old[0] base>.log.cleaned`, already fsynced; `headers`
        are its batches) in for the consecutive non-active segments `old`; returns the new segment.

        Call on the thread that appends and reads: the in-memory swap is one step for them. The old
        segments' fds are closed here, or by a claimed fsync holding one (`take_sync`) when it ends. On a
        failure before the commit point the files are put back and the error raised; after it, the error is
        raised with this object still serving the old segments (their open fds) and recovery finishing
        the swap at the next open."""
        if self.closed:
            raise ValueError(f"{self.name}: log is closed")
        i = next((j for j, seg in enumerate(self.segments) if seg is old[0]), None) if old else None
        if (i is None or i + len(old) >= len(self.segments)
                or any(a is not b for a, b in zip(self.segments[i:i + len(old)], old, strict=True))):
            raise ValueError(f"{self.name}: not consecutive non-active segments of this log")
        base = old[0].base_offset
        limit = self.segments[i + len(old)].base_offset
        if cleaned != self.dir / (segment_name(base) + CLEANED):
            raise ValueError(f"{self.name}: cleaned file {cleaned} is not named {segment_name(base)}{CLEANED}")
        if headers and (headers[0].base_offset < base or headers[-1].next_offset > limit):
            raise ValueError(f"{self.name}: cleaned segment offsets {headers[0].base_offset}.."
                             f"{headers[-1].last_offset} outside [{base}, {limit})")
        with self._index_lock:                   # no roll flush writes the old segments' index files meanwhile
            return self._swap_in(old, i, cleaned, headers)

    def _swap_in(self, old: list[Segment], i: int, cleaned: Path, headers: list[BatchHeader]) -> Segment:
        base = old[0].base_offset
        target = old[0].path
        swap = target.with_name(target.name + SWAP)
        moved: list[tuple[Path, Path]] = []
        if any([remove_index(seg.path) for seg in old]):   # they would describe the old files
            fsync_dir(self.dir)
        try:
            for seg in old[1:]:
                merging = seg.path.with_name(seg.path.name + MERGING)
                os.rename(seg.path, merging)
                moved.append((merging, seg.path))
            if moved:
                fsync_dir(self.dir)
            os.rename(cleaned, swap)
            fsync_dir(self.dir)
        except BaseException:
            for path in (swap, cleaned):
                try:
                    path.unlink()
                except OSError:
                    pass
            for merging, original in reversed(moved):
                try:
                    os.rename(merging, original)
                except OSError:
                    pass
            try:
                fsync_dir(self.dir)
            except OSError:
                pass
            raise
        try:
            for merging, _ in moved:
                merging.unlink()
            if moved:
                fsync_dir(self.dir)
            os.replace(swap, target)
            fsync_dir(self.dir)
            seg = Segment(target, base, self.config.index_interval_bytes)
        except OSError as exc:
            raise SwapUnfinished(f"{self.name}: swap of {swap.name} committed but not finished ({exc}); "
                                 f"the next open finishes it") from exc
        for h in headers:
            seg.add(h, h.position)
        self.segments[i:i + len(old)] = [seg]
        for o in old:
            self._dirty.discard(o)
            o.close()
        return seg

    def _finish_interrupted_swap(self) -> None:
        """At open, before the segments are read: finish or undo a `replace_segments` cut short."""
        entries = list(self.dir.iterdir())
        swaps = sorted(p for p in entries
                       if p.name.endswith(SUFFIX + SWAP) and p.name[:-len(SUFFIX + SWAP)].isdigit())
        merging = sorted(p for p in entries if p.name.endswith(SUFFIX + MERGING))
        stray = [p for p in entries if p.suffix in (CLEANED, SWAP) and p not in swaps]
        if not (swaps or merging or stray):
            return
        for p in stray:                              # never committed
            log.warning("%s: removing leftover %s from an interrupted compaction", self.name, p.name)
            p.unlink()
        if swaps:                                    # committed: finish it
            for p in merging:
                log.warning("%s: finishing an interrupted compaction: removing %s (merged into %s)", self.name,
                            p.name, swaps[0].name)
                p.unlink()
            fsync_dir(self.dir)
            for p in swaps:
                log.warning("%s: finishing an interrupted compaction: %s replaces its segment", self.name, p.name)
                os.replace(p, p.with_name(p.name[:-len(SWAP)]))
        else:                                        # not committed: the originals stand
            for p in merging:
                original = p.with_name(p.name[:-len(MERGING)])
                if original.exists():
                    raise CorruptLogError(p, 0, None, f"{original.name} exists too; cannot restore it")
                log.warning("%s: undoing an interrupted compaction: restoring %s", self.name, original.name)
                os.rename(p, original)
        fsync_dir(self.dir)

    def close(self) -> None:
        self.closed = True
        for seg in self.segments:
            seg.close()

    def delete(self) -> None:
        """Close and remove the partition directory (topic deletion)."""
        self.close()
        if self.start_floor:
            advance_checkpoint(self.dir, None, LOG_START_CHECKPOINT)
        for p in self.dir.iterdir():
            p.unlink()
        self.dir.rmdir()
        fsync_dir(self.dir.parent)


def astuple_tail(h: BatchHeader) -> tuple:
    """The header's fields after `position` (to rebuild it at another position)."""
    return (h.base_offset, h.batch_length, h.partition_leader_epoch, h.magic, h.crc, h.attributes,
            h.last_offset_delta, h.first_timestamp, h.max_timestamp, h.producer_id, h.producer_epoch,
            h.base_sequence, h.records_count)

