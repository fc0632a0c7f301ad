"""The audit pipeline (driver side): segment files -> Spark -> Parquet tables, report, summary.

See docs/audit.md for the tables, the rules behind every column and the anomaly thresholds.
"""
from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from . import listing, offsets_sink, read
from .fold import (
    ANOMALY_FIELDS,
    COORDINATOR_MOVED,
    GENERATION_FIELDS,
    HISTORY_FIELDS,
    RANGE_FIELDS,
    Checks,
    fold_catchup_ranges,
    fold_groups,
    fold_member_map,
    in_arrow,
)

EXECUTOR_ENV_DIR = "environment"     # where spark.archives unpacks --python-env on each executor
TABLES = ("member_map_history", "generations", "static_events", "offsets_history", "catchup_ranges", "anomalies",
          "errors")
SPLIT_BYTES = 16 << 20               # pieces per segment file: both cores of a small machine read one big file

S, L, I, B = T.StringType(), T.LongType(), T.IntegerType(), T.BooleanType()
# a GroupMetadata record's member as the later stages read it (its client id and host are in no table)
MEMBER = T.StructType([T.StructField("member_id", S), T.StructField("instance_id", S)])
RECORD_SCHEMA = T.StructType([T.StructField(n, t) for n, t in (
    ("partition", I), ("offset", L), ("timestamp", L), ("type", S), ("group", S), ("tombstone", B),
    # static-member events
    ("instance_id", S), ("cause", S), ("old_member_id", S), ("new_member_id", S), ("event_generation", I),
    ("event_time", L), ("client_id", S), ("client_host", S),
    # group metadata
    ("generation", I), ("protocol_type", S), ("protocol", S), ("leader", S), ("state_timestamp", L),
    ("members", T.ArrayType(MEMBER)),
    # offset commits
    ("topic", S), ("topic_partition", I), ("committed_offset", L), ("commit_time", L), ("metadata", S),
    # transactions: an offset commit's producer (a transactional batch), a marker's producer and kind
    # (commit/abort), a __transaction_state record's producer, state name (in `marker`) and transactional id
    ("producer_id", L), ("producer_epoch", I), ("marker", S), ("transactional_id", S),
)])
# the record types the per-group pass and static_events read
GROUP_TYPES = ("group_metadata", "static_member_event", "coordinator_load")
# what the read stage yields (read.unit_rows): kind R (a record), E (an error), I (how a unit's read went),
# G (a gap inside a file); the record columns; the payload of E/I/G rows as JSON
ROW_SCHEMA = T.StructType([T.StructField("kind", S), *RECORD_SCHEMA.fields, T.StructField("meta", S)])
ERROR_SCHEMA = T.StructType([T.StructField("file", S), T.StructField("log_partition", I),
                             T.StructField("position", L), T.StructField("offset", L),
                             T.StructField("kind", S), T.StructField("reason", S)])
assert len(RECORD_SCHEMA.fields) == read.RECORD_COLUMNS and tuple(ERROR_SCHEMA.names) == read.ERROR_FIELDS
OFFSETS_SCHEMA = T.StructType([T.StructField(n, {
    "group": S, "topic": S, "partition": I, "metadata": S, "deleted": B, "log_partition": I, "transactional_id": S,
    "producer_epoch": I, "outcome": S}.get(n, L)) for n in offsets_sink.OFFSETS_FIELDS])
GAP_SCHEMA = T.StructType([T.StructField("log_partition", I), T.StructField("from_offset", L),
                           T.StructField("to_offset", L), T.StructField("where", S)])
HISTORY_SCHEMA = T.StructType([T.StructField(n, {
    "group": S, "instance_id": S, "member_id": S, "log_partition": I, "start_cause": S, "end_cause": S,
    "from_generation": I, "to_generation": I, "from_broker": I, "to_broker": I}.get(n, L)) for n in HISTORY_FIELDS])
GENERATIONS_SCHEMA = T.StructType([T.StructField(n, t, nullable) for n, t, nullable in (
    ("group", S, True), ("generation", I, True), ("time", L, True), ("protocol_type", S, True), ("protocol", S, True),
    ("leader", S, True), ("member_count", I, False),
    ("members", T.ArrayType(MEMBER, False), False),
    ("trigger", S, False), ("rebalance_start", L, True), ("joined", T.ArrayType(S), False),
    ("left", T.ArrayType(S), False), ("log_partition", I, True), ("log_offset", L, True),
    ("state_timestamp", L, True))])
assert tuple(GENERATIONS_SCHEMA.names) == GENERATION_FIELDS
RANGE_SCHEMA = T.StructType([T.StructField(n, {"group": S, "topic": S, "partition": I, "merged_into": S,
                                                "instance_id": S, "log_partition": I}.get(n, L))
                             for n in RANGE_FIELDS])
ANOMALY_SCHEMA = T.StructType([T.StructField(n, t) for n, t in (
    ("kind", S), ("group", S), ("instance_id", S), ("count", L), ("first_time", L), ("last_time", L),
    ("detail", S))])
assert tuple(ANOMALY_SCHEMA.names) == ANOMALY_FIELDS
# fold.fold_groups' rows: a tag (fold.FOLD_TAGS) and one of a history row, a generation, an anomaly, or (as JSON)
# a task's counts or one group's drawing for the report
FOLD_SCHEMA = T.StructType([T.StructField("tag", S), T.StructField("h", HISTORY_SCHEMA),
                            T.StructField("g", GENERATIONS_SCHEMA), T.StructField("a", ANOMALY_SCHEMA),
                            T.StructField("s", S)])


@dataclass
class Options:
    data_dir: str
    out: str
    master: str = "local[*]"
    group: str | None = None
    since: int | None = None          # ms since the epoch; keeps rows whose time is >= since
    until: int | None = None          # ms since the epoch; keeps rows whose time is < until
    storm_k: int = 5                  # more than K rebalances ...
    storm_window_ms: int = 60_000     # ... within this window is a storm
    expiry_n: int = 2                 # an instance expiring at least N times
    churn_n: int = 4                  # an instance with at least N distinct member ids
    report: bool = True
    read_attempts: int = 3            # reads of a partition whose files a compaction swap changed meanwhile
    split_bytes: int | None = SPLIT_BYTES   # a segment file is read as pieces of about this size (listing.split)
    progress_interval_s: float = 5.0  # progress of the read stage on stderr every so often
    python_env: str | None = None     # a packed environment (tenure.audit.pack) for a cluster's executors
    conf: dict | None = None          # further Spark settings

    def checks(self) -> Checks:
        return Checks(self.since, self.until, self.storm_k, self.storm_window_ms, self.expiry_n, self.churn_n)


_T0 = time.monotonic()


def progress(msg: str) -> None:
    print(f"audit: [{time.monotonic() - _T0:6.1f} s] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------- Spark set-up
def package_zip(dest_dir: str) -> str:
    """The installed `tenure` package (every subpackage, wherever package-dir maps it) as one zip, for
    executors of a remote master (spark.submit.pyFiles / SparkContext.addPyFile)."""
    import importlib
    names = ["tenure", "tenure.protocol", "tenure.protocol.schemas", "tenure.broker", "tenure.storage",
             "tenure.coordinator", "tenure.audit", "tenure.catchup"]
    path = os.path.join(dest_dir, "tenure.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name in names:
            pkg = importlib.import_module(name)
            src = Path(list(pkg.__path__)[0])
            for f in sorted(src.iterdir()):
                if f.is_file() and f.suffix in (".py", ".json"):
                    z.write(f, "/".join(name.split(".")) + "/" + f.name)
    return path


def session(master: str = "local[*]", app: str = "tenure-audit", python_env: str | None = None,
            conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession for the audit. A local master runs the workers on this interpreter. Any other
    master gets the `tenure` package as a zip (`addPyFile`) and, with `python_env`, a packed Python
    environment holding the executors' third-party dependencies (`tenure.audit.pack`): shipped with
    `spark.archives` and unpacked as `./environment` in each executor's working directory, whose
    `bin/python` runs the Python workers. `conf`: further Spark settings (`--conf K=V`)."""
    b = (SparkSession.builder.master(master).appName(app)
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "4")
         .config("spark.default.parallelism", "4")
         .config("spark.sql.session.timeZone", "UTC")
         # the cached DataFrames hold a few percent of the log: building the compressed in-memory columns
         # (dictionary statistics of every string column) cost more CPU than anything they saved
         .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
         .config("spark.ui.showConsoleProgress", "false")    # progress: our own lines on stderr
         .config("spark.log.level", "WARN")
         # offsets_history's part files (one or more per piece: 85 at 10M records) are given by path: Spark
         # would list more than 32 with a job of its own; the driver stats them itself
         .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "4096"))
    if master.startswith("local"):
        # loopback only; the workers run this interpreter, where tenure and its dependencies are installed
        b = (b.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.pyspark.python", sys.executable))
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # the JVM's optimizing JIT compiler (C2) cost more CPU than it saved in a job of seconds to minutes
        # on two cores (a third of the JVM's CPU at 1M records, docs/benchmarks.md); --conf overrides it
        # without C2 the JVM's code cache defaults to 48 MiB, which a long-lived session running many audits
        # (the tests' one session) filled: "Out of space in CodeCache for adapters" killed the JVM
        b = b.config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m")
        # the one JVM is driver and executor: Spark's default 1g heap ran out at 10M records (Java heap
        # space, while the persisted read spilled to disk); --conf spark.driver.memory=... overrides it
        b = b.config("spark.driver.memory", "2g")
        # the JVM reads it at start: without it Spark warns that the host name resolves to a loopback
        # address and picks another interface, which a local run never uses
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    elif python_env is not None:
        where = python_env if "://" in python_env else os.path.abspath(python_env)   # hdfs://, s3a://, ...
        b = b.config("spark.archives", f"{where}#{EXECUTOR_ENV_DIR}")
        # read by SparkContext when it starts: the executors' Python workers run the packed interpreter
        os.environ["PYSPARK_PYTHON"] = f"./{EXECUTOR_ENV_DIR}/bin/python"
    for k, v in (conf or {}).items():
        b = b.config(k, v)
    # py4j logs each gateway connection it closes at INFO; the audit's own progress lines are enough
    logging.getLogger("py4j").setLevel(logging.WARNING)
    spark = b.getOrCreate()
    if not master.startswith("local"):
        spark.sparkContext.addPyFile(package_zip(tempfile.mkdtemp(prefix="tenure-audit-")))
    return spark


# ---------------------------------------------------------------------------------------- pipeline
class _StageProgress:
    """While a Spark job runs: a thread polling the status tracker, printing its stages' task counts
    (one task = one segment file in the read stage) when they change, every `interval` seconds."""

    def __init__(self, sc, label: str, interval: float) -> None:
        self.sc, self.label, self.interval = sc, label, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="audit-progress", daemon=True)

    def _run(self) -> None:
        tracker, last = self.sc.statusTracker(), None
        while not self._stop.wait(self.interval):
            try:
                infos = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            except Exception:             # the context is stopping
                return
            done = sum(i.numCompletedTasks for i in infos if i is not None)
            total = sum(i.numTasks for i in infos if i is not None)
            running = sum(i.numActiveTasks for i in infos if i is not None)
            if total and (done, total, running) != last:
                last = (done, total, running)
                progress(f"{self.label}: {done}/{total} done, {running} running")

    def __enter__(self) -> _StageProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


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
    offsets: DirectOffsets = field(default_factory=DirectOffsets)   # offset commits the tasks wrote
    # __consumer_offsets' record rows by type (in the consistent reads): a type not in it has no rows, and
    # the stages that only read it are skipped
    types: dict[str, int] = field(default_factory=dict)
    # the rows of `records` of GROUP_TYPES, cached in a few partitions (with the errors)
    group_records: DataFrame | None = None


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
    kept, infos, gaps, unstable_rows = [], [], [], []
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
        rows = sc.parallelize(units, max(len(units), 1)).flatMap(functools.partial(read.unit_rows, sink=sink))
        # one task per unit; decoded once: the plain offset commits into the task's own Parquet file (with
        # a sink), the rest straight into JVM rows (no second pass through Python), kept for every later stage
        raw = spark.createDataFrame(rows, ROW_SCHEMA, verifySchema=False).persist(StorageLevel.MEMORY_AND_DISK)
        with _StageProgress(sc, "reading segment files", opts.progress_interval_s):
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
            if sink is not None:
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
    for df in [*kept, *_transaction_state(spark, opts)]:
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
                  decoded, error_rows + len(unstable_rows), len(rereads), direct, types, group_records)


def _transaction_state(spark: SparkSession, opts: Options) -> list[DataFrame]:
    """The records (and errors) of `__transaction_state`, read as `__consumer_offsets` is (its own
    codec): they name the transactional id of each producer id. A small topic, read once: without the
    re-read of partitions a compaction swap changed (a swap during the read can only leave a producer
    id's transactional id unknown, never wrong: it removes superseded states)."""
    listings, _ = listing.list_partitions(opts.data_dir, topic=read.TRANSACTION_STATE_TOPIC)
    units = [u for p in sorted(listings) for u in listings[p].units()]
    if not units:
        return []
    rows = spark.sparkContext.parallelize(units, len(units)).flatMap(read.unit_rows)
    return [spark.createDataFrame(rows, ROW_SCHEMA, verifySchema=False).filter(F.col("kind").isin("R", "E"))
            .persist(StorageLevel.MEMORY_AND_DISK)]


def static_events(records: DataFrame) -> DataFrame:
    return (records.filter(F.col("type") == "static_member_event")
            .select("group", "instance_id", "cause", "old_member_id", "new_member_id",
                    F.col("event_generation").alias("generation"), "event_time", "client_id", "client_host",
                    "tombstone", F.col("partition").alias("log_partition"), F.col("offset").alias("log_offset"),
                    F.col("timestamp").alias("log_time")))


def offsets_history(records: DataFrame) -> DataFrame:
    """offsets_history rows of the offset commits among `records` (all of them, or with the read tasks
    writing the plain ones themselves, the transactional ones and the catch-up checkpoints). An offset
    committed inside a transaction (TxnOffsetCommit: a transactional batch of a producer) gets its producer
    id and epoch, the transactional id that producer id belongs to (from `__transaction_state`; null if no
    record of it is left), and its outcome: the first commit or abort marker of that producer id after it in
    the same partition decides (`committed`, `aborted`, with `marker_offset`), none yet is `open`. Plain
    commits have nulls there."""
    commits = (records.filter(F.col("type") == "offset_commit")
               .select("group", "topic", F.col("topic_partition").alias("partition"),
                       F.col("committed_offset").alias("offset"), "commit_time", "metadata",
                       F.col("tombstone").alias("deleted"), F.col("partition").alias("log_partition"),
                       F.col("offset").alias("log_offset"), F.col("timestamp").alias("log_time"),
                       "producer_id", "producer_epoch"))
    markers = (records.filter(F.col("type") == "txn_marker")
               .select(F.col("partition").alias("m_partition"), F.col("offset").alias("m_offset"),
                       F.col("producer_id").alias("m_producer"), F.col("marker").alias("m_kind")))
    txn = commits.filter(F.col("producer_id").isNotNull())
    ends = (txn.join(markers, (txn["log_partition"] == markers["m_partition"])
                     & (txn["producer_id"] == markers["m_producer"]) & (markers["m_offset"] > txn["log_offset"]))
            .groupBy("log_partition", "log_offset")
            .agg(F.min("m_offset").alias("marker_offset"), F.min_by("m_kind", "m_offset").alias("m_kind")))
    ids = (records.filter((F.col("type") == "transaction_state") & F.col("producer_id").isNotNull())
           .groupBy("producer_id")
           .agg(F.max_by("transactional_id", F.struct("timestamp", "partition", "offset")).alias("transactional_id")))
    outcome = (F.when(F.col("producer_id").isNull(), F.lit(None).cast(S))
               .when(F.col("m_kind") == "commit", F.lit("committed"))
               .when(F.col("m_kind") == "abort", F.lit("aborted")).otherwise(F.lit("open")))
    return (commits.join(ends, ["log_partition", "log_offset"], "left").join(ids, "producer_id", "left")
            .select(*(outcome.alias(n) if n == "outcome" else F.col(n) for n in offsets_sink.OFFSETS_FIELDS)))


def catchup_ranges(offsets: DataFrame) -> DataFrame:
    """The catch-up consumer's range tokens (the OffsetCommit metadata of its companion group), folded per
    (group, topic, partition) on the executors: one row per range, when it opened, when it was fully
    processed (or merged into a wider range), and what it still owes at the end of the log. `offsets`:
    offsets_history rows (before --since/--until) holding every checkpoint; one committed in a transaction
    counts at its commit marker, an aborted or open one not at all."""
    from tenure.catchup.ranges import PREFIX
    commits = (offsets.filter(~F.col("deleted") & F.col("metadata").startswith(PREFIX + " instance=")
                              & (F.col("outcome").isNull() | (F.col("outcome") == "committed")))
               .select("group", "topic", "partition", "metadata",
                       # the commit's own time (the consumer's clock at the broker), else the record's
                       F.coalesce(F.when(F.col("commit_time") >= 0, F.col("commit_time")),
                                  F.col("log_time")).alias("time"),
                       "log_partition", F.coalesce("marker_offset", "log_offset").alias("log_offset")))
    key = ("group", "topic", "partition")
    rows = commits.repartition(*key).sortWithinPartitions(*key, "log_partition", "log_offset")
    return rows.mapInArrow(in_arrow(fold_catchup_ranges, to_arrow_schema(RANGE_SCHEMA)), RANGE_SCHEMA)


def fold_input(records: DataFrame, moves: bool = True) -> DataFrame:
    """What the per-group folds read: the GroupMetadata and static-member records, and each coordinator move
    (CoordinatorLoad record) given to every group of its partition, one group's rows together in log order
    (sorted by group, partition, offset). Only the columns the folds read; a snapshot's members as two arrays
    of strings (member ids, instance ids), not structs. `moves=False`: the records hold no coordinator move
    (the read counted none), and the join that gives each one to its partition's groups is left out."""
    members = F.coalesce("members", F.array())
    records = records.select("group", "partition", "offset", "timestamp", "type", "tombstone", "instance_id", "cause",
                             "old_member_id", "new_member_id", "event_time", "generation", "protocol_type", "protocol",
                             "leader", "state_timestamp",
                             F.transform(members, lambda m: m["member_id"]).alias("all_member_ids"),
                             F.transform(members, lambda m: m["instance_id"]).alias("all_instance_ids"))
    rows = records.filter(F.col("type").isin("group_metadata", "static_member_event"))
    if moves:
        rows = rows.unionByName(records.filter(F.col("type") == "coordinator_load").drop("group")
                                .join(rows.select("group", "partition").distinct(), "partition"))
    return rows.repartition("group").sortWithinPartitions("group", "partition", "offset")


def member_map_history(grouped: DataFrame) -> DataFrame:
    """The member-map intervals of each (group, instance), and a row per coordinator move of the group's
    offsets partition (`fold_input`'s rows folded by `fold.fold_member_map`)."""
    return (grouped.select("group", "partition", "offset", "timestamp", "type", "tombstone", "instance_id", "cause",
                           "old_member_id", "new_member_id", "event_time", "generation", "all_member_ids",
                           "all_instance_ids")
            .mapInArrow(in_arrow(fold_member_map, to_arrow_schema(HISTORY_SCHEMA)), HISTORY_SCHEMA))


def fold_all(grouped: DataFrame, checks: Checks) -> DataFrame:
    """`fold_input`'s rows folded in one pass per group on the executors (`fold.fold_groups`): FOLD_SCHEMA rows,
    member_map_history rows (tag h), generations (g) and anomalies (a) inside the window, each task's counts
    for the summary (s) and what report.html draws of each task's most active groups (r)."""
    return grouped.mapInArrow(in_arrow(functools.partial(fold_groups, checks=checks), to_arrow_schema(FOLD_SCHEMA)),
                              FOLD_SCHEMA)


def anomalies(per_group: DataFrame, errors: DataFrame, gaps: DataFrame, ranges: DataFrame | None = None) -> DataFrame:
    """The anomalies: those of each group's rows in the --since/--until window (`fold.group_anomalies`, in
    the per-group pass), the catch-up ranges still owing offsets, and the log's own problems (damage, gaps),
    which have no time and are always reported."""
    cols = list(ANOMALY_FIELDS)
    damage = (errors.filter(~F.col("kind").isin(*read.NOT_DAMAGE))
              .select(F.lit("log_damage").alias("kind"), F.lit(None).cast(S).alias("group"),
                      F.lit(None).cast(S).alias("instance_id"), F.lit(1).cast(L).alias("count"),
                      F.lit(None).cast(L).alias("first_time"), F.lit(None).cast(L).alias("last_time"),
                      F.concat_ws(" ", "kind", "file", F.lit("at byte"), "position", F.lit(":"), "reason")
                      .alias("detail")))
    log_gaps = gaps.select(
        F.lit("log_gap").alias("kind"), F.lit(None).cast(S).alias("group"), F.lit(None).cast(S).alias("instance_id"),
        (F.col("to_offset") - F.col("from_offset")).alias("count"), F.lit(None).cast(L).alias("first_time"),
        F.lit(None).cast(L).alias("last_time"),
        F.concat(F.lit("offsets "), F.col("from_offset").cast(S), F.lit(".."), (F.col("to_offset") - 1).cast(S),
                 F.lit(f" of {read.OFFSETS_TOPIC}-"), F.col("log_partition").cast(S),
                 F.lit(" missing (never cleaned: at or above the cleaner checkpoint), "), F.col("where"))
        .alias("detail"))
    extra = []
    if ranges is not None:
        # a catch-up range still owing offsets at the end of the log: never committed (yet)
        extra.append(ranges.filter(F.col("owed_from").isNotNull()).select(
            F.lit("catchup_unfinished").alias("kind"), "group", "instance_id",
            (F.col("owed_to") - F.col("owed_from")).alias("count"), F.col("opened").alias("first_time"),
            F.col("last_checkpoint").alias("last_time"),
            F.concat(F.lit("topic "), F.col("topic"), F.lit(" partition "), F.col("partition").cast(S),
                     F.lit(": range "), F.col("lo").cast(S), F.lit("-"), F.col("hi").cast(S),
                     F.lit(", offsets "), F.col("owed_from").cast(S), F.lit(".."), (F.col("owed_to") - 1).cast(S),
                     F.lit(" never committed")).alias("detail")))
    out = per_group.select(*cols)
    for df in (damage, log_gaps, *extra):
        out = out.unionByName(df.select(*cols))
    return out


def _window(df: DataFrame, start: str, end: str | None, opts: Options) -> DataFrame:
    if opts.since is not None:
        df = df.filter(F.col(end).isNull() | (F.col(end) >= opts.since)) if end else df.filter(F.col(start) >= opts.since)
    if opts.until is not None:
        df = df.filter(F.col(start) < opts.until)
    return df


class Tables(dict):
    """The tables by name; with the read tasks' own offsets_history part files, what they hold
    (`direct`) and the table's rows computed by Spark (`offset_rows`, appended to those files); the
    per-group pass's counts (`counts`) and drawings (`drawings`)."""
    direct: DirectOffsets | None = None
    offset_rows: DataFrame | None = None
    counts: DataFrame | None = None        # the per-group pass's counts, a JSON row per task (fold._Counts)
    drawings: DataFrame | None = None      # what report.html draws of each task's most active groups (JSON)


def build(spark: SparkSession, opts: Options,
          after_listing: Callable[[int, dict], None] | None = None) -> tuple[Tables, int]:
    # plain offset commits (~96% of a log's records) go from the read tasks straight into offsets_history's
    # part files; only the rest becomes rows in the JVM
    got = load(spark, opts, after_listing, offsets_dir=str(Path(opts.out) / "offsets_history"))
    records, errors = got.records, got.errors             # over the persisted read: nothing is decoded again
    # counted by the read itself (its per-unit rows): no pass over the records for it
    progress(f"{got.decoded} record(s) decoded, {got.error_rows} error row(s), {got.offsets.rows} offset "
             f"commit(s) written by the read tasks"
             + (f", {got.rereads} partition(s) read again after a compaction swap" if got.rereads else ""))
    # GroupMetadata, static-member and coordinator-move records: a few percent of the log, all that the fold
    # and the events read, cached by the read with the errors; filled by one job (else the stages' first jobs,
    # started at once, would each compute it)
    group_records = got.group_records
    group_records.count()
    events = static_events(group_records)               # written and drawn: a filter of the cached rows
    # one shuffle puts each group's records together in log order; one Python pass per group folds them into
    # its member-map intervals, generations, anomalies and counts (kept: every table after it reads them)
    grouped = fold_input(group_records, moves=bool(got.types.get("coordinator_load")))
    folded = fold_all(grouped, opts.checks()).persist(StorageLevel.MEMORY_AND_DISK)
    history_w = folded.filter(F.col("tag") == "h").select("h.*")      # inside the window already
    gens_w = folded.filter(F.col("tag") == "g").select("g.*")
    events_w = _window(events, "log_time", None, opts)
    if got.types.get("offset_commit"):
        offsets = offsets_history(records).cache()     # the offset commits that are rows (few, unless no sink)
        ranges = catchup_ranges(offsets)
    else:                                              # none: every commit went to the read tasks' files
        offsets, ranges = spark.createDataFrame([], OFFSETS_SCHEMA), spark.createDataFrame([], RANGE_SCHEMA)
    ranges_w = _window(ranges, "opened", "closed", opts).cache()
    offset_rows = _window(offsets, "log_time", None, opts)
    direct = got.offsets
    tables = Tables({
        "member_map_history": history_w,
        "generations": gens_w,
        "static_events": events_w,
        "offsets_history": (offset_rows if not direct.files else
                            spark.read.schema(OFFSETS_SCHEMA).parquet(*direct.files).unionByName(offset_rows)),
        "catchup_ranges": ranges_w,
        # written, summarised and reported: computed once
        "anomalies": anomalies(folded.filter(F.col("tag") == "a").select("a.*"), errors, got.gaps, ranges_w).cache(),
        "errors": errors,
    })
    tables.direct, tables.offset_rows = direct, offset_rows
    tables.counts = folded.filter(F.col("tag") == "s").select("s")
    tables.drawings = folded.filter(F.col("tag") == "r").select("s")
    return tables, got.files


def summarize(tables: Tables) -> dict:
    """The summary's counts: the member ids, generations and static events counted by the per-group pass
    itself (a row per task), the errors, offset commits and anomalies by one small aggregate job each;
    offsets_history's part files written by the read tasks are counted by the tasks themselves, not read
    again."""
    by_cause: dict[str, int] = {}
    member_ids = moves = groups = instances = n_gens = n_events = 0
    events, firsts, lasts = {}, [], []
    for r in tables.counts.collect():
        c = json.loads(r["s"])
        for start, end, member, n in c["intervals"]:
            if start == COORDINATOR_MOVED:
                moves += n
            if not member:
                continue
            member_ids += n
            for cause in (start, end):
                if cause is not None:
                    by_cause[cause] = by_cause.get(cause, 0) + n
        groups += c["groups"]
        instances += c["instances"]
        n_gens += c["generations"]
        firsts.append(c["gen_first"])
        lasts.append(c["gen_last"])
        for cause, tombstone, n, a, b in c["events"]:
            n_events += n
            firsts.append(a)
            lasts.append(b)
            if not tombstone:
                events[cause] = events.get(cause, 0) + n
    errs = {r["kind"]: r["count"] for r in tables["errors"].groupBy("kind").count().collect()}
    direct = tables.direct
    offsets = tables["offsets_history"] if direct is None else tables.offset_rows
    n_offsets, txn = 0, {}
    for r in (offsets.groupBy("outcome")
              .agg(F.count("*").alias("n"), F.min("log_time").alias("a"), F.max("log_time").alias("b")).collect()):
        n_offsets += r["n"]
        firsts.append(r["a"])
        lasts.append(r["b"])
        if r["outcome"] is not None:
            txn[r["outcome"]] = r["n"]
    if direct is not None and direct.rows:
        n_offsets += direct.rows
        firsts.append(direct.first_time)
        lasts.append(direct.last_time)
    firsts = [x for x in firsts if x is not None]
    lasts = [x for x in lasts if x is not None]
    return {
        "events_by_cause": dict(sorted(events.items())),     # as the server's static-event counters
        "first_time": min(firsts) if firsts else None, "last_time": max(lasts) if lasts else None,
        "groups": groups,
        "instances": instances,
        "member_ids": member_ids,
        "coordinator_moves": moves,                         # rows per group of each moved offsets partition
        "changes_by_cause": dict(sorted(by_cause.items())),
        "generations": n_gens,
        "static_events": n_events,
        # the group's commits: plain ones and those of committed transactions (aborted and open ones never
        # count for the group; they are in transactional_commits)
        "offset_commits": n_offsets - txn.get("aborted", 0) - txn.get("open", 0),
        "transactional_commits": dict(sorted(txn.items())),
        "anomalies": {r["kind"]: r["count"] for r in tables["anomalies"].groupBy("kind").count().collect()},
        "errors": sum(n for k, n in errs.items() if k != read.TORN_TAIL),     # unstable counts: records left out
        "errors_by_kind": errs,
    }


def summary_table(s: dict) -> str:
    rows = [("groups", s["groups"]), ("instances", s["instances"]), ("member ids (intervals)", s["member_ids"])]
    rows += [("generations", s["generations"]), ("static events", s["static_events"])]
    if s.get("coordinator_moves"):
        rows += [("coordinator moves (per group)", s["coordinator_moves"])]
    rows += [(f"  {c}", n) for c, n in s["events_by_cause"].items()]
    rows += [("offset commits", s["offset_commits"])]
    rows += [(f"  in transactions, {k}", n) for k, n in s.get("transactional_commits", {}).items()]
    rows += [("anomalies", sum(s["anomalies"].values()))]
    rows += [(f"  {k}", n) for k, n in sorted(s["anomalies"].items())]
    rows += [("errors", s["errors"])]
    rows += [(f"  {k}", n) for k, n in sorted(s["errors_by_kind"].items())]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v:>8}" for k, v in rows)


WRITERS = 3      # driver threads submitting the tables' jobs at once (see write_tables)


def write_tables(tables: Tables, out: Path, gather: Callable[[], object] | None = None,
                 then: Callable[[dict, object], None] | None = None) -> dict:
    """Write every table and compute the summary; with `gather` and `then` (the report): `gather()` beside
    them, then `then(summary, what gather returned)`. Returns the summary. After the read the jobs are small
    and their cost is mostly the driver's and the JVM's (planning, code generation, scheduling), with the
    executors' cores idle in between: a few driver threads submit them at once (Spark runs jobs from
    several threads side by side; a cached table two of them need is computed once, the second waits for
    its blocks)."""
    def write(name: str) -> None:
        t0 = time.monotonic()
        if name == "offsets_history" and tables.direct is not None:
            # the read tasks' part files are in place: Spark adds the rows it computed (and _SUCCESS)
            tables.offset_rows.write.mode("append").parquet(str(out / name))
        else:
            tables[name].write.mode("overwrite").parquet(str(out / name))
        progress(f"wrote {name} ({time.monotonic() - t0:.1f} s)")

    progress(f"writing {', '.join(TABLES)}")
    with ThreadPoolExecutor(WRITERS, thread_name_prefix="audit-write") as pool:
        gathered = None if gather is None else pool.submit(gather)
        done = [pool.submit(write, name) for name in TABLES]
        summary = summarize(tables)           # this thread: its jobs run beside the writes
        if then is not None:
            then(summary, None if gathered is None else gathered.result())
        for f in done:
            f.result()
    return summary


def run(opts: Options, spark: SparkSession | None = None,
        after_listing: Callable[[int, dict], None] | None = None) -> tuple[int, dict]:
    """Run the audit; returns (exit code, summary). Exit 1 if any batch or record could not be read
    (damage, or a partition left out as `unstable`; a torn tail of a newest segment is not damage),
    else 0."""
    t0 = time.monotonic()
    own = spark is None
    if own:
        progress(f"starting Spark ({opts.master})")
        if not opts.master.startswith("local") and opts.python_env is None:
            progress("warning: no --python-env: the executors' Python must have kafka-python, crc32c and pyarrow "
                     "installed (docs/audit.md, running on a cluster)")
        spark = session(opts.master, python_env=opts.python_env, conf=opts.conf)
    try:
        tables, _ = build(spark, opts, after_listing)
        out = Path(opts.out)
        out.mkdir(parents=True, exist_ok=True)
        gather = render = None
        if opts.report:
            from . import report

            def gather() -> dict:
                progress("collecting the report's data")
                return report.collect(tables)

            def render(s: dict, data: dict) -> None:
                progress("rendering report.html")
                report.write_report(tables, s, out, opts, data)
        s = write_tables(tables, out, gather, render)
        print(summary_table(s))
        progress(f"done in {time.monotonic() - t0:.1f} s; tables and report in {out}")
        return (1 if s["errors"] else 0), s
    finally:
        if own:
            spark.stop()
