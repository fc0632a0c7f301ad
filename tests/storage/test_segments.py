"""The on-disk segment log: offsets across reopen and rolls, reads through the sparse index, recovery of
torn and corrupt tails, refusal of damage in the middle, and files any RecordBatch reader parses."""
import asyncio
import logging
import os

import pytest
from kafka.record.default_records import DefaultRecordBatch

from tenure.storage import parse_batches
from tenure.storage.durability import Durability
from tenure.storage.segments import CorruptLogError, LogConfig, SegmentLog, segment_name
from tests.support.wire import build_batch


def batch(i: int, n: int = 1, size: int = 10, ts: int | None = None) -> bytes:
    recs = [(f"k{i}-{j}".encode(), bytes([65 + (i % 26)]) * size) for j in range(n)]
    return build_batch(recs, base_timestamp=ts) if ts is not None else build_batch(recs)


def read_all(log: SegmentLog) -> list[tuple[int, bytes, bytes]]:
    out, off = [], log.log_start_offset
    while off < log.log_end_offset:
        data = log.read(off, 1 << 20)
        assert data, f"no data at offset {off}"
        for r in (rec for h in parse_batches(data)
                  for rec in DefaultRecordBatch(data[h.position:h.position + h.size])):
            if r.offset >= off:
                out.append((r.offset, r.key, r.value))
        off = out[-1][0] + 1
    return out


def test_offsets_continue_across_reopen_and_files_are_named_by_base_offset(tmp_path):
    log = SegmentLog(tmp_path / "t-0")
    assert log.append(batch(0, 3))[0] == 0
    assert log.append(batch(1, 2))[0] == 3
    log.close()
    log = SegmentLog(tmp_path / "t-0")
    assert (log.log_start_offset, log.log_end_offset) == (0, 5)
    assert log.append(batch(2))[0] == 5
    assert [o for o, _, _ in read_all(log)] == list(range(6))
    assert sorted(os.listdir(tmp_path / "t-0")) == [segment_name(0)]
    assert segment_name(0) == "00000000000000000000.log"


def test_segments_roll_by_size_and_reads_cross_them(tmp_path):
    log = SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=2000, index_interval_bytes=300))
    for i in range(60):
        log.append(batch(i, 2, size=40))
    names = sorted(os.listdir(tmp_path / "t-0"))
    assert len(names) > 3 and all(n.endswith(".log") and len(n) == 24 for n in names)
    bases = [int(n[:20]) for n in names]
    assert bases[0] == 0 and bases == sorted(bases)
    for seg in log.segments[:-1]:
        assert seg.size <= 2000
    got = read_all(log)
    assert [o for o, _, _ in got] == list(range(120))
    assert got[77][1] == b"k38-1"
    # a read from the middle of a batch returns the batch holding it; max_bytes bounds whole batches
    data = log.read(77, 1)
    (h,) = parse_batches(data)
    assert h.base_offset == 76 and h.last_offset == 77
    log.close()
    again = SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=2000, index_interval_bytes=300))
    assert [o for o, _, _ in read_all(again)] == list(range(120))
    assert [s.base_offset for s in again.segments] == bases


def test_roll_by_age(tmp_path):
    log = SegmentLog(tmp_path / "t-0", LogConfig(segment_ms=0))
    log.append(batch(0))
    log.append(batch(1))
    assert [s.base_offset for s in log.segments] == [0, 1]


def test_segment_files_parse_with_kafka_pythons_record_reader(tmp_path):
    log = SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=1500))
    for i in range(20):
        log.append(batch(i, 3, size=30), leader_epoch=0)
    log.flush()
    offsets = []
    for name in sorted(os.listdir(tmp_path / "t-0")):
        raw = (tmp_path / "t-0" / name).read_bytes()
        for h in parse_batches(raw):             # every CRC-32C verified
            b = DefaultRecordBatch(raw[h.position:h.position + h.size])
            assert b.validate_crc()
            offsets.extend(r.offset for r in b)
    assert offsets == list(range(60))


def test_timestamps(tmp_path):
    log = SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=400))
    for i in range(10):
        log.append(batch(i, 1, ts=1000 + 10 * i))
    assert log.offset_for_timestamp(1035) == (4, 1040)
    assert log.offset_for_timestamp(5000) is None
    assert log.max_timestamp() == (9, 1090)


def test_torn_tail_is_cut_at_the_last_whole_batch(tmp_path, caplog):
    log = SegmentLog(tmp_path / "t-0")
    for i in range(5):
        log.append(batch(i, 2))
    good = log.segments[-1].size
    log.append(batch(5, 2))
    log.close()
    path = tmp_path / "t-0" / segment_name(0)
    with open(path, "r+b") as f:
        f.truncate(good + 30)                    # a write torn mid-batch
    with caplog.at_level(logging.WARNING, "tenure.storage"):
        log = SegmentLog(tmp_path / "t-0")
    assert path.stat().st_size == good and log.log_end_offset == 10
    assert len(log.truncated) == 1 and log.truncated[0].position == good
    assert "cut 30 byte(s)" in caplog.text and "torn batch" in caplog.text
    assert log.append(batch(6))[0] == 10          # and it serves on from there
    assert [o for o, _, _ in read_all(log)] == list(range(11))


def test_flipped_byte_in_the_last_batch_cuts_exactly_that_batch(tmp_path, caplog):
    log = SegmentLog(tmp_path / "t-0")
    for i in range(4):
        log.append(batch(i, 2))
    good = log.segments[-1].size
    log.append(batch(4, 2))
    size = log.segments[-1].size
    log.close()
    path = tmp_path / "t-0" / segment_name(0)
    raw = bytearray(path.read_bytes())
    raw[size - 5] ^= 0x40
    path.write_bytes(raw)
    with caplog.at_level(logging.WARNING, "tenure.storage"):
        log = SegmentLog(tmp_path / "t-0")
    assert path.stat().st_size == good and log.log_end_offset == 8
    assert "CRC-32C" in caplog.text and f"at byte {good} (offset 8)" in caplog.text


def test_damage_in_the_middle_is_reported_never_skipped(tmp_path):
    log = SegmentLog(tmp_path / "t-0")
    for i in range(5):
        log.append(batch(i, 2))
    hs = parse_batches((tmp_path / "t-0" / segment_name(0)).read_bytes())
    second = hs[1].position
    log.close()
    path = tmp_path / "t-0" / segment_name(0)
    raw = bytearray(path.read_bytes())
    raw[second + 70] ^= 0x01
    path.write_bytes(raw)
    with pytest.raises(CorruptLogError) as exc:
        SegmentLog(tmp_path / "t-0")
    assert exc.value.path == path and exc.value.position == second and exc.value.offset == 2
    assert "valid batches follow it" in str(exc.value)
    assert path.read_bytes() == bytes(raw)       # nothing was cut


def test_a_bad_magic_byte_with_valid_batches_after_it_is_refused_not_cut(tmp_path):
    """A flipped magic byte leaves the batch's length readable: the batches after it are sound, so this
    is damage in the middle (refused), not a tail to cut (which would drop offsets 2..9)."""
    log = SegmentLog(tmp_path / "t-0")
    for i in range(5):
        log.append(batch(i, 2))
    log.close()
    path = tmp_path / "t-0" / segment_name(0)
    raw = bytearray(path.read_bytes())
    second = parse_batches(bytes(raw))[1].position
    raw[second + 16] ^= 0x01                     # magic 2 -> 3
    path.write_bytes(raw)
    with pytest.raises(CorruptLogError) as exc:
        SegmentLog(tmp_path / "t-0")
    assert exc.value.position == second and exc.value.offset == 2
    assert "magic 3, expected 2; valid batches follow it" in str(exc.value)
    assert path.read_bytes() == bytes(raw)       # nothing was cut


def test_damage_in_an_older_segment_is_reported(tmp_path):
    log = SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=300))
    for i in range(6):
        log.append(batch(i, 2, size=40))
    first = tmp_path / "t-0" / segment_name(0)
    log.close()
    raw = bytearray(first.read_bytes())
    raw[-3] ^= 0x01                              # the last batch of a segment that is not the newest
    first.write_bytes(raw)
    with pytest.raises(CorruptLogError, match="not in the newest segment"):
        SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=300))


def test_group_commit_covers_concurrent_writes_with_fewer_fsyncs(tmp_path):
    logs = [SegmentLog(tmp_path / f"t-{i}") for i in range(2)]

    async def main(policy):
        d = Durability(policy)

        async def writer(i):
            for j in range(10):
                lg = logs[i % 2]
                lg.append(batch(j))
                mine = lg.bytes_written
                await d.sync([lg])
                assert lg.bytes_synced >= mine or policy == "never", "sync returned before an fsync covered it"
        await asyncio.gather(*(writer(i) for i in range(8)))
        return d.fsyncs
    assert asyncio.run(main("never")) == 0
    always = asyncio.run(main("always"))
    grouped = asyncio.run(main("batch"))
    assert always == 80
    assert 1 <= grouped < always
    with pytest.raises(ValueError):
        Durability("sometimes")


def test_a_flipped_length_field_in_the_middle_is_refused_not_cut(tmp_path):
    log = SegmentLog(tmp_path / "t-0")
    for i in range(5):
        log.append(batch(i))
    log.close()
    path = tmp_path / "t-0" / segment_name(0)
    raw = bytearray(path.read_bytes())
    second = parse_batches(bytes(raw))[1].position
    raw[second + 11] ^= 0x04                       # the batch length of batch 1
    path.write_bytes(raw)
    with pytest.raises(CorruptLogError) as exc:
        SegmentLog(tmp_path / "t-0")
    assert exc.value.position == second and "valid batches follow it" in str(exc.value)
    assert path.read_bytes() == bytes(raw)


def test_a_failed_write_leaves_no_partial_batch(tmp_path, monkeypatch):
    log = SegmentLog(tmp_path / "t-0")
    log.append(batch(0))
    size = log.segments[-1].size
    real_write = os.write

    def short_then_fail(fd, data):
        if len(data) > 20:
            return real_write(fd, bytes(data[:20]))
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "write", short_then_fail)
    with pytest.raises(OSError):
        log.append(batch(1))
    monkeypatch.setattr(os, "write", real_write)
    assert (tmp_path / "t-0" / segment_name(0)).stat().st_size == size
    assert log.append(batch(2))[0] == 1
    log.close()
    assert SegmentLog(tmp_path / "t-0").log_end_offset == 2


def test_a_data_dir_refused_at_open_is_left_untouched(tmp_path):
    """One partition has a torn tail (recovery would cut it), another has damage in the middle (refused):
    the refusal comes before any cut, so no file changes."""
    from tenure.storage.datadir import DataDir
    data = DataDir.open(tmp_path)
    a, b = data.open_log("a", 0), data.open_log("b", 0)
    for i in range(4):
        a.append(batch(i))
        b.append(batch(i))
    a.close(), b.close(), data.close()
    torn = tmp_path / "a-0" / segment_name(0)
    with open(torn, "r+b") as f:
        f.truncate(torn.stat().st_size - 7)
    mid = tmp_path / "b-0" / segment_name(0)
    raw = bytearray(mid.read_bytes())
    raw[parse_batches(bytes(raw))[1].position + 70] ^= 1
    mid.write_bytes(raw)
    before = {p: p.read_bytes() for p in (torn, mid)}
    data = DataDir.open(tmp_path)
    a = data.open_log("a", 0)                      # sees the torn tail, does not cut it yet
    with pytest.raises(CorruptLogError):
        data.open_log("b", 0)
    assert {p: p.read_bytes() for p in (torn, mid)} == before
    data.finish_recovery()                         # had the open gone through, the tail is cut now
    assert torn.stat().st_size < len(before[torn]) and a.log_end_offset == 3
    assert a.append(batch(9))[0] == 3
    data.close()


def test_the_cluster_id_is_kept_in_the_data_dir(tmp_path):
    from tenure.storage.datadir import DataDir
    data = DataDir.open(tmp_path)
    cid = data.cluster_id()
    assert cid.startswith("tenure-") and data.cluster_id() == cid
    data.close()
    assert DataDir.open(tmp_path).cluster_id() == cid
    assert "cluster.id=" + cid in (tmp_path / "meta.properties").read_text()


def _flip_base_offset_bit(path, position: int, bit: int) -> None:
    """Flip one bit of the base offset of the batch at `position` (a field the CRC-32C does not cover)."""
    raw = bytearray(path.read_bytes())
    raw[position + 7 - bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(raw)


@pytest.mark.parametrize("bit", [0, 1, 5, 33, 60])
def test_a_flipped_bit_in_the_last_batchs_base_offset_is_a_torn_tail(tmp_path, caplog, bit):
    """The base offset is outside the CRC: a batch must continue the one before it exactly, else recovery
    treats it as damage (here the newest batch: cut, and the log end offset stays where it was)."""
    log = SegmentLog(tmp_path / "t-0")
    for i in range(5):
        log.append(batch(i, 2))
    last = [h for h in parse_batches((tmp_path / "t-0" / segment_name(0)).read_bytes())][-1].position
    log.close()
    path = tmp_path / "t-0" / segment_name(0)
    _flip_base_offset_bit(path, last, bit)
    with caplog.at_level(logging.WARNING, "tenure.storage"):
        log = SegmentLog(tmp_path / "t-0")
    assert log.log_end_offset == 8 and path.stat().st_size == last
    assert len(log.truncated) == 1 and log.truncated[0].position == last and log.truncated[0].offset == 8
    assert "does not continue the previous batch" in caplog.text
    assert log.append(batch(9))[0] == 8


@pytest.mark.parametrize("bit", [0, 2, 33, 60])
def test_a_flipped_bit_in_a_middle_batchs_base_offset_names_that_batch(tmp_path, bit):
    log = SegmentLog(tmp_path / "t-0")
    for i in range(5):
        log.append(batch(i, 2))
    log.close()
    path = tmp_path / "t-0" / segment_name(0)
    third = parse_batches(path.read_bytes())[2].position
    _flip_base_offset_bit(path, third, bit)
    raw = path.read_bytes()
    with pytest.raises(CorruptLogError) as exc:
        SegmentLog(tmp_path / "t-0")
    assert exc.value.position == third and exc.value.offset == 4, str(exc.value)
    assert "does not continue the previous batch" in str(exc.value) and "valid batches follow it" in str(exc.value)
    assert path.read_bytes() == raw              # nothing was cut


def test_a_batch_missing_from_a_never_compacted_log_is_refused(tmp_path):
    """Offsets only have gaps where the cleaner removed whole batches; a log it never cleaned (no cleaner
    checkpoint entry) that skips offsets lost a batch."""
    log = SegmentLog(tmp_path / "t-0")
    for i in range(5):
        log.append(batch(i, 2))
    log.close()
    path = tmp_path / "t-0" / segment_name(0)
    raw = path.read_bytes()
    hs = parse_batches(raw)
    path.write_bytes(raw[:hs[2].position] + raw[hs[3].position:])
    with pytest.raises(CorruptLogError) as exc:
        SegmentLog(tmp_path / "t-0")
    assert exc.value.position == hs[2].position and exc.value.offset == 4
    assert "base offset 6 does not continue the previous batch (expected 4)" in str(exc.value)


def test_a_missing_middle_segment_is_refused(tmp_path):
    log = SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=300))
    for i in range(8):
        log.append(batch(i, 2, size=40))
    bases = [s.base_offset for s in log.segments]
    log.close()
    assert len(bases) >= 3
    (tmp_path / "t-0" / segment_name(bases[1])).unlink()
    with pytest.raises(CorruptLogError, match=f"offsets {bases[1]}..{bases[2] - 1} are missing"):
        SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=300))
