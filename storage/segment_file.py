"""One segment file of a partition log (`Segment`): its append fd, its next offset, a sparse in-memory
offset index (one entry every `index_interval_bytes`, as Kafka's .index), its timestamps, and the holds
that keep its fd open for an fsync claimed on another thread. `SegmentLog` (storage/segments.py) holds
the segments of one partition."""
from __future__ import annotations

import bisect
import os
import threading
import time
from array import array
from collections.abc import Iterator
from pathlib import Path

from .batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, read_header


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
        self.sealed = False                  # fsynced whole with its index files (a roll's flush, or trusted)
        self.claimed = False                 # in a roll flush's job not run yet
        self._holds = 0                      # claimed fsyncs still to run on this fd (see `hold`)
        self._close_pending = False
        self._fd_lock = threading.Lock()

    def add(self, h: BatchHeader, position: int) -> None:
        # (once per batch at open: the header's fields read once, no properties)
        size = LOG_OVERHEAD + h.batch_length
        if self._since_index >= self.index_interval:
            self.index_offsets.append(h.base_offset)
            self.index_positions.append(position)
            self._since_index = 0
        self._since_index += size
        self.size = position + size
        self.next_offset = h.base_offset + h.last_offset_delta + 1
        self.batches += 1
        if h.max_timestamp > self.max_timestamp:         # the first batch holding the highest timestamp
            self.max_timestamp = h.max_timestamp
            self.max_timestamp_batch = h.base_offset

    def load_index(self, offsets, positions, max_timestamp: int, max_timestamp_batch: int) -> None:
        """Take a trusted index (storage/cleanshut.py) in place of the batches up to its last entry, which
        must then be `add`ed again with every batch after it (that finds the size and the next offset).
        `batches` then counts only those."""
        self.index_offsets = array("q", offsets[:-1])
        self.index_positions = array("q", positions[:-1])
        self.size = positions[-1]
        self.next_offset = offsets[-1]
        self._since_index = self.index_interval           # the last entry's batch is indexed again
        self.max_timestamp = max_timestamp
        self.max_timestamp_batch = max_timestamp_batch

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
