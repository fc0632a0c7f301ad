"""`tenure log dump|verify|compact DIR`: offline tools over a data dir's segment logs.

Each command reads the files directly (no server needed); they must not be run on a data dir a live
server is compacting (`compact` takes the data dir's lock, so it refuses a dir in use).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch

from tenure.broker.topics import DEFAULT_TOPIC_CONFIGS, OFFSETS_TOPIC
from tenure.protocol import records as rec
from tenure.storage.compaction import CompactionPolicy, Compactor, is_compacted
from tenure.storage.datadir import CATALOG, DataDir, DataDirLocked
from tenure.storage.files import SUFFIX
from tenure.storage.reader import BadBatch, Batch, SegmentReader
from tenure.storage.recovery import CorruptLogError, gaps_below, scan_segment, segment_gap


def add_parser(sub) -> None:
    p = sub.add_parser("log", help="inspect, verify or compact a data dir's logs offline")
    lsub = p.add_subparsers(dest="log_command", required=True)
    d = lsub.add_parser("dump", help="print the decoded records of a data dir")
    d.add_argument("dir")
    d.add_argument("--topic", default=None, help="only this topic (default: every topic)")
    d.add_argument("--group", default=None, help="only __consumer_offsets records of this group")
    d.add_argument("--json", action="store_true", help="one JSON object per record")
    v = lsub.add_parser("verify", help="check every batch's CRC and offsets; exit 1 on damage")
    v.add_argument("dir")
    c = lsub.add_parser("compact", help="compact the compacted topics' logs offline")
    c.add_argument("dir")
    _add_synth_parser(lsub)


def _add_synth_parser(lsub) -> None:
    from tenure.tools.synth import SynthConfig
    d = SynthConfig()
    s = lsub.add_parser("synth", help="write a realistic synthetic __consumer_offsets log into a new data dir",
                        description="Write a realistic __consumer_offsets log (static groups committing, "
                        "restarting, rebalancing, expiring, leaving, removed, fenced, deleted; see "
                        "tenure/tools/synth.py) into DIR, which a server can open. DIR must hold no logs yet.")
    s.add_argument("dir")
    s.add_argument("--records", type=int, required=True, help="records to write (a few more may be written "
                   "to finish the changes under way)")
    for name, typ, hlp in (("groups", int, "consumer groups"), ("members", int, "static members per group"),
                           ("partitions", int, "partitions of each group's topic"),
                           ("topics", int, "distinct topics the groups consume"),
                           ("segment-bytes", int, "roll segments at this size"),
                           ("offsets-partitions", int, "__consumer_offsets partitions"),
                           ("seed", int, "random seed (same seed and options: same log)"),
                           ("restart-rate", float, "per step: chance of a rolling restart of a group"),
                           ("rebalance-rate", float, "per step: chance of a rebalance (generation + 1)"),
                           ("expire-rate", float, "per step: chance of a member's session expiring"),
                           ("leave-rate", float, "per step: chance of a member leaving (LeaveGroup)"),
                           ("remove-rate", float, "per step: chance of an admin removing a member"),
                           ("force-rate", float, "per step: chance of a forced rebalance"),
                           ("fence-rate", float, "per replaced member: chance its old pod is fenced"),
                           ("delete-rate", float, "per step: chance of a group deletion")):
        default = getattr(d, name.replace("-", "_"))
        s.add_argument(f"--{name}", type=typ, default=default, help=f"{hlp} (default {default})")


def run(args: argparse.Namespace) -> int:
    if args.log_command == "dump":
        return dump(args)
    if args.log_command == "verify":
        return verify(args)
    if args.log_command == "compact":
        return compact(args)
    if args.log_command == "synth":
        return synth(args)
    return 2


def synth(args: argparse.Namespace) -> int:
    from tenure.tools.synth import SynthConfig, generate, summary_line
    fields = {f.name for f in dataclasses.fields(SynthConfig)}
    cfg = SynthConfig(**{k: v for k, v in vars(args).items() if k in fields})
    try:
        result = generate(args.dir, cfg)
    except (ValueError, FileExistsError) as exc:
        return _usage_error("synth", str(exc))
    except DataDirLocked as exc:
        print(f"tenure log synth: {exc}", file=sys.stderr)
        return 1
    print(summary_line(args.dir, result))
    return 0


# ====================================================================== dump and verify
# Both read a data dir without its lock and without writing anything: each segment file is opened
# read-only and walked batch by batch by the segment reader (storage/reader.py: a megabyte of file in memory
# at a time), so they are safe on a live server's dir. A live server may be mid-write at the tail of a
# newest segment: a batch that looks torn there is re-read (a few times at most) while the file grows.

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_BARE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_COMPACTION_LEFTOVERS = {
    ".cleaned": "a cleaned segment from a compaction interrupted before its commit point (a server deletes it "
                "at open; the originals stand)",
    ".swap": "a cleaned segment past its commit point (a server installs it at open, finishing the swap)",
    ".merging": "a segment being merged by an interrupted compaction (a server deletes it at open if the "
                "matching .swap exists, else renames it back)",
}
UNKNOWN_NOTE = "a record type this tenure does not know; a server skips it when loading"


@dataclass
class _Partition:
    topic: str
    partition: int
    path: Path
    segments: list[tuple[int, Path]] = field(default_factory=list)   # (base offset from the name, file)
    strays: list[Path] = field(default_factory=list)                  # other files in the directory

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def _usage_error(cmd: str, message: str) -> int:
    print(f"tenure log {cmd}: {message}", file=sys.stderr)
    return 2


def _read_catalog(root: Path) -> tuple[dict[str, int] | None, str | None]:
    """topics.json as {topic: partitions}; (None, None) if absent, (None, reason) if unreadable."""
    path = root / CATALOG
    if not path.exists():
        return None, None
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        return {str(e["name"]): int(e["partitions"]) for e in doc["topics"]}, None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"{path}: unreadable ({type(exc).__name__}: {exc}); a server cannot start on this dir"


def _partitions(root: Path) -> list[_Partition]:
    """Every `<topic>-<partition>/` directory of the data dir, sorted by topic then partition."""
    found = []
    for d in root.iterdir():
        m = _PARTITION_DIR.match(d.name)
        if m is None or not d.is_dir():
            continue
        p = _Partition(m["topic"], int(m["partition"]), d)
        for f in d.iterdir():
            if f.suffix == SUFFIX and f.stem.isdigit():       # what the server's recovery opens
                p.segments.append((int(f.stem), f))
            else:
                p.strays.append(f)
        p.segments.sort()
        p.strays.sort()
        found.append(p)
    return sorted(found, key=lambda p: (p.topic, p.partition))


def _read_batches(path: Path, resync: bool) -> Iterator[Batch | BadBatch]:
    """The segment reader over one file (a torn batch re-read while a live server's file grows)."""
    with SegmentReader(path, resync=resync) as reader:
        yield from reader


# ---------------------------------------------------------------------- rendering values
def _printable(b: bytes) -> str | None:
    """`b` as text if it is UTF-8 made of printable characters (tab, CR, LF allowed), else None."""
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return s if all(c.isprintable() or c in "\t\n\r" for c in s) else None


def _json_value(v):
    """A record field for --json: bytes as a string if printable UTF-8, else {"hex": "..."}."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        s = _printable(bytes(v))
        return s if s is not None else {"hex": bytes(v).hex()}
    if dataclasses.is_dataclass(v):
        return {f.name: _json_value(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    if isinstance(v, uuid.UUID):                       # topic ids (consumer group records)
        return str(v)
    return v


def _text_value(v) -> str:
    """A record field for the text form: strings (and printable UTF-8 bytes) JSON-quoted, other bytes
    as 0x<hex>, None as null, structs as {name=value ...}, lists as [a, b]."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (bytes, bytearray, memoryview)):
        s = _printable(bytes(v))
        return json.dumps(s, ensure_ascii=False) if s is not None else "0x" + bytes(v).hex()
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if dataclasses.is_dataclass(v):
        return _text_struct([(f.name, getattr(v, f.name)) for f in dataclasses.fields(v)])
    if isinstance(v, dict):
        return _text_struct(list(v.items()))
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_text_value(x) for x in v) + "]"
    return str(v)


def _text_name(name: str) -> str:
    return name if _BARE_NAME.match(name) else json.dumps(name, ensure_ascii=False)


def _text_struct(items) -> str:
    return "{" + " ".join(f"{_text_name(k)}={_text_value(v)}" for k, v in items) + "}"


def _record_type(record) -> str:
    """GroupMetadataRecord -> group_metadata, OffsetCommitRecord -> offset_commit, ..."""
    name = type(record).__name__.removesuffix("Record")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _split_record(record) -> tuple[list[tuple[str, object]], list[tuple[str, object]]]:
    """(key fields, value fields) of a decoded __consumer_offsets record. The record dataclasses take
    their key fields as the required arguments (what a tombstone is built from) and give every value
    field a default, so the split needs no per-type table."""
    key, value = [], []
    for f in dataclasses.fields(record):
        if f.name == "tombstone":
            continue
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        (key if required else value).append((f.name, getattr(record, f.name)))
    return key, value


# ---------------------------------------------------------------------- dump
class _Dump:
    def __init__(self, args: argparse.Namespace, out) -> None:
        self.json = args.json
        self.group = args.group
        self.out = out
        self.errors = 0

    def emit(self, text: str, obj: dict) -> None:
        self.out.write((json.dumps(obj, ensure_ascii=False) if self.json else text) + "\n")

    def error(self, part: _Partition, path: Path, position: int, offset: int | None, reason: str) -> None:
        self.errors += 1
        where = f"{path} at byte {position}" + (f" (offset {offset})" if offset is not None else "")
        self.emit(f"ERROR {where}: {reason}",
                  {"type": "error", "topic": part.topic, "partition": part.partition, "file": str(path),
                   "position": position, "offset": offset, "reason": reason})

    def partition(self, part: _Partition) -> None:
        for _base, path in part.segments:
            try:
                self.segment(part, path)
            except BrokenPipeError:
                raise
            except OSError as exc:               # e.g. a segment deleted by a live server meanwhile
                self.error(part, path, 0, None, f"cannot be read: {exc}")

    def segment(self, part: _Partition, path: Path) -> None:
        offsets_topic = part.topic == OFFSETS_TOPIC
        for item in _read_batches(path, resync=False):
            if isinstance(item, BadBatch):
                self.error(part, path, item.position, item.offset,
                           item.reason + "; the rest of this segment is skipped")
                break
            (h, raw), pos = item, item.position
            try:
                recs = list(DefaultRecordBatch(raw))
            except Exception as exc:      # a codec not installed, or records that do not parse
                self.error(part, path, pos, h.base_offset, f"the batch's records do not decode "
                                                            f"({type(exc).__name__}: {exc})")
                continue
            for r in recs:
                if h.is_control:
                    self.control(part, r)
                elif offsets_topic:
                    self.coordinator_record(part, path, pos, r)
                else:
                    self.user_record(part, r)

    def head(self, part: _Partition, r) -> tuple[str, dict]:
        return (f"{part.name} offset={r.offset} timestamp={r.timestamp}",
                {"topic": part.topic, "partition": part.partition, "offset": r.offset,
                 "timestamp": r.timestamp})

    def control(self, part: _Partition, r) -> None:
        if self.group is not None:
            return
        marker = {0: "ABORT", 1: "COMMIT"}.get(r.type, f"type {r.type}")
        text, obj = self.head(part, r)
        self.emit(f"{text} control {marker}", {**obj, "type": "control", "marker": marker})

    def user_record(self, part: _Partition, r) -> None:
        text, obj = self.head(part, r)
        text += f" key={_text_value(r.key)} value={_text_value(r.value)}"
        if r.headers:
            text += " headers=" + _text_struct(r.headers)
        self.emit(text, {**obj, "type": "record", "key": _json_value(r.key), "value": _json_value(r.value),
                         "headers": [{"key": k, "value": _json_value(v)} for k, v in r.headers]})

    def coordinator_record(self, part: _Partition, path: Path, pos: int, r) -> None:
        try:
            record = rec.decode(r.key, r.value)
        except rec.UnknownRecordType as exc:
            if self.group is not None:       # its group cannot be told without knowing its schema
                return
            text, obj = self.head(part, r)
            self.emit(f"{text} unknown key_version={exc.key_version} key={_text_value(r.key)} "
                      f"value={_text_value(r.value)} ({UNKNOWN_NOTE})",
                      {**obj, "type": "unknown", "key_version": exc.key_version, "key": _json_value(r.key),
                       "value": _json_value(r.value), "note": UNKNOWN_NOTE})
            return
        except Exception as exc:
            self.error(part, path, pos, r.offset, f"record at offset {r.offset} does not decode "
                                                  f"({type(exc).__name__}: {exc})")
            return
        if self.group is not None and record.group_id != self.group:
            return
        key, value = _split_record(record)
        kind = _record_type(record)
        text, obj = self.head(part, r)
        text += f" {kind} key={_text_struct(key)} " + ("tombstone" if record.tombstone
                                                       else f"value={_text_struct(value)}")
        self.emit(text, {**obj, "type": kind, "key_version": rec.key_version(r.key),
                         "value_version": None if r.value is None else rec.key_version(r.value),
                         "key": {k: _json_value(v) for k, v in key},
                         "value": None if record.tombstone else {k: _json_value(v) for k, v in value},
                         "tombstone": record.tombstone})


def dump(args: argparse.Namespace) -> int:
    """Print every record of the data dir (or of one topic / one group), one line each, in partition
    then offset order; see docs/log-tools.md for the formats. Exit 0, or 1 if anything could not be read
    (each such batch is an ERROR line where it was met), 2 on usage errors."""
    root = Path(args.dir)
    if not root.is_dir():
        return _usage_error("dump", f"{args.dir}: no such directory")
    if args.group is not None and args.topic not in (None, OFFSETS_TOPIC):
        return _usage_error("dump", f"--group selects records of {OFFSETS_TOPIC}, not of --topic {args.topic}")
    topic = OFFSETS_TOPIC if args.group is not None else args.topic
    parts = [p for p in _partitions(root) if topic is None or p.topic == topic]
    if topic is not None and not parts:
        return _usage_error("dump", f"{args.dir} has no partition of topic {topic!r}")
    d = _Dump(args, sys.stdout)
    try:
        for p in parts:
            d.partition(p)
        sys.stdout.flush()
    except BrokenPipeError:                    # `tenure log dump DIR | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    if d.errors:
        print(f"tenure log dump: {d.errors} batch(es) or record(s) could not be read; "
              f"see the ERROR lines and `tenure log verify {args.dir}`", file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------------- verify
@dataclass
class _Summary:
    segments: int = 0
    batches: int = 0
    records: int = 0
    bytes: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    verdict: str | None = None             # with problems: what recovery would do at a server's open

    def line(self, name: str) -> str:
        offsets = ("no batches" if self.first_offset is None
                   else f"offsets {self.first_offset}..{self.last_offset}")
        return (f"{name}: {self.segments} segment(s), {self.batches} batch(es), {self.records} record(s), "
                f"{self.bytes} byte(s), {offsets}")


def _where(path: Path, position: int, offset: int | None) -> str:
    return f"{path} at byte {position}" + (f" (offset {offset})" if offset is not None else "")


def _verify_partition(part: _Partition) -> _Summary:
    s = _Summary(segments=len(part.segments))
    for f in part.strays:
        if f.suffix in _COMPACTION_LEFTOVERS:
            s.notes.append(f"{f}: {_COMPACTION_LEFTOVERS[f.suffix]}")
        else:
            s.notes.append(f"{f}: not a segment file; ignored")
    last: int | None = None                 # last offset of the previous sound batch (any segment)
    gaps = gaps_below(part.path, part.segments[-1][0]) if part.segments else 0   # see storage/recovery.py
    prev_end: int | None = None             # next offset after the previous segment
    for i, (base, path) in enumerate(part.segments):
        newest = i == len(part.segments) - 1
        overlap = prev_end is not None and base < prev_end
        if overlap:
            s.problems.append(f"{path}: segment base offset {base} overlaps the previous segment, which "
                              f"ends at offset {prev_end - 1}")
        try:
            first, hidden = True, False
            for item in _read_batches(path, resync=True):
                if isinstance(item, BadBatch):
                    if item.resumes is not None:
                        after = f"; a sound batch follows at byte {item.resumes}"
                    else:
                        left = path.stat().st_size - item.position
                        after = (f"; no sound batch found after it: the last {left} byte(s) of "
                                 f"{'the newest' if newest else 'this'} segment cannot be read")
                    s.problems.append(f"{_where(path, item.position, item.offset)}: {item.reason}{after}")
                    first, hidden = False, True      # what the damage hides is not a gap to report
                    continue
                h, pos = item.header, item.position
                if first and h.base_offset < base:
                    s.problems.append(f"{_where(path, pos, h.base_offset)}: the segment's first batch starts "
                                      f"at offset {h.base_offset}, below the segment's base offset {base}")
                elif last is not None and h.base_offset <= last and not (first and overlap):
                    s.problems.append(f"{_where(path, pos, h.base_offset)}: base offset {h.base_offset} does "
                                      f"not move past the previous batch's last offset {last}")
                elif last is not None and h.base_offset > last + 1 >= gaps and not hidden:
                    s.problems.append(f"{_where(path, pos, h.base_offset)}: base offset {h.base_offset} does "
                                      f"not continue the previous batch's last offset {last}: offsets "
                                      f"{last + 1}..{h.base_offset - 1} are missing and the cleaner never "
                                      f"removed records there")
                first = hidden = False
                s.batches += 1
                s.records += h.records_count
                if s.first_offset is None:
                    s.first_offset = h.base_offset
                s.last_offset = h.last_offset
                last = h.last_offset if last is None else max(last, h.last_offset)
            s.bytes += path.stat().st_size
        except OSError as exc:             # e.g. a segment deleted by a live server meanwhile
            s.problems.append(f"{path}: cannot be read: {exc}")
        prev_end = max(base, last + 1 if last is not None else base)
    if s.problems:
        try:
            s.verdict = f"at open a server {_server_verdict(part)}"
        except OSError as exc:
            s.verdict = f"what a server does at open cannot be told: {exc}"
    return s


def _server_verdict(part: _Partition) -> str:
    """What `SegmentLog` recovery does with this partition at open, decided as `SegmentLog._recover`
    decides it and with its own `scan_segment` (read-only here): refuse, cut a tail, or open it."""
    expect = 0
    cut = None
    gaps = gaps_below(part.path, part.segments[-1][0]) if part.segments else 0
    for i, (base, path) in enumerate(part.segments):
        if base < expect:
            return (f"refuses to start: {path} has base offset {base}, which overlaps the previous segment "
                    f"(it ends at offset {expect - 1})")
        problem = segment_gap(base, expect, gaps) if i else None
        if problem is not None:
            return f"refuses to start: {CorruptLogError(path, 0, base, problem)}"
        headers, damage = scan_segment(path, base, gaps_below=gaps)
        if damage is not None:
            if i < len(part.segments) - 1 or damage.valid_after:
                err = CorruptLogError(damage.path, damage.position, damage.offset, damage.reason)
                return f"refuses to start: {err}"
            size = path.stat().st_size
            cut = (f"cuts {size - damage.position} byte(s) off {path} at byte {damage.position} and serves on "
                   f"from offset {headers[-1].next_offset if headers else base}")
        expect = max(headers[-1].next_offset if headers else base, base)
    return cut or "opens it as it is"


def verify(args: argparse.Namespace) -> int:
    """Check every batch of every segment of every partition (see docs/log-tools.md); print one summary
    line per partition with its problems under it, then a total. Exit 0 clean, 1 damage, 2 usage."""
    root = Path(args.dir)
    if not root.is_dir():
        return _usage_error("verify", f"{args.dir}: no such directory")
    catalog, catalog_problem = _read_catalog(root)
    parts = _partitions(root)
    if catalog is None and catalog_problem is None and not parts:
        return _usage_error("verify", f"{args.dir} is not a tenure data dir (no {CATALOG}, no partition logs)")
    problems: list[str] = [catalog_problem] if catalog_problem else []
    notes: list[str] = []
    if catalog is None and catalog_problem is None:
        notes.append(f"{root / CATALOG} is missing: a server starting here opens only {OFFSETS_TOPIC}")
    on_disk = {(p.topic, p.partition) for p in parts}
    for topic, n in sorted((catalog or {}).items()):
        for i in range(n):
            if (topic, i) not in on_disk:
                problems.append(f"{root / f'{topic}-{i}'}: listed in {CATALOG} but missing")
    out = sys.stdout
    try:
        for line in problems:
            out.write(f"PROBLEM {line}\n")
        for line in notes:
            out.write(f"note: {line}\n")
        totals = _Summary()
        for p in parts:
            s = _verify_partition(p)
            if catalog is not None and (p.topic not in catalog or p.partition >= catalog[p.topic]):
                s.notes.append(f"{p.path}: not in {CATALOG} (a server does not open it)")
            out.write(s.line(p.name) + "\n")
            for line in s.problems:
                out.write(f"  PROBLEM {line}\n")
            if s.verdict is not None:
                out.write(f"  {s.verdict}\n")
            for line in s.notes:
                out.write(f"  note: {line}\n")
            out.flush()
            problems += s.problems
            for attr in ("segments", "batches", "records", "bytes"):
                setattr(totals, attr, getattr(totals, attr) + getattr(s, attr))
        verdict = "clean" if not problems else f"{len(problems)} problem(s)"
        out.write(f"{args.dir}: {len(parts)} partition(s), {totals.segments} segment(s), {totals.batches} "
                  f"batch(es), {totals.records} record(s), {totals.bytes} byte(s): {verdict}\n")
        out.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 1 if problems else 0


# ---------------------------------------------------------------------- compact
def _log_size(plog) -> tuple[int, int, int]:
    """(segments, records, bytes) of a partition log, from its batch headers."""
    records = sum(h.records_count for h, _ in plog.batches(0))
    return len(plog.segments), records, plog.size_bytes


def compact(args: argparse.Namespace) -> int:
    """Compact every partition of every compacted topic (cleanup.policy holding `compact`; without a
    catalog, the `__consumer_offsets` partitions on disk) under the rules of storage/compaction.py, until
    there is nothing left to clean; the active segment of each is left alone. Takes the data dir's lock
    (refuses a dir a server is using). Prints one before -> after line per partition and a total.
    Exit 0 done, 1 locked or a log that does not open (damage), 2 usage."""
    root = Path(args.dir)
    if not root.is_dir():
        return _usage_error("compact", f"{args.dir}: no such directory")
    catalog = root / CATALOG
    try:
        if catalog.exists():
            with open(catalog, encoding="utf-8") as f:
                entries = json.load(f)["topics"]
            wanted = [(str(e["name"]), int(e["partitions"]), dict(e.get("configs", {}))) for e in entries]
        else:
            parts = sorted(int(p.name[len(OFFSETS_TOPIC) + 1:]) for p in root.iterdir()
                           if p.is_dir() and re.fullmatch(re.escape(OFFSETS_TOPIC) + r"-\d+", p.name))
            wanted = [(OFFSETS_TOPIC, max(parts) + 1, {"cleanup.policy": "compact"})] if parts else []
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"tenure log compact: {catalog}: unreadable ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 1
    try:
        data = DataDir.open(root)
    except DataDirLocked as exc:
        print(f"tenure log compact: {exc}", file=sys.stderr)
        return 1
    compactor = Compactor()
    before_total = [0, 0, 0]
    after_total = [0, 0, 0]
    dropped = 0
    try:
        for topic, count, configs in wanted:
            def config(name: str, configs=configs) -> str | None:
                return configs.get(name, DEFAULT_TOPIC_CONFIGS.get(name))
            if not is_compacted(config("cleanup.policy")):
                continue
            policy = CompactionPolicy.from_configs(config)
            for i in range(count):
                if not (root / f"{topic}-{i}").is_dir():
                    continue
                try:
                    plog = data.open_log(topic, i)
                except CorruptLogError as exc:
                    print(f"tenure log compact: {exc}; nothing compacted in {topic}-{i} (see `tenure log verify "
                          f"{args.dir}`)", file=sys.stderr)
                    return 1
                plog.finish_recovery()
                for d in plog.truncated:
                    print(f"{topic}-{i}: note: opening it cut {d.path.name} at byte {d.position}: {d.reason}")
                before = _log_size(plog)
                st = compactor.clean_fully(plog, policy)
                after = _log_size(plog)
                plog.close()
                dropped += st.tombstones_dropped
                for tot, now in ((before_total, before), (after_total, after)):
                    for k in range(3):
                        tot[k] += now[k]
                print(f"{topic}-{i}: {before[0]} segment(s), {before[1]} record(s), {before[2]} byte(s) -> "
                      f"{after[0]} segment(s), {after[1]} record(s), {after[2]} byte(s); "
                      f"{st.tombstones_dropped} tombstone(s) dropped")
        print(f"{args.dir}: {before_total[1]} record(s), {before_total[2]} byte(s) -> {after_total[1]} record(s), "
              f"{after_total[2]} byte(s); {dropped} tombstone(s) dropped")
        sys.stdout.flush()
    finally:
        for plog in data.logs.values():
            plog.close()
        data.close()
    return 0
