"""The read stage on the driver (`load`): the executors read and decode every segment file of the offsets
topic (read.py) and of `__transaction_state`; each partition's read is checked to be one consistent state of
its log (listing.py), else read again; the plain offset commits go to the read tasks' own offsets_history
part files (offsets_sink.py). What it gives the rest of the pipeline is a `Loaded`."""
from __future__ import annotations

import functools
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import listing, offsets_sink, read
from .options import Options
from .schemas import ERROR_SCHEMA, GAP_SCHEMA, GROUP_TYPES, RECORD_SCHEMA, ROW_SCHEMA
from .spark_session import StageProgress, progress


@dataclass
class DirectOffsets:
    """The offsets_history part files the read tasks wrote (kept reads only) and what they hold."""
    files: list[str] = field(default_factory=list)
    rows: int = 0
    first_time: int | None = None
    last_time: int | None = None

    def keep(self, infos: list[tuple], staging: str, table_dir: str) -> None:
        """Move the part files of a consistently read partition's units into the table, named as Spark
        names its part files; count their rows and time span (the units' "I" rows)."""
        for i in infos:
            n, first, last, name = i[15:19]
            if not n:
                continue
            dest = os.path.join(table_dir, f"part-{len(self.files):05d}-{uuid.uuid4()}-c000.snappy.parquet")
            os.replace(os.path.join(staging, name), dest)
            self.files.append(dest)
            self.rows += n
            self.first_time = first if self.first_time is None else min(self.first_time, first)
            self.last_time = last if self.last_time is None else max(self.last_time, last)


@dataclass
class Loaded:
    """What the read stage gives the rest of the pipeline."""
    records: DataFrame
    errors: DataFrame
    gaps: DataFrame               # GAP_SCHEMA: offset gaps above the cleaner checkpoint
    files: int                    # segment files read (in the consistent reads)
    decoded: int                  # records decoded (in the consistent reads, every group)
    error_rows: int               # rows of `errors`
    rereads: int                  # partitions read more than once (their files changed under a read)
    # the rows of `records` of GROUP_TYPES, cached in a few partitions (with the errors)
    group_records: DataFrame
    offsets: DirectOffsets = field(default_factory=DirectOffsets)   # offset commits the tasks wrote
    # __consumer_offsets' record rows by type (in the consistent reads): a type not in it has no rows, and
    # the stages that only read it are skipped
    types: dict[str, int] = field(default_factory=dict)


def _list_settled(data_dir: str, partitions: set[int] | None, tries: int = 20):
    """List; while a swap is under way in some partition (it takes milliseconds), list those again."""
    listings, note = listing.list_partitions(data_dir, partitions)
    for _ in range(tries):
        busy = {p for p, lst in listings.items() if lst.busy}
        if not busy:
            break
        time.sleep(0.05)
        again, note = listing.list_partitions(data_dir, busy)
        listings.update(again)
    return listings, note


def load(spark: SparkSession, opts: Options,
         after_listing: Callable[[int, dict], None] | None = None, offsets_dir: str | None = None) -> Loaded:
    """The executors read and decode every segment; each partition's read is one consistent state of
    its log, else the partition is read again (at most `opts.read_attempts` reads), else it becomes an
    `unstable` error row and its records are left out. `after_listing(attempt, listings)` runs between
    a listing and its read (tests use it to swap segments at the worst moment).

    With `offsets_dir` (offsets_history's table directory, emptied first) the read tasks write the plain
    offset commits there themselves (`offsets_sink.OffsetsSink`: part files in a staging directory, renamed into
    the table once their partition's read is found consistent, deleted otherwise), and `records` holds
    only the rest; `Loaded.offsets` counts what they wrote."""
    sc = spark.sparkContext
    sink_root, direct = None, DirectOffsets()
    if offsets_dir is not None:
        shutil.rmtree(offsets_dir, ignore_errors=True)
        sink_root = os.path.join(offsets_dir, "_staging")      # `_`: a directory Spark's readers skip
        os.makedirs(sink_root)
    kept: list[DataFrame] = []
    infos: list[tuple] = []
    gaps: list[tuple] = []
    unstable_rows: list[tuple] = []
    files, rereads, decoded, error_rows = 0, set(), 0, 0
    types: dict[str, int] = {}
    pending: set[int] | None = None
    unsplit: set[int] = set()             # read each file in one piece (its pieces did not chain)
    tries: dict[int, int] = {}            # reads of a partition that changed under them
    attempt = 0
    while True:
        listings, note = _list_settled(opts.data_dir, pending)
        if note is not None and attempt == 0:
            progress(f"warning: {note}")
        units = [u for p in sorted(listings)
                 for u in listings[p].units(None if p in unsplit else opts.split_bytes)]
        if attempt == 0:
            files_n = sum(len(lst.files) for lst in listings.values())
            progress(f"{files_n} segment file(s) in {len(listings)} partition(s) of {read.OFFSETS_TOPIC} "
                     f"under {opts.data_dir}, read as {len(units)} piece(s)")
        else:
            progress(f"read {attempt + 1}: {len(units)} piece(s) of segment files of partition(s) "
                     f"{sorted(listings)}")
        if after_listing is not None:
            after_listing(attempt, listings)
        attempt += 1
        if not listings:
            break
        sink = None
        if sink_root is not None:
            sink = offsets_sink.OffsetsSink(os.path.join(sink_root, str(attempt)), opts.group, opts.since, opts.until)
            os.makedirs(sink.staging)
        rdd = sc.parallelize(units, max(len(units), 1)).flatMap(functools.partial(read.unit_rows, sink=sink))
        # one task per unit; decoded once: the plain offset commits into the task's own Parquet file (with
        # a sink), the rest straight into JVM rows (no second pass through Python), kept for every later stage
        raw = spark.createDataFrame(rdd, ROW_SCHEMA, verifySchema=False).persist(StorageLevel.MEMORY_AND_DISK)
        with StageProgress(sc, "reading segment files", opts.progress_interval_s):
            meta = [(r["kind"], tuple(json.loads(r["meta"])))            # one pass: fills the cache
                    for r in raw.filter(F.col("kind").isin("I", "G")).select("kind", "meta").collect()]
        after, _ = listing.list_partitions(opts.data_dir, set(listings))
        by_part: dict[int, list] = {}
        for t in meta:
            by_part.setdefault(t[1][0], []).append(t)
        reasons, broken = {}, {}
        for p, lst in listings.items():
            units_i = [t[1] for t in by_part.get(p, ()) if t[0] == "I"]
            rows, joins, bad = listing.merge_pieces(units_i, lst.clean_to)
            reason = listing.unstable_reason(lst, rows, after.get(p))
            if reason is not None:
                reasons[p] = reason
                continue
            if bad:
                broken[p] = bad
                continue
            files += len(lst.files)
            decoded += sum(i[13] for i in units_i)
            error_rows += sum(i[14] for i in units_i)
            for i in units_i:
                for t, n in i[19].items():
                    types[t] = types.get(t, 0) + n
            if sink is not None and offsets_dir is not None:      # a sink: there is a table directory
                direct.keep(units_i, sink.staging, offsets_dir)
            infos += rows
            gaps += [(g[0], g[3], g[4], f"inside {g[1]} at byte {g[2]}")
                     for g in [g for k, g in by_part.get(p, ()) if k == "G"] + joins]
            gaps += listing.partition_gaps(lst, rows)
        stable = frozenset(listings) - frozenset(reasons) - frozenset(broken)
        if stable:
            kept.append(raw.filter(F.col("kind").isin("R", "E") & F.col("partition").isin(sorted(stable))))
        else:
            raw.unpersist()
        for p, bad in sorted(broken.items()):
            progress(f"partition {p}: the pieces of {listing.some_files(bad)} did not read one chain of batches "
                     f"(damage stopped a read where a later piece read on); read again, each file in one piece")
        unsplit |= set(broken)
        rereads |= set(reasons)
        for p, why in sorted(reasons.items()):
            tries[p] = tries.get(p, 0) + 1
            if tries[p] < max(opts.read_attempts, 1):
                progress(f"partition {p} changed under the read ({why})")
                continue
            unstable_rows.append((listings[p].dir, p, None, None, read.UNSTABLE,
                                  f"{why}; still changing after {tries[p]} read(s): the partition's "
                                  f"records are left out, run the audit again"))
        pending = {p for p in reasons if tries[p] < max(opts.read_attempts, 1)} | set(broken)
        if not pending:
            break
    if sink_root is not None:
        shutil.rmtree(sink_root, ignore_errors=True)     # the part files of reads found inconsistent
    raw_all = spark.createDataFrame([], ROW_SCHEMA)
    for df in [*kept, *_other_topic(spark, opts, read.TRANSACTION_STATE_TOPIC),
               *_other_topic(spark, opts, read.SHARE_STATE_TOPIC)]:
        raw_all = raw_all.unionByName(df)
    # what the later stages read - the records that are rows and the errors, a few percent of the log - sits in
    # one cached partition per piece (83 at 10M records), so every later job would run a task per piece. What
    # they read again - the group records (nearly all of those rows) and the errors - is gathered into a few
    # partitions, cached (a coalesce: no shuffle; one scan of the read's cache for both)
    rest = raw_all.filter(F.col("kind").isin("R", "E"))
    gathered = (rest.filter((F.col("kind") == "E") | F.col("type").isin(*GROUP_TYPES))
                .coalesce(max(1, spark.sparkContext.defaultParallelism)).persist(StorageLevel.MEMORY_AND_DISK))
    records = rest.filter(F.col("kind") == "R").select(*RECORD_SCHEMA.names)
    group_records = gathered.filter(F.col("kind") == "R").select(*RECORD_SCHEMA.names)
    errors = (gathered.filter(F.col("kind") == "E").select(F.from_json("meta", ERROR_SCHEMA).alias("e"))
              .select(*(F.col("e")[n].alias(n) for n in ERROR_SCHEMA.names)))
    if unstable_rows:
        errors = errors.unionByName(spark.createDataFrame(unstable_rows, ERROR_SCHEMA))
    if opts.group is not None:       # coordinator moves, markers and transaction states name no group: they stay
        records = records.filter((F.col("group") == opts.group) | F.col("group").isNull())
        group_records = group_records.filter((F.col("group") == opts.group) | F.col("group").isNull())
    return Loaded(records, errors, spark.createDataFrame(sorted(gaps), GAP_SCHEMA), files,
                  decoded, error_rows + len(unstable_rows), len(rereads), group_records, direct, types)


def _other_topic(spark: SparkSession, opts: Options, topic: str) -> list[DataFrame]:
    """The records (and errors) of `__transaction_state` or `__share_group_state`, read as
    `__consumer_offsets` is (each with its own codec): the first names the transactional id of each producer
    id, the second holds the share partitions' delivery states. Small topics, read once: without the re-read
    of partitions a compaction swap changed (a swap during that read can only leave a producer id's
    transactional id unknown, or a share partition's state at an earlier write, never wrong: compaction
    removes superseded states)."""
    listings, _ = listing.list_partitions(opts.data_dir, topic=topic)
    units = [u for p in sorted(listings) for u in listings[p].units()]
    if not units:
        return []
    rows = spark.sparkContext.parallelize(units, len(units)).flatMap(read.unit_rows)
    return [spark.createDataFrame(rows, ROW_SCHEMA, verifySchema=False).filter(F.col("kind").isin("R", "E"))
            .persist(StorageLevel.MEMORY_AND_DISK)]
