"""RecordBatch v2 (magic 2) headers: parse, validate the CRC-32C, restamp the base offset.

The record layout constants come from kafka-python's `DefaultRecordBase` (one codec engine); CRC-32C
from the `crc32c` package. The CRC covers attributes..end, so restamping the base offset and the
partition leader epoch (as a broker does on append) leaves it valid.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c
from kafka.record.default_records import DefaultRecordBase

HEADER = DefaultRecordBase.HEADER_STRUCT          # >qiibIhiqqqhii, 61 bytes
HEADER_SIZE = HEADER.size
LOG_OVERHEAD = DefaultRecordBase.AFTER_LEN_OFFSET  # baseOffset + batchLength = 12
CRC_OFFSET = DefaultRecordBase.CRC_OFFSET
ATTRIBUTES_OFFSET = DefaultRecordBase.ATTRIBUTES_OFFSET
MAGIC_OFFSET = 16
_BASE_AND_LEN = struct.Struct(">qi")
_EPOCH = struct.Struct(">i")
_BASE = struct.Struct(">q")

CONTROL_FLAG = DefaultRecordBase.CONTROL_MASK
TRANSACTIONAL_FLAG = DefaultRecordBase.TRANSACTIONAL_MASK
NO_PRODUCER_ID = -1


class InvalidBatch(ValueError):
    """Bytes that are not a well-formed RecordBatch v2; `error_code` is the Kafka error to answer."""

    def __init__(self, message: str, error_code: int = 2) -> None:  # CORRUPT_MESSAGE
        super().__init__(message)
        self.error_code = error_code


class BatchHeader(NamedTuple):
    """A batch's header fields (`HEADER`'s order) after its byte `position`. A named tuple, not a frozen
    dataclass: recovery, the coordinator's load and every append make one per batch, and a tuple is made
    in C (a frozen dataclass's `__init__` sets each of the 14 fields through `object.__setattr__`, ~4x the
    cost)."""
    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_header(buf, position: int = 0) -> BatchHeader:
    if len(buf) - position < HEADER_SIZE:
        raise InvalidBatch(f"truncated batch header at byte {position}")
    magic = buf[position + MAGIC_OFFSET]
    if magic != 2:
        raise InvalidBatch(f"batch at byte {position} has magic {magic}; only RecordBatch v2 is served",
                           error_code=43)  # UNSUPPORTED_FOR_MESSAGE_FORMAT
    fields = HEADER.unpack_from(buf, position)
    return BatchHeader(position, *fields)


def parse_batches(buf, verify_crc: bool = True) -> list[BatchHeader]:
    """Split a concatenation of batches into headers; raise InvalidBatch on any defect."""
    view = memoryview(buf)
    headers: list[BatchHeader] = []
    pos = 0
    while pos < len(view):
        h = read_header(view, pos)
        if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise InvalidBatch(f"batch at byte {pos} declares length {h.batch_length}, below a header")
        end = pos + h.size
        if end > len(view):
            raise InvalidBatch(f"batch at byte {pos} declares {h.size} bytes, only {len(view) - pos} present")
        if h.last_offset_delta < 0 or h.records_count < 0:
            raise InvalidBatch(f"batch at byte {pos} has negative counts")
        if verify_crc:
            actual = crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET:end])
            if actual != h.crc:
                raise InvalidBatch(f"batch at byte {pos}: CRC-32C {actual:#010x} != stored {h.crc:#010x}")
        headers.append(h)
        pos = end
    return headers


def restamp(batch: bytearray, position: int, base_offset: int, leader_epoch: int) -> None:
    """Assign the broker's base offset and leader epoch in place (outside the CRC's coverage)."""
    _BASE.pack_into(batch, position, base_offset)
    _EPOCH.pack_into(batch, position + LOG_OVERHEAD, leader_epoch)


_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")
MAX_TIMESTAMP_OFFSET = ATTRIBUTES_OFFSET + 2 + 4 + 8       # after attributes, lastOffsetDelta, baseTimestamp
LOG_APPEND_TIME_FLAG = DefaultRecordBase.TIMESTAMP_TYPE_MASK


def stamp_log_append_time(batch: bytearray, h: BatchHeader, now_ms: int) -> None:
    """Mark the batch at h.position as LogAppendTime with `now_ms` as its max timestamp (every record's timestamp
    to a reader), as a broker does for a topic with message.timestamp.type=LogAppendTime; the CRC is computed
    again (it covers both)."""
    pos = h.position
    _ATTRIBUTES.pack_into(batch, pos + ATTRIBUTES_OFFSET, h.attributes | LOG_APPEND_TIME_FLAG)
    _TIMESTAMP.pack_into(batch, pos + MAX_TIMESTAMP_OFFSET, now_ms)
    _CRC.pack_into(batch, pos + CRC_OFFSET, crc32c.crc32c(memoryview(batch)[pos + ATTRIBUTES_OFFSET:pos + h.size]))


def first_record_at_or_after(batch: bytes, timestamp: int, min_offset: int = 0) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record in `batch` at offset >= `min_offset` whose timestamp >=
    `timestamp`.

    Uses kafka-python's record reader (which decompresses where the codec is installed); returns
    None if no record qualifies.
    """
    from kafka.record.default_records import DefaultRecordBatch

    for rec in DefaultRecordBatch(bytes(batch)):
        if rec.offset >= min_offset and rec.timestamp >= timestamp:
            return rec.offset, rec.timestamp
    return None


def first_record_with_max_timestamp(batch: bytes, header: BatchHeader) -> tuple[int, int]:
    """ListOffsets MAX_TIMESTAMP within the batch holding it: (offset, timestamp) of its first record whose
    timestamp is the batch's max timestamp (KIP-734: the record's offset, not the batch's last), or the
    batch's last offset if its records cannot be read (a codec not installed)."""
    try:
        found = first_record_at_or_after(batch, header.max_timestamp)
    except Exception:
        found = None
    return found or (header.last_offset, header.max_timestamp)


def offset_at_or_after(batch: bytes, header: BatchHeader, timestamp: int,
                       min_offset: int = 0) -> tuple[int, int] | None:
    """ListOffsets by timestamp within a batch whose max timestamp >= `timestamp`: the first record at or
    after it from `min_offset` (the log start offset) on - None if only records below that qualify - or the
    batch itself if its records cannot be read (a codec not installed)."""
    try:
        return first_record_at_or_after(batch, timestamp, min_offset)
    except Exception:
        return header.base_offset, header.max_timestamp
