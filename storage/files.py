"""The files of a data dir as the storage code names them: a partition's directory, its segment files and the
names a compaction swap gives them on the way, and the directory fsync that makes a new name durable."""
from __future__ import annotations

import os
from pathlib import Path

SUFFIX = ".log"
CLEANED = ".cleaned"      # <base>.log.cleaned: a cleaned segment being written (storage/compaction.py)
SWAP = ".swap"            # <base>.log.swap: a complete cleaned segment, committed to replace its originals
MERGING = ".merging"      # <base>.log.merging: an original segment being merged into a cleaned one


def partition_of_dir(name: str) -> tuple[str, int]:
    """`<topic>-<partition>` -> (topic, partition); a directory not named so -> (name, -1)."""
    topic, _, partition = name.rpartition("-")
    return (topic, int(partition)) if topic and partition.isdigit() else (name, -1)


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SUFFIX}"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_fsynced(path, data: bytes) -> None:
    """Write `data` as the whole of file `path` (created or truncated) and fsync it before returning."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += os.write(fd, view[written:])
        os.fsync(fd)
    finally:
        os.close(fd)
