"""The partition log interface and its in-memory implementation.

Callers (the broker's Produce/Fetch/ListOffsets handlers, later the coordinator) only use `Log`:
append validated batches and get their base offset; read whole batches from an offset; ask for the
start/end offsets or the first offset at a timestamp. The on-disk segment log implements the same
interface, so choosing disk or memory is a constructor argument, not a change to callers.
"""
from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from typing import Protocol

from .batch import BatchHeader, first_record_with_max_timestamp, offset_at_or_after, parse_batches, read_header, restamp


class Log(Protocol):
    """Everything callers use of a partition log; `MemoryLog` and `segments.SegmentLog` implement all of it."""

    name: str                    # "<topic>-<partition>", for messages

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def size_bytes(self) -> int:
        """Bytes the log's batches take (DescribeLogDirs, metrics)."""
        ...

    def append(self, records: bytes, leader_epoch: int = 0) -> tuple[int, list[BatchHeader]]:
        """Append one or more already-validated batches; returns (base offset, stamped headers)."""
        ...

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches starting with the one holding `offset`; at least one batch if any exists."""
        ...

    def batches(self, start_offset: int = 0) -> Iterator[tuple[BatchHeader, bytes]]:
        """Every batch holding an offset from `start_offset` on, in offset order, as (header, bytes)."""
        ...

    def locate(self, offset: int) -> str:
        """Where the batch holding `offset` is, for an error message naming it."""
        ...

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first batch whose max timestamp >= `timestamp`, or None."""
        ...

    def max_timestamp(self) -> tuple[int, int] | None: ...

    def segment_spans(self) -> list[tuple[int, int, int, int]]:
        """(base offset, next offset, bytes, max timestamp (-1: none)) of each segment, oldest first: what
        retention decides on (a log in memory is one segment)."""
        ...

    def advance_start(self, offset: int) -> int:
        """DeleteRecords: make `offset` (<= the log end offset) the log start offset if it is higher; records
        below it are no longer readable (whole batches below it are dropped). Returns the log start offset."""
        ...

    def take_sync(self) -> Callable[[], None]:
        """Claim what the next fsync must cover (on the appending thread); returns the blocking call that
        makes it durable (it may run on a worker thread). A log in memory has nothing to make durable."""
        ...

    def flush(self) -> None:
        """Make everything appended so far durable (`take_sync()()`)."""
        ...

    def close(self) -> None: ...

    def delete(self) -> None:
        """Close the log and remove what it stored (topic deletion, an undone creation)."""
        ...


def _nothing_to_sync() -> None:
    pass


class MemoryLog:
    """A log kept as a list of stamped batches, indexed by their last offsets."""

    def __init__(self, name: str = "log") -> None:
        self.name = name
        self._batches: list[bytes] = []
        self._headers: list[BatchHeader] = []
        self._last_offsets: list[int] = []
        self._start = 0
        self._end = 0
        self.size_bytes = 0

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._end

    def append(self, records: bytes, leader_epoch: int = 0) -> tuple[int, list[BatchHeader]]:
        buf = bytearray(records)
        base = self._end
        stamped: list[BatchHeader] = []
        for h in parse_batches(buf, verify_crc=False):
            restamp(buf, h.position, self._end, leader_epoch)
            one = bytes(buf[h.position:h.position + h.size])
            sh = read_header(one, 0)
            self._batches.append(one)
            self._headers.append(sh)
            self._last_offsets.append(sh.last_offset)
            self._end = sh.next_offset
            self.size_bytes += len(one)
            stamped.append(sh)
        return base, stamped

    def read(self, offset: int, max_bytes: int) -> bytes:
        i = bisect.bisect_left(self._last_offsets, offset)
        out: list[bytes] = []
        total = 0
        while i < len(self._batches):
            b = self._batches[i]
            if out and total + len(b) > max_bytes:
                break
            out.append(b)
            total += len(b)
            i += 1
        return b"".join(out)

    def batches(self, start_offset: int = 0) -> Iterator[tuple[BatchHeader, bytes]]:
        """(header, bytes) of each batch holding an offset from `start_offset` on; each batch is its own
        buffer, so a header's position is 0."""
        i = bisect.bisect_left(self._last_offsets, start_offset)
        yield from zip(self._headers[i:], self._batches[i:], strict=True)

    def locate(self, offset: int) -> str:
        return f"{self.name} (offset {offset}, in memory)"

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        for h, b in zip(self._headers, self._batches, strict=True):
            if h.max_timestamp >= timestamp:
                found = offset_at_or_after(b, h, timestamp, self._start)
                if found is not None:
                    return found
        return None

    def segment_spans(self) -> list[tuple[int, int, int, int]]:
        if not self._headers:
            return []
        return [(self._headers[0].base_offset, self._end, self.size_bytes, max(h.max_timestamp for h in self._headers))]

    def advance_start(self, offset: int) -> int:
        if offset > self._start:
            self._start = offset
            drop = bisect.bisect_left(self._last_offsets, offset)
            self.size_bytes -= sum(len(b) for b in self._batches[:drop])
            del self._batches[:drop], self._headers[:drop], self._last_offsets[:drop]
        return self._start

    def max_timestamp(self) -> tuple[int, int] | None:
        best = None                              # the first batch holding the highest timestamp
        for h, b in zip(self._headers, self._batches, strict=True):
            if best is None or h.max_timestamp > best[0].max_timestamp:
                best = (h, b)
        return None if best is None else first_record_with_max_timestamp(best[1], best[0])

    def take_sync(self) -> Callable[[], None]:
        return _nothing_to_sync

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def delete(self) -> None:
        self.advance_start(self._end)
