"""The audit on a log whose cleaner swaps segments while it reads: each partition's read is one consistent
state of its log (re-read when a swap touched its files), never records missed or seen twice, and a swapped
file is never reported as damage; a partition that never settles is an explicit `unstable` error row."""
import os
import threading

from confluent_kafka import Consumer, TopicPartition

from tenure.audit import job, listing, read
from tenure.config import ServerConfig
from tenure.protocol import records as rec
from tenure.server import ServerThread
from tenure.storage.compaction import CompactionPolicy, Compactor
from tests.support.groups import committed_offsets
from tests.support.wire import WireClient, create_topic

from .logs import T0, Writer, offsets_in

POLICY = CompactionPolicy(delete_retention_ms=0)


def commits(w: Writer, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        w.add(rec.OffsetCommitRecord(f"g{i % 2}", "t", i % 3, i, -1, "", T0 + i), T0 + i)


def read_offsets(loaded) -> list[tuple[int, int]]:
    return sorted((r["partition"], r["offset"]) for r in loaded.records.select("partition", "offset").collect())


# ---------------------------------------------------------------------- the checks, without Spark
def test_a_swap_between_listing_and_reading_is_caught_file_by_file(tmp_path):
    """What a reader without the checks would do: the merged-away segments vanish (unreadable, i.e.
    "damage"), the replaced first segment holds their records (seen twice if the others were read first).
    With the listed identities every such file is refused as `changed`, and the partition is unstable."""
    w = Writer(tmp_path, 0, segment_bytes=400)
    commits(w, 40)
    listings, note = listing.list_partitions(str(tmp_path))
    assert note is None
    lst = listings[0]
    units = lst.units()
    assert len(units) > 4
    early = [list(read.read_unit(u)) for u in units[1:3]]        # read before the swap: sound
    assert all(t[0] in "RI" and (t[0] != "I" or t[1][2] == listing.OK) for rows in early for t in rows)
    Compactor().clean_fully(w.log, POLICY)
    after, _ = listing.list_partitions(str(tmp_path))
    now = {path: ident for _, path, ident in after[0].files}
    swapped = [u.path for u in units if now.get(u.path) != u.ident]
    assert len(swapped) > 4 and units[1].path in swapped and units[-1].path not in swapped
    late = [list(read.read_unit(u)) for u in units]
    infos = [t[1] for rows in late for t in rows if t[0] == "I"]
    assert [i[1] for i in infos if i[2] == listing.CHANGED] == swapped
    assert all(i[2] == listing.OK for i in infos if i[1] not in swapped)
    errors = [t[1] for rows in late for t in rows if t[0] == "E"]
    assert [e[0] for e in errors] == swapped and {e[4] for e in errors} == {read.UNSTABLE}  # not damage
    assert not [t for u, rows in zip(units, late) if u.path in swapped for t in rows if t[0] == "R"]
    assert "changed between listing and reading" in listing.unstable_reason(lst, infos, after[0])
    # the listings alone see it too: the listed files were replaced or removed
    assert "during the read" in listing.unstable_reason(lst, [], after[0])
    # a fresh listing read now is consistent
    lst2 = after[0]
    infos2 = [t[1] for u in lst2.units() for t in read.read_unit(u) if t[0] == "I"]
    assert listing.unstable_reason(lst2, infos2, listing.list_partitions(str(tmp_path))[0][0]) is None
    w.close()


def test_a_listing_taken_mid_swap_is_not_trusted(tmp_path):
    w = Writer(tmp_path, 0, segment_bytes=400)
    commits(w, 40)
    w.close()
    full, _ = listing.list_partitions(str(tmp_path))
    second = full[0].files[1][1]
    os.rename(second, second + ".merging")                        # step 2 of a swap
    mid, _ = listing.list_partitions(str(tmp_path))
    assert mid[0].busy == [os.path.basename(second) + ".merging"]
    assert "under way" in listing.unstable_reason(mid[0], [], full[0])
    os.rename(second + ".merging", second)
    # a listing that missed a file (a directory read racing a swap): the file turns up below the newest
    partial = listing.Listing(0, full[0].dir, [f for f in full[0].files if f[1] != second], [], 0)
    assert "appeared during the read below the newest segment" in listing.unstable_reason(partial, [], full[0])
    # a segment rolled after the listing is fine (it was not read, the read is the log as listed)
    shorter = listing.Listing(0, full[0].dir, full[0].files[:-1], [], 0)
    assert listing.unstable_reason(shorter, [], full[0]) is None


# ---------------------------------------------------------------------- the job
def test_compaction_between_listing_and_reading_is_read_again_exactly(spark, tmp_path):
    logs = [Writer(tmp_path, p, segment_bytes=400) for p in range(2)]
    for i, w in enumerate(logs):
        commits(w, 40 + 10 * i)
    swapped = []

    def compact_now(attempt, listings):
        if attempt == 0:
            for w in logs:
                st = Compactor().clean_fully(w.log, POLICY)
                swapped.append(st.groups_cleaned)

    loaded = job.load(spark, job.Options(str(tmp_path), str(tmp_path / "out")), after_listing=compact_now)
    assert all(swapped) and loaded.rereads == 2
    truth = sorted((p, o) for p, w in enumerate(logs) for o in offsets_in(w.log))
    got = read_offsets(loaded)
    assert got == truth                                   # nothing missing, nothing twice
    assert loaded.errors.count() == 0                     # a swapped-away file is not damage
    assert loaded.gaps.count() == 0                       # nor are the cleaner's holes gaps
    for w in logs:
        w.close()


def test_a_partition_that_never_settles_is_an_explicit_unstable_row(spark, tmp_path):
    busy, calm = Writer(tmp_path, 0, segment_bytes=400), Writer(tmp_path, 1, segment_bytes=400)
    commits(busy, 40)
    commits(calm, 20)
    n = [40]

    def churn(attempt, listings):
        # every time: new values for every key, a roll, and a clean that rewrites the listed segments
        commits(busy, 12, start=n[0])
        n[0] += 12
        busy.log.roll()
        assert Compactor().clean_fully(busy.log, POLICY).groups_cleaned

    opts = job.Options(str(tmp_path), str(tmp_path / "out"), report=False, read_attempts=2)
    loaded = job.load(spark, opts, after_listing=churn)
    errors = [r.asDict() for r in loaded.errors.collect()]
    assert [(e["kind"], e["log_partition"], e["file"]) for e in errors] == [
        ("unstable", 0, str(tmp_path / "__consumer_offsets-0"))]
    assert "left out" in errors[0]["reason"]
    assert {p for p, _ in read_offsets(loaded)} == {1}    # the unsettled partition's records are left out
    assert read_offsets(loaded) == [(1, o) for o in offsets_in(calm.log)]
    # through run(): exit 1, counted in the summary, and not damage
    code, summary = job.run(opts, spark=spark, after_listing=churn)
    assert code == 1 and summary["errors"] == 1 and summary["errors_by_kind"] == {"unstable": 1}
    assert "log_damage" not in summary["anomalies"]
    busy.close()
    calm.close()


def test_a_live_server_compacting_while_the_audit_reads(spark, tmp_path):
    """A real server appending commits and swapping cleaned segments (its cleaner every 50 ms, plus
    compact_now) during the audit's first read; the churn stops at the second listing. The audit's
    latest commit per key equals the server's committed offsets exactly, no record is read twice, and
    no swapped file shows up as damage."""
    data = tmp_path / "data"
    cfg = ServerConfig(port=0, data_dir=str(data), fsync="never", segment_bytes=1024, cleaner_interval_ms=50)
    with ServerThread(cfg) as s:
        with WireClient.to(s.bootstrap) as w:
            create_topic(w, "t", 8)
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "live", "enable.auto.commit": False})
        stop = threading.Event()
        count = [0]

        def commit_some(n):
            for _ in range(n):
                count[0] += 1
                i = count[0]
                c.commit(offsets=[TopicPartition("t", i % 8, i, metadata="m" * (i % 40))], asynchronous=False)

        def churn():
            while not stop.is_set():
                commit_some(5)
        commit_some(200)
        t = threading.Thread(target=churn)

        def hook(attempt, listings):
            if attempt == 0:
                commit_some(60)                    # rolls segments past the listed ones ...
                s.compact_now()                    # ... and swaps the listed ones out
                t.start()                          # commits (and the cleaner) go on during the read
            elif not stop.is_set():
                stop.set()
                t.join(30)
        try:
            loaded = job.load(spark, job.Options(str(data), str(tmp_path / "out"), read_attempts=6),
                              after_listing=hook)
        finally:
            stop.set()
            if t.is_alive():
                t.join(30)
        truth = committed_offsets(s, "live")
        c.close()
    assert loaded.rereads >= 1
    errors = [r.asDict() for r in loaded.errors.collect()]
    assert all(e["kind"] == read.TORN_TAIL for e in errors), errors
    offs = read_offsets(loaded)
    assert len(offs) == len(set(offs))
    latest: dict = {}
    for r in (loaded.records.filter("type = 'offset_commit' AND `group` = 'live'")
              .orderBy("partition", "offset").collect()):
        latest[(r["topic"], r["topic_partition"])] = r["committed_offset"]
    assert latest == truth and len(truth) == 8
    assert loaded.gaps.count() == 0


def test_the_read_tasks_offsets_history_files_are_those_of_the_consistent_read(spark, tmp_path):
    """The read tasks write the plain offset commits as offsets_history's part files themselves: a partition
    read again after a swap keeps only its last read's files (nothing twice, nothing missing), the others'
    staging files are gone, and the counts the tasks returned are the table's."""
    logs = [Writer(tmp_path, p, segment_bytes=400) for p in range(2)]
    for i, w in enumerate(logs):
        commits(w, 40 + 10 * i)

    def compact_now(attempt, listings):
        if attempt == 0:
            for w in logs:
                assert Compactor().clean_fully(w.log, POLICY).groups_cleaned

    out = tmp_path / "out"
    code, summary = job.run(job.Options(str(tmp_path), str(out), report=False), spark=spark,
                            after_listing=compact_now)
    assert code == 0
    truth = sorted((p, o) for p, w in enumerate(logs) for o in offsets_in(w.log))
    table = spark.read.parquet(str(out / "offsets_history"))
    got = sorted((r["log_partition"], r["log_offset"]) for r in table.collect())
    assert got == truth                                   # nothing missing, nothing twice
    assert summary["offset_commits"] == len(truth)
    names = sorted(os.listdir(out / "offsets_history"))
    assert "_SUCCESS" in names and "_staging" not in names
    parts = [n for n in names if not n.startswith((".", "_"))]        # not Spark's checksums nor _SUCCESS
    assert parts and all(n.startswith("part-") and n.endswith(".parquet") for n in parts)
    for w in logs:
        w.close()
