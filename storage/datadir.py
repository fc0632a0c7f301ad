"""A data directory: one `<topic>-<partition>/` segment log per partition, the topic catalog
(`topics.json`: names, topic ids, partition counts, configs) and a lock so that two servers never
write the same directory.

A clean stop (`mark_clean_shutdown`, after every log was flushed and closed) leaves each log's recovery point
and the clean-shutdown marker; `open` takes the marker (deletes it before any log opens, as Kafka does) and
the logs then trust what the stop wrote instead of verifying every batch (storage/cleanshut.py).

While the server runs, as Kafka's LogManager does: each roll's flush (`SegmentLog.take_roll_flush`) runs on the
data dir's flusher thread and is followed by a `recovery-point-offset-checkpoint` write, and the server calls
`checkpoint_recovery_points` every `log.flush.offset.checkpoint.interval.ms`. The file only ever names offsets
below which every record was fsynced, so after a kill (no marker) each segment wholly below its log's recovery
point is trusted up to its index files' last entry and only the rest is verified batch by batch."""
from __future__ import annotations

import fcntl
import logging
import os
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .checkpoints import LOG_START_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, read_checkpoint, write_checkpoint
from .cleanshut import take_marker, write_marker
from .files import fsync_dir, partition_dir_name, partition_of_dir, segment_name
from .segments import LogConfig, SegmentLog

log = logging.getLogger("tenure.storage")

CATALOG = "topics.json"
META = "meta.properties"
LOCK = ".lock"
_DEFAULT_CONFIG = LogConfig()          # frozen: one default for every open


class DataDirLocked(OSError):
    pass


class DataDir:
    def __init__(self, path: Path, config: LogConfig, lock_fd: int, clean_shutdown: bool = False) -> None:
        self.path = path
        self.clean_shutdown = clean_shutdown  # the last stop was clean (its marker was found, and taken)
        self._recovery_points: dict[tuple[str, int], int] = {}
        try:                                  # read whatever the stop was, as Kafka's LogManager does
            self._recovery_points = read_checkpoint(path, RECOVERY_POINT_CHECKPOINT)
        except ValueError as exc:
            log.warning("%s; verifying every log", exc)
        self._checkpointed = dict(self._recovery_points)   # what the file holds now
        self._checkpoint_lock = threading.Lock()
        self._flusher: ThreadPoolExecutor | None = None    # runs the roll flushes, one at a time
        self.roll_flushes = 0                 # finished since open
        self.checkpoints_written = 0          # recovery-point checkpoint writes since open
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
        try:
            clean = take_marker(p)
        except OSError:
            os.close(fd)
            raise
        return cls(p, config, fd, clean)

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
            point = self._recovery_points.get((topic, partition))
            seg_log = SegmentLog(directory, self.config, name, defer_cut=True,
                                 trusted_end=point if self.clean_shutdown else None, flushed_to=point)
            seg_log.on_roll = self._roll_flush
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

    # ------------------------------------------------------------------ while running
    def _roll_flush(self, job: Callable[[], None]) -> None:
        """`SegmentLog.on_roll`: run a roll's flush on the flusher thread, then checkpoint the recovery points."""
        if self._flusher is None:
            self._flusher = ThreadPoolExecutor(1, thread_name_prefix="tenure-flush")
        self._flusher.submit(self._run_roll_flush, job)

    def _run_roll_flush(self, job: Callable[[], None]) -> None:
        try:
            job()
            self.roll_flushes += 1
            self.checkpoint_recovery_points()
        except OSError as exc:             # the policy's own flush of the same segments decides (fail-stop)
            log.error("flushing a rolled segment: %s (its recovery point stays where it was)", exc)

    def wait_flushes(self) -> None:
        """Wait for the roll flushes submitted so far (the stop, and tests)."""
        if self._flusher is not None:
            self._flusher.submit(lambda: None).result()

    def live_logs(self) -> list[tuple[tuple[str, int], SegmentLog]]:
        """The logs opened whose partition still exists (a deleted topic's logs are gone; a closed one counts)."""
        return [(key, lg) for key, lg in list(self.logs.items()) if lg.dir.is_dir()]

    def checkpoint_recovery_points(self) -> bool:
        """Write `recovery-point-offset-checkpoint` with each open log's recovery point (every offset below it
        was fsynced), unless it already says that; whether it was written. Kafka's
        `checkpointLogRecoveryOffsets`: every log.flush.offset.checkpoint.interval.ms, and here after each
        roll's flush too. Any thread."""
        with self._checkpoint_lock:
            if self._lock_fd < 0:
                return False
            points = {key: lg.recovery_point for key, lg in self.live_logs()}
            if points == self._checkpointed:
                return False
            write_checkpoint(self.path, points, RECOVERY_POINT_CHECKPOINT)
            self._checkpointed = points
            self.checkpoints_written += 1
            return True

    def finish_recovery(self) -> None:
        """After every log opened (none refused): cut the damaged tails recovery found; then, on the flusher
        thread, flush the segments below each active one that recovery verified in full and write their index
        files (as Kafka's recovery rebuilds them), so that the next kill need not verify them again."""
        for seg_log in self.logs.values():
            seg_log.finish_recovery()
        for seg_log in self.logs.values():
            if any(not seg.sealed for seg in seg_log.segments[:-1]):
                self._roll_flush(seg_log.take_roll_flush())
        scanned, trusted = self.recovery_report()
        log.info("opened %d log(s) after a%s stop: %d segment(s) verified batch by batch, %d trusted up to their "
                 "index%s", len(self.logs), " clean" if self.clean_shutdown else "n unclean", scanned, trusted,
                 "" if self.clean_shutdown else " (below the checkpointed recovery point)")

    def recovery_report(self) -> tuple[int, int]:
        """(segments verified batch by batch, segments trusted up to their index) over the logs opened."""
        logs = self.logs.values()
        return sum(lg.scanned for lg in logs), sum(lg.trusted for lg in logs)

    def mark_clean_shutdown(self, logs) -> bool:
        """The last step of a clean stop, after every log of `logs` (the data dir's live logs) was flushed and
        closed: their index files, their recovery points, then the marker. Refused (False, no marker) if a log
        was written after its last flush."""
        self.wait_flushes()                # no roll flush writes index files or the checkpoint meanwhile
        logs = [lg for lg in logs if isinstance(lg, SegmentLog) and lg.dir.is_dir()]
        behind = [lg.name for lg in logs if lg.recovery_point != lg.log_end_offset]
        if behind:
            log.warning("not a clean shutdown: %s not flushed to the log end", ", ".join(behind[:5]))
            return False
        for lg in logs:
            lg.write_index_files()
        with self._checkpoint_lock:
            points = {partition_of_dir(lg.dir.name): lg.recovery_point for lg in logs}
            write_checkpoint(self.path, points, RECOVERY_POINT_CHECKPOINT)
            self._checkpointed = points
        write_marker(self.path)
        return True

    def close(self, refused: bool = False) -> None:
        """Release the lock. `refused`: the start was refused (damage found at open or at the load); if the
        last stop was clean and nothing was written or cut since, the marker is put back, so that a refused
        start leaves the data dir exactly as it found it (the next start decides the same)."""
        if self._flusher is not None:      # the roll flushes still queued run first (they only fsync)
            self._flusher.shutdown(wait=True)
            self._flusher = None
        if refused and self.clean_shutdown and self._lock_fd >= 0 and not any(
                lg.truncated or lg.bytes_written for lg in self.logs.values()):
            try:
                write_marker(self.path)
            except OSError as exc:
                log.error("could not put the clean-shutdown marker back: %s", exc)
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
