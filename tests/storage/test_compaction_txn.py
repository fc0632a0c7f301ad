"""Log compaction of transactional data (storage/cleaning.py, storage/compaction.py), Kafka's rules as its
LogCleaner and LogCleanerTest state them: records of aborted transactions are removed and supersede nothing;
committed ones are compacted like any record (their keys are in the key map); a transaction marker stays
until no data of its transaction is left, then for delete.retention.ms (a delete horizon), then goes; the
cleanable range ends at the first batch of a transaction that has no marker yet (the first unstable offset),
so nothing at or after it is removed or supersedes anything."""
from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from tenure.protocol.markers import control_batch
from tenure.storage import parse_batches
from tenure.storage.cleaning import DELETE_HORIZON_FLAG, summarize_files
from tenure.storage.compaction import CompactionPolicy, Compactor
from tenure.storage.segments import SegmentLog

from .test_compaction import build, file_records, k, new_log, records_of

RETAIN = CompactionPolicy(delete_retention_ms=1000)
ABORT_KEY, COMMIT_KEY, MARKER_VALUE = b"\0\0\0\0", b"\0\0\0\1", b"\0" * 6   # version 0, type; epoch 0


def txn(records, ts: int, pid: int) -> bytes:
    return build(records, ts, transactional=True, producer_id=pid)


def marker(pid: int, commit: bool, ts: int) -> bytes:
    return control_batch(pid, 0, commit, 0, ts)


def batches(plog: SegmentLog) -> list[tuple[int, bool, bool, int]]:
    """(base offset, control?, transactional?, attributes) of every batch, CRC-checked."""
    out = []
    for h, raw in plog.batches(0):
        parse_batches(raw, verify_crc=True)
        assert DefaultRecordBatch(raw).validate_crc()
        out.append((h.base_offset, h.is_control, h.is_transactional, h.attributes))
    return out


def values(plog: SegmentLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(o, key, v) for o, key, v, _, _ in records_of(plog)]


def check_summaries(c: Compactor, plog: SegmentLog) -> None:
    """The key index a pass keeps for a cleaned segment is what reading the segment again gives."""
    checked = 0
    for seg in plog.segments[:-1]:
        if seg in c._summaries:
            assert c._summaries[seg] == summarize_files([(seg.path, seg.size)])[0]
            checked += 1
    assert checked


class Clock:
    def __init__(self, now: int = 100) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_an_open_transaction_ends_the_cleanable_range_until_its_marker_is_written():
    with tempfile.TemporaryDirectory() as d:
        plog = new_log(Path(d) / "u-0", segment_bytes=100)
        plog.append(build([(k(1), b"old")], ts=1))
        plog.append(txn([(k(1), b"txn")], ts=2, pid=5))          # the first unstable offset: 1
        plog.append(build([(None, b"keyless")], ts=3))
        plog.append(build([(k(2), b"old")], ts=4))
        plog.append(build([(k(2), None)], ts=5))                  # a tombstone above it
        plog.append(build([(k(9), b"active")], ts=6))
        clock = Clock()
        c = Compactor(clock_ms=clock)
        before = values(plog)
        for _ in range(3):
            c.clean_fully(plog, CompactionPolicy(delete_retention_ms=0))
            clock.now += 10_000
        assert values(plog) == before                             # nothing at or above offset 1 was touched
        # the transaction commits (marker in a cleanable segment): its record is compacted like any other
        plog.append(marker(5, True, 7))
        plog.append(build([(k(8), b"x")], ts=8))
        c.clean_fully(plog, RETAIN)
        assert values(plog)[:3] == [(1, k(1), b"txn"), (2, None, b"keyless"), (4, k(2), None)]
        assert (6, True, True) in [b[:3] for b in batches(plog)]  # the marker stays while its data does
        plog.close()


def test_records_of_an_aborted_transaction_are_removed_and_supersede_nothing():
    with tempfile.TemporaryDirectory() as d:
        plog = new_log(Path(d) / "a-0", segment_bytes=100)
        plog.append(build([(k(1), b"v1")], ts=1))                 # 0
        plog.append(txn([(k(1), b"aborted"), (k(2), b"aborted")], ts=2, pid=7))   # 1-2
        plog.append(build([(k(3), b"plain")], ts=3))              # 3: another producer, between
        plog.append(txn([(k(1), b"aborted too")], ts=4, pid=7))   # 4
        plog.append(marker(7, False, 5))                          # 5: ABORT
        plog.append(build([(k(9), b"active")], ts=6))             # 6 (active)
        st = Compactor(clock_ms=Clock()).clean_fully(plog, RETAIN)
        assert st.aborted_batches_dropped == 2
        # the aborted values did not supersede v1; the marker stays (this pass still saw its data)
        assert values(plog) == [(0, k(1), b"v1"), (3, k(3), b"plain"), (5, ABORT_KEY, MARKER_VALUE),
                                (6, k(9), b"active")]
        assert file_records(plog) == records_of(plog)             # a restart reads the same log
        plog.close()


def test_a_marker_stays_while_data_of_its_transaction_is_left_then_for_the_delete_retention():
    with tempfile.TemporaryDirectory() as d:
        plog = new_log(Path(d) / "m-0", segment_bytes=100)
        plog.append(txn([(k(1), b"c1")], ts=1, pid=7))            # 0
        plog.append(marker(7, True, 2))                           # 1: COMMIT
        plog.append(txn([(k(2), b"a1")], ts=3, pid=7))            # 2
        plog.append(marker(7, False, 4))                          # 3: ABORT
        plog.append(build([(k(9), b"active")], ts=5))             # 4 (active)
        clock = Clock(100)
        c = Compactor(clock_ms=clock)
        c.clean_fully(plog, RETAIN)
        # the committed record is the latest of its key: kept, and so is its marker; the aborted data is gone
        # and its marker waits for delete.retention.ms from the pass that found it without data
        c.clean_fully(plog, RETAIN)
        got = {b[0]: b for b in batches(plog)}
        assert sorted(got) == [0, 1, 3, 4]
        assert not got[1][3] & DELETE_HORIZON_FLAG               # the commit marker: data left, no horizon
        assert got[3][3] & DELETE_HORIZON_FLAG                   # the abort marker: stamped
        clock.now += 999
        c.clean_fully(plog, RETAIN)
        assert sorted(b[0] for b in batches(plog)) == [0, 1, 3, 4]
        clock.now += 1
        st = c.clean_fully(plog, RETAIN)
        assert st.markers_dropped == 1
        assert sorted(b[0] for b in batches(plog)) == [0, 1, 4]
        # a later value of k1 removes the committed record; then its marker goes after the retention too
        plog.append(build([(k(1), b"plain")], ts=6))              # 5
        plog.append(build([(k(8), b"x")], ts=7))
        c.clean_fully(plog, RETAIN)
        c.clean_fully(plog, RETAIN)
        assert sorted(b[0] for b in batches(plog)) == [1, 4, 5, 6]
        clock.now += 1000
        c.clean_fully(plog, RETAIN)
        assert values(plog) == [(4, k(9), b"active"), (5, k(1), b"plain"), (6, k(8), b"x")]
        check_summaries(c, plog)
        assert file_records(plog) == records_of(plog)
        plog.close()


def test_committed_records_are_deduplicated_by_key_and_a_later_tombstone_deletes_them_for_good():
    """The gap this closes: a plain tombstone newer than a committed transactional record of the same key
    (e.g. an OffsetDelete after a transactional offset commit) must remove that record before the tombstone
    itself may go, or a reload brings the deleted value back."""
    with tempfile.TemporaryDirectory() as d:
        plog = new_log(Path(d) / "c-0", segment_bytes=100)
        plog.append(txn([(k(1), b"c0"), (k(1), b"c1"), (k(2), b"c2")], ts=1, pid=7))   # 0-2
        plog.append(marker(7, True, 2))                           # 3
        plog.append(build([(k(1), None)], ts=3))                  # 4: plain tombstone of k1
        plog.append(build([(k(9), b"active")], ts=4))             # 5 (active)
        clock = Clock(100)
        c = Compactor(clock_ms=clock)
        c.clean_fully(plog, RETAIN)
        assert values(plog) == [(2, k(2), b"c2"), (3, COMMIT_KEY, MARKER_VALUE), (4, k(1), None),
                                (5, k(9), b"active")]
        kept = {b[0]: b for b in batches(plog)}
        assert kept[0][2] and not kept[0][1]                      # the rebuilt batch is still transactional
        clock.now += 1000
        c.clean_fully(plog, RETAIN)
        got = values(plog)
        assert all(key != k(1) for _, key, _ in got)              # the tombstone went, with every k1 record
        assert [o for o, _, _ in got] == [2, 3, 5]
        check_summaries(c, plog)
        assert file_records(plog) == records_of(plog)
        plog.close()


def test_a_tombstone_after_an_open_transactions_first_offset_is_never_removed():
    """The open transaction's pending record may still commit: a tombstone written after it (which had
    dropped that pending value's key) is above the first unstable offset and stays."""
    with tempfile.TemporaryDirectory() as d:
        plog = new_log(Path(d) / "o-0", segment_bytes=100)
        plog.append(build([(k(1), b"v0")], ts=1))                 # 0
        plog.append(txn([(k(1), b"pending")], ts=2, pid=7))       # 1: open
        plog.append(build([(k(1), None)], ts=3))                  # 2: tombstone
        plog.append(build([(k(2), b"x")], ts=4))                  # 3
        plog.append(build([(k(9), b"active")], ts=5))             # 4 (active)
        clock = Clock(100)
        c = Compactor(clock_ms=clock)
        for _ in range(3):
            c.clean_fully(plog, CompactionPolicy(delete_retention_ms=0))
            clock.now += 10 ** 6
        assert [o for o, _, _ in values(plog)] == [0, 1, 2, 3, 4]
        plog.close()


def test_interleaved_transactions_are_matched_to_their_own_producers_marker():
    with tempfile.TemporaryDirectory() as d:
        plog = new_log(Path(d) / "i-0", segment_bytes=100)
        plog.append(txn([(k(1), b"p7")], ts=1, pid=7))            # 0
        plog.append(txn([(k(1), b"p8")], ts=2, pid=8))            # 1
        plog.append(marker(8, False, 3))                          # 2: 8 aborts
        plog.append(marker(7, True, 4))                           # 3: 7 commits
        plog.append(txn([(k(2), b"p8 again")], ts=5, pid=8))      # 4
        plog.append(marker(8, True, 6))                           # 5: 8 commits its next transaction
        plog.append(build([(k(9), b"active")], ts=7))             # 6 (active)
        c = Compactor(clock_ms=Clock())
        c.clean_fully(plog, RETAIN)
        got = values(plog)
        assert [(o, key, v) for o, key, v in got if key in (k(1), k(2))] == [(0, k(1), b"p7"), (4, k(2), b"p8 again")]
        st = c.clean_fully(plog, RETAIN)                          # converged: the stamped marker waits
        assert st.groups_cleaned == 0
        check_summaries(c, plog)
        assert file_records(plog) == records_of(plog)
        plog.close()


def kafka_case(plog: SegmentLog, steps) -> None:
    for i, (kind, pid, arg) in enumerate(steps):
        if kind == "txn":
            plog.append(txn([(k(x), b"v") for x in arg], ts=i, pid=pid))
        elif kind == "plain":
            plog.append(build([(k(x), b"v") for x in arg], ts=i))
        else:
            plog.append(marker(pid, kind == "commit", i))


def offsets_and_keys(plog: SegmentLog) -> tuple[list[int], list[bytes]]:
    got = [(o, key) for o, key, _ in values(plog)]
    return [o for o, _ in got], [key for _, key in got if not key.startswith(b"\0")]


def test_kafka_log_cleaner_test_cases():
    """LogCleanerTest's testAbortMarkerRemoval, testDeletedBatchesWithNoMessagesRead and
    testCommittedTransactionSpanningSegments, the active segment being the last batch: the offsets left after
    a first cleaning (the aborted data goes, the markers stay) and after the delete horizon (the abort marker
    goes). Kafka keeps an emptied batch of a producer's last sequence (tenure keeps no producer state in the
    log, so it drops the batch); the records left are the same."""
    cases = [
        ([("txn", 1, [1]), ("txn", 1, [2, 3]), ("abort", 1, None), ("txn", 1, [3]), ("commit", 1, None)],
         [3, 4, 5], [4, 5], [k(3)]),
        ([("txn", 1, [1]), ("abort", 1, None), ("txn", 1, [2]), ("txn", 1, [2]), ("commit", 1, None)],
         [1, 3, 4], [3, 4], [k(2)]),
        ([("txn", 1, [1]), ("commit", 1, None)], [0, 1], [0, 1], [k(1)]),
    ]
    for n, (steps, first, later, keys) in enumerate(cases):
        with tempfile.TemporaryDirectory() as d:
            plog = new_log(Path(d) / f"k{n}-0", segment_bytes=100)
            kafka_case(plog, steps)
            plog.append(build([(k(99), b"active")], ts=99))
            clock = Clock(100)
            c = Compactor(clock_ms=clock)
            c.clean_fully(plog, RETAIN)
            offsets, got_keys = offsets_and_keys(plog)
            assert offsets[:-1] == first, n
            clock.now += 1000
            c.clean_fully(plog, RETAIN)
            offsets, got_keys = offsets_and_keys(plog)
            assert offsets[:-1] == later and got_keys[:-1] == keys, n
            assert file_records(plog) == records_of(plog)
            plog.close()


step = st.one_of(
    st.tuples(st.just("plain"), st.just(-1), st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=3)),
    st.tuples(st.just("txn"), st.integers(1, 3), st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=3)),
    st.tuples(st.sampled_from(["commit", "abort"]), st.integers(1, 3), st.none()),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=1, max_size=30), retention=st.sampled_from([0, 1000]))
def test_generated_transactional_histories_keep_what_a_read_committed_load_sees(steps, retention):
    """After cleaning (and a restart), every key's latest committed record is the same, a key whose latest
    record was a tombstone has either that tombstone or no committed record left (nothing deleted comes
    back), and every record from the first unstable offset on is untouched."""
    with tempfile.TemporaryDirectory() as d:
        plog = new_log(Path(d) / "h-0", segment_bytes=150)
        for i, (kind, pid, arg) in enumerate(steps):
            if kind in ("plain", "txn"):
                recs = [(k(x), None if tomb else f"v{i}".encode()) for x, tomb in arg]
                plog.append(build(recs, i) if kind == "plain" else txn(recs, i, pid))
            else:
                plog.append(marker(pid, kind == "commit", i))
        plog.append(build([(k(99), b"active")], ts=99))

        def visible(plog):
            """(offset, key, value) of committed records; the first unstable offset."""
            batches = [(h, raw) for h, raw in plog.batches(0)]
            outcome: dict[int, bool] = {}
            pending: dict[int, list[int]] = {}
            for h, raw in batches:
                if h.is_control:
                    commit = next(iter(DefaultRecordBatch(raw))).key == COMMIT_KEY
                    for base in pending.pop(h.producer_id, []):
                        outcome[base] = commit
                elif h.is_transactional:
                    pending.setdefault(h.producer_id, []).append(h.base_offset)
            unstable = min((b for bases in pending.values() for b in bases), default=1 << 62)
            out = []
            for h, raw in batches:
                if h.is_control or (h.is_transactional and not outcome.get(h.base_offset)):
                    continue
                out += [(r.offset, r.key, r.value) for r in DefaultRecordBatch(raw)]
            return out, unstable

        before, unstable = visible(plog)
        all_before = records_of(plog)
        clock = Clock(100)
        c = Compactor(clock_ms=clock)
        for _ in range(3):
            c.clean_fully(plog, CompactionPolicy(delete_retention_ms=retention))
            clock.now += 2000
        after, unstable_after = visible(plog)
        assert unstable_after == unstable
        latest_before = {key: (o, v) for o, key, v in before}
        latest_after = {key: (o, v) for o, key, v in after}
        for key, (o, v) in latest_before.items():
            if v is not None:
                assert latest_after.get(key) == (o, v)
            else:
                assert latest_after.get(key) in (None, (o, v)), f"{key!r} came back"
        assert set(latest_after) <= set(latest_before)
        assert [r for r in records_of(plog) if r[0] >= unstable] == [r for r in all_before if r[0] >= unstable]
        assert file_records(plog) == records_of(plog)
        plog.close()


def test_an_empty_control_batch_goes_and_a_control_batch_of_another_type_stays():
    """Kafka's testCleanEmptyControlBatch (an empty control batch is discarded) and ControlRecordType's
    other types (kept)."""
    from tenure.protocol.markers import _ControlBatchBuilder

    def control(key: bytes | None) -> bytes:
        b = _ControlBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=1,
                                 producer_epoch=0, base_sequence=-1, batch_size=2 ** 20)
        if key is not None:
            b.append(0, timestamp=1, key=key, value=MARKER_VALUE, headers=[])
        return bytes(b.build())

    with tempfile.TemporaryDirectory() as d:
        plog = new_log(Path(d) / "e-0", segment_bytes=100)
        plog.append(build([(k(1), b"a")], ts=1))                  # 0
        plog.append(control(b"\0\0\0\x05"))                        # 1: a control type Kafka does not clean
        plog.append(build([(k(2), b"b")], ts=2))                  # 2
        plog.append(control(None))                                 # 3: no record
        plog.append(build([(k(9), b"active")], ts=3))
        assert [h.records_count for h, _ in plog.batches(0)][3] == 0
        c = Compactor(clock_ms=Clock())
        st = c.clean_fully(plog, RETAIN)
        assert st.batches_dropped == 1
        assert [b[0] for b in batches(plog)] == [0, 1, 2, 4]
        assert not c.clean_fully(plog, RETAIN).groups_cleaned   # converged
        plog.close()
