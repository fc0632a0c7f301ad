"""The read tasks' own offsets_history part files: with an `OffsetsSink`, a task of the read stage writes the
plain offset commits it decodes as a Parquet part file of offsets_history (`OffsetsWriter`, fed straight
from the decode in read.py) instead of turning them into rows; the driver (job.py) renames the part files
of consistently read partitions into the table."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .listing import Unit

if TYPE_CHECKING:                     # imported when a task first writes (executors without a sink never do)
    import pyarrow.parquet as pq

# offsets_history, as the job writes it (Spark's column types: tenure.audit.job.OFFSETS_SCHEMA)
OFFSETS_FIELDS = ("group", "topic", "partition", "offset", "commit_time", "metadata", "deleted", "log_partition",
                  "log_offset", "log_time", "transactional_id", "producer_id", "producer_epoch", "outcome",
                  "marker_offset")
_CHECKPOINT = None                    # the catch-up consumer's checkpoint metadata prefix (catchup_ranges)


def _checkpoint_prefix() -> str:
    global _CHECKPOINT
    if _CHECKPOINT is None:
        from tenure.catchup.ranges import PREFIX
        _CHECKPOINT = PREFIX + " instance="
    return _CHECKPOINT


@dataclass(frozen=True)
class OffsetsSink:
    """Where read tasks write offsets_history part files themselves (a staging directory every executor
    sees, under the table's own directory), and the job's filters that apply to that table: --group, and
    --since/--until on the log time. The task writes the plain offset commits (`OffsetsWriter.add`): not a
    transactional one (its outcome and transactional id are joined on by the job) nor a catch-up
    checkpoint (catchup_ranges folds those), which stay rows."""
    staging: str
    group: str | None = None
    since: int | None = None
    until: int | None = None


_NO_TIME = (-(1 << 63), 1 << 63)              # no --since/--until: every int64 log time passes


class OffsetsWriter:
    """One task's offsets_history part file: the plain offset commits of its piece that pass the sink's
    filters, written with pyarrow in row groups of `ROWS` (the task holds one row group at a time), first
    to a hidden temporary name, renamed to its own name when complete (a task Spark runs again writes the
    same file again). The decode hands each commit over as its fields (`add`): no row is built, a row
    group is one list of scalars per column (a row group of tuples held alive would lengthen every pass
    of Python's garbage collector), turned into Arrow columns at the flush."""
    ROWS = 1 << 16
    # dictionary-encoded: the columns whose values repeat (the others' dictionaries overflow: wasted work)
    DICTIONARY = ["group", "topic", "partition", "metadata", "log_partition"]

    def __init__(self, sink: OffsetsSink, unit: Unit) -> None:
        self.sink, self.unit = sink, unit
        self.name = f"p{unit.partition}-{unit.base_offset:020d}-{unit.piece:05d}.parquet"
        self.tmp = os.path.join(sink.staging, f".{self.name}.{os.getpid()}.tmp")
        self.checkpoint = _checkpoint_prefix()
        self.since = _NO_TIME[0] if sink.since is None else sink.since
        self.until = _NO_TIME[1] if sink.until is None else sink.until
        # group, topic, partition, offset, commit time, metadata, log offset, log time
        self.cols: tuple[list, ...] = tuple([] for _ in range(8))
        self.writer: pq.ParquetWriter | None = None
        self.seen = self.n = 0                # commits taken (what the read decoded), rows written
        self.first: int | None = None         # log time span of the rows written
        self.last: int | None = None

    def add(self, k: tuple[str, str, int], log_offset: int, log_time: int, value: tuple | None) -> bool:
        """Take one plain offset commit as decoded - its key's fields (`k`: group, topic, partition), its
        value's (`rec.offset_commit_value`; None: a tombstone) - unless it is a catch-up checkpoint (False:
        it stays a row). A taken commit outside the filters is dropped."""
        if value is not None and value[2] is not None and value[2].startswith(self.checkpoint):
            return False
        self.seen += 1
        if not self.since <= log_time < self.until:
            return True
        group = self.sink.group
        if group is not None and k[0] != group:
            return True
        c = self.cols
        c[0].append(k[0])
        c[1].append(k[1])
        c[2].append(k[2])
        if value is None:
            c[3].append(None)
            c[4].append(None)
            c[5].append(None)
        else:
            c[3].append(value[0])
            c[4].append(value[3])
            c[5].append(value[2])
        c[6].append(log_offset)
        c[7].append(log_time)
        if len(c[0]) >= self.ROWS:
            self._flush()
        return True

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
        c, n = self.cols, len(self.cols[0])
        if not n:
            return
        offset = pa.array(c[3], pa.int64())
        times = pa.array(c[7], pa.int64())
        lo, hi = (x.as_py() for x in pc.min_max(times).values())
        self.first = lo if self.first is None else min(self.first, lo)
        self.last = hi if self.last is None else max(self.last, hi)
        table = pa.table([pa.array(c[0], pa.string()), pa.array(c[1], pa.string()), pa.array(c[2], pa.int32()),
                          offset, pa.array(c[4], pa.int64()), pa.array(c[5], pa.string()),
                          offset.is_null(),            # a tombstone: no offset (a commit's value always has one)
                          pa.repeat(pa.scalar(self.unit.partition, pa.int32()), n),
                          pa.array(c[6], pa.int64()), times,
                          *(pa.nulls(n, t) for t in _TXN_TYPES())], names=list(OFFSETS_FIELDS))
        writer = self.writer
        if writer is None:
            writer = self.writer = pq.ParquetWriter(self.tmp, table.schema, compression="snappy",
                                                    use_dictionary=self.DICTIONARY)
        writer.write_table(table)
        self.n += n
        for col in c:
            col.clear()

    def close(self) -> tuple:
        """Write what is left and put the file in place: (rows, first log time, last log time, file name)."""
        self._flush()
        if self.writer is None:
            return 0, None, None, None
        self.writer.close()
        self.writer = None
        os.replace(self.tmp, os.path.join(self.sink.staging, self.name))
        return self.n, self.first, self.last, self.name

    def abort(self) -> None:
        if self.writer is not None:          # the task failed (or its output was not consumed) mid-file
            self.writer.close()
            self.writer = None
            try:
                os.unlink(self.tmp)
            except FileNotFoundError:
                pass


def _TXN_TYPES():
    import pyarrow as pa
    return (pa.string(), pa.int64(), pa.int32(), pa.string(), pa.int64())
