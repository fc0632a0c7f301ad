"""A data dir as the offline log tools (`tenure log dump|verify|compact`) see it: its partition directories
and their segment files, its topic catalog, and the segment reader over one file.

Dump and verify read a data dir without its lock and without writing anything: each segment file is opened
read-only and walked batch by batch by the segment reader (storage/reader.py: a megabyte of file in memory
at a time), so they are safe on a live server's dir. A live server may be mid-write at the tail of a
newest segment: a batch that looks torn there is re-read (a few times at most) while the file grows.
"""
from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tenure.storage.cleanshut import INDEX, TIME_INDEX
from tenure.storage.datadir import CATALOG
from tenure.storage.files import SUFFIX
from tenure.storage.reader import BadBatch, Batch, SegmentReader

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


@dataclass
class Partition:
    topic: str
    partition: int
    path: Path
    segments: list[tuple[int, Path]] = field(default_factory=list)   # (base offset from the name, file)
    strays: list[Path] = field(default_factory=list)                  # other files in the directory

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def usage_error(cmd: str, message: str) -> int:
    print(f"tenure log {cmd}: {message}", file=sys.stderr)
    return 2


def read_catalog(root: Path) -> tuple[dict[str, int] | None, str | None]:
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


def partitions(root: Path) -> list[Partition]:
    """Every `<topic>-<partition>/` directory of the data dir, sorted by topic then partition."""
    found = []
    for d in root.iterdir():
        m = _PARTITION_DIR.match(d.name)
        if m is None or not d.is_dir():
            continue
        p = Partition(m["topic"], int(m["partition"]), d)
        for f in d.iterdir():
            if f.suffix == SUFFIX and f.stem.isdigit():       # what the server's recovery opens
                p.segments.append((int(f.stem), f))
            elif f.suffix in (INDEX, TIME_INDEX) and f.with_suffix(SUFFIX).exists():
                continue                                     # a segment's index files (a clean stop wrote them)
            else:
                p.strays.append(f)
        p.segments.sort()
        p.strays.sort()
        found.append(p)
    return sorted(found, key=lambda p: (p.topic, p.partition))


def read_batches(path: Path, resync: bool) -> Iterator[Batch | BadBatch]:
    """The segment reader over one file (a torn batch re-read while a live server's file grows)."""
    with SegmentReader(path, resync=resync) as reader:
        yield from reader
