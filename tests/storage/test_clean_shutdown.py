"""A clean stop (Kafka's `.kafka_cleanshutdown` marker, `recovery-point-offset-checkpoint` and segment index
files) lets the next open trust the segments instead of verifying every batch; anything else is verified as
after a crash. Kafka's LogManager/LogLoader decide the same: the marker is deleted before any log loads, and
a clean shutdown skips the recovery of every segment."""
import json
import os

import pytest

from tenure.storage.batch import restamp
from tenure.storage.checkpoints import RECOVERY_POINT_CHECKPOINT, read_checkpoint
from tenure.storage.cleanshut import MARKER, index_paths
from tenure.storage.datadir import DataDir
from tenure.storage.recovery import CorruptLogError
from tenure.storage.segments import LogConfig, SegmentLog
from tests.storage.test_segments import batch, read_all

# small segments and an index entry every 300 bytes; index files for every non-empty segment
CONFIG = LogConfig(segment_bytes=10_000, index_interval_bytes=300, index_files_min_bytes=1)


def fill(data: DataDir, n: int = 400, topic: str = "t") -> SegmentLog:
    lg = data.open_log(topic, 0)
    for i in range(n):
        lg.append(batch(i, 2, size=40, ts=1_000 + (i * 7919) % 5000))
    return lg


def stop(data: DataDir, *, clean: bool = True) -> bool:
    """What the server's stop does: flush and close every log, then (clean) the marker."""
    logs = list(data.logs.values())
    for lg in logs:
        lg.flush()
        lg.close()
    marked = data.mark_clean_shutdown(logs) if clean else False
    data.close()
    return marked


def forget(tmp_path) -> None:
    """Neither the marker nor a recovery-point checkpoint: a data dir killed before anything was checkpointed
    (every batch is verified at the next open)."""
    (tmp_path / MARKER).unlink(missing_ok=True)
    (tmp_path / RECOVERY_POINT_CHECKPOINT).unlink(missing_ok=True)


def state(lg: SegmentLog):
    return ([(s.base_offset, s.next_offset, s.size, s.max_timestamp, s.max_timestamp_batch,
              list(s.index_offsets), list(s.index_positions)) for s in lg.segments],
            lg.log_end_offset, read_all(lg), lg.offset_for_timestamp(3_000), lg.max_timestamp())


def test_a_clean_restart_trusts_every_segment_and_opens_the_same_log(tmp_path):
    data = DataDir.open(tmp_path, CONFIG)
    fill(data)
    assert stop(data)
    assert (tmp_path / MARKER).exists()
    assert json.loads((tmp_path / MARKER).read_text())["version"] == 0
    assert read_checkpoint(tmp_path, RECOVERY_POINT_CHECKPOINT) == {("t", 0): 800}

    data = DataDir.open(tmp_path, CONFIG)
    assert data.clean_shutdown and not (tmp_path / MARKER).exists()    # taken before any log opens
    lg = data.open_log("t", 0)
    data.finish_recovery()
    assert len(lg.segments) > 5
    assert (lg.scanned, lg.trusted) == (0, len(lg.segments))
    assert sum(s.batches for s in lg.segments) < 400 // 4    # only the batches after each last index entry
    assert lg.recovery_point == 800
    trusted = state(lg)
    stop(data, clean=False)
    forget(tmp_path)

    data = DataDir.open(tmp_path, CONFIG)                       # the same files, verified batch by batch
    full = data.open_log("t", 0)
    assert (full.scanned, full.trusted) == (len(full.segments), 0)
    assert state(full) == trusted
    assert full.append(batch(999))[0] == 800
    data.close()


def test_a_kill_leaves_no_marker_so_every_batch_is_verified_and_a_torn_tail_cut(tmp_path):
    data = DataDir.open(tmp_path, CONFIG)
    fill(data)
    assert stop(data)
    data = DataDir.open(tmp_path, CONFIG)                       # a clean start, then appends and a kill -9
    lg = fill(data, 50, "t")
    assert lg.log_end_offset == 900
    last = lg.segments[-1].path
    lg.close()
    data.close()                                               # no marker: the process died here
    forget(tmp_path)                                           # ... before any recovery point was checkpointed
    with open(last, "r+b") as f:
        f.truncate(os.path.getsize(last) - 20)                  # the last batch torn
    data = DataDir.open(tmp_path, CONFIG)
    assert not data.clean_shutdown
    lg = data.open_log("t", 0)
    data.finish_recovery()
    assert (lg.scanned, lg.trusted) == (len(lg.segments), 0)   # the old index files are not trusted
    assert lg.log_end_offset == 898 and len(lg.truncated) == 1
    assert lg.recovery_point == 0 and lg.dirty                   # read back, not yet fsynced by this process
    lg.flush()
    assert lg.recovery_point == 898
    data.close()


def test_a_marker_with_a_tail_torn_after_the_stop_still_cuts_the_tail(tmp_path):
    data = DataDir.open(tmp_path, CONFIG)
    fill(data)
    last = data.logs[("t", 0)].segments[-1].path
    assert stop(data)
    with open(last, "r+b") as f:
        f.truncate(os.path.getsize(last) - 20)
    data = DataDir.open(tmp_path, CONFIG)
    lg = data.open_log("t", 0)
    data.finish_recovery()
    assert lg.log_end_offset == 798 and len(lg.truncated) == 1
    assert [o for o, _, _ in read_all(lg)] == list(range(798))
    data.close()


def test_a_marker_with_a_batch_changed_after_the_stop_is_trusted_as_kafka_does(tmp_path):
    """Kafka skips the recovery of every segment after a clean shutdown: a batch changed in the middle of
    a segment afterwards is not looked at when the log opens. tenure does the same; the batch's CRC is
    checked again when it is read through `batches` (the coordinator's load stops there, naming it)."""
    data = DataDir.open(tmp_path, CONFIG)
    fill(data)
    seg = data.logs[("t", 0)].segments[1]
    path, where = seg.path, seg.index_positions[2] + 70       # inside a batch that is not last in its segment
    assert stop(data)
    with open(path, "r+b") as f:
        f.seek(where)
        byte = f.read(1)
        f.seek(where)
        f.write(bytes([byte[0] ^ 0xFF]))
    data = DataDir.open(tmp_path, CONFIG)
    lg = data.open_log("t", 0)
    assert lg.scanned == 0 and lg.log_end_offset == 800
    with pytest.raises(CorruptLogError, match=path.name):
        for _ in lg.batches(0):
            pass
    lg.close()
    data.close()
    forget(tmp_path)
    with pytest.raises(CorruptLogError, match=path.name):     # with nothing checkpointed: refused at open
        DataDir.open(tmp_path, CONFIG).open_log("t", 0)


def test_records_appended_after_the_stop_are_verified(tmp_path):
    """The log end found must be the recovery point of the clean stop; otherwise the log is verified."""
    data = DataDir.open(tmp_path, CONFIG)
    lg = fill(data)
    last = lg.segments[-1].path
    assert stop(data)
    extra = bytearray(batch(0))
    restamp(extra, 0, 800, 0)                                    # the next offset: a sound batch
    with open(last, "ab") as f:                                  # e.g. another program appended it
        f.write(extra)
    data = DataDir.open(tmp_path, CONFIG)
    lg = data.open_log("t", 0)
    assert lg.trusted == 0 and lg.scanned == len(lg.segments)
    assert lg.log_end_offset == 801
    data.close()


def test_a_wrongly_numbered_batch_appended_after_the_stop_is_a_torn_tail(tmp_path):
    data = DataDir.open(tmp_path, CONFIG)
    lg = fill(data)
    last = lg.segments[-1].path
    assert stop(data)
    with open(last, "ab") as f:
        f.write(batch(0))                                        # base offset 0 after offset 799
    data = DataDir.open(tmp_path, CONFIG)
    lg = data.open_log("t", 0)
    data.finish_recovery()
    assert lg.scanned == 0 and lg.log_end_offset == 800 and len(lg.truncated) == 1
    data.close()


@pytest.mark.parametrize("damage", ["missing", "partial", "past-end"])
def test_an_index_file_that_fails_its_sanity_check_has_its_segment_verified(tmp_path, damage):
    data = DataDir.open(tmp_path, CONFIG)
    lg = fill(data)
    seg_path = lg.segments[2].path
    assert stop(data)
    index = index_paths(seg_path)[0]
    if damage == "missing":
        index.unlink()
    elif damage == "partial":
        with open(index, "ab") as f:
            f.write(b"\x00\x01\x02")
    else:
        with open(index, "ab") as f:
            f.write((10_000).to_bytes(4, "big") + (1 << 30).to_bytes(4, "big"))
    data = DataDir.open(tmp_path, CONFIG)
    lg = data.open_log("t", 0)
    assert (lg.scanned, lg.trusted) == (1, len(lg.segments) - 1)
    assert [o for o, _, _ in read_all(lg)] == list(range(800))
    data.close()


def test_the_recovery_point_advances_with_flushes_and_an_unflushed_log_gets_no_marker(tmp_path):
    data = DataDir.open(tmp_path, CONFIG)
    lg = fill(data, 10)
    assert lg.recovery_point == 0
    lg.flush()
    assert lg.recovery_point == 20
    lg.append(batch(50, 3))
    assert lg.recovery_point == 20                               # written, not fsynced
    sync = lg.take_sync()
    lg.append(batch(51))                                          # after the claim: not covered by it
    sync()
    assert lg.recovery_point == 23
    lg.close()
    assert not data.mark_clean_shutdown([lg])
    assert not (tmp_path / MARKER).exists()
    data.close()


def test_a_crash_after_a_clean_start_is_unclean_and_small_segments_lose_stale_index_files(tmp_path):
    data = DataDir.open(tmp_path, CONFIG)
    fill(data)
    assert stop(data)
    data = DataDir.open(tmp_path, CONFIG)                       # the marker is gone from here on
    data.open_log("t", 0)
    data.close()                                               # a crash: nothing written at the stop
    forget(tmp_path)
    data = DataDir.open(tmp_path, CONFIG)
    assert not data.clean_shutdown
    lg = data.open_log("t", 0)
    assert lg.trusted == 0
    big = LogConfig(segment_bytes=10_000, index_interval_bytes=300, index_files_min_bytes=1 << 20)
    lg.config = big                                              # segments below the size: no index files
    assert stop(data)
    assert not [p for p in os.listdir(tmp_path / "t-0") if not p.endswith(".log")]
    data = DataDir.open(tmp_path, big)
    lg = data.open_log("t", 0)
    assert (lg.scanned, lg.trusted) == (len(lg.segments), 0) and lg.log_end_offset == 800
    data.close()


def test_orphaned_index_files_are_removed_at_a_clean_open(tmp_path):
    data = DataDir.open(tmp_path, CONFIG)
    lg = fill(data)
    lg.advance_start(lg.segments[3].base_offset)                # three segments deleted
    assert stop(data)
    for p in (tmp_path / "t-0").iterdir():
        if p.suffix == ".log":
            continue
        assert (p.with_suffix(".log")).exists()
    orphan = tmp_path / "t-0" / "00000000000000000000.index"
    orphan.write_bytes(b"\x00" * 8)
    data = DataDir.open(tmp_path, CONFIG)
    lg = data.open_log("t", 0)
    assert not orphan.exists() and lg.scanned == 0
    data.close()


def test_a_refused_start_puts_the_marker_back_and_a_start_that_wrote_does_not(tmp_path):
    data = DataDir.open(tmp_path, CONFIG)
    lg = fill(data)
    seg = lg.segments[1]
    path, where = seg.path, seg.size - 5                       # the last batch of an older segment
    assert stop(data)
    raw = bytearray(path.read_bytes())
    raw[where] ^= 0x10
    path.write_bytes(raw)
    data = DataDir.open(tmp_path, CONFIG)
    assert not (tmp_path / MARKER).exists()
    with pytest.raises(CorruptLogError, match="not in the newest segment"):
        data.open_log("t", 0)                                  # the tail after its last index entry is verified
    data.close(refused=True)
    assert (tmp_path / MARKER).exists()                         # the data dir is as the refused start found it
    raw[where] ^= 0x10
    path.write_bytes(raw)
    data = DataDir.open(tmp_path, CONFIG)
    data.open_log("t", 0).append(batch(1))
    data.close(refused=True)                                    # refused after a write: stays unclean
    assert not (tmp_path / MARKER).exists()


def test_log_verify_after_a_clean_stop_takes_index_files_for_what_they_are(tmp_path, capsys):
    from tenure.tools.cli import main
    data = DataDir.open(tmp_path, CONFIG)
    fill(data)
    assert stop(data)
    assert main(["log", "verify", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert ".index" not in out and ".timeindex" not in out and "t-0:" in out, out
    assert (tmp_path / MARKER).exists()                         # read-only: the marker stays


def test_a_segment_of_one_large_batch_is_trusted_from_its_only_index_entry(tmp_path):
    data = DataDir.open(tmp_path, CONFIG)
    lg = data.open_log("t", 0)
    lg.append(batch(0, 1, size=30_000))                          # one batch larger than a segment
    lg.append(batch(1, 1, size=30_000))
    assert len(lg.segments) == 2 and len(lg.segments[0].index_offsets) == 1
    assert stop(data)
    data = DataDir.open(tmp_path, CONFIG)
    lg = data.open_log("t", 0)
    assert (lg.scanned, lg.trusted, lg.log_end_offset) == (0, 2, 2)
    assert [o for o, _, _ in read_all(lg)] == [0, 1]
    data.close()


def test_compaction_between_two_clean_stops_leaves_index_files_of_the_cleaned_segments(tmp_path):
    from tenure.storage.compaction import CompactionPolicy, Compactor
    data = DataDir.open(tmp_path, CONFIG)
    lg = data.open_log("t", 0)
    for i in range(400):                                          # 5 keys rewritten over and over
        lg.append(batch(i % 5, 1, size=40, ts=1_000 + i))
    assert stop(data)
    data = DataDir.open(tmp_path, CONFIG)
    lg = data.open_log("t", 0)
    assert lg.scanned == 0
    before = len(lg.segments)
    Compactor(clock_ms=lambda: 10_000_000).clean_fully(lg, CompactionPolicy())
    assert len(lg.segments) < before
    compacted = state(lg)
    assert stop(data)
    data = DataDir.open(tmp_path, CONFIG)
    lg = data.open_log("t", 0)
    assert (lg.scanned, lg.trusted) == (0, len(lg.segments))
    assert state(lg) == compacted
    lg.close()
    data.close()                                               # no clean stop this time
    data = DataDir.open(tmp_path, CONFIG)                       # below the recovery point: trusted by index
    lg = data.open_log("t", 0)
    assert (lg.scanned, lg.trusted) == (1, len(lg.segments) - 1) and state(lg) == compacted
    lg.close()
    data.close()
    forget(tmp_path)
    data = DataDir.open(tmp_path, CONFIG)                       # the same, verified batch by batch
    lg = data.open_log("t", 0)
    assert lg.trusted == 0 and state(lg) == compacted
    data.close()
