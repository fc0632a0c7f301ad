"""Where `tenure audit`'s wall time goes, in two views that bench/audit.py does not give. Prints figures only.

    .venv/bin/python bench/audit_stages.py events EVENTLOG_DIR
        Spark's own event log of one audit, one line per job: when it started and ended (seconds since the
        application started), how long it ran, its stages' task counts and durations. Make the log with
        tenure audit DIR --out OUT --conf spark.eventLog.enabled=true --conf spark.eventLog.dir=file:///tmp/EV
                                  --conf spark.eventLog.compress=false
        (or bench/audit.py ... --audit-conf KEY=VALUE for each of the three).

    .venv/bin/python bench/audit_stages.py pyread DATA_DIR [--processes 2]
        The audit's read without Spark: every piece of every __consumer_offsets segment file read by
        `tenure.audit.read.unit_rows` with a sink (the plain offset commits written as Parquet part files to a
        temporary directory, as the audit's read tasks write them) in a pool of processes: the wall time
        and the processes' CPU seconds, the floor of the audit's read stage on this machine.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def events(log_dir: str) -> None:
    files = sorted(p for p in Path(log_dir).rglob("*") if p.is_file() and not p.name.startswith((".", "appstatus")))
    if not files:
        sys.exit(f"{log_dir}: no event log file")
    t0, jobs, stages = None, {}, {}
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    e = json.loads(line)
                except ValueError:
                    sys.exit(f"{f}: not a JSON event log (compressed? use spark.eventLog.compress=false)")
                kind = e.get("Event")
                if kind == "SparkListenerApplicationStart":
                    t0 = e["Timestamp"]
                elif kind == "SparkListenerJobStart":
                    jobs[e["Job ID"]] = {"start": e["Submission Time"],
                                         "stages": [s["Stage ID"] for s in e["Stage Infos"]],
                                         "site": e.get("Properties", {}).get("callSite.short", "")}
                elif kind == "SparkListenerJobEnd" and e["Job ID"] in jobs:
                    jobs[e["Job ID"]]["end"] = e["Completion Time"]
                elif kind == "SparkListenerStageCompleted":
                    s = e["Stage Info"]
                    if s.get("Submission Time") is not None:
                        stages[s["Stage ID"]] = (s["Number of Tasks"], s["Completion Time"] - s["Submission Time"])
    if t0 is None:
        sys.exit(f"{log_dir}: no application start in the event log")
    print(f"{len(jobs)} jobs")
    for j, d in sorted(jobs.items()):
        end = d.get("end")
        ran = "" if end is None else f"{(end - d['start']) / 1000:6.2f} s"
        stages_run = ", ".join(f"{stages[s][0]} tasks {stages[s][1] / 1000:.2f} s" for s in d["stages"] if s in stages)
        print(f"job {j:3d}  {(d['start'] - t0) / 1000:7.2f} -> "
              f"{'?' if end is None else f'{(end - t0) / 1000:7.2f}'}  {ran}  [{stages_run}]  {d['site'][:50]}")


def _read(args) -> tuple[float, int]:
    from tenure.audit import read
    unit, staging = args
    c = time.process_time()
    n = sum(1 for _ in read.unit_rows(unit, read.OffsetsSink(staging)))
    return time.process_time() - c, n


def pyread(data_dir: str, processes: int) -> None:
    from tenure.audit import job, read
    listings, _ = read.list_partitions(data_dir, None)
    units = [u for p in sorted(listings) for u in listings[p].units(job.SPLIT_BYTES)]
    if not units:
        sys.exit(f"{data_dir}: no __consumer_offsets segment file")
    staging = tempfile.mkdtemp(prefix="tenure-bench-pyread-")
    try:
        t = time.monotonic()
        with Pool(processes) as pool:
            got = pool.map(_read, [(u, staging) for u in units], chunksize=1)
        wall = time.monotonic() - t
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    cpu = sum(c for c, _ in got)
    print(f"{len(units)} pieces of {sum(len(lst.files) for lst in listings.values())} segment file(s) read by "
          f"{processes} process(es): wall {wall:.1f} s, CPU {cpu:.1f} s; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    e = sub.add_parser("events", help="per-job timings from a Spark event log directory")
    e.add_argument("dir")
    r = sub.add_parser("pyread", help="the audit's read in a process pool, without Spark")
    r.add_argument("data_dir")
    r.add_argument("--processes", type=int, default=2)
    args = ap.parse_args()
    if args.what == "events":
        events(args.dir)
    else:
        pyread(args.data_dir, args.processes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
