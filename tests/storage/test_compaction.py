"""Log compaction (storage/compaction.py): fold(compact(log)) == fold(log) through the coordinator's own
replay for generated histories; offsets, CRCs, the active segment, tombstone retention and the compaction
lag with an injected clock; bounded passes; crash-safe swaps (a crash at every file operation of a swap,
in a forked child, recovers to a consistent log)."""
from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from tenure.coordinator import GroupShard
from tenure.protocol import records as rec
from tenure.protocol.markers import control_batch
from tenure.storage import parse_batches
from tenure.storage import segments as segments_mod
from tenure.storage.batch import restamp
from tenure.storage.cleaning import DELETE_HORIZON_FLAG, SegmentSummary, batch_horizon, plan, rebuild_batch, rewrite
from tenure.storage.compaction import CompactionPolicy, Compactor
from tenure.storage.segments import CorruptLogError, LogConfig, SegmentLog, segment_name

T0 = 1_700_000_000_000
STEP = 1000                        # ms between generated batches


# ---------------------------------------------------------------------- helpers
def build(records: list[tuple[bytes | None, bytes | None]], ts: int, *, compression: int = 0,
          transactional: bool = False, producer_id: int = -1, headers=()) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=transactional,
                                  producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                  base_sequence=0 if producer_id >= 0 else -1, batch_size=2 ** 30)
    for i, (k, v) in enumerate(records):
        b.append(i, timestamp=ts + i, key=k, value=v, headers=list(headers))
    return bytes(b.build())


def coordinator_batch(records: list, ts: int) -> bytes:
    return build([rec.encode(r) for r in records], ts)


def records_of(plog: SegmentLog) -> list[tuple[int, bytes | None, bytes | None, int, tuple]]:
    """(offset, key, value, timestamp, headers) of every record, checking every batch's CRC both ways."""
    out = []
    for _h, raw in plog.batches(0):
        parse_batches(raw, verify_crc=True)
        batch = DefaultRecordBatch(raw)
        assert batch.validate_crc()
        out += [(r.offset, r.key, r.value, r.timestamp, tuple(r.headers)) for r in batch]
    return out


def file_records(plog: SegmentLog) -> list:
    """The same, read back by a fresh open of the directory (recovery) - what a restart sees."""
    again = SegmentLog(plog.dir, plog.config)
    try:
        return records_of(again)
    finally:
        again.close()


def fold(recs) -> GroupShard:
    c = GroupShard()
    for _, key, value, _, _ in recs:
        c.replay(rec.decode(key, value))
    return c


def state(c: GroupShard):
    """What replay built: groups (member maps, generation, leader, protocol, ...), offsets and static-member
    event keys - all of it (an offsets-only group whose last offset is tombstoned is gone in both)."""
    return c.groups, c.offsets, c.static_event_keys


def latest_by_key(recs) -> dict:
    out = {}
    for r in recs:
        out[r[1]] = r
    return out


def check_compacted(before: list, after: list, *, dropped_tombstones_ok: bool) -> None:
    """`after` is a subsequence of `before` (same offsets, same bytes) that keeps every key's latest value;
    a key's latest tombstone may be gone only if every record of that key is gone."""
    by_offset = {r[0]: r for r in before}
    assert [r[0] for r in after] == sorted({r[0] for r in after}), "offsets strictly increase"
    for r in after:
        assert by_offset[r[0]] == r, f"record at offset {r[0]} changed"
    kept = {r[0] for r in after}
    after_keys = {r[1] for r in after}
    for key, r in latest_by_key(before).items():
        if r[2] is not None:
            assert r[0] in kept, f"latest value of key {key!r} (offset {r[0]}) was removed"
        elif r[0] not in kept:
            assert dropped_tombstones_ok and key not in after_keys, f"tombstone of {key!r} dropped too early"


def active_bytes(plog: SegmentLog) -> bytes:
    return plog.active.path.read_bytes()


def new_log(path: Path, segment_bytes: int = 600) -> SegmentLog:
    return SegmentLog(path, LogConfig(segment_bytes=segment_bytes))


# ---------------------------------------------------------------------- generated histories
GROUPS = st.sampled_from(["g0", "g1", "g2"])
members = st.lists(st.builds(rec.MemberRecord, member_id=st.sampled_from(["m1", "m2", "m3"]),
                             group_instance_id=st.sampled_from([None, "i1", "i2"]), client_id=st.just("c"),
                             client_host=st.just("/127.0.0.1"), rebalance_timeout_ms=st.integers(1, 60000),
                             session_timeout_ms=st.integers(1, 60000), subscription=st.binary(max_size=6),
                             assignment=st.binary(max_size=6)),
                   max_size=3, unique_by=lambda m: m.member_id)
group_metadata = st.builds(
    lambda g, gen, proto, ms, ts: rec.GroupMetadataRecord(g, "consumer", gen, proto if ms else None,
                                                          ms[0].member_id if ms else None, ts, tuple(ms)),
    GROUPS, st.integers(0, 9), st.sampled_from(["range", "roundrobin"]), members, st.integers(-1, 10 ** 6))
offset_commit = st.builds(rec.OffsetCommitRecord, group_id=GROUPS, topic=st.sampled_from(["t0", "t1"]),
                          partition=st.integers(0, 2), offset=st.integers(0, 10 ** 6),
                          leader_epoch=st.integers(-1, 3), metadata=st.sampled_from(["", "meta"]),
                          commit_timestamp=st.integers(-1, 10 ** 6))
static_event = st.builds(rec.StaticMemberEventRecord, group_id=GROUPS, group_instance_id=st.sampled_from(["i1", "i2"]),
                         cause=st.sampled_from(rec.STATIC_EVENT_CAUSES), old_member_id=st.sampled_from([None, "m1"]),
                         new_member_id=st.sampled_from([None, "m2"]), generation=st.integers(-1, 9),
                         timestamp=st.integers(-1, 10 ** 6))
record = st.one_of(
    offset_commit, offset_commit, offset_commit, group_metadata, static_event,
    offset_commit.map(lambda r: dataclasses.replace(r, tombstone=True)),
    GROUPS.map(lambda g: rec.GroupMetadataRecord(g, tombstone=True)),
    static_event.map(lambda r: dataclasses.replace(r, tombstone=True)),
)
history = st.lists(st.lists(record, min_size=1, max_size=4), min_size=1, max_size=70)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=history, segment_bytes=st.integers(250, 2500), retention=st.sampled_from([0, 5 * STEP, 10 ** 9]),
       lag_batches=st.sampled_from([0, 0, 5, 30]), budget=st.sampled_from([None, 1, 700]))
def test_compaction_preserves_the_replayed_state_offsets_crcs_and_the_active_segment(
        batches, segment_bytes, retention, lag_batches, budget):
    with tempfile.TemporaryDirectory() as d:
        plog = new_log(Path(d) / "__consumer_offsets-0", segment_bytes)
        for i, b in enumerate(batches):
            plog.append(coordinator_batch(b, T0 + i * STEP))
        before = records_of(plog)
        start, end, active = plog.log_start_offset, plog.log_end_offset, active_bytes(plog)
        now = T0 + len(batches) * STEP
        lag = lag_batches * STEP
        policy = CompactionPolicy(delete_retention_ms=retention, min_compaction_lag_ms=lag)
        clock = [now]
        comp = Compactor(clock_ms=lambda: clock[0])

        def compact():
            if budget is None:
                return comp.clean_fully(plog, policy)
            for _ in range(10_000):                  # bounded passes, to the same fixed point
                st_ = comp.clean(plog, policy, budget=budget)
                assert st_.bytes_read <= max(budget, segment_bytes * 2 + 8192)
                if not st_.did_work:
                    return
            raise AssertionError("passes did not converge")

        # retention 0: a pass stamps the horizon `now`, the next pass (clean_fully runs it) is at or past it
        for when, dropping in ((now, retention == 0), (now + retention + 1, True),
                               (now + 2 * retention + 2, True)):
            clock[0] = when
            compact()
            after = records_of(plog)
            check_compacted(before, after, dropped_tombstones_ok=dropping)
            assert state(fold(after)) == state(fold(before))
            assert (plog.log_start_offset, plog.log_end_offset) == (start, end)
            assert active_bytes(plog) == active, "the active segment is never touched"
            young = when - lag
            if lag:
                assert all(r[0] in {a[0] for a in after} for r in before if r[3] > young), \
                    "a record younger than min.compaction.lag.ms was removed"
            else:                                    # everything before the active segment is compacted
                cleaned = [r for r in after if r[0] < plog.active.base_offset]
                assert len({r[1] for r in cleaned}) == len(cleaned), "a superseded record survived"
            assert file_records(plog) == after
            leftovers = [p.name for p in plog.dir.iterdir() if not p.name.endswith(".log")]
            assert leftovers == []
        plog.close()


# ---------------------------------------------------------------------- tombstones and the lag, exactly
def k(i: int) -> bytes:
    return f"key-{i}".encode()


def test_tombstone_is_stamped_kept_for_delete_retention_ms_then_dropped():
    with tempfile.TemporaryDirectory() as d:
        plog = new_log(Path(d) / "c-0", segment_bytes=200)
        plog.append(build([(k(1), b"v1"), (k(2), b"v2")], ts=100))
        plog.append(build([(k(1), None)], ts=200))          # tombstone of key-1 (offset 2)
        for i in range(3, 8):
            plog.append(build([(k(i), b"x" * 50)], ts=300 + i))
        plog.append(build([(k(99), None)], ts=900))         # a tombstone in the active segment
        assert len(plog.segments) > 3
        end, active = plog.log_end_offset, active_bytes(plog)
        clock = [10_000]
        comp = Compactor(clock_ms=lambda: clock[0])
        policy = CompactionPolicy(delete_retention_ms=5_000)

        comp.clean_fully(plog, policy)
        recs = records_of(plog)
        assert [(o, key, v) for o, key, v, _, _ in recs][:2] == [(1, k(2), b"v2"), (2, k(1), None)]
        stamped = [h for h, _ in plog.batches(0) if h.base_offset == 2]
        assert len(stamped) == 1 and stamped[0].attributes & DELETE_HORIZON_FLAG
        assert batch_horizon(stamped[0]) == 15_000                 # first cleaned at 10 000 + 5 000
        assert recs[1][3] == 200, "the tombstone's own timestamp is unchanged"

        clock[0] = 14_999
        comp.clean_fully(plog, policy)
        assert (2, k(1), None) in [(o, key, v) for o, key, v, _, _ in records_of(plog)]

        clock[0] = 15_000
        st_ = comp.clean_fully(plog, policy)
        assert st_.tombstones_dropped == 1
        recs = records_of(plog)
        assert k(1) not in {r[1] for r in recs}
        assert (plog.log_end_offset, active_bytes(plog)) == (end, active)
        assert recs[-1][1:3] == (k(99), None), "a tombstone in the active segment stays"
        plog.close()


def test_a_tombstone_is_not_dropped_while_an_older_value_sits_in_another_group():
    old = SegmentSummary({k(1): (0, False, None)}, 1, 0)
    tomb = SegmentSummary({k(1): (5, True, 100)}, 1, 0)
    p = plan([old, tomb], [500, 500], segment_bytes=600, now=200)     # two groups of one segment each
    assert [(g.start, g.end) for g in p.groups] == [(0, 1)]           # the old value goes; the tombstone waits
    p = plan([old, tomb], [500, 500], segment_bytes=1000, now=200)    # one group: both go together
    assert [(g.start, g.end, k(1) in g.droppable) for g in p.groups] == [(0, 2, True)]
    p = plan([tomb], [500], segment_bytes=600, now=200)
    assert k(1) in p.groups[0].droppable
    p = plan([tomb], [500], segment_bytes=600, now=99)                # before the horizon: nothing to do
    assert p.groups == []
    # rewriting the tombstone's group alone, while the old value's group is not rewritten: kept
    raw = bytearray(build([(k(1), None)], ts=50))
    restamp(raw, 0, 5, 0)
    stamped = rebuild_batch(parse_batches(raw)[0], list(DefaultRecordBatch(bytes(raw))), horizon=100)
    p = plan([old, tomb], [500, 500], segment_bytes=600, now=200)
    batches = [(parse_batches(stamped)[0], stamped)]
    out = rewrite([batches], [True], [tomb], p.latest, frozenset(), now=200, stamp=10 ** 9)
    assert out.data == stamped and out.stats.tombstones_dropped == 0
    out = rewrite([batches], [True], [tomb], p.latest, frozenset({k(1)}), now=200, stamp=10 ** 9)
    assert out.data == b"" and out.stats.tombstones_dropped == 1


def test_min_compaction_lag_leaves_young_segments_byte_identical():
    with tempfile.TemporaryDirectory() as d:
        plog = new_log(Path(d) / "c-0", segment_bytes=150)
        for i in range(20):
            plog.append(build([(k(i % 3), b"v" * 40)], ts=1000 * i))
        files = {s.base_offset: s.path.read_bytes() for s in plog.segments}
        now, lag = 20_000, 9_500          # records with timestamp > 10 500 are young
        before = records_of(plog)
        Compactor(clock_ms=lambda: now).clean_fully(plog, CompactionPolicy(min_compaction_lag_ms=lag))
        first_young = next(s for s in plog.segments if s.max_timestamp > now - lag)
        for s in plog.segments[plog.segments.index(first_young):]:
            assert s.path.read_bytes() == files[s.base_offset]
        after = records_of(plog)
        assert {r[0] for r in before if r[3] > now - lag} <= {r[0] for r in after}
        assert len(after) < len(before)
        plog.close()


# ---------------------------------------------------------------------- batches
def test_rebuilt_batches_keep_offsets_timestamps_headers_codec_and_producer_fields():
    raw = build([(k(i), None if i == 3 else b"value" * 20) for i in range(6)], ts=5000, compression=1,
                producer_id=77, headers=[("h", b"\x00\x01"), ("n", None)])
    h = parse_batches(bytearray(raw))[0]
    buf = bytearray(raw)
    restamp(buf, 0, 1000, 4)           # as appended at offset 1000, leader epoch 4
    h = parse_batches(buf)[0]
    recs = list(DefaultRecordBatch(bytes(buf)))
    kept = [recs[1], recs[3], recs[4]]
    out = rebuild_batch(h, kept, horizon=99_999)
    nh = parse_batches(out, verify_crc=True)[0]
    assert DefaultRecordBatch(out).validate_crc()
    assert (nh.base_offset, nh.last_offset_delta, nh.partition_leader_epoch) == (1000, 5, 4)
    assert (nh.producer_id, nh.producer_epoch, nh.base_sequence) == (77, 0, 0)
    assert nh.attributes & 0x07 == 1 and nh.attributes & DELETE_HORIZON_FLAG
    assert nh.first_timestamp == 99_999 and nh.max_timestamp == 5004 and nh.records_count == 3
    got = [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in DefaultRecordBatch(out)]
    assert got == [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in kept]
    plain = rebuild_batch(h, kept, horizon=None)
    ph = parse_batches(plain, verify_crc=True)[0]
    assert not ph.attributes & DELETE_HORIZON_FLAG and ph.first_timestamp == 5001


def test_log_append_time_batches_keep_their_timestamp_type():
    raw = bytearray(build([(k(1), b"a"), (k(2), b"b")], ts=10))
    attrs = int.from_bytes(raw[21:23], "big") | 0x08              # LogAppendTime, as a broker may set it
    raw[21:23] = attrs.to_bytes(2, "big")
    import crc32c
    raw[17:21] = crc32c.crc32c(bytes(raw[21:])).to_bytes(4, "big")
    h = parse_batches(raw)[0]
    kept = list(DefaultRecordBatch(bytes(raw)))[1:]
    out = rebuild_batch(h, kept, horizon=None)
    nh = parse_batches(out)[0]
    assert nh.attributes & 0x08 and nh.max_timestamp == h.max_timestamp
    assert [(r.offset, r.timestamp) for r in DefaultRecordBatch(out)] == [(1, h.max_timestamp)]


def test_committed_transactional_records_compact_like_others_and_keyless_records_are_kept():
    # (an open or aborted transaction: tests/storage/test_compaction_txn.py)
    with tempfile.TemporaryDirectory() as d:
        plog = new_log(Path(d) / "u-0", segment_bytes=100)
        plog.append(build([(k(1), b"old")], ts=1))
        plog.append(build([(k(1), b"txn")], ts=2, transactional=True, producer_id=5))
        plog.append(build([(None, b"keyless")], ts=3))
        plog.append(build([(k(2), b"old")], ts=4))
        plog.append(build([(k(2), b"new")], ts=5))
        plog.append(control_batch(5, 0, True, 0, 6))
        plog.append(build([(k(9), b"active")], ts=7))
        Compactor(clock_ms=lambda: 100).clean_fully(plog, CompactionPolicy())
        got = [(o, key, v) for o, key, v, _, _ in records_of(plog)]
        # the committed transactional record supersedes the older value of its key (Kafka's key map holds it)
        assert got == [(1, k(1), b"txn"), (2, None, b"keyless"), (4, k(2), b"new"),
                       (5, b"\0\0\0\1", b"\0" * 6), (6, k(9), b"active")]     # the COMMIT marker
        plog.close()


def test_reads_after_compaction_skip_removed_offsets_and_segments_merge():
    with tempfile.TemporaryDirectory() as d:
        plog = new_log(Path(d) / "c-0", segment_bytes=300)
        for i in range(60):
            plog.append(build([(k(i % 4), f"v{i}".encode() * 10)], ts=i))
        n = len(plog.segments)
        Compactor(clock_ms=lambda: 10 ** 6).clean_fully(plog, CompactionPolicy())
        assert len(plog.segments) < n / 4
        kept = [r[0] for r in records_of(plog)]
        for off in range(plog.log_end_offset):
            data = plog.read(off, 1 << 20)
            first = next(r.offset for h in parse_batches(data)
                         for r in DefaultRecordBatch(data[h.position:h.position + h.size]) if r.offset >= off)
            assert first == min(o for o in kept if o >= off)
        plog.close()


def test_a_pass_reads_within_its_budget_and_passes_converge():
    with tempfile.TemporaryDirectory() as d:
        a = new_log(Path(d) / "a-0", segment_bytes=400)
        b = new_log(Path(d) / "b-0", segment_bytes=400)
        for i in range(300):
            raw = build([(k(i % 7), f"{i}".encode() * 20)], ts=i)
            a.append(raw)
            b.append(raw)
        comp = Compactor(clock_ms=lambda: 10 ** 6)
        passes = 0
        while True:
            st_ = comp.clean(a, CompactionPolicy(), budget=2000)
            passes += 1
            assert st_.bytes_read <= 2000 or st_.segments_indexed + st_.groups_cleaned == 1
            if not st_.did_work:
                break
        assert passes > 5
        Compactor(clock_ms=lambda: 10 ** 6).clean_fully(b, CompactionPolicy())
        assert records_of(a) == records_of(b)
        a.close()
        b.close()


# ---------------------------------------------------------------------- swaps: fds and crashes
def test_a_claimed_fsync_survives_the_swap_of_its_segment():
    with tempfile.TemporaryDirectory() as d:
        plog = new_log(Path(d) / "c-0", segment_bytes=200)
        for i in range(10):
            plog.append(build([(k(i % 2), b"x" * 60)], ts=i))
        claimed = plog.take_sync()                    # dirty segments, about to be fsynced on a worker
        Compactor(clock_ms=lambda: 10 ** 6).clean_fully(plog, CompactionPolicy())
        claimed()                                     # would be EBADF on a closed fd
        assert plog.bytes_synced == plog.bytes_written
        plog.close()


def test_leftovers_of_an_uncommitted_swap_are_undone_at_open():
    with tempfile.TemporaryDirectory() as d:
        plog = new_log(Path(d) / "c-0", segment_bytes=200)
        for i in range(10):
            plog.append(build([(k(i % 2), b"x" * 60)], ts=i))
        before = records_of(plog)
        bases = [s.base_offset for s in plog.segments]
        plog.close()
        p = Path(d) / "c-0"
        (p / (segment_name(bases[0]) + ".cleaned")).write_bytes(b"partial garbage")
        os.rename(p / segment_name(bases[1]), p / (segment_name(bases[1]) + ".merging"))
        assert file_records(new_log(p, 200)) == before
        assert sorted(x.name for x in p.iterdir()) == sorted(segment_name(b) for b in bases)


def _crash_at(n: int, src: Path, dst: Path, segment_bytes: int, now: int) -> int:
    """Copy `src` to `dst`, compact it in a forked child that dies (os._exit) at its n-th file operation of
    a swap (rename, replace, unlink, directory fsync); returns the child's exit status (0: no crash)."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    pid = os.fork()
    if pid == 0:                                              # the child: never returns
        try:
            count = [0]

            def dying(fn):
                def wrapper(*a, **kw):
                    if count[0] == n:
                        os._exit(17)
                    count[0] += 1
                    return fn(*a, **kw)
                return wrapper
            os.rename, os.replace = dying(os.rename), dying(os.replace)
            Path.unlink = dying(Path.unlink)
            segments_mod.fsync_dir = dying(segments_mod.fsync_dir)
            plog = SegmentLog(dst, LogConfig(segment_bytes=segment_bytes))
            Compactor(clock_ms=lambda: now).clean_fully(plog, CompactionPolicy(delete_retention_ms=0))
            os._exit(0)
        except BaseException:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_crash_at_any_step_of_a_swap_recovers_a_consistent_log(tmp_path):
    src = tmp_path / "src" / "__consumer_offsets-0"
    plog = new_log(src, segment_bytes=400)
    for i in range(40):
        g = f"g{i % 3}"
        recs = [rec.OffsetCommitRecord(g, "t", i % 2, offset=i)]
        if i % 9 == 8:
            recs.append(rec.OffsetCommitRecord(g, "t", 0, tombstone=True))
        if i % 13 == 0:
            recs.append(rec.GroupMetadataRecord(g, "consumer", i, "range", None, i))
        plog.append(coordinator_batch(recs, T0 + i))
    before = records_of(plog)
    end = plog.log_end_offset
    plog.close()
    shutil.copytree(src, tmp_path / "ref")                       # the same log compacted without a crash
    ref = SegmentLog(tmp_path / "ref", LogConfig(segment_bytes=400))
    Compactor(clock_ms=lambda: T0 + 10 ** 6).clean_fully(ref, CompactionPolicy(delete_retention_ms=0))
    final = records_of(ref)
    ref.close()
    crashes = 0
    for n in range(10_000):
        dst = tmp_path / "work" / "__consumer_offsets-0"
        code = _crash_at(n, src, dst, 400, T0 + 10 ** 6)
        if code == 0:
            break
        assert code == 17, f"the child failed at operation {n} (exit {code})"
        crashes += 1
        after = SegmentLog(dst, LogConfig(segment_bytes=400))       # recovery: finish or undo the swap
        assert [p.name for p in dst.iterdir() if not p.name.endswith(".log")] == []
        got = records_of(after)
        check_compacted(before, got, dropped_tombstones_ok=True)
        assert state(fold(got)) == state(fold(before))
        assert after.log_end_offset == end
        Compactor(clock_ms=lambda: T0 + 10 ** 6).clean_fully(after, CompactionPolicy(delete_retention_ms=0))
        assert records_of(after) == final                         # and compaction carries on from there
        after.close()
    assert crashes > 20


def test_a_batch_damaged_on_disk_after_open_is_never_rebuilt_with_a_fresh_crc(tmp_path):
    """The cleaner reads segments through the segment reader, which checks every batch: a batch whose bytes
    changed on disk stops the pass (CorruptLogError) instead of being rebuilt into a cleaned segment with a
    new, valid CRC-32C that would hide the damage for good."""
    plog = new_log(tmp_path / "c-0", segment_bytes=300)
    for i in range(12):
        plog.append(build([(b"k%d" % (i % 3), b"value-%02d" % i)], ts=T0 + i))
    first = plog.segments[0]
    assert len(plog.segments) > 2
    data = first.path.read_bytes()
    spot = data.index(b"value-00") + 7                # a value byte: the records still parse, the CRC fails
    with open(first.path, "r+b") as f:
        f.seek(spot)
        f.write(b"9")
    damaged = first.path.read_bytes()
    with pytest.raises(CorruptLogError) as err:
        Compactor().clean_fully(plog, CompactionPolicy())
    assert "CRC-32C" in str(err.value) and str(first.path) in str(err.value)
    assert first.path.read_bytes() == damaged and not list(plog.dir.glob("*.cleaned"))
    again = Compactor()
    with pytest.raises(CorruptLogError):
        again.clean(plog, CompactionPolicy())
    assert not again.clean(plog, CompactionPolicy()).did_work    # named once; later passes leave the log alone
    assert first.path.read_bytes() == damaged
    plog.close()
