"""The recovery point while the server runs, as Kafka's LogManager and LogLoader keep it: each segment roll
flushes everything below the new segment (whatever the fsync policy), writes the rolled segment's index
files and raises the recovery point to the new base offset; `recovery-point-offset-checkpoint` is written
after each roll's flush and periodically. After a kill (no clean-shutdown marker) only the segments from the
one holding the checkpointed recovery point on are verified batch by batch (Kafka's `recoverLog` recovers
`segments.values(recoveryPointCheckpoint, ...)`); a segment below it is trusted up to its last index entry,
after the index files' sanity check."""
import os

import pytest

from tenure.storage.checkpoints import RECOVERY_POINT_CHECKPOINT, read_checkpoint
from tenure.storage.cleanshut import MARKER, index_paths
from tenure.storage.datadir import DataDir
from tenure.storage.recovery import CorruptLogError
from tenure.storage.segments import LogConfig, SegmentLog
from tests.storage.test_segments import batch, read_all

CONFIG = LogConfig(segment_bytes=10_000, index_interval_bytes=300, index_files_min_bytes=1)


def run(data: DataDir, n: int, start: int = 0, topic: str = "t") -> SegmentLog:
    """Append n batches of 2 records (no flush of the fsync policy: `--fsync never`), then let the roll
    flushes finish."""
    lg = data.logs.get((topic, 0)) or data.open_log(topic, 0)
    for i in range(start, start + n):
        lg.append(batch(i, 2, size=40, ts=1_000 + i))
    data.wait_flushes()
    return lg


def kill(data: DataDir) -> None:
    """What a SIGKILL leaves: the files as written, no flush, no marker, no index files of the active segment."""
    for lg in data.logs.values():
        lg.close()
    data.close()
    assert not (data.path / MARKER).exists()


def reopen(path) -> tuple[DataDir, SegmentLog]:
    data = DataDir.open(path, CONFIG)
    lg = data.open_log("t", 0)
    data.finish_recovery()
    return data, lg


def test_a_roll_flushes_the_rolled_segment_writes_its_index_and_checkpoints_without_any_flush_policy(tmp_path):
    data = DataDir.open(tmp_path, CONFIG)
    lg = run(data, 400)
    rolled = lg.segments[:-1]
    assert len(rolled) >= 5 and data.roll_flushes == len(rolled)
    assert lg.recovery_point == lg.active.base_offset < lg.log_end_offset == 800   # only up to the roll
    assert read_checkpoint(tmp_path, RECOVERY_POINT_CHECKPOINT) == {("t", 0): lg.active.base_offset}
    assert all(s.sealed for s in rolled) and not lg.active.sealed
    for s in rolled:
        assert all(p.exists() for p in index_paths(s.path))
    assert not any(p.exists() for p in index_paths(lg.active.path))   # the active segment gets none
    assert lg.dirty                                                  # the policy's own flush still covers it
    kill(data)


def test_after_a_kill_only_the_segments_from_the_recovery_point_on_are_verified(tmp_path):
    data = DataDir.open(tmp_path, CONFIG)
    lg = run(data, 400)
    segments, point = len(lg.segments), lg.recovery_point
    before = read_all(lg)
    kill(data)

    data, lg = reopen(tmp_path)
    assert not data.clean_shutdown
    assert (lg.scanned, lg.trusted) == (1, segments - 1)               # the active segment, scanned in full
    assert data.recovery_report() == (1, segments - 1)
    assert sum(s.batches for s in lg.segments[:-1]) < 400 // 4          # only the batches after each last entry
    assert lg.segments[-1].batches == 400 - point // 2                 # every batch past the recovery point
    assert read_all(lg) == before and lg.log_end_offset == 800
    assert lg.recovery_point == point and lg.dirty                      # the rest is not known to be fsynced
    lg.flush()
    assert lg.recovery_point == 800
    data.close()


def test_a_torn_tail_past_the_recovery_point_is_cut(tmp_path):
    data = DataDir.open(tmp_path, CONFIG)
    lg = run(data, 400)
    segments, last = len(lg.segments), lg.active.path
    kill(data)
    with open(last, "r+b") as f:
        f.truncate(os.path.getsize(last) - 20)
    data, lg = reopen(tmp_path)
    assert (lg.scanned, lg.trusted) == (1, segments - 1)
    assert lg.log_end_offset == 798 and len(lg.truncated) == 1 and lg.truncated[0].path == last
    assert [o for o, _, _ in read_all(lg)] == list(range(798))
    data.close()


def test_the_segment_holding_the_recovery_point_is_verified_in_full(tmp_path):
    """Kafka recovers from the segment the recovery point falls in: a checkpoint from before the last roll's
    flush (the kill came between the roll and its checkpoint) leaves two segments to verify."""
    data = DataDir.open(tmp_path, CONFIG)
    lg = run(data, 400)
    segments, previous = len(lg.segments), lg.segments[-2]
    kill(data)
    from tenure.storage.checkpoints import write_checkpoint
    write_checkpoint(tmp_path, {("t", 0): previous.base_offset + 2}, RECOVERY_POINT_CHECKPOINT)
    data, lg = reopen(tmp_path)
    assert (lg.scanned, lg.trusted) == (2, segments - 2)
    assert lg.recovery_point == previous.base_offset + 2 and lg.log_end_offset == 800
    data.close()


def test_a_segment_below_the_recovery_point_torn_after_the_checkpoint_refuses_the_start(tmp_path):
    """Decided as follows (Kafka would trust the segment: it checks only the index files, and meet the
    damage when it reads it): records below the recovery point were fsynced, so a crash cannot tear them;
    damage there is outside damage. A segment changed after its index files were written is verified in
    full; otherwise its bytes after its last index entry (which finds its end) and the segments' offsets
    following each other still are. So a cut segment below the recovery point is found and the start refused,
    naming the file - as damage in any older segment is."""
    data = DataDir.open(tmp_path, CONFIG)
    lg = run(data, 400)
    seg = lg.segments[1]
    path, size = seg.path, seg.size
    kill(data)
    with open(path, "r+b") as f:
        f.truncate(size - 20)                                          # its last batch torn
    data = DataDir.open(tmp_path, CONFIG)
    with pytest.raises(CorruptLogError, match=path.name):
        data.open_log("t", 0)
    data.close(refused=True)
    with open(path, "r+b") as f:
        f.truncate(seg.index_positions[-1] - 1)                       # cut before its last index entry
    data = DataDir.open(tmp_path, CONFIG)
    with pytest.raises(CorruptLogError, match=path.name):               # index fails its check: verified in full
        data.open_log("t", 0)
    data.close(refused=True)


def test_the_periodic_checkpoint_advances_with_the_policys_flushes(tmp_path):
    data = DataDir.open(tmp_path, CONFIG)
    lg = run(data, 10)                                                 # no roll yet
    assert data.checkpoint_recovery_points()                           # the first: nothing fsynced yet
    assert read_checkpoint(tmp_path, RECOVERY_POINT_CHECKPOINT) == {("t", 0): 0}
    lg.flush()                                                         # --fsync batch/always: a group commit
    assert data.checkpoint_recovery_points()
    assert read_checkpoint(tmp_path, RECOVERY_POINT_CHECKPOINT) == {("t", 0): 20}
    assert not data.checkpoint_recovery_points()                       # nothing new: not written again
    lg.append(batch(99, 3))                                            # written, not fsynced: not named
    assert not data.checkpoint_recovery_points()
    lg.flush()
    assert data.checkpoint_recovery_points()
    assert read_checkpoint(tmp_path, RECOVERY_POINT_CHECKPOINT) == {("t", 0): 23}
    kill(data)
    data, lg = reopen(tmp_path)                                        # one segment: verified, nothing cut
    assert (lg.scanned, lg.trusted, lg.recovery_point, lg.log_end_offset) == (1, 0, 23, 23)
    data.close()


def test_a_kill_after_a_compaction_never_trusts_the_replaced_segments_index_files(tmp_path):
    from tenure.storage.compaction import CompactionPolicy, Compactor
    data = DataDir.open(tmp_path, CONFIG)
    lg = data.open_log("t", 0)
    for i in range(400):                                               # 5 keys rewritten over and over
        lg.append(batch(i % 5, 1, size=40, ts=1_000 + i))
    data.wait_flushes()
    rolled = [s.path for s in lg.segments[:-1]]
    assert all(index_paths(p)[0].exists() for p in rolled)
    Compactor(clock_ms=lambda: 10_000_000).clean_fully(lg, CompactionPolicy())
    compacted = read_all(lg)
    assert len(lg.segments) < len(rolled) + 1
    assert not any(index_paths(p)[0].exists() for p in rolled)         # the old files' indexes are gone
    kill(data)
    data, lg = reopen(tmp_path)
    assert lg.trusted == 0 and read_all(lg) == compacted               # below the point, with no index: verified
    lg.append(batch(7, 1, size=9_000))                                 # a roll seals the cleaned segments
    lg.append(batch(8, 1, size=9_000))
    data.wait_flushes()
    kill(data)
    data, lg = reopen(tmp_path)
    assert lg.trusted == len(lg.segments) - 1 and read_all(lg)[:len(compacted)] == compacted
    data.close()


def test_a_recovery_cut_removes_the_cut_segments_index_files(tmp_path):
    data = DataDir.open(tmp_path, CONFIG)
    lg = run(data, 400)
    lg.flush()
    kill(data)
    last = lg.active.path
    data = DataDir.open(tmp_path, CONFIG)                              # a clean stop's index files on the last
    lg = data.open_log("t", 0)
    lg.write_index_files()
    assert index_paths(last)[0].exists()
    lg.close()
    data.close()
    with open(last, "r+b") as f:
        f.truncate(os.path.getsize(last) - 20)
    data, lg = reopen(tmp_path)
    assert len(lg.truncated) == 1 and not index_paths(last)[0].exists()
    data.close()


def test_the_segment_active_at_a_clean_stop_gets_fresh_index_files_at_its_roll(tmp_path):
    """After a clean stop the last segment is trusted by the index files the stop wrote; appends go on into
    it, and its roll must flush it and write its index anew (the old files cover only what it held then)."""
    data = DataDir.open(tmp_path, CONFIG)
    lg = run(data, 400)
    lg.flush()
    for x in data.logs.values():
        x.close()
    assert data.mark_clean_shutdown(list(data.logs.values()))
    data.close()
    data, lg = reopen(tmp_path)
    assert lg.scanned == 0
    old_active = lg.active
    stale = index_paths(old_active.path)[0].read_bytes()
    run(data, 100, start=400)                                        # fills it up and rolls
    assert lg.active is not old_active and old_active.sealed
    assert len(index_paths(old_active.path)[0].read_bytes()) > len(stale)
    assert lg.recovery_point == lg.active.base_offset
    before = read_all(lg)
    kill(data)
    data, lg = reopen(tmp_path)
    assert (lg.scanned, lg.trusted) == (1, len(lg.segments) - 1) and read_all(lg) == before
    data.close()


def test_a_burst_of_rolls_flushes_each_segment_once_and_a_failed_flush_holds_the_recovery_point(tmp_path,
                                                                                               monkeypatch):
    import tenure.storage.segments as segments
    lg = SegmentLog(tmp_path / "t-0", CONFIG)
    jobs = []
    lg.on_roll = jobs.append                                           # queued, not run (a busy flusher)
    for i in range(400):
        lg.append(batch(i, 2, size=40))
    assert len(jobs) == len(lg.segments) - 1 >= 5
    fsynced = []
    real_fsync = os.fsync
    monkeypatch.setattr(segments.os, "fsync", lambda fd: (fsynced.append(fd), real_fsync(fd))[1])
    jobs[1]()                                                          # the second roll's job ran first
    seg_fds = {s.fd for s in lg.segments}                              # (os.fsync also covers the index files)
    assert seg_fds & set(fsynced) == {lg.segments[1].fd}               # its own segment only
    assert lg.recovery_point == 0                                      # the first segment is not fsynced yet
    assert lg.segments[1].sealed and not lg.segments[0].sealed
    jobs[0]()
    assert lg.recovery_point == lg.segments[2].base_offset             # ... the job covering it only now

    def failing(fd):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(segments.os, "fsync", failing)
    with pytest.raises(OSError):
        jobs[2]()
    assert lg.recovery_point == lg.segments[2].base_offset and not lg.segments[2].sealed
    monkeypatch.setattr(segments.os, "fsync", lambda fd: (fsynced.append(fd), real_fsync(fd))[1])
    jobs[3]()                                                          # sealed, but the failed one is below it
    assert lg.segments[3].sealed and lg.recovery_point == lg.segments[2].base_offset
    fsynced.clear()
    n = len(jobs)
    lg.append(batch(999, 1, size=9_500))                               # the next roll claims the failed one again
    assert len(jobs) == n + 1
    jobs[-1]()
    assert lg.segments[2].fd in fsynced and lg.segments[2].sealed
    assert lg.segments[4].fd not in fsynced                            # claimed by its own job (not run yet)
    for job in jobs[4:n]:                                              # the rest of the queue
        job()
    assert all(s.sealed for s in lg.segments[:-1])
    assert lg.recovery_point == lg.active.base_offset
    lg.close()


def test_segments_verified_in_full_after_a_kill_are_sealed_once_the_logs_are_open(tmp_path):
    """A data dir killed before anything was checkpointed (or written by an older tenure): every batch is
    verified once; then the rolled segments are flushed and get index files (Kafka rebuilds the index of a
    segment it recovers), the recovery point and its checkpoint follow, and the next kill trusts them."""
    data = DataDir.open(tmp_path, CONFIG)
    lg = data.open_log("t", 0)
    for i in range(400):
        lg.append(batch(i, 2, size=40))
    kill(data)
    for p in (tmp_path / "t-0").iterdir():                             # no index files, no checkpoint
        if p.suffix != ".log":
            p.unlink()
    (tmp_path / RECOVERY_POINT_CHECKPOINT).unlink(missing_ok=True)
    data, lg = reopen(tmp_path)
    assert (lg.scanned, lg.trusted) == (len(lg.segments), 0)
    data.wait_flushes()
    assert all(s.sealed for s in lg.segments[:-1]) and lg.recovery_point == lg.active.base_offset
    assert read_checkpoint(tmp_path, RECOVERY_POINT_CHECKPOINT) == {("t", 0): lg.active.base_offset}
    kill(data)
    data, lg = reopen(tmp_path)
    assert (lg.scanned, lg.trusted) == (1, len(lg.segments) - 1)
    data.close()


def test_index_files_older_than_their_segment_are_not_trusted_after_a_kill(tmp_path):
    """Index files describe the bytes of their segment when they were written (after its last write, at its
    roll or a clean stop). A segment rewritten after them - an older tenure's cleaner swapped a segment in
    and left a clean stop's index files beside it - is verified in full, not read through them."""
    data = DataDir.open(tmp_path, CONFIG)
    lg = run(data, 400)
    seg = lg.segments[1]
    path, base, batches = seg.path, seg.base_offset, seg.batches
    kill(data)
    index = index_paths(path)[0].read_bytes()
    raw = bytearray(path.read_bytes())
    later = os.stat(index_paths(path)[0]).st_mtime_ns + 5_000_000_000
    path.write_bytes(raw)                                              # the same bytes, rewritten after
    os.utime(path, ns=(later, later))
    data, lg = reopen(tmp_path)
    assert lg.segments[1].base_offset == base and lg.segments[1].batches == batches     # verified batch by batch
    assert (lg.scanned, lg.trusted) == (2, len(lg.segments) - 2)
    assert index_paths(path)[0].read_bytes() == index
    data.close()
