"""The transaction coordinator's runtime: the coordinator runtime (runtime.py) over `__transaction_state`,
whose one shard is a TransactionCoordinator. Its Results carry `markers`: written by `write_markers` (the
broker's, into the data partitions; a marker for __consumer_offsets goes through the group runtime's
`write_marker`), then its shard's `markers_written` completes the transactions."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tenure.protocol.markers import TxnMarker

from .result import Result
from .routing import partition_for
from .runtime import CoordinatorRuntime
from .transactions import TransactionCoordinator, TxnResult


class TransactionRuntime(CoordinatorRuntime[TransactionCoordinator]):
    def __init__(self, *args: Any, write_markers: Callable[[list[TxnMarker], int], list], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.write_markers = write_markers

    def _after_records(self, result: Result, logs: list) -> None:
        if isinstance(result, TxnResult) and result.markers:
            self._write_markers(result, logs)

    def _write_markers(self, result: TxnResult, logs: list) -> None:
        """A transaction coordinator's Result: after its records (the prepared transactions), the markers go
        into their partitions, then the records completing those transactions (by the shard of their
        transactional ids, which made the Result); the answers leave after all of them, and wait for all of
        them to be durable."""
        shard = self.shards[partition_for(result.markers[0].transactional_id, self.partitions)]
        now = self.clock_ms()
        try:
            logs += self.write_markers(result.markers, now)
        except OSError as exc:
            self.writer.fail(exc, "cannot write transaction markers")
            raise
        done = shard.markers_written(result.markers, now)
        if done.records:
            logs += self.writer.write(done.records)
        result.responses += done.responses
        result.timers += done.timers
        result.records += done.records

