"""Message formats v0 and v1 (KIP-32's legacy MessageSets), which Produce v0-2 carries, as a Kafka 2.8-3.9 broker
appends them: every log is message format v2 (a 3.x broker's inter-broker protocol 3.0+ forces it), so the
messages of a partition's MessageSet are converted to ONE RecordBatch v2 before they are appended (Kafka's
LogValidator, "convert and assign offsets"): the same keys, values and timestamps (a v0 message has none: -1,
NO_TIMESTAMP), no headers, no producer id, CreateTime, compressed with the codec the producer used (a topic whose
compression.type is producer, tenure's only one). A message whose CRC does not match is refused, as Kafka refuses
it, with CORRUPT_MESSAGE (2). A v2 batch sent in an old Produce version is appended as it is (Kafka does not check
the magic of an old Produce request's records).

The other way, for Fetch v0-3 (whose clients read only formats v0 - Fetch v0-1 - and v1 - Fetch v2-3), a 2.8-3.9
broker converts what it reads down (Kafka's RecordsUtil.downConvert, "down-conversion"): each RecordBatch v2 becomes
messages of the older format with their offsets, keys, values and (v1) timestamps - headers dropped -, a compressed
batch one compressed wrapper message (v1: inner offsets relative, the wrapper's the last absolute one; v0: all
absolute) with its codec, an uncompressed one a message per record from the fetch offset on; control batches
(transaction markers) are left out, and a transaction's records are delivered whatever became of it (Fetch v0-3
reads uncommitted). A ZStandard batch cannot be read in the old formats: Kafka answers such a fetch
UNSUPPORTED_COMPRESSION_TYPE (76), as `downconvert` says by raising.

Reading and writing both formats is kafka-python's record library (`kafka.record`); nothing here parses bytes but
the magic byte that says which format a MessageSet is."""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from kafka.record.default_records import DefaultRecordBatchBuilder

from tenure.deferred import deferred
from tenure.protocol.errors import ErrorCode
from tenure.storage import InvalidBatch

if TYPE_CHECKING:
    from kafka.record import legacy_records, memory_records
else:   # kafka-python's reader of MessageSets and its writer of the old formats: at the first old Produce or Fetch
    legacy_records = deferred("kafka.record.legacy_records")
    memory_records = deferred("kafka.record.memory_records")

MAGIC_OFFSET = 16              # offset (8), length (4), crc (4): then the magic byte, in every format
NO_TIMESTAMP = -1


def is_legacy(records: bytes) -> bool:
    """Whether these records are a MessageSet of message format v0 or v1 (magic 0 or 1)."""
    return len(records) > MAGIC_OFFSET and records[MAGIC_OFFSET] in (0, 1)


def upconvert(records: bytes) -> bytes:
    """The messages of a v0/v1 MessageSet as one RecordBatch v2 (offsets from 0: the append assigns the real
    ones); InvalidBatch for a corrupt message (CORRUPT_MESSAGE), an empty or truncated set (CORRUPT_MESSAGE, as
    Kafka's validator finds no message), or a v2 batch mixed into it (INVALID_RECORD)."""
    mr = memory_records.MemoryRecords(bytes(records))
    builder = None
    count = 0
    try:
        batch = mr.next_batch()
        while batch is not None:
            if batch.magic not in (0, 1):
                raise InvalidBatch("a message set of format v0/v1 holds a batch of format v2",
                                   ErrorCode.INVALID_RECORD)
            if builder is None:
                builder = DefaultRecordBatchBuilder(magic=2, compression_type=batch.compression_type,
                                                    is_transactional=False, producer_id=-1, producer_epoch=-1,
                                                    base_sequence=-1, batch_size=len(records) * 2 + 1024)
            if not batch.validate_crc():
                raise InvalidBatch(f"a message of format v{batch.magic} fails its CRC check",
                                   ErrorCode.CORRUPT_MESSAGE)
            for message in batch:
                if not message.validate_crc():
                    raise InvalidBatch(f"a message of format v{message.magic} fails its CRC check",
                                       ErrorCode.CORRUPT_MESSAGE)
                stamp = message.timestamp if message.timestamp is not None else NO_TIMESTAMP
                builder.append(count, timestamp=stamp, key=message.key, value=message.value, headers=[])
                count += 1
            batch = mr.next_batch()
    except InvalidBatch:
        raise
    except Exception as exc:        # a truncated message, a codec that does not decode
        raise InvalidBatch(f"the message set does not decode: {exc}", ErrorCode.CORRUPT_MESSAGE) from exc
    if builder is None or count == 0:
        raise InvalidBatch("the message set holds no message", ErrorCode.CORRUPT_MESSAGE)
    return bytes(builder.build())


ZSTD = 4


class CannotDownConvert(Exception):
    """Records a Fetch v0-3 client cannot read (ZStandard-compressed): UNSUPPORTED_COMPRESSION_TYPE (76)."""
    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def downconvert(records: bytes, magic: int, fetch_offset: int) -> bytes:
    """RecordBatches v2 (a read of the log) as a MessageSet of format `magic` (0 or 1): see the module's docs."""
    out = bytearray()
    mr = memory_records.MemoryRecords(bytes(records))
    batch = mr.next_batch()
    while batch is not None:
        if batch.is_control_batch:
            batch = mr.next_batch()
            continue
        codec = batch.compression_type
        if codec == ZSTD:
            raise CannotDownConvert("a ZStandard batch cannot be read as message format v0/v1")
        kept = [r for r in batch if codec or r.offset >= fetch_offset]
        if kept:
            out += _legacy(kept, magic, codec)
        batch = mr.next_batch()
    return bytes(out)


def _legacy(records: list, magic: int, codec: int) -> bytes:
    builder = legacy_records.LegacyRecordBatchBuilder(magic=magic, compression_type=codec,
                                       batch_size=sum(len(r.value or b"") + len(r.key or b"") + 64 for r in records))
    relative = codec and magic == 1
    for i, r in enumerate(records):
        builder.append(i if relative else r.offset, timestamp=r.timestamp if magic else None, key=r.key,
                       value=r.value)
    data = bytearray(builder.build())
    if codec:         # the wrapper message carries the offset of its last record (the builder leaves it 0)
        struct.pack_into(">q", data, 0, records[-1].offset)
    return bytes(data)
