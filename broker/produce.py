"""Producing, as the `Broker` (dataplane.py) answers it: InitProducerId (idempotent producers), Produce (each
partition's batches checked, then appended through the replica manager - the producer dedup first -, then
acknowledged once durable), DescribeProducers, and the transaction markers the transaction coordinator writes
into data partitions (Kafka's WriteTxnMarkers, in process)."""
from __future__ import annotations

import logging
from typing import Any

from tenure.protocol.acl import READ, TOPIC, WRITE
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.errors import ErrorCode
from tenure.protocol.markers import TxnMarker
from tenure.storage import BatchHeader, InvalidBatch, Log, parse_batches

from .base import BrokerBase, per_partition, resp
from .topics import DEFAULT_TOPIC_CONFIGS, TopicError

log = logging.getLogger("tenure.broker")

MAX_BATCH_BYTES = int(DEFAULT_TOPIC_CONFIGS["max.message.bytes"])

# a handler's answer meaning "close this connection instead of answering" (the dispatcher closes it)
CLOSE_CONNECTION = object()
ADDS_PARTITIONS_SINCE = 12     # Produce v12+ of a transactions v2 producer: its partitions join by the Produce
# the coordinator's answers a producer retries, which Kafka's broker answers NOT_ENOUGH_REPLICAS (a retriable
# error that older clients retry without refreshing their metadata)
_RETRIED_AS_NOT_ENOUGH_REPLICAS = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                             ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


def produce_txn_error(code: int, api_version: int) -> int:
    """The transaction coordinator's answer about a transactional batch's partition as Produce of that version
    reports it (Kafka's AddPartitionsToTxnManager and ReplicaManager): PRODUCER_FENCED is INVALID_PRODUCER_EPOCH;
    a partition not in the transaction TRANSACTION_ABORTABLE from v11, INVALID_TXN_STATE before; the retriable
    coordinator errors NOT_ENOUGH_REPLICAS."""
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code == ErrorCode.TRANSACTION_ABORTABLE and api_version <= 10:
        return ErrorCode.INVALID_TXN_STATE
    if code in _RETRIED_AS_NOT_ENOUGH_REPLICAS:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return code


def _transactional_producer(records: bytes | None) -> tuple[int, int] | None:
    """The producer id and epoch of a partition's transactional data batch (None: none, or batches the checks
    below refuse)."""
    try:
        headers = parse_batches(records) if records else []
    except InvalidBatch:
        return None
    for h in headers:
        if h.is_transactional and not h.is_control:
            return h.producer_id, h.producer_epoch
    return None


class ProduceApis(BrokerBase):
    async def init_producer_id(self, req: Request, ctx: RequestContext) -> Any:
        """An idempotent producer's id (one with a transactional id goes to the transaction coordinator)."""
        body, v = req.body, req.api_version
        R = resp(22)
        pid, epoch = self.producers.allocate(body.producer_id if v >= 3 else -1,
                                             body.producer_epoch if v >= 3 else -1)
        return R(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch)

    async def produce(self, req: Request, ctx: RequestContext) -> Any:
        body = req.body
        R = resp(0)
        TR, PR = R.TopicProduceResponse, R.TopicProduceResponse.PartitionProduceResponse
        code = ErrorCode.INVALID_REQUIRED_ACKS if body.acks not in (0, 1, -1) else ErrorCode.NONE
        out = []
        written: list[Log] = []
        added = {} if code else await self._add_to_transaction(body, req.api_version, ctx)
        for td in body.topic_data:
            parts = []
            allowed = ctx.allows(WRITE, TOPIC, td.name)    # as Kafka: before whether the topic exists
            for pd in td.partition_data:
                if code or not allowed:
                    parts.append(PR(index=pd.index, error_code=code or ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                    base_offset=-1))
                    continue
                parts.append(self._produce_partition(PR, td.name, pd.index, pd.records, written,
                                                     body.transactional_id, ctx.broker_id, req.api_version,
                                                     added))
            out.append(TR(name=td.name, partition_responses=parts))
        if body.acks == 0:
            # no answer is due; a refused partition closes the connection instead, as Kafka does, so the
            # producer refreshes its metadata (e.g. finds a moved leader) rather than keep sending there
            if any(p.error_code for t in out for p in t.partition_responses):
                return CLOSE_CONNECTION
            return None
        if written and self.replicas.durable_needed:
            try:
                await self.replicas.durable(written)          # the commit point
            except OSError as exc:
                log.error("fsync failed after a produce: %s; answering KAFKA_STORAGE_ERROR", exc)
                for t in out:
                    for p in t.partition_responses:
                        if p.error_code == 0:
                            p.error_code, p.base_offset = ErrorCode.KAFKA_STORAGE_ERROR, -1
        return R(responses=out, throttle_time_ms=0)

    async def _add_to_transaction(self, body: Any, api_version: int, ctx: RequestContext
                                  ) -> dict[tuple[str, int], int]:
        """Transactions v2 (Produce v12+): the partitions this request's transactional batches go to join their
        producer's transaction first, as a Kafka 4.x broker asks its transaction coordinator before appending
        them (the coordinator's code for each; those it refuses are not appended). Only partitions this broker
        would append to are asked for; the others are answered by the checks that refuse them."""
        if body.transactional_id is None or api_version < ADDS_PARTITIONS_SINCE or self.txn_side is None:
            return {}
        by_producer: dict[tuple[int, int], list[tuple[str, int]]] = {}
        for td in body.topic_data:
            if self.topics.is_internal(td.name):
                continue
            for pd in td.partition_data:
                producer = _transactional_producer(pd.records)
                if producer is None or self.replicas.get(td.name, pd.index) is None or \
                        self.cluster.check(td.name, pd.index, broker=ctx.broker_id):
                    continue
                by_producer.setdefault(producer, []).append((td.name, pd.index))
        added: dict[tuple[str, int], int] = {}
        for (pid, epoch), partitions in by_producer.items():
            added.update(await self.txn_side.add_partitions(body.transactional_id, pid, epoch, partitions, ctx))
        return added

    def _produce_partition(self, PR: Any, topic: str, index: int, records: bytes | None, written: list[Log],
                           transactional_id: str | None = None, broker: int | None = None, api_version: int = 9,
                           added: dict[tuple[str, int], int] | None = None) -> Any:
        try:                                   # first, as Kafka's ReplicaManager: any partition, existing or not
            self.topics.refuse_internal(topic, "append to")
        except TopicError as exc:
            log.info("refused a produce to %s-%d: %s", topic, index, exc.message)
            return PR(index=index, error_code=exc.code, base_offset=-1, error_message=exc.message)
        p = self.replicas.get(topic, index)
        if p is None:
            return PR(index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, base_offset=-1,
                      error_message=f"unknown topic-partition {topic}-{index}")
        code = self.cluster.check(topic, index, broker=broker)
        if code:
            return PR(index=index, error_code=code, base_offset=-1,
                      error_message=f"this broker does not lead {topic}-{index}")
        try:
            if not records:
                raise InvalidBatch("produce request carries no record batch")
            headers = parse_batches(records)
            for h in headers:
                if h.size > MAX_BATCH_BYTES:
                    raise InvalidBatch(f"batch of {h.size} bytes exceeds max.message.bytes {MAX_BATCH_BYTES}",
                                       ErrorCode.MESSAGE_TOO_LARGE)
                if h.is_control:
                    raise InvalidBatch("control batches are written by the transaction coordinator only",
                                       ErrorCode.INVALID_REQUEST)
                if h.is_transactional:
                    code = self._check_transactional(transactional_id, topic, index, h, api_version, added or {})
                    if code:
                        return PR(index=index, error_code=code, base_offset=-1,
                                  log_start_offset=p.log_start_offset)
        except InvalidBatch as exc:
            log.info("rejected produce to %s-%d: %s", topic, index, exc)
            return PR(index=index, error_code=exc.error_code, base_offset=-1, error_message=str(exc))
        try:
            done = self.replicas.append_records(p, bytes(records), headers)
        except OSError as exc:
            log.error("append to %s-%d failed: %s", topic, index, exc)
            return PR(index=index, error_code=ErrorCode.KAFKA_STORAGE_ERROR, base_offset=-1,
                      error_message=f"cannot write the log: {exc}")
        if done.error:
            return PR(index=index, error_code=done.error, base_offset=-1, log_start_offset=p.log_start_offset)
        if done.duplicate:
            return PR(index=index, error_code=0, base_offset=done.base_offset, log_append_time_ms=-1,
                      log_start_offset=p.log_start_offset)
        written.append(p.log)
        return PR(index=index, error_code=0, base_offset=done.base_offset, log_append_time_ms=-1,
                  log_start_offset=p.log_start_offset, record_errors=[], error_message=None)

    def _check_transactional(self, transactional_id: str | None, topic: str, index: int, h: BatchHeader,
                             api_version: int, added: dict[tuple[str, int], int]) -> int:
        """A transactional batch is appended only inside its producer's transaction, which holds the
        partition (AddPartitionsToTxn first; from Produce v12 the coordinator's add, `added`, if it refused
        it), as Kafka verifies it; the coordinator's answer as this Produce version reports it."""
        if transactional_id is None:
            return ErrorCode.INVALID_REQUEST if h.producer_id < 0 else ErrorCode.INVALID_TXN_STATE
        refused = added.get((topic, index), ErrorCode.NONE)
        verdict = refused or (None if self.txn_side is None else self.txn_side.verify(
            transactional_id, h.producer_id, h.producer_epoch, topic, index))
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING if verdict is None else produce_txn_error(verdict, api_version)

    async def describe_producers(self, req: Request, ctx: RequestContext) -> Any:
        """DescribeProducers: the producers each partition knows (idempotent and transactional), with the
        first offset of the transaction each has open there (-1: none)."""
        R = resp(61)
        T, P = R.TopicResponse, R.TopicResponse.PartitionResponse

        def answer(topic: str, i: int) -> Any:
            if not ctx.allows(READ, TOPIC, topic):
                return P(partition_index=i, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None,
                         active_producers=[])
            p, code = self.served_partition(topic, i, ctx, require_leader=False)   # any replica answers
            if p is None or code:
                unknown = f"unknown topic-partition {topic}-{i}" if p is None else None
                return P(partition_index=i, error_code=code, error_message=unknown, active_producers=[])
            return P(partition_index=i, error_code=0, error_message=None, active_producers=[
                P.ProducerState(producer_id=pid, producer_epoch=epoch, last_sequence=seq, last_timestamp=ts,
                                coordinator_epoch=-1, current_txn_start_offset=p.txns.open_at(pid))
                for pid, epoch, seq, ts in p.producers.active()])
        return R(throttle_time_ms=0, topics=per_partition(
            req.body.topics, answer, lambda name, parts: T(name=name, partitions=parts), items="partition_indexes"))

    def write_txn_markers(self, markers: list[TxnMarker], now_ms: int) -> list[Log]:
        """Append each transaction marker (a control batch) to its partition; the logs written. (Kafka's
        WriteTxnMarkers from the coordinator to the partition's leader, in process.) A data partition's marker
        goes through the replica manager; an internal topic's through its coordinator runtime, whose shard
        replays it."""
        written = []
        for m in markers:
            if self.topics.is_internal(m.topic):
                if self.txn_side is None:
                    raise AssertionError(f"no writer for the transaction markers of {m.topic}")
                written.append(self.txn_side.internal_marker(m, now_ms))
                continue
            plog = self.replicas.write_txn_marker(m, now_ms)
            if plog is not None:               # None: the topic was deleted while the transaction was open
                written.append(plog)
        return written
