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

Transactions v2 (KIP-890 part 2, Kafka's `transaction.version` 2): a client speaking it (EndTxn v5+) gets its
epoch bumped at every end of a transaction - the markers carry the bumped epoch, the answer names it (or a new
producer id at epoch 0 once the epochs are exhausted) -, and its partitions join the transaction implicitly:
the broker asks `add_partitions` (AddPartitionsToTxn v5, as Kafka's AddPartitionsToTxnManager asks it) before
appending a Produce v12+ batch or a TxnOffsetCommit v5+. EndTxn v4 and older and AddPartitionsToTxn v3 and
older are served as in v1. `transaction_version` is the feature level the server finalizes: from 1 the records
are TransactionLogValue v1 (with the client's transaction version), at 2 the coordinator's own aborts (a
transaction's timeout) bump the epoch as v2 ends do.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from tenure.coordinator.consumer.regex import InvalidRegex, compile_regex
from tenure.coordinator.result import Result
from tenure.coordinator.timers import Timer
from tenure.protocol.acl import DESCRIBE, TOPIC, TRANSACTIONAL_ID, WRITE
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.errors import ErrorCode
from tenure.protocol.internal_topics import OFFSETS_TOPIC
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
    TxnMarker,
)

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66
TXN_APIS = frozenset({ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS})
MAX_TIMEOUT_MS = 900_000           # Kafka's transaction.max.timeout.ms default
MAX_EPOCH = 32767 - 1              # an epoch that cannot be bumped once more gets a new producer id
SHORT_MAX = 32767
TV_1, TV_2 = 0, 2                  # a request's transaction version (Kafka's TransactionVersion TV_0 / TV_2)
# the first version of each API that knows PRODUCER_FENCED (90); older ones are answered INVALID_PRODUCER_EPOCH
_FENCED_SINCE = {INIT_PRODUCER_ID: 4, ADD_PARTITIONS_TO_TXN: 2, ADD_OFFSETS_TO_TXN: 2, END_TXN: 2}


def _fencing_epoch(epoch: int) -> int:
    """The epoch a fencing abort (a new producer, a timeout) is written under: the next one while one is left
    (32767 from 32766, as Kafka; the next InitProducerId then gets a new producer id), else the same."""
    return epoch + 1 if epoch <= MAX_EPOCH else epoch


def client_version(api_key: int, api_version: int) -> int:
    """The transaction version a request speaks (Kafka's TransactionVersion.transactionVersionFor*): EndTxn v5+
    and AddPartitionsToTxn v4+ (the broker's, for Produce v12+ and TxnOffsetCommit v5+) are v2."""
    if api_key == END_TXN:
        return TV_2 if api_version > 4 else TV_1
    if api_key == ADD_PARTITIONS_TO_TXN:
        return TV_2 if api_version > 3 else TV_1
    return TV_1


def txn_offset_commit_error(code: int, api_version: int) -> int:
    """The transaction coordinator's answer about a TxnOffsetCommit's partition as that TxnOffsetCommit version
    reports it (Kafka's AddPartitionsToTxnManager): PRODUCER_FENCED is INVALID_PRODUCER_EPOCH; a partition not in
    the transaction TRANSACTION_ABORTABLE from v4, INVALID_TXN_STATE before."""
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code == ErrorCode.TRANSACTION_ABORTABLE and api_version < 4:
        return ErrorCode.INVALID_TXN_STATE
    return code


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


class TxnResult(Result):
    """A transaction coordinator's Result: also the transaction `markers` to write (txn_runtime.py)."""
    __slots__ = ("markers",)
    _FIELDS = (*Result._FIELDS, "markers")

    def __init__(self, markers: list[TxnMarker] | None = None, **fields: Any) -> None:
        super().__init__(**fields)
        self.markers: list[TxnMarker] = [] if markers is None else markers


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
                 offsets_partition_of: Callable[[str], tuple[str, int]] = lambda group_id: ("__consumer_offsets", 0),
                 *, transaction_version: int, offsets_partitions: Callable[[], int] = lambda: 1) -> None:
        self._allocate = allocate_producer_id          # injected: producer ids shared with idempotent producers
        self._partitions_of = partitions_of            # a topic's partition count (None: no such topic)
        self._offsets_partition_of = offsets_partition_of     # a group's __consumer_offsets partition
        self._offsets_partitions = offsets_partitions         # how many __consumer_offsets has
        self.transactions: dict[str, TransactionRecord] = {}
        # the `transaction.version` feature level the server finalizes (0-2): the records' value version (v1
        # from 1) and how the coordinator's own aborts (timeouts) end a transaction (with an epoch bump at 2)
        self.transaction_version = transaction_version

    # ------------------------------------------------------------------ the one mutator
    def replay(self, record: TransactionRecord) -> None:
        if record.tombstone:
            self.transactions.pop(record.transactional_id, None)
        else:
            self.transactions[record.transactional_id] = record

    def _emit(self, res: TxnResult, before: TransactionRecord | None, after: TransactionRecord) -> TransactionRecord:
        """Write `after`, the next state of `before`'s transactional id: in the value version the feature level
        asks, naming the producer id it had before (Kafka's previousProducerId, kept in memory)."""
        after = dataclasses.replace(after, value_version=1 if self.transaction_version >= 1 else 0,
                                    previous_producer_id=before.producer_id if before is not None else -1)
        res.emit(after)
        return after

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
        """A transactional batch (or v1 TxnOffsetCommit) to `topic`-`partition`: NONE if its transaction holds
        the partition, else the coordinator's answer to a verification as Kafka's
        (handleVerifyPartitionsInTransaction): PRODUCER_FENCED for another epoch, CONCURRENT_TRANSACTIONS while
        it ends, TRANSACTION_ABORTABLE for a partition not in it. The broker turns them into what the request's
        version knows (the broker's `produce_txn_error`, `txn_offset_commit_error`)."""
        if transactional_id == "":
            return ErrorCode.INVALID_REQUEST
        t = self.transactions.get(transactional_id) if transactional_id is not None else None
        if t is None or t.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != t.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if t.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if (topic, partition) not in t.partitions:
            return ErrorCode.TRANSACTION_ABORTABLE
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
        self._fence_and_abort(res, t, now_ms)
        return self._done(res)

    def _fence_and_abort(self, res: TxnResult, t: TransactionRecord, now_ms: int) -> None:
        """The coordinator's own abort of an open transaction (its timeout, or a new producer's InitProducerId),
        as Kafka's: an epoch fence (the next epoch, 32767 at most), then the abort as the server's transaction
        version ends one - at 2 bumped once more (none past 32767)."""
        fenced = dataclasses.replace(t, producer_epoch=_fencing_epoch(t.producer_epoch),
                                     last_producer_epoch=t.producer_epoch)
        if self.transaction_version >= TV_2:
            self._prepare_v2(res, t, fenced, commit=False, now_ms=now_ms, next_pid=-1, version=self.transaction_version)
        else:
            self._prepare(res, t, fenced, commit=False, now_ms=now_ms)

    def markers_written(self, markers: list[TxnMarker], now_ms: int) -> TxnResult:
        """Every marker of these transactions is in the data partitions: they are complete."""
        res = TxnResult()
        for tid in dict.fromkeys(m.transactional_id for m in markers):
            t = self.transactions.get(tid)
            if t is None or t.state not in (PREPARE_COMMIT, PREPARE_ABORT):
                continue
            self._emit(res, t, self._completed(t, now_ms))
        return self._done(res)

    @staticmethod
    def _completed(t: TransactionRecord, now_ms: int) -> TransactionRecord:
        """A prepared transaction's completion (Kafka's prepareComplete): a v2 one whose epochs are exhausted
        goes on with its next producer id at epoch 0."""
        done = COMPLETE_COMMIT if t.state == PREPARE_COMMIT else COMPLETE_ABORT
        pid, epoch = t.producer_id, t.producer_epoch
        if t.client_version >= TV_2 and t.next_producer_id >= 0:
            pid, epoch = t.next_producer_id, 0
        return dataclasses.replace(t, state=done, producer_id=pid, producer_epoch=epoch, next_producer_id=-1,
                                   partitions=frozenset(), last_update_ms=now_ms)

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
        if tid == "":                                   # Kafka: an empty transactional id is no id (null is)
            return answer(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout <= MAX_TIMEOUT_MS:
            return answer(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        t = self.transactions.get(tid)
        if t is None:
            new = self._emit(res, None, TransactionRecord(tid, self._allocate(), 0, timeout, EMPTY, frozenset(),
                                                          ctx.now_ms, -1))
            return answer(ErrorCode.NONE, new.producer_id, new.producer_epoch)
        if t.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected[0] >= 0:                            # KIP-360: the producer names the id and epoch it has
            known = (t.producer_id, t.producer_epoch)
            # a retry of an InitProducerId whose answer was lost after the epochs ran out names the previous id
            overflow_retry = expected[0] == t.previous_producer_id and expected[1] >= MAX_EPOCH
            if expected != known and not overflow_retry and \
                    not (expected[0] == t.producer_id and expected[1] == t.last_producer_epoch):
                return answer(self._fenced(INIT_PRODUCER_ID, ctx.api_version))
            if expected[1] == t.last_producer_epoch and expected != known and t.state != ONGOING:
                # a retry after a fencing abort (the transaction timed out): the bumped epoch is the answer
                return answer(ErrorCode.NONE, t.producer_id, t.producer_epoch)
        if t.state == ONGOING:
            # an open transaction of the previous producer: as Kafka, fence it and abort it under its
            # producer id (the one its batches carry, which the markers - rewritten from the PrepareAbort
            # record if the server stops before them - must name) and tell the new producer to retry
            # (CONCURRENT_TRANSACTIONS): its retry, once the abort is complete, bumps the epoch once more, or
            # gets a new producer id when the fencing used the last epochs
            self._fence_and_abort(res, t, ctx.now_ms)
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        if t.producer_epoch >= MAX_EPOCH:               # epochs exhausted: a new producer id, as Kafka
            pid, epoch = self._allocate(), 0
        else:
            pid, epoch = t.producer_id, t.producer_epoch + 1
        self._emit(res, t, dataclasses.replace(t, producer_id=pid, producer_epoch=epoch, timeout_ms=timeout,
                                               state=EMPTY, partitions=frozenset(), last_update_ms=ctx.now_ms,
                                               start_ms=-1, last_producer_epoch=t.producer_epoch))
        return answer(ErrorCode.NONE, pid, epoch)

    def _check_producer(self, api_key: int, ctx: TxnContext, tid: str, pid: int, epoch: int) -> int:
        if not tid:
            return ErrorCode.INVALID_REQUEST             # Kafka: an empty transactional id
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
            internal = ctx.api_version >= 4 and name == OFFSETS_TOPIC
            if count is None and internal:
                # the broker's own request (v4+) for a TxnOffsetCommit v5+: the group's offsets partition (the
                # TxnOffsetCommit itself was authorized: the group, the transactional id)
                count = self._offsets_partitions()
            if not internal and not ctx.allows(WRITE, TOPIC, name):   # as Kafka: WRITE first, then existence
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
                    # verify-only (what a broker asks before a v1 append): Kafka's
                    # handleVerifyPartitionsInTransaction, TRANSACTION_ABORTABLE for a partition not in it
                    codes[key] = (ErrorCode.NONE if not verify_only or key in t.partitions
                                  else ErrorCode.TRANSACTION_ABORTABLE)
                if not verify_only:
                    self._join(res, t, wanted, ctx.now_ms, client_version(ADD_PARTITIONS_TO_TXN, ctx.api_version))
        by_topic: dict[str, list] = {}
        for (name, p), code in codes.items():
            by_topic.setdefault(name, []).append(PR(partition_index=p, partition_error_code=code))
        return [TR(name=name, results_by_partition=ps) for name, ps in by_topic.items()]

    def _join(self, res: TxnResult, t: TransactionRecord, wanted: list[tuple[str, int]], now_ms: int,
              version: int) -> None:
        """The partitions join the transaction (which starts, with its timeout, if it was not open); the
        transaction takes the transaction version of the request that adds them (Kafka's prepareAddPartitions)."""
        if t.state == ONGOING and set(wanted) <= t.partitions:
            return
        start = t.start_ms if t.state == ONGOING else now_ms
        new = self._emit(res, t, dataclasses.replace(t, state=ONGOING, partitions=t.partitions | set(wanted),
                                                     last_update_ms=now_ms, start_ms=start, client_version=version))
        res.set_timer(timeout_key(t.transactional_id), start + new.timeout_ms)

    def _add_offsets(self, ctx: TxnContext, body) -> TxnResult:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction (its TxnOffsetCommit
        goes to the group coordinator next; the markers end it there too)."""
        res = TxnResult()
        code = self._check_producer(ADD_OFFSETS_TO_TXN, ctx, body.transactional_id, body.producer_id,
                                    body.producer_epoch)
        if not code:
            self._join(res, self.transactions[body.transactional_id], [self._offsets_partition_of(body.group_id)],
                       ctx.now_ms, TV_1)
        res.respond(ctx.token, SUPPORTED[ADD_OFFSETS_TO_TXN].response(throttle_time_ms=0, error_code=code))
        return res

    def _end_txn(self, ctx: TxnContext, body) -> TxnResult:
        res = TxnResult()
        R = SUPPORTED[END_TXN].response

        def answer(code: int, pid: int = -1, epoch: int = -1) -> TxnResult:
            res.respond(ctx.token, R(throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch))
            return res

        tid, commit = body.transactional_id, body.committed
        if not tid:
            return answer(ErrorCode.INVALID_REQUEST)     # Kafka: an empty transactional id, in v1 and v2
        t = self.transactions.get(tid)
        if client_version(END_TXN, ctx.api_version) >= TV_2:
            return self._end_txn_v2(res, ctx, body, t, answer)
        if t is None or t.producer_id != body.producer_id:
            return answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if t.producer_epoch != body.producer_epoch:
            return answer(self._fenced(END_TXN, ctx.api_version))
        if t.state == ONGOING:
            self._prepare(res, t, t, commit, ctx.now_ms)
            return answer(ErrorCode.NONE)
        if (t.state, commit) in ((COMPLETE_COMMIT, True), (COMPLETE_ABORT, False)):
            return answer(ErrorCode.NONE)               # a retry of the request that ended it
        if t.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        return answer(ErrorCode.INVALID_TXN_STATE)

    def _end_txn_v2(self, res: TxnResult, ctx: TxnContext, body, t: TransactionRecord | None,
                    answer: Callable[..., TxnResult]) -> TxnResult:
        """EndTxn v5+ (transactions v2), as Kafka's coordinator ends one: every end bumps the epoch (the answer
        names the producer id and epoch to go on with), and a retry is told apart by its epoch - the one before
        the bump (or the last one of the previous producer id after the epochs ran out), not the same one.

        | state          | abort, retry | abort, current | commit, retry | commit, current |
        | Empty          | FENCED       | bump           | FENCED        | INVALID_TXN_STATE |
        | CompleteAbort  | NONE         | bump           | INVALID_TXN_STATE | INVALID_TXN_STATE |
        | CompleteCommit | INVALID_TXN_STATE | bump      | NONE          | INVALID_TXN_STATE |
        """
        commit, pid, epoch = body.committed, body.producer_id, body.producer_epoch
        if t is None:
            return answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        retry_on_overflow = t.previous_producer_id == pid and epoch == MAX_EPOCH and t.producer_epoch == 0
        retry_on_bump = t.producer_epoch == epoch + 1
        if t.producer_id != pid and not retry_on_overflow:
            return answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if t.state in (PREPARE_COMMIT, PREPARE_ABORT):
            valid = retry_on_bump
        elif t.state in (COMPLETE_COMMIT, COMPLETE_ABORT):
            valid = retry_on_bump or retry_on_overflow or epoch == t.producer_epoch
        else:
            valid = epoch == t.producer_epoch
        if not valid:
            return answer(ErrorCode.PRODUCER_FENCED)
        retry = retry_on_bump or retry_on_overflow
        same = (t.state, commit) in ((COMPLETE_COMMIT, True), (COMPLETE_ABORT, False))
        if t.state == ONGOING or (not commit and not retry and t.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT)):
            if commit and t.producer_epoch >= SHORT_MAX:
                # no epoch left to commit under (only a transaction prepared at the last epoch and completed
                # at a restart, which loses the next producer id Kafka does not write, gets here): Kafka's
                # transition refuses the overflowing epoch and the request fails; an abort goes through
                return answer(ErrorCode.UNKNOWN_SERVER_ERROR)
            next_pid = self._allocate() if t.producer_epoch >= MAX_EPOCH else -1
            done = self._prepare_v2(res, t, t, commit, ctx.now_ms, next_pid, TV_2)
            return answer(ErrorCode.NONE, done.producer_id, done.producer_epoch)
        if same and retry:
            return answer(ErrorCode.NONE, t.producer_id, t.producer_epoch)     # a retry of the request that ended it
        if t.state in (PREPARE_COMMIT, PREPARE_ABORT) and (t.state == PREPARE_COMMIT) == commit:
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
        """Kafka's filters (TransactionStateManager.listTransactionStates): states by name (unknown names are
        echoed back), producer ids, (v1+) only transactions running longer than `duration_filter` ms, and (v2+,
        KIP-1152) only transactional ids the whole of which `transactional_id_pattern` matches - an RE2/J
        pattern, as the consumer groups' topic regexes; null or empty: no filter. A pattern RE2/J refuses
        answers INVALID_REGULAR_EXPRESSION (128) and lists nothing."""
        res = TxnResult()
        R = SUPPORTED[LIST_TRANSACTIONS].response
        states = set(body.state_filters or ())
        unknown = sorted(states - set(STATE_NAMES))
        pids = set(body.producer_id_filters or ())
        duration = body.duration_filter if ctx.api_version >= 1 else -1
        pattern = body.transactional_id_pattern if ctx.api_version >= 2 else None
        matcher = None
        if pattern:
            try:
                matcher = compile_regex(pattern)
            except InvalidRegex:
                res.respond(ctx.token, R(throttle_time_ms=0, error_code=ErrorCode.INVALID_REGULAR_EXPRESSION,
                                         unknown_state_filters=[], transaction_states=[]))
                return res
        out = []
        for tid, t in sorted(self.transactions.items()):
            if t.state == DEAD or (states and t.state_name not in states) or (pids and t.producer_id not in pids):
                continue
            if duration >= 0 and ctx.now_ms - t.start_ms <= duration:     # running longer than: strictly
                continue
            if matcher is not None and matcher.fullmatch(tid) is None:
                continue
            if not ctx.allows(DESCRIBE, TRANSACTIONAL_ID, tid):
                continue
            out.append(R.TransactionState(transactional_id=tid, producer_id=t.producer_id,
                                          transaction_state=t.state_name))
        res.respond(ctx.token, R(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
                                 transaction_states=out))
        return res

    # ------------------------------------------------------------------ ending a transaction
    def _prepare(self, res: TxnResult, before: TransactionRecord, t: TransactionRecord, commit: bool,
                 now_ms: int) -> None:
        """v1: the transaction `t` (`before` with a fencing epoch, if any) is prepared under its epoch."""
        prepared = self._emit(res, before, dataclasses.replace(
            t, state=PREPARE_COMMIT if commit else PREPARE_ABORT, last_update_ms=now_ms, client_version=TV_1))
        res.cancel_timer(timeout_key(t.transactional_id))
        res.markers += self._markers(prepared, commit)

    def _prepare_v2(self, res: TxnResult, before: TransactionRecord, t: TransactionRecord, commit: bool,
                    now_ms: int, next_pid: int, version: int) -> TransactionRecord:
        """v2 (Kafka's prepareAbortOrCommit with an epoch bump): prepared under the next epoch, which its markers
        carry (an abort already at 32767, a broken state, goes through without one); `next_pid` (>= 0) the
        producer id it completes with when the epochs are exhausted. A transaction with no partition (an abort
        in Empty or after an end, which v2 allows) completes at once. What it completes with is returned."""
        epoch = t.producer_epoch if t.producer_epoch == SHORT_MAX and not commit else t.producer_epoch + 1
        added = t.state == ONGOING
        prepared = self._emit(res, before, dataclasses.replace(
            t, state=PREPARE_COMMIT if commit else PREPARE_ABORT, producer_epoch=epoch,
            last_producer_epoch=t.producer_epoch, next_producer_id=next_pid, client_version=version,
            start_ms=t.start_ms if added else now_ms, last_update_ms=now_ms,
            partitions=t.partitions if added else frozenset()))
        res.cancel_timer(timeout_key(t.transactional_id))
        if prepared.partitions:
            res.markers += self._markers(prepared, commit)
            return self._completed(prepared, now_ms)
        return self._emit(res, prepared, self._completed(prepared, now_ms))

    @staticmethod
    def _markers(t: TransactionRecord, commit: bool) -> list[TxnMarker]:
        return [TxnMarker(t.transactional_id, topic, p, t.producer_id, t.producer_epoch, commit)
                for topic, p in sorted(t.partitions)]
