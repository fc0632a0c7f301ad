"""A data directory: one `<topic>-<partition>/` segment log per partition, the topic catalog
(`topics.json`: names, topic ids, partition counts, configs) and a lock so that two servers never
write the same directory."""
from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path

from .segments import LogConfig, SegmentLog, partition_dir_name

log = logging.getLogger("tenure.storage")

CATALOG = "topics.json"
LOCK = ".lock"


class DataDirLocked(OSError):
    pass


class DataDir:
    def __init__(self, path: Path, config: LogConfig, lock_fd: int) -> None:
        self.path = path
        self.config = config
        self._lock_fd = lock_fd
        self.logs: dict[tuple[str, int], SegmentLog] = {}

    @classmethod
    def open(cls, path: str | os.PathLike, config: LogConfig = LogConfig()) -> "DataDir":
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
        name = partition_dir_name(topic, partition)
        seg_log = SegmentLog(self.path / name, self.config, name)
        self.logs[(topic, partition)] = seg_log
        return seg_log

    def close(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
