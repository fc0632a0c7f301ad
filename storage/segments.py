"""The on-disk partition log: Kafka segment files of RecordBatch v2, behind the same `Log` interface.

A partition is a directory `<data-dir>/<topic>-<partition>/` of segment files named by their base
offset (`00000000000000000000.log`), each a plain concatenation of RecordBatch v2 batches exactly as
Kafka writes them, so Kafka's own tools and any RecordBatch reader can parse them. The newest segment
is the active one (appends go there); a new one is rolled when the active segment would pass
`segment_bytes` or is older than `segment_ms`.

Reads use a sparse in-memory offset index per segment (one entry every `index_interval_bytes`, as
Kafka's .index), rebuilt while the segment is verified at open; a read finds the segment by base
offset, the nearest index entry, then walks batch headers from there.

Recovery at open verifies every batch (length, magic, CRC-32C, and a base offset continuing the previous
batch exactly, except where the cleaner left gaps: see `scan_segment`, `gaps_below`). Damage at
the end of the newest segment - a torn write or a corrupt last batch with nothing valid after it - is
cut off and logged with what was cut. Damage anywhere else is never skipped: opening raises
`CorruptLogError` naming the file, byte position and offset.

Durability is the caller's choice: `append` writes to the OS (a process crash loses nothing that
was appended); `flush` fsyncs every segment written since the last flush (and the directory when a
segment file was created), for the fsync policies in `storage.durability`.
"""
from __future__ import annotations

import bisect
import logging
import mmap
import os
import struct
import threading
import time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    first_record_with_max_timestamp,
    offset_at_or_after,
    parse_batches,
    read_header,
    restamp,
)
from .checkpoints import LOG_START_CHECKPOINT, advance_checkpoint, read_checkpoint
from .files import (  # noqa: F401 (partition_dir_name: imported from here too)
    CLEANED,
    MERGING,
    SUFFIX,
    SWAP,
    fsync_dir,
    partition_dir_name,
    partition_of_dir,
    segment_name,
)
from .reader import BadBatch, SegmentReader, check_batch  # noqa: F401 (check_batch: imported from here too)

log = logging.getLogger("tenure.storage")

_BASE_AND_LEN = struct.Struct(">qi")


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 100 * 1024 * 1024      # Kafka's offsets.topic.segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000      # Kafka's log.roll.ms default (7 days)
    index_interval_bytes: int = 4096            # Kafka's index.interval.bytes


class CorruptLogError(Exception):
    """Damage that recovery must not cut: a bad batch with valid data after it, or in an older segment."""

    def __init__(self, path: Path, position: int, offset: int | None, reason: str) -> None:
        where = f"{path} at byte {position}" + (f" (offset {offset})" if offset is not None else "")
        super().__init__(f"corrupt log: {where}: {reason}")
        self.path = path
        self.position = position
        self.offset = offset
        self.reason = reason


class SwapUnfinished(OSError):
    """`replace_segments` failed after its commit point: the files are mid-swap (the next open finishes
    the swap) while the log object still serves the old segments."""


@dataclass
class Damage:
    """A batch that failed verification: where, why, and whether valid batches follow it."""
    path: Path
    position: int
    offset: int | None
    reason: str
    valid_after: bool


def gaps_below(directory: Path, newest_base: int) -> int:
    """The offset below which a partition log's batches may skip offsets (see `scan_segment`).

    Only the log cleaner leaves such gaps: it drops batches whose records were all superseded, keeping
    every other batch's base and last offset, and before a cleaned segment is swapped in it raises this
    partition's entry in the cleaner checkpoint (`<data dir>/cleaner-offset-checkpoint`) past every offset
    it cleaned. So: that entry; 0 if there is none (never cleaned: every batch continues the one before it
    exactly); if the checkpoint cannot be read, the newest segment's base offset (the cleaner never
    touches the newest segment)."""
    try:
        entries = read_checkpoint(directory.parent)
    except (OSError, ValueError) as exc:
        log.warning("%s: %s; below offset %d batches are only checked for moving forward", directory.name,
                    exc, newest_base)
        return newest_base
    return entries.get(partition_of_dir(directory.name), 0)


def scan_segment(path: Path, base_offset: int, on_batch=None,
                 gaps_below: int = 0) -> tuple[list[BatchHeader], Damage | None]:
    """Every sound batch of a segment file up to the first damage (if any), read by the segment reader.

    A sound batch starts exactly where the one before it (or, first in the file, the segment's base
    offset) ends - the base offset is not covered by the CRC, so this is what catches a damaged one -
    except where the expected offset is below `gaps_below`: there the cleaner may have dropped whole
    batches, and a base offset only has to move forward.

    With `on_batch`, each sound header is handed to it as it is found and the returned list stays empty
    (a large segment's headers are then never all held at once)."""
    headers: list[BatchHeader] = []
    keep = headers.append if on_batch is None else on_batch
    expect = base_offset
    skipped: tuple[BatchHeader, int] | None = None   # the previous batch and its expected offset, if it
    with SegmentReader(path, expect_offset=base_offset, exact_from=gaps_below, rereads=1) as reader:
        for item in reader:                          # jumped over a gap
            if isinstance(item, BadBatch):
                return headers, _damage(Path(path), item, reader.size, expect, skipped)
            h = item.header
            keep(h)
            skipped = (h, expect) if h.base_offset > expect else None
            expect = h.next_offset
    return headers, None


def _damage(path: Path, bad: BadBatch, size: int, expect: int,
            skipped: tuple[BatchHeader, int] | None) -> Damage:
    """What `scan_segment` reports for the bad batch it met (`expect`: the offset it should have had)."""
    h, reason = bad.header, bad.reason
    offsets_only = reason.startswith("base offset")  # check_batch checks offsets last: all else is sound
    if skipped is not None and h is not None and h.base_offset < expect and offsets_only:
        # a sound batch going back into the batch before it, which skipped offsets: either base offset
        # may be the damaged one; the earlier is named, so nothing sound is cut
        prev, prev_expect = skipped
        return Damage(path, prev.position, prev_expect,
                      f"base offset {prev.base_offset} skips offsets {prev_expect}..{prev.base_offset - 1} and "
                      f"the next batch's base offset {h.base_offset} goes back into this batch: one of the two "
                      f"is damaged", True)
    offset = expect if h is None or offsets_only else h.base_offset
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        valid_after = _valid_after(buf, bad.position, min(size, len(buf)), h, expect)
    return Damage(path, bad.position, offset, reason, valid_after)


def segment_gap(base: int, expect: int, gaps_below: int) -> str | None:
    """Why a segment with base offset `base` cannot follow one whose next offset is `expect`, if it cannot:
    it overlaps it, or offsets are missing between them that no cleaning explains (see `gaps_below`)."""
    if base < expect:
        return f"segment base offset {base} overlaps the previous segment, whose next offset is {expect}"
    if base > expect >= gaps_below:
        return (f"offsets {expect}..{base - 1} are missing: the previous segment ends at offset {expect - 1} "
                f"and the cleaner never removed records there")
    return None


def _valid_after(buf, pos: int, size: int, h: BatchHeader | None, expect: int) -> bool:
    """Is there a sound batch anywhere after a damaged one (so the damage is not a tail)?

    First where the damaged batch's own length points; then, since that length may itself be the
    damaged field, every position whose magic byte reads 2 and whose header is plausible (length
    within the file, base offset not below the damaged batch's or the expected one), confirmed by its CRC-32C. A rare,
    recovery-only search: cheap checks first, the CRC only for plausible candidates."""
    if h is not None and pos + h.size < size:
        if check_batch(buf, pos + h.size, size, 0)[1] is None:
            return True
    floor = min(_BASE_AND_LEN.unpack_from(buf, pos)[0], expect) if size - pos >= LOG_OVERHEAD else expect
    q = buf.find(b"\x02", pos + 1 + MAGIC_OFFSET)
    while q != -1:
        p = q - MAGIC_OFFSET
        if p + HEADER_SIZE <= size:
            base, length = _BASE_AND_LEN.unpack_from(buf, p)
            if (length >= HEADER_SIZE - LOG_OVERHEAD and p + LOG_OVERHEAD + length <= size
                    and floor <= base < floor + (1 << 40)
                    and check_batch(buf, p, size, 0)[1] is None):
                return True
        q = buf.find(b"\x02", q + 1)
    return False


class Segment:
    """One segment file: an append fd, the next offset, a sparse index, and timestamps."""

    def __init__(self, path: Path, base_offset: int, index_interval: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = 0
        self.next_offset = base_offset
        self.index_interval = index_interval
        self.index_offsets = array("q")      # base offset of an indexed batch
        self.index_positions = array("q")    # its byte position
        self._since_index = index_interval   # index the first batch
        self.max_timestamp = -1
        self.max_timestamp_batch = -1        # base offset of the first batch holding max_timestamp
        self.created = time.monotonic()
        self.batches = 0
        self._holds = 0                      # claimed fsyncs still to run on this fd (see `hold`)
        self._close_pending = False
        self._fd_lock = threading.Lock()

    def add(self, h: BatchHeader, position: int) -> None:
        if self._since_index >= self.index_interval:
            self.index_offsets.append(h.base_offset)
            self.index_positions.append(position)
            self._since_index = 0
        self._since_index += h.size
        self.size = position + h.size
        self.next_offset = h.next_offset
        self.batches += 1
        if h.max_timestamp > self.max_timestamp:         # the first batch holding the highest timestamp
            self.max_timestamp = h.max_timestamp
            self.max_timestamp_batch = h.base_offset

    def position_for(self, offset: int) -> int:
        i = bisect.bisect_right(self.index_offsets, offset) - 1
        return self.index_positions[i] if i >= 0 else 0

    def pread(self, length: int, position: int) -> bytes:
        return os.pread(self.fd, length, position)

    def headers_from(self, position: int, chunk: int = 64 * 1024) -> Iterator[tuple[BatchHeader, int]]:
        """(header, position) of each batch from `position` on, reading in chunks."""
        while position < self.size:
            buf = self.pread(min(chunk, self.size - position), position)
            off = 0
            while off + HEADER_SIZE <= len(buf):
                h = read_header(buf, off)
                yield h, position + off
                off += h.size
            if off == 0:                       # header larger than the chunk left: read exactly it
                h = read_header(self.pread(HEADER_SIZE, position), 0)
                yield h, position
                off = h.size
            position += off

    def hold(self) -> bool:
        """Keep the fd open for a claimed fsync (which may run on a worker thread) until `release`; a
        `close` meanwhile is carried out by the last release. False if the segment is closed already."""
        with self._fd_lock:
            if self.fd < 0 or self._close_pending:
                return False
            self._holds += 1
            return True

    def release(self) -> None:
        with self._fd_lock:
            self._holds -= 1
            if self._holds == 0 and self._close_pending:
                self._close_fd()

    def close(self) -> None:
        with self._fd_lock:
            if self._holds:
                self._close_pending = True
            else:
                self._close_fd()

    def _close_fd(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


class SegmentLog:
    """A partition log on disk (see the module docstring). Implements `storage.Log`."""

    def __init__(self, directory: str | os.PathLike, config: LogConfig = LogConfig(),
                 name: str | None = None, defer_cut: bool = False) -> None:
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
        self._recover()

    # ------------------------------------------------------------------ recovery
    def _recover(self) -> None:
        self._finish_interrupted_swap()
        files = sorted(p for p in self.dir.iterdir() if p.suffix == SUFFIX and p.stem.isdigit())
        gaps = gaps_below(self.dir, int(files[-1].stem)) if files else 0
        expect = 0
        for i, p in enumerate(files):
            base = int(p.stem)
            problem = segment_gap(base, expect, gaps) if i else None
            if problem is not None:
                for earlier in self.segments:
                    earlier.close()
                raise CorruptLogError(p, 0, base, problem)
            seg = Segment(p, base, self.config.index_interval_bytes)
            _, damage = scan_segment(p, base, on_batch=lambda h, seg=seg: seg.add(h, h.position), gaps_below=gaps)
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
        if not self.segments:
            self.segments.append(Segment(self.dir / segment_name(0), 0, self.config.index_interval_bytes))
            self._dir_dirty = True
        if not self._defer_cut:
            self.finish_recovery()

    def finish_recovery(self) -> None:
        """Cut the damaged tail recovery found (at once, unless opened with defer_cut=True: then the
        caller first opens every log - so a refusal elsewhere changes no file - and calls this)."""
        cuts, self._pending_cuts = self._pending_cuts, []
        for damage in cuts:
            p = damage.path
            cut = p.stat().st_size - damage.position
            log.warning("%s: recovery cut %d byte(s) from %s at byte %d (offset %s): %s", self.name, cut,
                        p.name, damage.position, damage.offset, damage.reason)
            with open(p, "r+b") as f:
                f.truncate(damage.position)
                f.flush()
                os.fsync(f.fileno())
            self.truncated.append(damage)

    # ------------------------------------------------------------------ the Log interface
    @property
    def log_start_offset(self) -> int:
        return max(self.segments[0].base_offset, min(self.start_floor, self.log_end_offset))

    def advance_start(self, offset: int) -> int:
        """DeleteRecords (see storage.Log): raise the start floor; delete the segments wholly below it (never
        the active one). The floor is written to the data dir's log-start-offset-checkpoint first."""
        if offset > self.start_floor:
            advance_checkpoint(self.dir, offset, LOG_START_CHECKPOINT)     # durable before anything goes
            self.start_floor = offset
            while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
                seg = self.segments.pop(0)
                self._dirty.discard(seg)
                seg.close()
                seg.path.unlink()
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
        """Start a new active segment at the log end offset (the old one stays dirty until flushed)."""
        base = self.log_end_offset
        if self.active.size == 0:
            return self.active
        seg = Segment(self.dir / segment_name(base), base, self.config.index_interval_bytes)
        self.segments.append(seg)
        self._dir_dirty = True
        return seg

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
                if item.header.last_offset >= start_offset:
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

        def do_sync() -> None:
            try:
                for seg in segs:
                    os.fsync(seg.fd)
                if dir_too:
                    fsync_dir(directory)
                self.bytes_synced = max(self.bytes_synced, target)
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
                or any(a is not b for a, b in zip(self.segments[i:i + len(old)], old))):
            raise ValueError(f"{self.name}: not consecutive non-active segments of this log")
        base = old[0].base_offset
        limit = self.segments[i + len(old)].base_offset
        if cleaned != self.dir / (segment_name(base) + CLEANED):
            raise ValueError(f"{self.name}: cleaned file {cleaned} is not named {segment_name(base)}{CLEANED}")
        if headers and (headers[0].base_offset < base or headers[-1].next_offset > limit):
            raise ValueError(f"{self.name}: cleaned segment offsets {headers[0].base_offset}.."
                             f"{headers[-1].last_offset} outside [{base}, {limit})")
        target = old[0].path
        swap = target.with_name(target.name + SWAP)
        moved: list[tuple[Path, Path]] = []
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

