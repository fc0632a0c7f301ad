"""Message formats v0/v1 (Produce v0-2) converted to one RecordBatch v2 on append (broker/message_format.py), as
a Kafka 2.8-3.9 broker's LogValidator converts them: keys, values and timestamps kept (v0: -1), the producer's
codec kept, no producer id; a message failing its CRC, or an empty set, refused with CORRUPT_MESSAGE (2)."""
from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from tenure.broker.message_format import is_legacy, upconvert
from tenure.storage import InvalidBatch, parse_batches

V0, V1 = b"v0" * 100, b"v1" * 100          # compressible: kafka-python sends a batch uncompressed when gzip gains nothing


def message_set(magic: int, codec: int = 0, records=((b"k0", V0, 1000), (None, V1, 1001))) -> bytes:
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (k, v, ts) in enumerate(records):
        b.append(i, timestamp=ts if magic else None, key=k, value=v)
    return bytes(b.build())


@pytest.mark.parametrize("magic,codec", [(0, 0), (1, 0), (0, 1), (1, 1)])      # none, gzip (the codecs installed)
def test_a_message_set_becomes_one_v2_batch(magic, codec):
    records = message_set(magic, codec)
    assert is_legacy(records)
    out = upconvert(records)
    [h] = parse_batches(out)
    assert not is_legacy(out) and (h.magic, h.producer_id, h.is_transactional) == (2, -1, False)
    batch = DefaultRecordBatch(out)
    assert batch.compression_type == codec
    got = [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in batch]
    stamps = (1000, 1001) if magic else (-1, -1)
    assert got == [(0, b"k0", V0, stamps[0], []), (1, None, V1, stamps[1], [])]


def test_a_corrupt_message_is_corrupt_message():
    records = bytearray(message_set(1))
    records[-1] ^= 0xFF                   # the last message's value: its CRC no longer matches
    with pytest.raises(InvalidBatch) as e:
        upconvert(bytes(records))
    assert e.value.error_code == 2


def test_an_empty_or_truncated_set_is_corrupt_message():
    for bad in (message_set(1)[:20], b"\x00" * 17):
        with pytest.raises(InvalidBatch) as e:
            upconvert(bad)
        assert e.value.error_code == 2


def v2_batch(base: int, records, codec: int = 0, transactional: bool = False) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                  producer_id=7 if transactional else -1, producer_epoch=0 if transactional else -1,
                                  base_sequence=0 if transactional else -1, batch_size=1 << 20)
    for i, (k, v, ts) in enumerate(records):
        b.append(i, timestamp=ts, key=k, value=v, headers=[("h", b"x")])
    data = bytearray(b.build())
    import struct
    struct.pack_into(">q", data, 0, base)            # the offset the log gave the batch
    return bytes(data)


def legacy_read(data: bytes) -> list[tuple]:
    from kafka.record.memory_records import MemoryRecords
    mr, out = MemoryRecords(data), []
    batch = mr.next_batch()
    while batch is not None:
        out += [(r.magic, r.offset, r.key, r.value, r.timestamp, batch.compression_type) for r in batch]
        batch = mr.next_batch()
    return out


@pytest.mark.parametrize("codec", [0, 1])
def test_down_conversion_for_fetch_v0_to_v3(codec):
    """Fetch v2-3: format v1 with timestamps; v0-1: format v0 without; offsets kept, headers dropped; an
    uncompressed batch from the fetch offset on, a compressed one whole (one wrapper)."""
    from tenure.broker.message_format import downconvert
    data = v2_batch(10, [(b"a", V0, 100), (None, V1, 101), (b"c", b"z", 102)], codec) + \
        v2_batch(13, [(b"d", V1, 103)], codec)
    got = legacy_read(downconvert(data, 1, 11))
    first = [(1, 10, b"a", V0, 100, codec)] if codec else []
    assert got == first + [(1, 11, None, V1, 101, codec), (1, 12, b"c", b"z", 102, codec),
                           (1, 13, b"d", V1, 103, codec)]
    assert [(m, o, t) for m, o, _k, _v, t, _c in legacy_read(downconvert(data, 0, 10))] == [
        (0, 10, None), (0, 11, None), (0, 12, None), (0, 13, None)]


def test_down_conversion_leaves_out_markers_and_refuses_zstd():
    import struct

    from tenure.broker.message_format import CannotDownConvert, downconvert
    from tenure.protocol.markers import control_batch
    marker = bytearray(control_batch(7, 0, True, 0, 5))
    struct.pack_into(">q", marker, 0, 1)                # the commit marker at offset 1, after the record
    data = v2_batch(0, [(b"k", b"v", 1)], transactional=True) + bytes(marker)
    assert [o for _m, o, *_ in legacy_read(downconvert(data, 1, 0))] == [0]
    zstd = bytearray(v2_batch(0, [(b"k", b"v", 1)]))
    attrs = struct.unpack_from(">h", zstd, 21)[0]
    struct.pack_into(">h", zstd, 21, attrs | 4)          # claims ZStandard: a v0/v1 reader cannot have it
    with pytest.raises(CannotDownConvert) as e:
        downconvert(bytes(zstd), 1, 0)
    assert e.value.error_code == 76
