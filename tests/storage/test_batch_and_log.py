
import pytest

from tenure.storage import InvalidBatch, MemoryLog, parse_batches
from tests.support.wire import build_batch


def test_parse_batches_reads_headers_and_verifies_crc():
    a = build_batch([(b"k1", b"v1"), (b"k2", b"v2")])
    b = build_batch([(None, b"v3")], producer_id=7, producer_epoch=0, base_sequence=0)
    hs = parse_batches(a + b)
    assert [(h.position, h.records_count, h.last_offset_delta) for h in hs] == [(0, 2, 1), (len(a), 1, 0)]
    assert hs[1].producer_id == 7 and hs[1].last_sequence == 0


def test_crc_mismatch_truncation_and_magic_are_rejected():
    a = bytearray(build_batch([(b"k", b"v")]))
    a[-1] ^= 0xFF
    with pytest.raises(InvalidBatch, match="CRC"):
        parse_batches(a)
    with pytest.raises(InvalidBatch, match="declares"):
        parse_batches(build_batch([(b"k", b"v")])[:-3])
    with pytest.raises(InvalidBatch, match="truncated"):
        parse_batches(b"\x00" * 20)
    old = bytearray(build_batch([(b"k", b"v")]))
    old[16] = 1
    with pytest.raises(InvalidBatch) as exc:
        parse_batches(old)
    assert exc.value.error_code == 43


def test_memory_log_assigns_offsets_and_keeps_crc_valid():
    log = MemoryLog()
    base0, _ = log.append(build_batch([(b"a", b"1"), (b"b", b"2")]))
    base1, _ = log.append(build_batch([(b"c", b"3")]))
    assert (base0, base1, log.log_start_offset, log.log_end_offset) == (0, 2, 0, 3)
    data = log.read(0, 1 << 20)
    hs = parse_batches(data)  # CRCs still valid after the broker restamped base offsets
    assert [h.base_offset for h in hs] == [0, 2]
    # a read from the middle of a batch returns that whole batch
    assert [h.base_offset for h in parse_batches(log.read(1, 1 << 20))] == [0, 2]
    assert [h.base_offset for h in parse_batches(log.read(2, 1 << 20))] == [2]
    assert log.read(3, 1 << 20) == b""
    # max_bytes below one batch still returns one batch (progress), then stops
    assert len(parse_batches(log.read(0, 1))) == 1


def test_offset_for_timestamp_is_record_exact():
    log = MemoryLog()
    log.append(build_batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], base_timestamp=1000))
    log.append(build_batch([(b"d", b"4")], base_timestamp=5000))
    assert log.offset_for_timestamp(1001) == (1, 1001)
    assert log.offset_for_timestamp(1003) == (3, 5000)
    assert log.offset_for_timestamp(9999) is None
    assert log.max_timestamp() == (3, 5000)


def _stamped(timestamps: list[int]) -> bytes:
    """One batch whose records carry these timestamps, in this order (not necessarily increasing)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=2**30)
    for i, ts in enumerate(timestamps):
        b.append(i, timestamp=ts, key=b"k%d" % i, value=b"v", headers=[])
    return bytes(b.build())


@pytest.mark.parametrize("kind", ["memory", "segments"])
def test_max_timestamp_is_the_offset_of_the_record_holding_it(tmp_path, kind):
    """ListOffsets MAX_TIMESTAMP (KIP-734): the offset of the first record with the highest timestamp,
    even in the middle of a batch and with the same timestamp again later - not the batch's last offset."""
    from tenure.storage.segments import LogConfig, SegmentLog
    log = MemoryLog() if kind == "memory" else SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=300))
    try:
        assert log.max_timestamp() is None
        log.append(_stamped([1000, 1001, 1002]))            # offsets 0-2
        log.append(_stamped([1500, 9000, 2000, 9000]))      # offsets 3-6: the max at 4 (and again at 6)
        log.append(_stamped([3000]))                        # offset 7
        log.append(_stamped([9000]))                        # offset 8: the same max, later
        assert log.max_timestamp() == (4, 9000)
        if kind == "segments":
            assert len(log.segments) > 1                    # the max lives in an older segment
    finally:
        log.close()


def test_memory_log_advance_start_drops_whole_batches_below_it():
    from tenure.storage import MemoryLog
    from tests.support.wire import build_batch
    log = MemoryLog()
    for _ in range(3):
        log.append(build_batch([(b"k", b"v")] * 2))                   # offsets 0-1, 2-3, 4-5
    assert log.advance_start(3) == 3
    assert log.log_start_offset == 3 and log.log_end_offset == 6
    assert log.read(3, 1 << 20)[:8] == (2).to_bytes(8, "big")           # the batch holding 3 starts at 2
    assert log.advance_start(1) == 3                                     # never lowered
    assert log.advance_start(6) == 6 and log.read(6, 1 << 20) == b""
    assert log.size_bytes == 0


@pytest.mark.parametrize("kind", ["memory", "segments"])
def test_both_logs_implement_the_whole_log_protocol_alike(tmp_path, kind):
    """Every member `storage.Log` declares is implemented by both logs (callers never probe a log for
    one), and batches/locate/take_sync/flush/delete behave alike."""
    import inspect

    from tenure.storage import Log
    from tenure.storage.segments import LogConfig, SegmentLog
    from tests.support.wire import build_batch
    declared = {n for n, _ in inspect.getmembers(Log) if not n.startswith("_")} | set(Log.__annotations__)
    assert {"batches", "flush", "take_sync", "locate", "delete", "size_bytes", "name"} <= declared
    log = MemoryLog("t-0") if kind == "memory" else SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=200))
    for n in sorted(declared):
        assert getattr(type(log), n, None) is not None or n in vars(log), f"{type(log).__name__} lacks {n}"
    sent = [build_batch([(b"k%d" % i, b"v" * 40)] * (1 + i % 2)) for i in range(6)]
    for b in sent:
        log.append(b)
    got = list(log.batches(0))
    assert [(h.base_offset, h.last_offset) for h, _ in got] == [(0, 0), (1, 2), (3, 3), (4, 5), (6, 6), (7, 8)]
    assert all(raw[17:] == b[17:] for (_, raw), b in zip(got, sent))  # as sent from the CRC on (restamped before)
    assert [h.base_offset for h, _ in log.batches(4)] == [4, 6, 7]
    assert [h.base_offset for h, _ in log.batches(5)] == [4, 6, 7]  # from the batch holding the offset
    assert list(log.batches(9)) == []
    assert "t-0" in log.locate(4)
    log.take_sync()()
    log.flush()
    log.delete()
    if kind == "segments":
        assert not (tmp_path / "t-0").exists()
    else:
        assert log.size_bytes == 0 and list(log.batches(0)) == []
