"""What a clean stop leaves for the next open, so that it need not verify every batch again (as Kafka's
LogManager and LogLoader do):

- `.kafka_cleanshutdown` in the data dir (`MARKER`, Kafka's name; a one-line JSON as Kafka writes it): every
  log was flushed and closed, and the files below were written after it. The next open reads and deletes it
  *before* opening any log (so a crash during that open, or any time later, makes the following open unclean).
- `recovery-point-offset-checkpoint` (storage/checkpoints.py): each log's end offset at the stop.
- `<base>.index` / `<base>.timeindex` next to a segment of at least `INDEX_MIN_BYTES` (Kafka's file names and
  entry layouts: 4-byte offset relative to the segment's base + 4-byte position; 8-byte timestamp + 4-byte
  relative offset): the segment's sparse offset index as `Segment` holds it (each entry is the *base* offset
  of the batch at that position - Kafka's entries name a batch's last offset) and one time index entry, the
  segment's highest timestamp and the batch holding it first. Smaller segments get none (and lose a stale one):
  they are verified at open, which costs less than the files' fsyncs at the stop.

After a clean stop a segment with sound index files is trusted up to its last index entry (its batches are
not read); the batches from there to its end (at most about `index_interval_bytes`) are verified as at
any open, which finds the log end and cuts a torn tail. The index files of a rolled segment are also written by
the flush of its roll (`SegmentLog.take_roll_flush`), so without the marker (a kill) the same is done for each
segment wholly below the log's checkpointed recovery point (storage/datadir.py), and every batch of the rest is
verified.
"""
from __future__ import annotations

import json
import logging
import os
import struct
from array import array
from pathlib import Path

from .files import SUFFIX, fsync_dir, write_fsynced

log = logging.getLogger("tenure.storage")

MARKER = ".kafka_cleanshutdown"      # Kafka's clean-shutdown file name
INDEX = ".index"
TIME_INDEX = ".timeindex"
INDEX_MIN_BYTES = 1 << 20            # smaller segments are verified at open even after a clean stop
_INDEX_ENTRY = struct.Struct(">ii")          # relative offset, position
_TIME_ENTRY = struct.Struct(">qi")           # timestamp, relative offset
_INT32 = 1 << 31


class SegmentIndex:
    """A segment's index files as read back: entries (base offset, position), and its highest timestamp and
    the base offset of the first batch holding it (-1, -1: none)."""

    def __init__(self, offsets: array, positions: array, max_timestamp: int, max_timestamp_batch: int) -> None:
        self.offsets = offsets
        self.positions = positions
        self.max_timestamp = max_timestamp
        self.max_timestamp_batch = max_timestamp_batch


def write_marker(data_dir: Path) -> None:
    """Write the clean-shutdown marker (fsynced, atomic): the last step of a clean stop."""
    path = data_dir / MARKER
    tmp = path.with_name(MARKER + ".tmp")
    write_fsynced(tmp, json.dumps({"version": 0, "brokerEpoch": -1}).encode("ascii"))
    os.replace(tmp, path)
    fsync_dir(data_dir)


def take_marker(data_dir: Path) -> bool:
    """Was the last stop clean? Deletes the marker (durably) before anything else opens, as Kafka does."""
    path = data_dir / MARKER
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_dir(data_dir)
    return True


def index_paths(segment_path: Path) -> tuple[Path, Path]:
    stem = segment_path.name[:-len(SUFFIX)]
    return segment_path.with_name(stem + INDEX), segment_path.with_name(stem + TIME_INDEX)


def write_index(segment_path: Path, base: int, offsets, positions, max_timestamp: int,
                max_timestamp_batch: int) -> bool:
    """Write a segment's index files (each fsynced); False (and none left) if an entry does not fit 32 bits."""
    paths = index_paths(segment_path)
    if any(not 0 <= o - base < _INT32 for o in offsets) or any(not 0 <= p < _INT32 for p in positions) \
            or (max_timestamp >= 0 and not 0 <= max_timestamp_batch - base < _INT32):
        remove_index(segment_path)
        return False
    data = (b"".join(_INDEX_ENTRY.pack(o - base, p) for o, p in zip(offsets, positions, strict=True)),
            _TIME_ENTRY.pack(max_timestamp, max_timestamp_batch - base) if max_timestamp >= 0 else b"")
    for path, blob in reversed(list(zip(paths, data, strict=True))):   # the time index first: an offset index
        write_fsynced(path, blob)              # left from before (a prefix of this one) never meets an older one
    return True


def remove_index(segment_path: Path) -> bool:
    """Remove a segment's index files; whether there were any."""
    removed = False
    for path in index_paths(segment_path):
        try:
            path.unlink()
            removed = True
        except FileNotFoundError:
            pass
    return removed


def read_index(segment_path: Path, base: int, size: int) -> SegmentIndex | str:
    """The segment's index files, or why they cannot be trusted (missing, a partial entry, entries not
    increasing, a position past the file's `size` bytes, the first entry not at byte 0): Kafka's sanity check
    of an index, after which the segment is verified as after an unclean stop."""
    index_path, time_path = index_paths(segment_path)
    try:
        raw = index_path.read_bytes()
        traw = time_path.read_bytes()
    except FileNotFoundError:
        return "no index file"
    if not raw or len(raw) % _INDEX_ENTRY.size or len(traw) not in (0, _TIME_ENTRY.size):
        return f"index files of {len(raw)} and {len(traw)} bytes"
    offsets, positions = array("q"), array("q")
    last_o = last_p = -1
    for rel, pos in _INDEX_ENTRY.iter_unpack(raw):
        if rel <= last_o or pos <= last_p or pos >= size:
            return f"index entry ({base + rel}, byte {pos}) out of order or past the file's {size} bytes"
        offsets.append(base + rel)
        positions.append(pos)
        last_o, last_p = rel, pos
    if positions[0] != 0:
        return "the first index entry is not at byte 0"
    ts, ts_rel = _TIME_ENTRY.unpack(traw) if traw else (-1, -1)
    if traw and (ts < 0 or ts_rel < 0):
        return f"time index entry ({ts}, {ts_rel}) invalid"
    return SegmentIndex(offsets, positions, ts, base + ts_rel if traw else -1)


def index_older_than(segment_path: Path) -> bool:
    """Were the segment's index files written before the segment file last changed? A roll's flush and a clean
    stop write them after the segment's last write, so such files describe other bytes (e.g. left by an older
    tenure next to a segment its cleaner replaced)."""
    try:
        written = min(os.stat(p).st_mtime_ns for p in index_paths(segment_path))
        return written < os.stat(segment_path).st_mtime_ns
    except FileNotFoundError:
        return True


def remove_orphans(directory: Path, entries) -> None:
    """Remove index files whose segment is gone (`entries`: the directory's paths), as Kafka's loader does."""
    logs = {p.name for p in entries if p.suffix == SUFFIX}
    for p in entries:
        if p.suffix in (INDEX, TIME_INDEX) and p.stem + SUFFIX not in logs:
            try:
                p.unlink()
            except FileNotFoundError:
                pass
            log.info("%s: removed orphaned index file %s", directory.name, p.name)
