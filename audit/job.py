"""The audit pipeline (driver side): segment files -> Spark -> Parquet tables, report, summary.

`run` is an audit: a Spark session (spark_session.py), the read stage (`load`, load.py), the tables built
over it (`build`, tables.py), written with the summary (`write_tables`, summary.py) and the report
(report.py). See docs/audit.md for the tables, the rules behind every column and the anomaly thresholds.
"""
from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from pyspark import StorageLevel
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tenure.protocol.internal_topics import SHARE_STATE_TOPIC

from . import spark_session
from .load import load
from .options import SPLIT_BYTES, Options  # noqa: F401 (SPLIT_BYTES: imported from here too, by bench/)
from .schemas import DELIVERIES_SCHEMA, OFFSETS_SCHEMA, RANGE_SCHEMA
from .spark_session import progress, session
from .summary import summarize, summary_table
from .tables import (
    Tables,
    anomalies,
    catchup_ranges,
    fold_all,
    fold_input,
    offsets_history,
    share_deliveries,
    static_events,
    topic_names,
    window,
)

TABLES = ("member_map_history", "generations", "static_events", "offsets_history", "catchup_ranges", "share_deliveries",
          "anomalies", "errors")


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
    events_w = window(events, "log_time", None, opts)
    if got.types.get("offset_commit"):
        # a commit marker's verdict reads the plain commits the read tasks wrote too (only with markers)
        plain = (spark.read.schema(OFFSETS_SCHEMA).parquet(*got.offsets.files)
                 if got.offsets.files and got.types.get("txn_marker") else None)
        offsets = offsets_history(records, plain).cache()     # the offset commits that are rows (few, unless no sink)
        ranges = catchup_ranges(offsets)
    else:                                              # none: every commit went to the read tasks' files
        offsets, ranges = spark.createDataFrame([], OFFSETS_SCHEMA), spark.createDataFrame([], RANGE_SCHEMA)
    ranges_w = window(ranges, "opened", "closed", opts).cache()
    offset_rows = window(offsets, "log_time", None, opts)
    # __share_group_state's records (a small topic): the records delivered more than once or archived
    shares = any(Path(opts.data_dir).glob(f"{SHARE_STATE_TOPIC}-*"))
    deliveries = (share_deliveries(records, topic_names(opts.data_dir)) if shares
                  else spark.createDataFrame([], DELIVERIES_SCHEMA))
    deliveries_w = window(deliveries, "first_time", "done_time", opts).cache()
    direct = got.offsets
    tables = Tables({
        "member_map_history": history_w,
        "generations": gens_w,
        "static_events": events_w,
        "offsets_history": (offset_rows if not direct.files else
                            spark.read.schema(OFFSETS_SCHEMA).parquet(*direct.files).unionByName(offset_rows)),
        "catchup_ranges": ranges_w,
        "share_deliveries": deliveries_w,
        # written, summarised and reported: computed once
        "anomalies": anomalies(folded.filter(F.col("tag") == "a").select("a.*"), errors, got.gaps, ranges_w,
                               deliveries_w if shares else None).cache(),
        "errors": errors,
    })
    tables.direct, tables.offset_rows, tables.shares = direct, offset_rows, shares
    tables.counts = folded.filter(F.col("tag") == "s").select("s")
    tables.drawings = folded.filter(F.col("tag") == "r").select("s")
    return tables, got.files


WRITERS = 3      # driver threads submitting the tables' jobs at once (see write_tables)
Gathered = TypeVar("Gathered")


def write_tables(tables: Tables, out: Path, gather: Callable[[], Gathered] | None = None,
                 then: Callable[[dict, Gathered | None], None] | None = None) -> dict:
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
    if spark is None:
        if not opts.master.startswith("local") and opts.python_env is None:
            progress("no executors' environment (--python-env none): their Python must have kafka-python, crc32c "
                     "and pyarrow installed (docs/audit.md, running on a cluster)")
        progress(f"starting Spark ({opts.master})")
        spark = session(opts.master, python_env=opts.python_env, conf=opts.conf, spark_log=opts.spark_log)
        if spark_session.JVM_LOG is not None:
            progress(f"Spark's own warnings and errors go to {spark_session.JVM_LOG} (--spark-log: here)")
    ok = False
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

            def render(s: dict, data: dict | None) -> None:
                progress("rendering report.html")
                report.write_report(tables, s, out, opts, data)
        s = write_tables(tables, out, gather, render)
        print(summary_table(s))
        progress(f"done in {time.monotonic() - t0:.1f} s; tables and report in {out}")
        ok = True
        return (1 if s["errors"] else 0), s
    finally:
        if own:
            spark.stop()
            jvm_log, log_dir = spark_session.JVM_LOG, spark_session.JVM_LOG_DIR
            if jvm_log is not None and not ok:
                progress(f"failed; Spark's own warnings and errors are in {jvm_log}")
            elif log_dir is not None:
                shutil.rmtree(log_dir, ignore_errors=True)
