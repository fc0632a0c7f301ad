"""Executor side of the audit: read one segment file of `__consumer_offsets` and turn it into rows; and
the driver's cheap side of it: listing the segment files, checking that a partition's read was
consistent, and finding offset gaps.

Runs inside Spark's Python workers (shipped as part of the `tenure` package), so it uses only the
project's own storage and protocol code: the server's one segment reader (`tenure.storage.reader`,
`SegmentReader`) reads and verifies each batch (length, magic, CRC-32C, offsets moving forward) and
`tenure.protocol.records.decode` decodes each record (`tenure.protocol.txn_records` for a
`__transaction_state` file). Nothing is skipped silently: every batch or record that cannot be read
becomes an error row. A transactional batch's offset commits carry its producer id and epoch; a
transactional control batch (a commit or abort marker) is a row of its own. With an `OffsetsSink` the
plain offset commits are written by the task as a Parquet part file of offsets_history (`OffsetsWriter`)
instead of becoming rows.

A live server appends to the newest segment and its log cleaner swaps cleaned segments in (new files,
renames, see `SegmentLog.replace_segments`). The listing records every segment file's identity (device,
inode, size, mtime). A unit reads its file only if the file it opens is the listed one (the newest may
have grown) and only up to the size listed (a batch straddling that size is read whole: it was being
written), so a read is the log as listed; a changed file gives an `unstable` row instead of records. The
driver lists again after the read (`unstable_reason`): a partition whose files changed or that had a
swap under way is read again (docs/audit.md). A batch that looks torn is re-read a few times while the
file grows; one still torn at the end of the newest segment is a `torn_tail` row ("not yet written"),
reported but not damage. Any other failed batch is `damage`.

Besides records ("R") and errors ("E") a unit yields one "I" row (how the read went: the file's status,
its batch count, first and next offset) and "G" rows (offset gaps inside the file above the cleaner
checkpoint); the driver collects those (one per file, gaps are rare) for the checks.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch

from tenure.broker.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from tenure.broker.transactions import COMMIT, marker_type
from tenure.protocol import records as rec
from tenure.protocol import txn_records
from tenure.storage.checkpoints import read_checkpoint
from tenure.storage.files import MERGING, SUFFIX, SWAP
from tenure.storage.reader import BadBatch, SegmentReader

_PART_DIRS = {topic: re.compile(rf"^{topic}-(\d+)$") for topic in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)}
_SWAP_MARKERS = (SUFFIX + SWAP, SUFFIX + MERGING)    # a swap past its first step and not finished

# error kinds
DAMAGE = "damage"                  # a batch failing verification (not a tail still being written)
TORN_TAIL = "torn_tail"            # the newest segment ends in an incomplete batch: not yet written
UNDECODABLE = "undecodable"        # a sound batch whose records, or one record, do not decode
UNKNOWN_TYPE = "unknown_type"      # a record key version tenure does not know (a server skips it too)
UNREADABLE = "unreadable"          # the file could not be opened or read (not because it was swapped)
UNSTABLE = "unstable"              # the partition's files kept changing under the read (log cleaner swaps):
                                   # its records are left out, not half read; not damage
NOT_DAMAGE = (TORN_TAIL, UNSTABLE)

# "I" row status
OK, CHANGED, OPEN_FAILED = "ok", "changed", "open_failed"


def file_id(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def same_file(listed: tuple, now: tuple, newest: bool) -> bool:
    """Is `now` (a file_id) still the listed file? The newest segment may only have grown; any other
    segment is immutable (a cleaned one is a new file: a new inode and mtime)."""
    if newest:
        return listed[:2] == now[:2] and now[2] >= listed[2]
    return listed == now


@dataclass(frozen=True)
class Unit:
    """One unit of work: one segment file as listed, or one byte range of it (a piece: see `split`)."""
    partition: int
    path: str
    base_offset: int
    newest: bool          # the partition's newest (active) segment: a torn tail there is not damage
    ident: tuple | None = None    # file_id at listing; None: read whatever is there (no consistency check)
    clean_to: int | None = 0      # the cleaner checkpoint: offsets below may be cleaned (None: unknown)
    start: int = 0                # the piece's byte range [start, end): it reads the batches starting in it
    end: int | None = None        # None: to the end of the file
    piece: int = 0                # this piece's index among the file's `pieces`
    pieces: int = 1
    topic: str = OFFSETS_TOPIC    # __consumer_offsets, or __transaction_state (its records decoded as such)


def split(unit: Unit, split_bytes: int | None) -> list[Unit]:
    """One segment file as pieces of about `split_bytes` each, so that several tasks read one big file (one
    piece, the file itself, if it is smaller or `split_bytes` is None). Input splits as Hadoop makes them
    of a file with no sync markers: each piece reads the batches that *start* in its byte range (the
    segment reader's byte-range read: its first batch found by walking the batch lengths from the
    file's start) up to the first batch starting at or past the range end, read whole even if it runs
    past it. `merge_pieces` then checks on the driver that each piece began exactly where the one before
    it stopped, so the pieces read the file's one chain of batches, as a single read would (where damage
    stops a read, a later piece may have read on: that file is read again in one piece)."""
    size = unit.ident[2] if unit.ident is not None else None
    if split_bytes is None or size is None or size <= split_bytes:
        return [unit]
    n = -(-size // split_bytes)
    step = -(-size // n)
    return [replace(unit, start=i * step, end=None if i == n - 1 else (i + 1) * step, piece=i, pieces=n)
            for i in range(n)]


@dataclass
class Listing:
    """One partition directory as listed: its segment files (base offset, path, file_id) in offset order,
    what showed a swap under way, and the cleaner checkpoint read after the files were listed."""
    partition: int
    dir: str
    files: list[tuple[int, str, tuple]] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)
    clean_to: int | None = 0
    topic: str = OFFSETS_TOPIC

    def units(self, split_bytes: int | None = None) -> list[Unit]:
        """One unit per segment file, or per piece of it with `split_bytes` (see `split`)."""
        n = len(self.files)
        return [piece for i, (base, path, ident) in enumerate(self.files)
                for piece in split(Unit(self.partition, path, base, i == n - 1, ident, self.clean_to,
                                        topic=self.topic), split_bytes)]


def list_partitions(data_dir: str, partitions: set[int] | None = None,
                    topic: str = OFFSETS_TOPIC) -> tuple[dict[int, Listing], str | None]:
    """Every `<topic>-<n>/` directory's segment files (`__consumer_offsets` unless said) with their
    identities (driver side, cheap: names and stat), then the cleaner checkpoint. Returns (listings, a note
    if the checkpoint is unreadable: then no partition's gaps can be told from compaction and none are
    reported)."""
    out: dict[int, Listing] = {}
    root = Path(data_dir)
    for d in sorted(root.iterdir()):
        m = _PART_DIRS[topic].match(d.name)
        if m is None or not d.is_dir():
            continue
        part = int(m.group(1))
        if partitions is not None and part not in partitions:
            continue
        lst = out[part] = Listing(part, str(d), topic=topic)
        try:
            names = sorted(os.listdir(d))
        except FileNotFoundError:
            lst.busy.append(f"{d} vanished while listed")
            continue
        for name in names:
            if name.endswith(_SWAP_MARKERS):
                lst.busy.append(name)
                continue
            stem, suffix = os.path.splitext(name)
            if suffix != SUFFIX or not stem.isdigit():
                continue
            path = os.path.join(d, name)
            try:
                lst.files.append((int(stem), path, file_id(os.stat(path))))
            except FileNotFoundError:
                lst.busy.append(f"{name} (vanished while listed)")
        lst.files.sort()
    note = None
    try:                                  # after the files: it covers every swap they show
        checkpoint = read_checkpoint(data_dir)
    except (OSError, ValueError) as exc:
        checkpoint, note = None, f"{exc}: offset gaps are not checked"
    for part, lst in out.items():
        lst.clean_to = None if checkpoint is None else checkpoint.get((topic, part), 0)
    return out, note


def list_units(data_dir: str, partitions: set[int] | None = None) -> list[Unit]:
    """The segment files of every `__consumer_offsets-<n>/` directory, as units."""
    listings, _ = list_partitions(data_dir, partitions)
    return [u for part in sorted(listings) for u in listings[part].units()]


def row_partition(t: tuple) -> int:
    """The log partition of any row read_unit yields."""
    return t[1][1] if t[0] == "E" else t[1][0]


def unstable_reason(first: Listing, infos: list[tuple], second: Listing | None) -> str | None:
    """Why the read of one partition may not be one consistent state of its log (None: it is): a swap
    under way at either listing, a file that changed between the listing and its read ("I" rows with
    status `changed`), or a listed file changed, removed or joined by an older one by the second listing.
    Segments rolled after the first listing (above its newest) do not matter: they were not read."""
    if first.busy:
        return (f"a compaction swap was under way when the files were listed ({', '.join(first.busy)}; left "
                f"by an interrupted one, a server's next open finishes or undoes it)")
    changed = sorted(i[1] for i in infos if i[2] == CHANGED)
    if changed:
        return f"{_some(changed)} changed between listing and reading (a compaction swap)"
    if second is None:
        return f"{first.dir} vanished during the read"
    if second.busy:
        return f"a compaction swap was under way after the read ({', '.join(second.busy)})"
    now = {path: ident for _, path, ident in second.files}
    newest = first.files[-1][0] if first.files else None
    for i, (base, path, ident) in enumerate(first.files):
        if path not in now:
            return f"{path} was removed during the read (a compaction swap)"
        if not same_file(ident, now[path], i == len(first.files) - 1):
            return f"{path} was replaced during the read (a compaction swap)"
    listed = {path for _, path, _ in first.files}
    extra = sorted(p for b, p, _ in second.files if p not in listed and newest is not None and b < newest)
    if extra:
        return f"{_some(extra)} appeared during the read below the newest segment"
    return None


def merge_pieces(infos: list[tuple], clean_to: int | None) -> tuple[list[tuple], list[tuple], list[str]]:
    """The "I" rows of one partition's units, pieces of one file merged: (one info per file - partition,
    path, status, batches, first offset, next offset -, the "G" gaps at the joins between pieces, the files
    whose pieces did not read one chain of batches). A file's pieces read what a single read of it reads
    when each piece began at the very batch where the one before stopped (an empty piece: its whole range
    lay inside that batch) and the offsets moved forward across the join; else (damage at a join, a
    position inside a batch that looked like a sound batch) the file is to be read again in one piece."""
    by_path: dict[str, list[tuple]] = {}
    for i in infos:
        by_path.setdefault(i[1], []).append(i)
    merged, gaps, broken = [], [], []
    for path, rows in by_path.items():
        rows.sort(key=lambda i: i[6])
        if len(rows) == 1 and rows[0][7] == 1:
            merged.append(rows[0][:6])
            continue
        part = rows[0][0]
        status = next((i[2] for i in rows if i[2] != OK), OK)
        whole = len(rows) == rows[0][7] and [i[6] for i in rows] == list(range(len(rows)))
        pos = expect = prev_next = None
        first, end, ended = None, None, False
        for i in rows if whole and status == OK else ():
            _, _, _, batches, first_i, end_i, piece, _, start, stop, expect_i, prev_next_i, ended_i = i[:13]
            if piece == 0:
                first = first_i
            elif start is None:            # no batch starts in this piece's range: the batch before covers it
                if not ended and (pos is None or pos < stop):
                    whole = False
                    break
                continue
            elif ended or start != pos or (first_i is not None and expect is not None and first_i < expect):
                whole = False
                break
            elif first_i is not None and prev_next is not None and first_i > prev_next and clean_to is not None \
                    and first_i > clean_to:
                gaps.append((part, path, start, max(prev_next, clean_to), first_i))
            pos, expect, prev_next, ended = stop, expect_i, prev_next_i, ended_i
            if batches:
                end = end_i
        if status == OK and not whole:
            broken.append(path)
            continue
        merged.append((part, path, status, sum(i[3] for i in rows), first, end))
    return merged, gaps, broken


def _some(paths: list[str], n: int = 3) -> str:
    names = ", ".join(os.path.basename(p) for p in paths[:n])
    return (f"{len(paths)} segment files ({names}, ...)" if len(paths) > n
            else names if len(paths) > 1 else paths[0])


def partition_gaps(lst: Listing, infos: list[tuple]) -> list[tuple]:
    """Offset gaps between the segment files of one consistently read partition, above its cleaner
    checkpoint (offsets below it may have been removed by compaction): (partition, first missing offset,
    the offset after the last missing one, where). The log starts at offset 0; a segment's first batch
    follows the previous segment's last batch; an empty segment's base offset is where the log had
    reached. Offsets unknown after unreadable damage are not guessed (the damage is reported)."""
    if lst.clean_to is None:
        return []
    by_path = {i[1]: i for i in infos}
    out = []
    expected, prev = 0, None
    for base, path, _ in lst.files:
        info = by_path.get(path)
        if info is None or info[2] != OK:
            expected, prev = None, path
            continue
        _, _, _, batches, first, end = info
        start = first if batches else base
        if start is None:
            expected = None
        else:
            if expected is not None and start > expected and start > lst.clean_to:
                where = f"before the first batch of {path}" + (f", after {prev}" if prev else "")
                out.append((lst.partition, max(expected, lst.clean_to), start, where))
            if batches:
                expected = end
            else:
                expected = base if expected is None else max(expected, base)
        prev = path
    return out


def _record_row(part, offset, timestamp, record, producer: tuple[int, int] | None = None) -> tuple:
    """One row of the `records` schema (see `tenure.audit.job.RECORD_SCHEMA`); `producer`: the (id, epoch)
    of the transactional batch an offset commit was written in (TxnOffsetCommit), None for a plain one."""
    if isinstance(record, rec.CoordinatorLoadRecord):     # no group; brokers in the member id columns (fold.py)
        return (part, offset, timestamp, "coordinator_load", None, record.tombstone,
                None, record.cause or None, str(record.previous_broker), str(record.broker), record.leader_epoch,
                record.timestamp, None, None,
                None, None, None, None, None, None,
                None, None, None, None, None, *_NO_TXN)
    g = record.group_id
    if isinstance(record, rec.StaticMemberEventRecord):
        return (part, offset, timestamp, "static_member_event", g, record.tombstone,
                record.group_instance_id, record.cause or None, record.old_member_id, record.new_member_id,
                record.generation, record.timestamp, record.client_id, record.client_host,
                None, None, None, None, None, None,
                None, None, None, None, None, *_NO_TXN)
    if isinstance(record, rec.GroupMetadataRecord):
        members = [(m.member_id, m.group_instance_id) for m in record.members]     # job.MEMBER
        return (part, offset, timestamp, "group_metadata", g, record.tombstone,
                None, None, None, None, None, None, None, None,
                None if record.tombstone else record.generation,
                None if record.tombstone else record.protocol_type,
                record.protocol, record.leader,
                None if record.tombstone else record.current_state_timestamp,
                None if record.tombstone else members,
                None, None, None, None, None, *_NO_TXN)
    if record.tombstone:
        return _commit_row(part, offset, timestamp, g, record.topic, record.partition, None, producer)
    return _commit_row(part, offset, timestamp, g, record.topic, record.partition,
                       (record.offset, record.leader_epoch, record.metadata, record.commit_timestamp), producer)


def _commit_row(part, offset, timestamp, group, topic, partition, value: tuple | None,
                producer: tuple[int, int] | None) -> tuple:
    """An offset commit's row; `value`: its value's fields as `rec.offset_commit_value` gives them (None: a
    tombstone)."""
    txn = _NO_TXN if producer is None else (*producer, None, None)
    if value is None:
        return (part, offset, timestamp, "offset_commit", group, True, *_NO_MEMBER, topic, partition,
                None, None, None, *txn)
    return (part, offset, timestamp, "offset_commit", group, False, *_NO_MEMBER, topic, partition,
            value[0], value[3], value[2], *txn)


_NO_TXN = (None, None, None, None)          # producer_id, producer_epoch, marker, transactional_id
_BLANK = (None,) * 19                       # the record columns from instance_id to metadata
_NO_MEMBER = (None,) * 14                   # the record columns from instance_id to members


def _marker_row(part, h, kind: str) -> tuple:
    """A commit or abort marker (a transactional control batch) of __consumer_offsets, as a record row."""
    return (part, h.base_offset, h.max_timestamp, "txn_marker", None, False, *_BLANK,
            h.producer_id, h.producer_epoch, kind, None)


def _txn_state_row(part, offset, timestamp, record) -> tuple:
    """A __transaction_state record (a transactional id's state) as a record row: the transactional id,
    its producer id and epoch, its state's name in `marker`."""
    return (part, offset, timestamp, "transaction_state", None, record.tombstone, *_BLANK,
            None if record.tombstone else record.producer_id,
            None if record.tombstone else record.producer_epoch,
            None if record.tombstone else record.state_name, record.transactional_id)


ERROR_FIELDS = ("file", "log_partition", "position", "offset", "kind", "reason")
RECORD_COLUMNS = 29                # len(_record_row(...)): the `records` schema, partition first
assert 6 + len(_BLANK) + len(_NO_TXN) == RECORD_COLUMNS


def unit_rows(unit: Unit, sink: OffsetsSink | None = None):
    """read_unit as flat rows of one schema (`tenure.audit.job.ROW_SCHEMA`): the row kind, the record
    columns (a record's; else only the log partition), and for the other kinds their payload as JSON -
    so a unit's output becomes one DataFrame, read and decoded once. With a `sink`, the plain offset
    commits (`OffsetsSink`) are not rows: the task writes them as offsets_history's own Parquet part file
    (`OffsetsWriter`, fed straight from the decode), and its "I" row ends with what it wrote (count,
    first and last log time, file); then, in every "I" row, the record rows yielded by type (the driver
    skips the later stages whose input is known to be empty)."""
    blank = (None,) * (RECORD_COLUMNS - 1)
    out = None if sink is None else OffsetsWriter(sink, unit)
    types: dict[str, int] = {}
    try:
        for kind, payload in read_unit(unit, out):
            if kind == "R":
                types[payload[3]] = types.get(payload[3], 0) + 1
                yield (kind, *payload, None)
            elif kind == "E":
                yield (kind, row_partition((kind, payload)), *blank, json.dumps(dict(zip(ERROR_FIELDS, payload))))
            else:
                if kind == "I":
                    payload = (*payload, *(out.close() if out is not None else (0, None, None, None)), types)
                yield (kind, row_partition((kind, payload)), *blank, json.dumps(payload))
    finally:
        if out is not None:
            out.abort()


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
        self.writer = None
        self.seen = self.n = 0                # commits taken (what the read decoded), rows written
        self.first = self.last = None

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
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.tmp, table.schema, compression="snappy",
                                           use_dictionary=self.DICTIONARY)
        self.writer.write_table(table)
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


def _error(unit: Unit, position, offset, kind, reason) -> tuple:
    return ("E", (unit.path, unit.partition, position, offset, kind, reason))


def _file_error(unit: Unit, kind, reason):
    """An error of the whole file (it cannot be opened, it changed): one row, from its first piece."""
    if unit.piece == 0:
        yield _error(unit, 0, None, kind, reason)


def read_unit(unit: Unit, out: OffsetsWriter | None = None):
    """("R", record row), ("E", error row), ("G", gap) and one ("I", info) tuple of one segment file. With
    `out`, the plain offset commits go to it instead of being record rows (they count as records read)."""
    info = {"status": OK, "batches": 0, "first": None, "end": None, "from": None, "stop": None,
            "expect": None, "prev_next": None, "ended": False}
    n = {"R": 0, "E": 0, "G": 0}
    for t in _read_unit(unit, info, out):
        n[t[0]] += 1
        yield t
    if out is not None:
        n["R"] += out.seen
    yield ("I", (unit.partition, unit.path, info["status"], info["batches"], info["first"], info["end"],
                 # where the piece began and stopped reading, and the chain's state there (merge_pieces)
                 unit.piece, unit.pieces, info["from"], info["stop"], info["expect"], info["prev_next"],
                 info["ended"], n["R"], n["E"]))


def _read_unit(unit: Unit, info: dict, out: OffsetsWriter | None):
    try:
        fd = os.open(unit.path, os.O_RDONLY)
    except FileNotFoundError as exc:
        if unit.ident is None:
            info["status"] = OPEN_FAILED
            yield from _file_error(unit, UNREADABLE, f"cannot be opened: {exc}")
        else:
            info["status"] = CHANGED
            yield from _file_error(unit, UNSTABLE, "removed since it was listed (a compaction swap); "
                                                  "its records are not read")
        return
    except OSError as exc:
        info["status"] = OPEN_FAILED
        yield from _file_error(unit, UNREADABLE, f"cannot be opened: {exc}")
        return
    try:
        now = file_id(os.fstat(fd))
        if unit.ident is not None and not same_file(unit.ident, now, unit.newest):
            info["status"] = CHANGED
            yield from _file_error(unit, UNSTABLE, "replaced since it was listed (a compaction swap); "
                                                  "its records are not read")
            return
        stop = unit.ident[2] if unit.ident is not None else now[2]    # the file as listed
        limit = stop if unit.end is None else min(stop, unit.end)
        # the project's one segment reader: the batches starting in [start, limit) - a piece's first batch
        # found by walking the batch lengths from the file's start -, each checked (offsets moving forward
        # from the segment's base offset), a torn one re-read while the file grows, past a damaged batch
        # only when a sound one follows it
        reader = SegmentReader(fd, unit.start, limit, align_from=0 if unit.start else None, resync=True,
                               expect_offset=unit.base_offset)
        if reader.done or reader.position >= limit:
            info["stop"] = limit          # no batch starts in [start, limit)
            return
        info["from"] = begin = reader.position
        clean_to = unit.clean_to
        prev_next = None                  # next offset after the previous sound batch (None: unknown)
        expect = reader.expect
        for item in reader:
            info["stop"], info["expect"], info["prev_next"] = item.position, expect, prev_next
            if isinstance(item, BadBatch):
                if item.resumes is None and unit.newest and item.torn:
                    yield _error(unit, item.position, item.offset, TORN_TAIL,
                                 f"{item.reason}; the newest segment's tail is not (yet) fully written")
                    info["ended"] = True
                    return
                prev_next = None          # what the damage hides is not a gap to report
                if item.resumes is not None:
                    yield _error(unit, item.position, item.offset, DAMAGE, f"{item.reason}; this batch is skipped")
                    continue
                info["end"] = None
                yield _error(unit, item.position, item.offset, DAMAGE,
                             f"{item.reason}; the rest of this segment ({reader.size - item.position} bytes) "
                             f"cannot be read")
                info["batches"] += 1      # not an empty segment, whatever it held
                info["ended"] = True
                return
            h, start = item.header, item.position
            if start == begin:
                info["first"] = h.base_offset
            if (prev_next is not None and h.base_offset > prev_next and clean_to is not None
                    and h.base_offset > clean_to):
                yield ("G", (unit.partition, unit.path, start, max(prev_next, clean_to), h.base_offset))
            info["batches"] += 1
            info["end"] = prev_next = expect = h.next_offset
            if h.is_control:
                if h.is_transactional and unit.topic == OFFSETS_TOPIC:
                    yield from _marker(unit, h, item.data)
                continue
            yield from _records(unit, h, item.data, out)
        info["stop"], info["expect"], info["prev_next"] = reader.position, expect, prev_next
    except OSError as exc:
        info["end"] = None
        yield _error(unit, 0, None, UNREADABLE, f"read failed: {exc}")
    finally:
        os.close(fd)


def _marker(unit: Unit, h, data: bytes):
    """The row of a transaction's commit or abort marker (or the error of one that does not decode)."""
    try:
        kind = "commit" if marker_type(data) == COMMIT else "abort"
    except Exception as exc:
        yield _error(unit, h.position, h.base_offset, UNDECODABLE,
                     f"the control batch's marker does not decode ({type(exc).__name__}: {exc})")
        return
    yield ("R", _marker_row(unit.partition, h, kind))


_COMMIT_KEY_VERSIONS = (0, rec.OFFSET_COMMIT_KEY_VERSION)
_COMMIT_KEYS: dict[bytes, tuple[str, str, int]] = {}   # offset commit key bytes -> (group, topic, partition)
_COMMIT_KEYS_MAX = 1 << 16                              # bounded: cleared when full


def _records(unit: Unit, h, data: bytes, out: OffsetsWriter | None = None):
    """The record rows (and the errors of records that do not decode) of one sound batch; with `out`, its
    plain offset commits go to the task's offsets_history part file instead (`OffsetsWriter.add`)."""
    try:
        records = list(DefaultRecordBatch(data))
    except Exception as exc:
        yield _error(unit, h.position, h.base_offset, UNDECODABLE,
                     f"the batch's records do not decode ({type(exc).__name__}: {exc})")
        return
    txn_state = unit.topic == TRANSACTION_STATE_TOPIC
    producer = (h.producer_id, h.producer_epoch) if h.is_transactional else None
    part = unit.partition
    keys = _COMMIT_KEYS
    take = None if out is None or producer is not None else out.add    # a transaction's commits stay rows
    for r in records:
        key, k = r.key, None
        try:
            if key is None:
                raise ValueError("record without a key")
            if txn_state:
                yield ("R", _txn_state_row(part, r.offset, r.timestamp, txn_records.decode(key, r.value)))
                continue
            # offset commits (most of the log) repeat a few keys: each distinct key is decoded once, and
            # the value straight into its fields (the same decoders rec.decode uses)
            k = keys.get(key)
            if k is None and rec.key_version(key) in _COMMIT_KEY_VERSIONS:
                if len(keys) >= _COMMIT_KEYS_MAX:
                    keys.clear()
                k = keys[key] = rec.offset_commit_key(key)
            if k is not None:
                value = r.value
                v = None if value is None else rec.offset_commit_value(value)
            else:
                record = rec.decode(key, r.value)
        except (rec.UnknownRecordType, txn_records.UnknownRecordType) as exc:
            yield _error(unit, h.position, r.offset, UNKNOWN_TYPE, str(exc))
            continue
        except Exception as exc:
            yield _error(unit, h.position, r.offset, UNDECODABLE,
                         f"record does not decode ({type(exc).__name__}: {exc})")
            continue
        if k is not None:        # a failure to write the part file is the task's, not a record's error
            if take is None or not take(k, r.offset, r.timestamp, v):
                yield ("R", _commit_row(part, r.offset, r.timestamp, k[0], k[1], k[2], v, producer))
        elif isinstance(record, rec.CONSUMER_GROUP_RECORDS):    # KIP-848 groups: their static events are read
            yield _error(unit, h.position, r.offset, UNKNOWN_TYPE,
                         f"consumer group record (key version {rec.key_version(r.key)}) is not audited")
        else:
            yield ("R", _record_row(part, r.offset, r.timestamp, record, producer))
