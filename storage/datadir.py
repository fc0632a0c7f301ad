"""A data directory: one `<topic>-<partition>/` segment log per partition, the topic catalog
(`topics.json`: names, topic ids, partition counts, configs) and a lock so that two servers never
write the same directory."""
from __future__ import annotations

import fcntl
import logging
import os
import uuid
from pathlib import Path

from .checkpoints import LOG_START_CHECKPOINT, read_checkpoint
from .files import fsync_dir, partition_dir_name, segment_name
from .segments import LogConfig, SegmentLog

log = logging.getLogger("tenure.storage")

CATALOG = "topics.json"
META = "meta.properties"
LOCK = ".lock"
_DEFAULT_CONFIG = LogConfig()          # frozen: one default for every open


class DataDirLocked(OSError):
    pass


class DataDir:
    def __init__(self, path: Path, config: LogConfig, lock_fd: int) -> None:
        self.path = path
        self.config = config
        self._lock_fd = lock_fd
        self.logs: dict[tuple[str, int], SegmentLog] = {}
        self._log_starts: dict[tuple[str, int], int] | None = None   # log-start-offset-checkpoint, read once

    @classmethod
    def open(cls, path: str | os.PathLike, config: LogConfig = _DEFAULT_CONFIG) -> DataDir:
        p = Path(path)
        p.mkdir(parents=True, exist_ok=True)
        fd = os.open(p / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirLocked(f"data dir {p} is in use by another tenure process") from None
        return cls(p, config, fd)

    @property
    def catalog(self) -> Path:
        return self.path / CATALOG

    def open_log(self, topic: str, partition: int) -> SegmentLog:
        """Open (or create) a partition's log. A new partition that fails to open (e.g. out of descriptors)
        leaves no directory behind."""
        name = partition_dir_name(topic, partition)
        directory = self.path / name
        existed = directory.exists()
        seg_log = None
        try:
            seg_log = SegmentLog(directory, self.config, name, defer_cut=True)
            if self._log_starts is None:
                self._log_starts = read_checkpoint(self.path, LOG_START_CHECKPOINT)
        except OSError:
            if seg_log is not None:
                seg_log.close()
            if not existed:                # what a new log creates, removed without opening anything
                for path in (directory / segment_name(0), directory):
                    try:
                        path.rmdir() if path == directory else path.unlink()
                    except FileNotFoundError:
                        pass
                    except OSError as exc:
                        log.error("could not remove %s of a log that failed to open: %s", path, exc)
            raise
        seg_log.start_floor = self._log_starts.pop((topic, partition), 0)
        self.logs[(topic, partition)] = seg_log
        return seg_log

    def cluster_id(self) -> str:
        """The cluster id kept in `meta.properties` (as Kafka keeps it), made on first use: clients see
        the same cluster across restarts on this dir."""
        meta = self.path / META
        if meta.exists():
            for line in meta.read_text(encoding="utf-8").splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "cluster.id" and value.strip():
                    return value.strip()
        cid = "tenure-" + uuid.uuid4().hex[:14]
        tmp = meta.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"version=0\ncluster.id={cid}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, meta)
        fsync_dir(self.path)
        return cid

    def finish_recovery(self) -> None:
        """After every log opened (none refused): cut the damaged tails recovery found."""
        for seg_log in self.logs.values():
            seg_log.finish_recovery()

    def close(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
