"""Where the audit's executor time goes, per record: one segment file read the way an audit task reads it,
each step timed alone in CPU seconds (time.process_time, so other load on the machine matters little).

    .venv/bin/python bench/audit_decode.py DATA_DIR/__consumer_offsets-0/00000000000000000000.log

Steps: the segment reader (tenure.storage.reader.SegmentReader: length, magic, CRC-32C of every batch), as
the audit reads a file; finding the first batch of each 16 MiB piece (walking batch lengths from the file's
start, read.split's pieces); kafka-python's DefaultRecordBatch iteration
(keys, values, offsets, timestamps); tenure.protocol.records.decode of every record; the offset commits the way
the audit decodes them (each distinct key once, the value straight into its fields); the row tuples; pickling
the rows (what PySpark sends from a Python worker to the JVM); and tenure.audit.read.unit_rows end to end on
the same file: without a sink (every record a row) and with one, as the audit runs it (read.OffsetsSink: the
plain offset commits written as an offsets_history Parquet part file by the task, the rest rows). Prints
figures only.
"""
from __future__ import annotations

import os
import pickle
import sys
import tempfile
import time
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tenure.audit import job, read  # noqa: E402
from tenure.protocol import records as rec  # noqa: E402
from tenure.storage.reader import BadBatch, SegmentReader  # noqa: E402


def main(path: str) -> None:
    clock = time.process_time
    t = clock()
    batches = []
    with SegmentReader(path, resync=True) as reader:
        for b in reader:
            if isinstance(b, BadBatch):
                sys.exit(f"{path}: {b.reason} at byte {b.position}")
            batches.append(b.data)
    steps = [("SegmentReader (length, magic, CRC-32C)", clock() - t)]
    size = os.path.getsize(path)
    starts = [u.start for u in read.split(read.Unit(0, path, 0, False, (0, 0, size, 0)), job.SPLIT_BYTES)][1:]
    t = clock()
    for start in starts:
        SegmentReader(path, start, None, align_from=0).close()
    steps.append((f"first batch of {len(starts)} later 16 MiB pieces (walking lengths)", clock() - t))
    t = clock()
    kv = [(r.key, r.value, r.offset, r.timestamp) for b in batches for r in DefaultRecordBatch(b)]
    steps.append(("kafka-python batch + record iteration", clock() - t))
    t = clock()
    decoded = [rec.decode(k, v) for k, v, _, _ in kv]
    steps.append(("tenure.protocol.records.decode", clock() - t))
    t = clock()
    keys: dict = {}
    for k, v, _, _ in kv:                  # the audit's offset-commit path (read._records)
        if k in keys or rec.key_version(k) in (0, rec.OFFSET_COMMIT_KEY_VERSION):
            if k not in keys:
                keys[k] = rec.offset_commit_key(k)
            if v is not None:
                rec.offset_commit_value(v)
    steps.append((f"offset commits: {len(keys):,} distinct keys + values", clock() - t))
    t = clock()
    rows = [read._record_row(0, o, ts, d) for (_, _, o, ts), d in zip(kv, decoded)]
    steps.append(("row tuples", clock() - t))
    t = clock()
    pickle.dumps(rows, protocol=5)
    steps.append(("pickle (Python worker -> JVM)", clock() - t))
    kinds: dict[str, int] = {}
    for d in decoded:
        kinds[type(d).__name__] = kinds.get(type(d).__name__, 0) + 1
    n = len(kv)
    # end to end as a Spark Python worker runs it: without the steps' lists held alive (every pass of the
    # garbage collector would walk them), pyarrow imported (once per worker, not per task), best of 3
    del kv, decoded, rows
    import pyarrow.parquet  # noqa: F401
    listings, _ = read.list_partitions(os.path.dirname(os.path.dirname(os.path.abspath(path))), None)
    units = [u for p in sorted(listings) for u in listings[p].units() if u.path == os.path.abspath(path)]
    for name, sinked in (("read.unit_rows end to end, no sink", False),
                         ("read.unit_rows end to end, with a sink", True)):
        best = None
        for _ in range(3):
            with tempfile.TemporaryDirectory() as staging:
                sink = read.OffsetsSink(staging) if sinked else None
                t = clock()
                sum(1 for u in units for _ in read.unit_rows(u, sink))
                x = clock() - t
            best = x if best is None else min(best, x)
        steps.append((name, best))
    print(f"{path}: {n:,} records in {len(batches):,} batches, {size / 2**20:.1f} MiB; {kinds}")
    for name, x in steps:
        print(f"  {name:40s} {x:7.2f} s CPU  {x / n * 1e6:6.1f} us/record")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: bench/audit_decode.py SEGMENT.log")
    main(sys.argv[1])
