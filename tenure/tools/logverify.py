"""`tenure log verify DIR`: every batch of every segment of every partition checked (CRC, offsets, segment
order), one summary line per partition with its problems, and what a server's recovery would do with a
damaged partition at open (docs/log-tools.md)."""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tenure.broker.topics import OFFSETS_TOPIC
from tenure.storage.datadir import CATALOG
from tenure.storage.reader import BadBatch
from tenure.storage.recovery import CorruptLogError, gaps_below, scan_segment, segment_gap
from tenure.tools.logdir import Partition, partitions, read_batches, read_catalog, usage_error

_COMPACTION_LEFTOVERS = {
    ".cleaned": "a cleaned segment from a compaction interrupted before its commit point (a server deletes it "
                "at open; the originals stand)",
    ".swap": "a cleaned segment past its commit point (a server installs it at open, finishing the swap)",
    ".merging": "a segment being merged by an interrupted compaction (a server deletes it at open if the "
                "matching .swap exists, else renames it back)",
}


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


def _verify_partition(part: Partition) -> _Summary:
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
        overlap = False
        if prev_end is not None and base < prev_end:
            overlap = True
            s.problems.append(f"{path}: segment base offset {base} overlaps the previous segment, which "
                              f"ends at offset {prev_end - 1}")
        try:
            first, hidden = True, False
            for item in read_batches(path, resync=True):
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


def _server_verdict(part: Partition) -> str:
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
        return usage_error("verify", f"{args.dir}: no such directory")
    catalog, catalog_problem = read_catalog(root)
    parts = partitions(root)
    if catalog is None and catalog_problem is None and not parts:
        return usage_error("verify", f"{args.dir} is not a tenure data dir (no {CATALOG}, no partition logs)")
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
