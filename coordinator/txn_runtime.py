"""The transaction coordinator's runtime: the coordinator runtime (runtime.py) over `__transaction_state`,
whose one shard is a TransactionCoordinator. Its Results carry `markers`: written by `write_markers` (the
broker's, into the data partitions; a marker for __consumer_offsets goes through the group runtime's
`write_marker`), then its shard's `markers_written` completes the transactions. `add_partitions` is the broker's
way in for transactions v2 (Produce v12+, TxnOffsetCommit v5+)."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.errors import ErrorCode
from tenure.protocol.txn_records import TxnMarker

from .result import Result
from .routing import partition_for
from .runtime import CoordinatorRuntime
from .transactions import ADD_PARTITIONS_TO_TXN, TransactionCoordinator, TxnResult

BROKER_ADD_VERSION = 5        # the AddPartitionsToTxn version a Kafka 4.x broker asks its coordinator with


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


    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[tuple[str, int]], ctx: RequestContext) -> dict[tuple[str, int], int]:
        """Transactions v2: the partitions a Produce v12+ (or a TxnOffsetCommit v5+) writes to join the
        producer's transaction before it is appended, as a Kafka broker asks its transaction coordinator
        (AddPartitionsToTxnManager: AddPartitionsToTxn v5, not verify-only). The coordinator's code for each
        partition, once its record is durable (a whole-request refusal - 14 while a move loads it - for all)."""
        wanted = list(dict.fromkeys(partitions))
        A = SUPPORTED[ADD_PARTITIONS_TO_TXN].request
        by_topic: dict[str, list[int]] = {}
        for topic, p in wanted:
            by_topic.setdefault(topic, []).append(p)
        body = A(transactions=[A.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=False, topics=[A.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()])])
        req = Request(ADD_PARTITIONS_TO_TXN, BROKER_ADD_VERSION, 0, ctx.client_id, body, SUPPORTED[ADD_PARTITIONS_TO_TXN])
        # the broker asks whichever broker coordinates the transactional id: no hosting check on the way in
        answer = await self.handle(req, dataclasses.replace(ctx, api_key=ADD_PARTITIONS_TO_TXN,
                                                            api_version=BROKER_ADD_VERSION, broker_id=None))
        if answer.error_code:
            return {key: answer.error_code for key in wanted}
        codes = {(t.name, r.partition_index): r.partition_error_code
                 for res in answer.results_by_transaction for t in res.topic_results for r in t.results_by_partition}
        return {key: codes.get(key, ErrorCode.UNKNOWN_SERVER_ERROR) for key in wanted}
