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
