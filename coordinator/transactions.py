"""The transaction coordinator as a deterministic state machine (beside the group coordinator, as in Kafka).

Inputs: a decoded InitProducerId (with a transactional id), AddPartitionsToTxn or EndTxn with its context and
`now_ms`; timer expiries (a transaction's timeout); the data plane's word that the markers of a transaction
are written. Outputs: a `TxnResult` - responses, records for `__transaction_state`, timers, and the markers
(commit/abort control records) to write into the data partitions. `replay(record)` is the only code that
changes state; handlers read state and emit records, which are replayed once the handler has returned
(so a handler that raises changes nothing), as the group coordinator's shard does.

Ending a transaction is Kafka's two phases: EndTxn writes PrepareCommit (or PrepareAbort) and asks for the
markers; once the runtime has written them it calls `markers_written`, which writes CompleteCommit (or
CompleteAbort). The answer to EndTxn leaves after both, so a read_committed consumer polled after
commitTransaction() returns sees the records. A transaction found prepared at start-up (the server stopped
between the two phases) gets its markers again and completes, as Kafka's coordinator does on loading.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from tenure.coordinator.result import Result
from tenure.coordinator.timers import Timer
from tenure.protocol.acl import DESCRIBE, TOPIC, TRANSACTIONAL_ID, WRITE
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.errors import ErrorCode
from tenure.protocol.markers import TxnMarker
from tenure.protocol.txn_records import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    DEAD,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    STATE_NAMES,
    TransactionRecord,
)

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66
TXN_APIS = frozenset({ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS})
MAX_TIMEOUT_MS = 900_000           # Kafka's transaction.max.timeout.ms default
MAX_EPOCH = 32767 - 1              # an epoch that cannot be bumped once more gets a new producer id
# the first version of each API that knows PRODUCER_FENCED (90); older ones are answered INVALID_PRODUCER_EPOCH
_FENCED_SINCE = {INIT_PRODUCER_ID: 4, ADD_PARTITIONS_TO_TXN: 2, ADD_OFFSETS_TO_TXN: 2, END_TXN: 2}


def _fencing_epoch(epoch: int) -> int:
    """The epoch a fencing abort (a new producer, a timeout) is written under: the next one while one is left
    (32767 from 32766, as Kafka; the next InitProducerId then gets a new producer id), else the same."""
    return epoch + 1 if epoch <= MAX_EPOCH else epoch


def is_transaction_request(api_key: int, body) -> bool:
    """Requests the transaction coordinator answers (an InitProducerId only with a transactional id)."""
    return api_key in TXN_APIS or (api_key == INIT_PRODUCER_ID and body.transactional_id is not None)


@dataclass(frozen=True)
class TxnTimeoutKey(Timer):
    """A transaction's timeout (shown as "txn_timeout/<transactional id>", as the group timers are)."""
    transactional_id: str
    kind: ClassVar[str] = "txn_timeout"

    @property
    def parts(self) -> tuple[str, ...]:
        return (self.transactional_id,)


def timeout_key(transactional_id: str) -> TxnTimeoutKey:
    return TxnTimeoutKey(transactional_id)


@dataclass
class TxnResult(Result):
    markers: list[TxnMarker] = field(default_factory=list)


def _allow_all(operation: int, resource_type: int, name: str) -> bool:
    return True


@dataclass(frozen=True)
class TxnContext:
    token: int
    api_version: int
    now_ms: int
    allows: Callable[[int, int, str], bool] = _allow_all     # the request context's ACL check


class TransactionCoordinator:
    def __init__(self, allocate_producer_id: Callable[[], int],
                 partitions_of: Callable[[str], int | None],
                 offsets_partition_of: Callable[[str], tuple[str, int]] = lambda group_id: ("__consumer_offsets", 0)
                 ) -> None:
        self._allocate = allocate_producer_id          # injected: producer ids shared with idempotent producers
        self._partitions_of = partitions_of            # a topic's partition count (None: no such topic)
        self._offsets_partition_of = offsets_partition_of     # a group's __consumer_offsets partition
        self.transactions: dict[str, TransactionRecord] = {}

    # ------------------------------------------------------------------ the one mutator
    def replay(self, record: TransactionRecord) -> None:
        if record.tombstone:
            self.transactions.pop(record.transactional_id, None)
        else:
            self.transactions[record.transactional_id] = record

    def _done(self, res: TxnResult) -> TxnResult:
        """A handler has returned its Result: now, and only now, replay what it produced."""
        for event in res.events:
            self.replay(event)
        return res

    def max_producer_id(self) -> int:
        return max((t.producer_id for t in self.transactions.values()), default=-1)

    # ------------------------------------------------------------------ queries
    def verify(self, transactional_id: str | None, producer_id: int, producer_epoch: int, topic: str,
               partition: int) -> int:
        """A transactional batch to `topic`-`partition`: NONE if its transaction holds the partition."""
        t = self.transactions.get(transactional_id) if transactional_id is not None else None
        if t is None or t.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != t.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if t.state != ONGOING or (topic, partition) not in t.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    # ------------------------------------------------------------------ inputs
    def handle(self, api_key: int, ctx, body) -> TxnResult:
        ctx = TxnContext(ctx.token, ctx.api_version, ctx.now_ms, getattr(ctx, "allows", _allow_all))
        handler = {INIT_PRODUCER_ID: self._init_producer_id, ADD_PARTITIONS_TO_TXN: self._add_partitions,
                   END_TXN: self._end_txn, ADD_OFFSETS_TO_TXN: self._add_offsets,
                   DESCRIBE_TRANSACTIONS: self._describe, LIST_TRANSACTIONS: self._list}.get(api_key)
        if handler is None:
            raise AssertionError(f"API {api_key} is not the transaction coordinator's")
        return self._done(handler(ctx, body))

    def loaded(self, now_ms: int) -> TxnResult:
        """After replaying the log: prepared transactions get their markers again; open ones their timeout."""
        res = TxnResult()
        for t in list(self.transactions.values()):
            if t.state in (PREPARE_COMMIT, PREPARE_ABORT):
                res.markers += self._markers(t, t.state == PREPARE_COMMIT)
            elif t.state == ONGOING:
                res.set_timer(timeout_key(t.transactional_id), t.start_ms + t.timeout_ms)
        return res

    def unload(self, now_ms: int) -> TxnResult:
        """Give up __transaction_state (its coordinator moved to another broker): the open transactions'
        timeouts are cancelled; nothing is parked, nothing is written (the next owner loads the log)."""
        res = TxnResult()
        for t in self.transactions.values():
            if t.state == ONGOING:
                res.cancel_timer(timeout_key(t.transactional_id))
        return res

    def on_timer(self, key, now_ms: int) -> TxnResult:
        """A transaction's timeout: abort it, fencing its producer with an epoch bump (as Kafka does)."""
        tid = key.transactional_id
        res = TxnResult()
        t = self.transactions.get(tid)
        if t is None or t.state != ONGOING:
            return res
        if t.start_ms + t.timeout_ms > now_ms:          # re-armed by a later change
            res.set_timer(key, t.start_ms + t.timeout_ms)
            return res
        self._prepare(res, dataclasses.replace(t, producer_epoch=_fencing_epoch(t.producer_epoch),
                                               last_producer_epoch=t.producer_epoch), commit=False, now_ms=now_ms)
        return self._done(res)

    def markers_written(self, markers: list[TxnMarker], now_ms: int) -> TxnResult:
        """Every marker of these transactions is in the data partitions: they are complete."""
        res = TxnResult()
        for tid in dict.fromkeys(m.transactional_id for m in markers):
            t = self.transactions.get(tid)
            if t is None or t.state not in (PREPARE_COMMIT, PREPARE_ABORT):
                continue
            done = COMPLETE_COMMIT if t.state == PREPARE_COMMIT else COMPLETE_ABORT
            res.emit(dataclasses.replace(t, state=done, partitions=frozenset(), last_update_ms=now_ms))
        return self._done(res)

    # ------------------------------------------------------------------ handlers
    @staticmethod
    def _fenced(api_key: int, version: int) -> int:
        return ErrorCode.PRODUCER_FENCED if version >= _FENCED_SINCE[api_key] else ErrorCode.INVALID_PRODUCER_EPOCH

    def _init_producer_id(self, ctx: TxnContext, body) -> TxnResult:
        res = TxnResult()
        R = SUPPORTED[INIT_PRODUCER_ID].response

        def answer(code: int, pid: int = -1, epoch: int = -1) -> TxnResult:
            res.respond(ctx.token, R(throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch))
            return res

        tid, timeout = body.transactional_id, body.transaction_timeout_ms
        expected = (body.producer_id, body.producer_epoch) if ctx.api_version >= 3 else (-1, -1)
        if not 0 < timeout <= MAX_TIMEOUT_MS:
            return answer(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        t = self.transactions.get(tid)
        if t is None:
            new = TransactionRecord(tid, self._allocate(), 0, timeout, EMPTY, frozenset(), ctx.now_ms, -1)
            res.emit(new)
            return answer(ErrorCode.NONE, new.producer_id, new.producer_epoch)
        if t.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected[0] >= 0:                            # KIP-360: the producer names the id and epoch it has
            known = (t.producer_id, t.producer_epoch)
            if expected != known and not (expected[0] == t.producer_id and expected[1] == t.last_producer_epoch):
                return answer(self._fenced(INIT_PRODUCER_ID, ctx.api_version))
            if expected[1] == t.last_producer_epoch and expected != known and t.state != ONGOING:
                # a retry after a fencing abort (the transaction timed out): the bumped epoch is the answer
                return answer(ErrorCode.NONE, t.producer_id, t.producer_epoch)
        if t.state == ONGOING:
            # an open transaction of the previous producer: fence it and abort it under the next epoch of
            # its producer id (the id its batches carry, which the markers - rewritten from the PrepareAbort
            # record if the server stops before them - must name)
            bumped = dataclasses.replace(t, producer_epoch=_fencing_epoch(t.producer_epoch), timeout_ms=timeout,
                                         last_producer_epoch=t.producer_epoch)
            self._prepare(res, bumped, commit=False, now_ms=ctx.now_ms)
            if bumped.producer_epoch > MAX_EPOCH:
                # that was the last epoch: as Kafka, the producer retries and, once the abort is complete,
                # gets a new producer id
                return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
            return answer(ErrorCode.NONE, bumped.producer_id, bumped.producer_epoch)
        if t.producer_epoch >= MAX_EPOCH:               # epochs exhausted: a new producer id, as Kafka
            pid, epoch = self._allocate(), 0
        else:
            pid, epoch = t.producer_id, t.producer_epoch + 1
        res.emit(dataclasses.replace(t, producer_id=pid, producer_epoch=epoch, timeout_ms=timeout,
                                            state=EMPTY, partitions=frozenset(), last_update_ms=ctx.now_ms,
                                            start_ms=-1, last_producer_epoch=t.producer_epoch))
        return answer(ErrorCode.NONE, pid, epoch)

    def _check_producer(self, api_key: int, ctx: TxnContext, tid: str, pid: int, epoch: int) -> int:
        t = self.transactions.get(tid)
        if t is None or t.producer_id != pid:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if t.producer_epoch != epoch:
            return self._fenced(api_key, ctx.api_version)
        if t.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.NONE

    def _add_partitions(self, ctx: TxnContext, body) -> TxnResult:
        res = TxnResult()
        R = SUPPORTED[ADD_PARTITIONS_TO_TXN].response
        if ctx.api_version < 4:
            topics = self._add_one(res, ctx, body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
                                   body.v3_and_below_producer_epoch, body.v3_and_below_topics, False, R)
            res.respond(ctx.token, R(throttle_time_ms=0, results_by_topic_v3_and_below=topics))
            return res
        out = []
        for tx in body.transactions:
            topics = self._add_one(res, ctx, tx.transactional_id, tx.producer_id, tx.producer_epoch, tx.topics,
                                   tx.verify_only, R)
            out.append(R.AddPartitionsToTxnResult(transactional_id=tx.transactional_id, topic_results=topics))
        res.respond(ctx.token, R(throttle_time_ms=0, error_code=0, results_by_transaction=out))
        return res

    def _add_one(self, res: TxnResult, ctx: TxnContext, tid, pid, epoch, topics, verify_only: bool, R) -> list:
        TR = R.AddPartitionsToTxnTopicResult
        PR = TR.AddPartitionsToTxnPartitionResult
        wanted = [(t.name, p) for t in topics for p in t.partitions]
        codes: dict[tuple[str, int], int] = {}
        for name, p in wanted:
            count = self._partitions_of(name)
            if not ctx.allows(WRITE, TOPIC, name):        # as Kafka: WRITE first, then whether it exists
                codes[(name, p)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif count is None or not 0 <= p < count:
                codes[(name, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if codes:                                       # Kafka: the others are not attempted
            for key in wanted:
                codes.setdefault(key, ErrorCode.OPERATION_NOT_ATTEMPTED)
        else:
            code = self._check_producer(ADD_PARTITIONS_TO_TXN, ctx, tid, pid, epoch)
            t = self.transactions.get(tid)
            if code:
                for key in wanted:
                    codes[key] = code
            else:
                assert t is not None, "a producer that passes the check has its transaction (_check_producer)"
                for key in wanted:
                    codes[key] = (ErrorCode.NONE if not verify_only or (t.state == ONGOING and key in t.partitions)
                                  else ErrorCode.INVALID_TXN_STATE)
                if not verify_only:
                    self._join(res, t, wanted, ctx.now_ms)
        by_topic: dict[str, list] = {}
        for (name, p), code in codes.items():
            by_topic.setdefault(name, []).append(PR(partition_index=p, partition_error_code=code))
        return [TR(name=name, results_by_partition=ps) for name, ps in by_topic.items()]

    def _join(self, res: TxnResult, t: TransactionRecord, wanted: list[tuple[str, int]], now_ms: int) -> None:
        """The partitions join the transaction (which starts, with its timeout, if it was not open)."""
        if t.state == ONGOING and set(wanted) <= t.partitions:
            return
        start = t.start_ms if t.state == ONGOING else now_ms
        new = dataclasses.replace(t, state=ONGOING, partitions=t.partitions | set(wanted), last_update_ms=now_ms,
                                  start_ms=start)
        res.emit(new)
        res.set_timer(timeout_key(t.transactional_id), start + new.timeout_ms)

    def _add_offsets(self, ctx: TxnContext, body) -> TxnResult:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction (its TxnOffsetCommit
        goes to the group coordinator next; the markers end it there too)."""
        res = TxnResult()
        code = self._check_producer(ADD_OFFSETS_TO_TXN, ctx, body.transactional_id, body.producer_id,
                                    body.producer_epoch)
        if not code:
            self._join(res, self.transactions[body.transactional_id], [self._offsets_partition_of(body.group_id)],
                       ctx.now_ms)
        res.respond(ctx.token, SUPPORTED[ADD_OFFSETS_TO_TXN].response(throttle_time_ms=0, error_code=code))
        return res

    def _end_txn(self, ctx: TxnContext, body) -> TxnResult:
        res = TxnResult()
        R = SUPPORTED[END_TXN].response

        def answer(code: int) -> TxnResult:
            res.respond(ctx.token, R(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1))
            return res

        tid, commit = body.transactional_id, body.committed
        t = self.transactions.get(tid)
        if t is None or t.producer_id != body.producer_id:
            return answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if t.producer_epoch != body.producer_epoch:
            return answer(self._fenced(END_TXN, ctx.api_version))
        if t.state == ONGOING:
            self._prepare(res, t, commit, ctx.now_ms)
            return answer(ErrorCode.NONE)
        if (t.state, commit) in ((COMPLETE_COMMIT, True), (COMPLETE_ABORT, False)):
            return answer(ErrorCode.NONE)               # a retry of the request that ended it
        if t.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        return answer(ErrorCode.INVALID_TXN_STATE)

    # ------------------------------------------------------------------ admin (read only)
    def _describe(self, ctx: TxnContext, body) -> TxnResult:
        res = TxnResult()
        R = SUPPORTED[DESCRIBE_TRANSACTIONS].response
        S = R.TransactionState
        out = []
        for tid in body.transactional_ids:
            t = self.transactions.get(tid)
            if not ctx.allows(DESCRIBE, TRANSACTIONAL_ID, tid):
                out.append(S(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id=tid,
                             transaction_state="", transaction_timeout_ms=0, transaction_start_time_ms=-1,
                             producer_id=-1, producer_epoch=-1, topics=[]))
                continue
            if t is None:
                out.append(S(error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, transactional_id=tid,
                             transaction_state="", transaction_timeout_ms=0, transaction_start_time_ms=-1,
                             producer_id=-1, producer_epoch=-1, topics=[]))
                continue
            by_topic: dict[str, list[int]] = {}
            for topic, p in sorted(t.partitions):
                if ctx.allows(DESCRIBE, TOPIC, topic):         # as Kafka: the topics it may describe
                    by_topic.setdefault(topic, []).append(p)
            out.append(S(error_code=0, transactional_id=tid, transaction_state=t.state_name,
                         transaction_timeout_ms=t.timeout_ms, transaction_start_time_ms=t.start_ms,
                         producer_id=t.producer_id, producer_epoch=t.producer_epoch,
                         topics=[S.TopicData(topic=topic, partitions=ps) for topic, ps in by_topic.items()]))
        res.respond(ctx.token, R(throttle_time_ms=0, transaction_states=out))
        return res

    def _list(self, ctx: TxnContext, body) -> TxnResult:
        """Kafka's filters: states by name (unknown names are echoed back), producer ids, and (v1+) only
        transactions running at least `duration_filter` ms."""
        res = TxnResult()
        R = SUPPORTED[LIST_TRANSACTIONS].response
        states = set(body.state_filters or ())
        unknown = sorted(states - set(STATE_NAMES))
        pids = set(body.producer_id_filters or ())
        duration = body.duration_filter if ctx.api_version >= 1 else -1
        out = []
        for tid, t in sorted(self.transactions.items()):
            if t.state == DEAD or (states and t.state_name not in states) or (pids and t.producer_id not in pids):
                continue
            if duration >= 0 and ctx.now_ms - t.start_ms < duration:
                continue
            if not ctx.allows(DESCRIBE, TRANSACTIONAL_ID, tid):
                continue
            out.append(R.TransactionState(transactional_id=tid, producer_id=t.producer_id,
                                          transaction_state=t.state_name))
        res.respond(ctx.token, R(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
                                 transaction_states=out))
        return res

    # ------------------------------------------------------------------ ending a transaction
    def _prepare(self, res: TxnResult, t: TransactionRecord, commit: bool, now_ms: int) -> None:
        prepared = dataclasses.replace(t, state=PREPARE_COMMIT if commit else PREPARE_ABORT, last_update_ms=now_ms)
        res.emit(prepared)
        res.cancel_timer(timeout_key(t.transactional_id))
        res.markers += self._markers(prepared, commit)

    @staticmethod
    def _markers(t: TransactionRecord, commit: bool) -> list[TxnMarker]:
        return [TxnMarker(t.transactional_id, topic, p, t.producer_id, t.producer_epoch, commit)
                for topic, p in sorted(t.partitions)]
