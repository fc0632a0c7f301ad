"""The one reader of segment files: batch by batch from a byte position, each batch checked.

A segment file is a plain concatenation of RecordBatch v2 batches (see storage/segments.py). Recovery at
open (`segments.scan_segment`), a partition log's `batches` (and so the coordinator's load), the log
cleaner and `tenure log dump/verify` read segment files through `SegmentReader`:

- it starts at a byte position where a batch starts (`start`), or, for a byte-range split whose start
  may fall inside a batch, at the first batch starting at or after `start`, found by walking the batch
  lengths from a known batch position (`align_from`, usually 0);
- it reads the batches that *start* before `stop` (a batch straddling `stop` is read whole), so
  consecutive ranges [0, a), [a, b), [b, end) read every batch of a file exactly once;
- each batch is checked by `check_batch` (length, magic 2, CRC-32C, counts, and with `expect_offset`
  base offsets moving forward - continuing exactly from `exact_from` on, as recovery checks them) and
  handed out as a `Batch` (header with its byte position in the file, the batch's bytes); one that fails
  is a `BadBatch` (where, which offset, why, torn or not);
- after a bad batch it stops, unless `resync` and the bad batch's own length leads to a sound batch (the
  damage is confined to that batch): then it goes on from there;
- a batch the file ends inside (torn) is re-read a few times while the file grows (a live writer appending);
  with `follow` it is not reported at all: the reader stops before it, and iterating again later resumes
  at that batch, so a tail reader returns what is complete and picks up what is appended.

The records of a sound batch are read by `batch_records`: kafka-python's record reader (the one codec
engine), or - only for an uncompressed data batch, and only where aiokafka is installed - aiokafka's record
reader written in C (`aiokafka.record._crecords`), an optional accelerator of the coordinator's load (a
1M-record `__consumer_offsets` is read ~10x faster) that gives the same records: offset, key, value and headers
(tests/storage/test_reader.py compares the two over torn, compacted and transactional logs). Compressed
and control batches are always read by kafka-python.

Files are read in chunks through one buffer (a batch larger than a chunk is read whole), so a large
segment costs a few system calls per megabyte, and only the batch being handed out is copied.
"""
from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

import crc32c
from kafka.record.default_records import DefaultRecordBatch

from .batch import ATTRIBUTES_OFFSET, CONTROL_FLAG, HEADER, HEADER_SIZE, LOG_OVERHEAD, BatchHeader

log = logging.getLogger("tenure.storage")

NO_MIN_OFFSET = -(1 << 63)
TORN_REREADS = 4                    # how often a torn batch is re-read while the file grows
CHUNK = 1 << 20
_BASE_AND_LEN = struct.Struct(">qi")
_MIN_LENGTH = HEADER_SIZE - LOG_OVERHEAD     # the smallest batch length a batch header fits in
_PYTHON_ONLY = CONTROL_FLAG | DefaultRecordBatch.CODEC_MASK   # batches only kafka-python's reader reads


def check_batch(buf, pos: int, end: int, expect_min_offset: int, exact: bool = False,
                at: int | None = None) -> tuple[BatchHeader | None, str | None]:
    """Verify the batch at `pos` of `buf[:end]`: (header, None) if sound, else (header-or-None, reason).

    Its base offset must be at least `expect_min_offset`, or exactly it with `exact` (see
    `segments.scan_segment`). The header's `position` is `at` if given (the batch's place in its file
    when `buf` holds only part of it), else `pos`."""
    if end - pos < LOG_OVERHEAD:
        return None, f"torn batch: {end - pos} bytes left, a batch needs at least {HEADER_SIZE}"
    base, length = _BASE_AND_LEN.unpack_from(buf, pos)
    if length < _MIN_LENGTH:
        return None, f"batch length {length} is below a batch header"
    if pos + LOG_OVERHEAD + length > end:
        return None, f"torn batch: declares {LOG_OVERHEAD + length} bytes, {end - pos} present"
    h = BatchHeader(pos if at is None else at, *HEADER.unpack_from(buf, pos))
    if h.magic != 2:              # the length is still read: a caller can look past this batch
        return h, f"magic {h.magic}, expected 2"
    actual = crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:pos + h.size])
    if actual != h.crc:
        return h, f"CRC-32C {actual:#010x} != stored {h.crc:#010x}"
    if h.last_offset_delta < 0 or h.records_count < 0:
        return h, "negative record counts"
    if exact and h.base_offset != expect_min_offset:
        return h, f"base offset {h.base_offset} does not continue the previous batch (expected {expect_min_offset})"
    if h.base_offset < expect_min_offset:
        return h, f"base offset {h.base_offset} goes back (expected >= {expect_min_offset})"
    return h, None


class Batch(NamedTuple):
    """A sound batch: its header (`header.position` is its byte position in the file) and its bytes."""
    header: BatchHeader
    data: bytes

    @property
    def position(self) -> int:
        return self.header.position


class BadBatch(NamedTuple):
    """A batch that failed `check_batch`.

    `offset` is its base offset if its header could be read; `torn`: the file ends inside it (a tail still
    being written, or cut by a crash - or a damaged length pointing past the end); `resumes`: with
    `resync`, where the sound batch after it starts (None: the reader stops here)."""
    position: int
    offset: int | None
    reason: str
    torn: bool
    header: BatchHeader | None = None
    resumes: int | None = None


class SegmentReader:
    """The batches of one segment file, in file order (see the module docstring).

    `source` is a path (opened read-only here, closed by `close` or the `with` block) or an open file
    descriptor (borrowed: never closed here). Iterating yields `Batch` and `BadBatch` items from
    `position` on; `position` then holds where the next read starts, so iterating again continues (with
    `follow`, after the batches appended meanwhile)."""

    def __init__(self, source: str | os.PathLike | int, start: int = 0, stop: int | None = None, *,
                 align_from: int | None = None, resync: bool = False, expect_offset: int | None = None,
                 exact_from: int | None = None, follow: bool = False, rereads: int = TORN_REREADS,
                 chunk: int = CHUNK) -> None:
        if isinstance(source, int):
            self.fd, self._owned, self.path = source, False, None
        else:
            self.path = os.fspath(source)
            self.fd, self._owned = os.open(self.path, os.O_RDONLY), True
        self.stop = stop
        self.resync = resync
        self.expect = NO_MIN_OFFSET if expect_offset is None else expect_offset   # the next base offset's floor
        self._forward = expect_offset is not None
        # from this expected offset on, a base offset must continue the previous batch exactly (below it -
        # where the log cleaner dropped whole batches - it only has to move forward)
        self.exact_from = 1 << 63 if exact_from is None or expect_offset is None else exact_from
        self.follow = follow
        self.rereads = max(rereads, 1)
        self.chunk = chunk
        self.size = 0                          # the file's size as last seen
        self.done = False                      # stopped for good: damage it cannot read past
        self._buf = b""
        self._buf_pos = 0
        self.position = start if align_from is None else self._align(align_from, start)

    # ---------------------------------------------------------------- the file
    def close(self) -> None:
        if self._owned and self.fd >= 0:
            os.close(self.fd)
        self.fd = -1
        self._buf = b""

    def __enter__(self) -> SegmentReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _stat(self) -> int:
        self.size = os.fstat(self.fd).st_size
        return self.size

    def _window(self, pos: int, need: int) -> tuple[bytes, int, int]:
        """(buffer, offset of `pos` in it, bytes of [pos, pos + need) the file holds now)."""
        off = pos - self._buf_pos
        if off < 0 or off + need > len(self._buf):
            self._buf = os.pread(self.fd, max(need, self.chunk), pos)
            self._buf_pos, off = pos, 0
        return self._buf, off, min(need, len(self._buf) - off)

    def _length_at(self, pos: int) -> int | None:
        """The batch length field at `pos`, or None if the file ends before it."""
        buf, off, got = self._window(pos, LOG_OVERHEAD)
        return _BASE_AND_LEN.unpack_from(buf, off)[1] if got == LOG_OVERHEAD else None

    def _align(self, origin: int, start: int) -> int:
        """The first batch position at or after `start`, walking batch lengths from the batch at `origin`.
        Where the lengths stop making sense (a damaged length, or the end of the file) before `start`,
        there is no batch to start from: the range is empty (the reader covering that place reports it)."""
        self._stat()
        pos = origin
        while pos < start:
            length = self._length_at(pos)
            if length is None or length < _MIN_LENGTH or pos + LOG_OVERHEAD + length > self.size:
                self.done = True
                return start
            pos += LOG_OVERHEAD + length
        return pos

    # ---------------------------------------------------------------- batches
    def _check(self, pos: int, expect: int,
               exact: bool = False) -> tuple[BatchHeader | None, str | None, bytes | None, bool]:
        """(header, reason, the batch's bytes if sound, torn) of the batch at `pos`."""
        length = self._length_at(pos)
        need = LOG_OVERHEAD + max(length, 0) if length is not None else LOG_OVERHEAD
        if pos + need > self.size:
            self._stat()                        # grown since the last look?
        # never more than the file holds: a damaged length may declare up to 2 GiB
        buf, off, got = self._window(pos, min(need, max(self.size - pos, LOG_OVERHEAD)))
        h, reason = check_batch(buf, off, off + got, expect, exact, at=pos)
        torn = got < need and (length is None or length >= _MIN_LENGTH)   # a too-short length is damage
        return h, reason, (bytes(buf[off:off + need]) if reason is None else None), torn

    def _check_growing(self, pos: int, expect: int, exact: bool):
        """`_check`, re-reading a torn batch while the file grows (a live writer appending)."""
        for _ in range(self.rereads):
            h, reason, data, torn = self._check(pos, expect, exact)
            if not torn or self.follow:
                break
            before = self.size
            if self._stat() <= before:
                break
        return h, reason, data, torn

    def __iter__(self) -> Iterator[Batch | BadBatch]:
        if self.done:
            return
        self._stat()
        # the named tuples are made by tuple.__new__ directly: `_make` and a NamedTuple's `__new__` are Python
        # functions, a frame per batch
        header, crc, new = HEADER.unpack_from, crc32c.crc32c, tuple.__new__
        while True:
            pos = self.position
            limit = self.size if self.stop is None else self.stop
            if pos >= limit:
                if self.stop is None and self.follow and self._stat() > pos:
                    continue
                return
            # the common case: sound batches lying wholly in the buffer, one check and one copy each. The
            # checks are check_batch's, inlined (this loop runs once per batch of every log at open and of
            # every coordinator load); a batch failing any of them goes to the path below, which names why
            buf, off = self._buf, pos - self._buf_pos
            n, expect, exact_from, forward = len(buf), self.expect, self.exact_from, self._forward
            view = memoryview(buf)
            while 0 <= off and off + HEADER_SIZE <= n and pos < limit:
                f = header(buf, off)      # base offset, length, epoch, magic, crc, attributes, last delta, ...
                end = off + LOG_OVERHEAD + f[1]
                if f[1] < _MIN_LENGTH or end > n or f[3] != 2 or f[6] < 0 or f[12] < 0 \
                        or crc(view[off + ATTRIBUTES_OFFSET:end]) != f[4] \
                        or f[0] < expect or (expect >= exact_from and f[0] != expect):
                    break
                if forward:
                    self.expect = expect = f[0] + f[6] + 1
                h = new(BatchHeader, (pos, *f))
                self.position = pos = pos + end - off
                yield new(Batch, (h, buf[off:end]))
                off = end
            del view
            if pos >= limit:
                continue
            h, reason, data, torn = self._check_growing(pos, self.expect, self.expect >= self.exact_from)
            if reason is None:
                if self._forward:
                    self.expect = h.next_offset
                self.position = pos + h.size
                yield Batch(h, data)
                continue
            if torn and self.follow:
                return                          # not complete yet: resume here next time
            resumes = None
            if self.resync and h is not None and not torn:
                nxt = pos + h.size
                if self._check(nxt, NO_MIN_OFFSET)[1] is None:
                    resumes = nxt
            yield BadBatch(pos, None if h is None else h.base_offset, reason, torn, h, resumes)
            if resumes is None:
                self.done = True
                return
            self.position = resumes

    @property
    def pending(self) -> int:
        """Bytes after `position` that are not (yet) a complete batch, as of the last look at the file."""
        return max(self.size - self.position, 0) if not self.done else 0


def read_range(path: str | os.PathLike, start: int, stop: int | None, **options) -> SegmentReader:
    """A reader of the batches starting in [start, stop) of a segment file, wherever `start` falls (a
    byte-range split: consecutive ranges read every batch once)."""
    return SegmentReader(path, start, stop, align_from=0, **options)


# the records of a batch: (name, reader) by `set_record_reader`; None: not chosen yet (at the first batch)
_reader: tuple[str, Callable[[object], Iterator]] | None = None
RECORD_READERS = ("c", "kafka-python")


def _c_reader() -> Callable[[object], Iterator] | None:
    """aiokafka's C record batch reader, if aiokafka is installed with its compiled extension (imported at the
    first batch a load reads, not at start-up: it pulls in aiokafka's client too)."""
    try:
        from aiokafka.record._crecords.default_records import DefaultRecordBatch as CRecordBatch
    except ImportError:
        return None
    except Exception as exc:                 # installed but broken: say so once, read with kafka-python
        log.warning("aiokafka's C record reader cannot be imported (%s: %s): kafka-python's reader reads the "
                    "records", type(exc).__name__, exc)
        return None
    return CRecordBatch


def set_record_reader(name: str | None) -> str:
    """Choose who reads the records of uncompressed data batches: "c" (aiokafka's, if it is installed; else
    kafka-python's), "kafka-python", or None (the default: "c" where it can). Returns the one in use."""
    global _reader
    if name is not None and name not in RECORD_READERS:
        raise ValueError(f"record reader {name!r}: one of {', '.join(RECORD_READERS)}")
    fast = _c_reader() if name != "kafka-python" else None
    _reader = ("c", fast) if fast is not None else ("kafka-python", DefaultRecordBatch)
    return _reader[0]


def record_reader() -> str:
    """The record reader in use ("c" or "kafka-python"), choosing the default at the first call."""
    return _reader[0] if _reader is not None else set_record_reader(None)


def batch_records(h: BatchHeader, data) -> list:
    """The records of one sound batch (header `h`, bytes `data`), each with `offset`, `key`, `value` and
    `headers`: all of them, or an exception (a record that cannot be read makes the whole batch unreadable)."""
    if h.attributes & _PYTHON_ONLY:                  # compressed or a control batch: kafka-python's reader
        return list(DefaultRecordBatch(data))
    reader = _reader[1] if _reader is not None else _pick()
    return list(reader(data))


def _pick() -> Callable[[object], Iterator]:
    set_record_reader(None)
    assert _reader is not None
    return _reader[1]
