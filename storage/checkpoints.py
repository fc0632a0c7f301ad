"""The data dir's two checkpoint files, in Kafka's names and text format: a version line `0`, a count line,
then one `topic partition offset` line per partition.

- `cleaner-offset-checkpoint` (`CHECKPOINT`): per partition, an offset below which the log cleaner may have
  removed records. Raised by the cleaner (storage/compaction.py) before a cleaned group is swapped in; read
  by recovery (`storage.recovery.gaps_below`: below it batches may skip offsets), `tenure log verify` and
  the audit (offset gaps at or above it are real gaps).
- `log-start-offset-checkpoint` (`LOG_START_CHECKPOINT`): DeleteRecords' log start offsets. Raised by
  `SegmentLog.advance_start` before any segment goes, its entry removed by `SegmentLog.delete`; read by
  `DataDir` when it opens the logs.
- `recovery-point-offset-checkpoint` (`RECOVERY_POINT_CHECKPOINT`): per partition, the offset below which
  every record was fsynced. Written whole by `DataDir.checkpoint_recovery_points` after each segment roll's
  flush and every log.flush.offset.checkpoint.interval.ms while the server runs, and by
  `DataDir.mark_clean_shutdown` at a clean stop (with the `.kafka_cleanshutdown` marker, storage/cleanshut.py);
  read by `DataDir` at the next open, clean or not.

Both files sit next to the partition directories and are replaced atomically (written, fsynced, renamed,
directory fsynced); an entry is only ever raised, or removed with its partition.
"""
from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from .files import fsync_dir, partition_of_dir, write_fsynced

log = logging.getLogger("tenure.storage")

CHECKPOINT = "cleaner-offset-checkpoint"   # Kafka's file name, in the data dir (written by storage/compaction.py)
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"  # DeleteRecords' log start offsets, same format
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"  # fsynced up to here (a clean stop writes it)
_CHECKPOINT_VERSION = 0
_checkpoint_lock = threading.Lock()               # one read-modify-write at a time in this process


def read_checkpoint(data_dir, name: str = CHECKPOINT) -> dict[tuple[str, int], int]:
    """`<data_dir>/<name>` (by default cleaner-offset-checkpoint) as {(topic, partition): offset}; {} if there
    is none. Raises ValueError if the file is not in the format `advance_checkpoint` writes."""
    path = os.path.join(os.fspath(data_dir), name)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != _CHECKPOINT_VERSION:
            raise ValueError(f"version {lines[0]!r}")
        count = int(lines[1])
        if len(lines) != 2 + count:
            raise ValueError(f"{count} entries announced, {len(lines) - 2} present")
        out = {}
        for line in lines[2:]:
            topic, partition, offset = line.rsplit(" ", 2)
            out[(topic, int(partition))] = int(offset)
        return out
    except (IndexError, ValueError) as exc:
        kind = {CHECKPOINT: "cleaner", LOG_START_CHECKPOINT: "log start offset"}.get(name, "recovery point")
        raise ValueError(f"{path}: not a {kind} checkpoint ({exc})") from None


def advance_checkpoint(partition_dir, offset: int | None, name: str = CHECKPOINT) -> None:
    """Raise the checkpoint entry of the log in `partition_dir` to `offset` (never lower it; None removes the
    entry, for a deleted partition); atomic."""
    pdir = os.path.abspath(os.fspath(partition_dir))
    root = os.path.dirname(pdir)
    key = partition_of_dir(os.path.basename(pdir))
    with _checkpoint_lock:
        try:
            entries = read_checkpoint(root, name)
        except ValueError as exc:
            log.warning("%s; rewriting it", exc)
            entries = {}
        if offset is None:
            if entries.pop(key, None) is None:
                return
        elif entries.get(key, -1) >= offset:
            return
        else:
            entries[key] = offset
        write_checkpoint(root, entries, name)


def write_checkpoint(data_dir, entries: dict[tuple[str, int], int], name: str) -> None:
    """Replace `<data_dir>/<name>` with `entries`, atomically (written, fsynced, renamed, directory fsynced)."""
    root = os.fspath(data_dir)
    data = "".join([f"{_CHECKPOINT_VERSION}\n{len(entries)}\n"]
                   + [f"{t} {p} {o}\n" for (t, p), o in sorted(entries.items())]).encode("utf-8")
    path = os.path.join(root, name)
    tmp = path + ".tmp"
    write_fsynced(tmp, data)
    os.replace(tmp, path)
    fsync_dir(Path(root))
