"""`tenure log dump DIR`: every record of a data dir (or of one topic, or one group's `__consumer_offsets`
records), one line or one JSON object each, in partition then offset order (docs/log-tools.md)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import uuid
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch

from tenure.broker.topics import OFFSETS_TOPIC
from tenure.protocol import records as rec
from tenure.storage.reader import BadBatch
from tenure.tools.logdir import Partition, partitions, read_batches, usage_error

_BARE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
UNKNOWN_NOTE = "a record type this tenure does not know; a server skips it when loading"


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
    key: list[tuple[str, object]] = []
    value: list[tuple[str, object]] = []
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

    def error(self, part: Partition, path: Path, position: int, offset: int | None, reason: str) -> None:
        self.errors += 1
        where = f"{path} at byte {position}" + (f" (offset {offset})" if offset is not None else "")
        self.emit(f"ERROR {where}: {reason}",
                  {"type": "error", "topic": part.topic, "partition": part.partition, "file": str(path),
                   "position": position, "offset": offset, "reason": reason})

    def partition(self, part: Partition) -> None:
        for _base, path in part.segments:
            try:
                self.segment(part, path)
            except BrokenPipeError:
                raise
            except OSError as exc:               # e.g. a segment deleted by a live server meanwhile
                self.error(part, path, 0, None, f"cannot be read: {exc}")

    def segment(self, part: Partition, path: Path) -> None:
        offsets_topic = part.topic == OFFSETS_TOPIC
        for item in read_batches(path, resync=False):
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

    def head(self, part: Partition, r) -> tuple[str, dict]:
        return (f"{part.name} offset={r.offset} timestamp={r.timestamp}",
                {"topic": part.topic, "partition": part.partition, "offset": r.offset,
                 "timestamp": r.timestamp})

    def control(self, part: Partition, r) -> None:
        if self.group is not None:
            return
        marker = {0: "ABORT", 1: "COMMIT"}.get(r.type, f"type {r.type}")
        text, obj = self.head(part, r)
        self.emit(f"{text} control {marker}", {**obj, "type": "control", "marker": marker})

    def user_record(self, part: Partition, r) -> None:
        text, obj = self.head(part, r)
        text += f" key={_text_value(r.key)} value={_text_value(r.value)}"
        if r.headers:
            text += " headers=" + _text_struct(r.headers)
        self.emit(text, {**obj, "type": "record", "key": _json_value(r.key), "value": _json_value(r.value),
                         "headers": [{"key": k, "value": _json_value(v)} for k, v in r.headers]})

    def coordinator_record(self, part: Partition, path: Path, pos: int, r) -> None:
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
        if self.group is not None and (isinstance(record, rec.CoordinatorLoadRecord)     # names no group
                                       or record.group_id != self.group):
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
        return usage_error("dump", f"{args.dir}: no such directory")
    if args.group is not None and args.topic not in (None, OFFSETS_TOPIC):
        return usage_error("dump", f"--group selects records of {OFFSETS_TOPIC}, not of --topic {args.topic}")
    topic = OFFSETS_TOPIC if args.group is not None else args.topic
    parts = [p for p in partitions(root) if topic is None or p.topic == topic]
    if topic is not None and not parts:
        return usage_error("dump", f"{args.dir} has no partition of topic {topic!r}")
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
