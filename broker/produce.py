"""Producing, as the `Broker` (dataplane.py) answers it: InitProducerId (idempotent producers), Produce (each
partition's batches checked, then appended through the replica manager - the producer dedup first -, then
acknowledged once durable), DescribeProducers, and the transaction markers the transaction coordinator writes
into data partitions (Kafka's WriteTxnMarkers, in process)."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafka.record.default_records import DefaultRecordBatch

from tenure.protocol.acl import READ, TOPIC, WRITE
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.errors import ErrorCode
from tenure.storage import BatchHeader, InvalidBatch, Log, parse_batches, stamp_log_append_time

from .base import BrokerBase, per_partition_in_turns, resp
from .message_format import is_legacy, upconvert
from .topics import DEFAULT_TOPIC_CONFIGS, TopicError

if TYPE_CHECKING:                  # (made by the transaction coordinator: protocol/txn_records.py)
    from tenure.protocol.txn_records import TxnMarker

log = logging.getLogger("tenure.broker")

MAX_BATCH_BYTES = int(DEFAULT_TOPIC_CONFIGS["max.message.bytes"])

# a handler's answer meaning "close this connection instead of answering" (the dispatcher closes it)
CLOSE_CONNECTION = object()
ADDS_PARTITIONS_SINCE = 12     # Produce v12+ of a transactions v2 producer: its partitions join by the Produce
LEGACY_FORMAT_UNTIL = 2        # Produce v0-2 carry message formats v0/v1, converted to v2 on append (message_format.py)
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


def keyless_records(records: bytes, h: BatchHeader, partition: str) -> list[tuple[int, str]]:
    """The records of a batch bound for a compacted topic that have no key, with Kafka's per-record message
    (KIP-467: the index in the batch): a compacted topic cannot keep a record it could never compact."""
    try:
        decoded = list(DefaultRecordBatch(bytes(records[h.position:h.position + h.size])))
    except Exception as exc:      # a codec not installed, or records that do not parse under a valid CRC
        raise InvalidBatch(f"the records of the batch at byte {h.position} do not decode: {exc}") from exc
    return [(i, f"Compacted topic cannot accept message without key in topic partition {partition}")
            for i, r in enumerate(decoded) if r.key is None]


def refused_records(PR: Any, index: int, errors: list[tuple[int, str]]) -> Any:
    """A partition's answer refusing its batch for these records (Kafka's RecordValidationException):
    INVALID_RECORD (87), each record's error, and the summary naming at most the first three."""
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    E = PR.fields["record_errors"].data_class
    return PR(index=index, error_code=ErrorCode.INVALID_RECORD, base_offset=-1,
              record_errors=[E(batch_index=i, batch_index_error_message=m) for i, m in errors],
              error_message=f"One or more records have been rejected due to {len(errors)} record errors in total, "
                            f"and only showing the first three errors at most: [{shown}]")


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
        by_id = req.api_version >= 13               # KIP-516: topics named by id from Produce v13
        names = [self._topic_name(td, by_id) for td in body.topic_data]     # None: an unknown topic id
        added = {} if code else await self._add_to_transaction(body, names, req.api_version, ctx)
        for td, name in zip(body.topic_data, names, strict=True):
            parts = []
            # as Kafka: WRITE before whether the topic exists (an unknown id has no name to authorize)
            allowed = name is not None and ctx.allows(WRITE, TOPIC, name)
            for pd in td.partition_data:
                if code or not allowed:
                    error = code or (ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    parts.append(PR(index=pd.index, error_code=error, base_offset=-1))
                    continue
                assert name is not None
                parts.append(self._produce_partition(PR, name, pd.index, pd.records, written,
                                                     body.transactional_id, ctx.broker_id, req.api_version,
                                                     added, ctx.now_ms))
            out.append(TR(topic_id=td.topic_id, partition_responses=parts) if by_id
                       else TR(name=td.name, partition_responses=parts))
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

    def _topic_name(self, td: Any, by_id: bool) -> str | None:
        """A produced topic's name: as sent, or from Produce v13 its topic id's (None: no such topic)."""
        if not by_id:
            return td.name
        topic = self.topics.by_id(td.topic_id)
        return topic.name if topic is not None else None

    async def _add_to_transaction(self, body: Any, names: list[str | None], api_version: int, ctx: RequestContext
                                  ) -> dict[tuple[str, int], int]:
        """Transactions v2 (Produce v12+): the partitions this request's transactional batches go to join their
        producer's transaction first, as a Kafka 4.x broker asks its transaction coordinator before appending
        them (the coordinator's code for each; those it refuses are not appended). Only partitions this broker
        would append to are asked for; the others are answered by the checks that refuse them."""
        if body.transactional_id is None or api_version < ADDS_PARTITIONS_SINCE or self.txn_side is None:
            return {}
        by_producer: dict[tuple[int, int], list[tuple[str, int]]] = {}
        for td, name in zip(body.topic_data, names, strict=True):
            if name is None or self.topics.is_internal(name) or not ctx.allows(WRITE, TOPIC, name):
                continue
            for pd in td.partition_data:
                producer = _transactional_producer(pd.records)
                if producer is None or self.replicas.get(name, pd.index) is None or \
                        self.cluster.check(name, pd.index, broker=ctx.broker_id):
                    continue
                by_producer.setdefault(producer, []).append((name, pd.index))
        added: dict[tuple[str, int], int] = {}
        for (pid, epoch), partitions in by_producer.items():
            added.update(await self.txn_side.add_partitions(body.transactional_id, pid, epoch, partitions, ctx))
        return added

    def _produce_partition(self, PR: Any, topic: str, index: int, records: bytes | None, written: list[Log],
                           transactional_id: str | None = None, broker: int | None = None, api_version: int = 9,
                           added: dict[tuple[str, int], int] | None = None, now_ms: int = -1) -> Any:
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
        topic_of = self.topics.get(topic)
        max_bytes = int(topic_of.config("max.message.bytes") or MAX_BATCH_BYTES) if topic_of else MAX_BATCH_BYTES
        compacted = topic_of is not None and "compact" in (topic_of.config("cleanup.policy") or "")
        append_time = topic_of is not None and topic_of.config("message.timestamp.type") == "LogAppendTime"
        try:
            if not records:
                raise InvalidBatch("produce request carries no record batch")
            if api_version <= LEGACY_FORMAT_UNTIL and is_legacy(records):
                records = upconvert(records)
            headers = parse_batches(records)
            for h in headers:
                if h.size > max_bytes:      # the topic's max.message.bytes, as Kafka's append checks it
                    raise InvalidBatch(f"The record batch size in the append to {topic}-{index} is {h.size} bytes "
                                       f"which exceeds the maximum configured value of {max_bytes}.",
                                       ErrorCode.MESSAGE_TOO_LARGE)
                if h.is_control:
                    raise InvalidBatch("control batches are written by the transaction coordinator only",
                                       ErrorCode.INVALID_REQUEST)
                if h.is_transactional:
                    code = self._check_transactional(transactional_id, topic, index, h, api_version, added or {})
                    if code:
                        return PR(index=index, error_code=code, base_offset=-1,
                                  log_start_offset=p.log_start_offset)
                if compacted:
                    refused = keyless_records(records, h, f"{topic}-{index}")
                    if refused:
                        return refused_records(PR, index, refused)
        except InvalidBatch as exc:
            log.info("rejected produce to %s-%d: %s", topic, index, exc)
            return PR(index=index, error_code=exc.error_code, base_offset=-1, error_message=str(exc))
        append_time_ms = -1
        if append_time:                        # the broker's clock is every record's timestamp (KIP-32)
            append_time_ms = now_ms
            stamped = bytearray(records)
            for h in headers:
                stamp_log_append_time(stamped, h, now_ms)
            records, headers = bytes(stamped), parse_batches(stamped)
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
        return PR(index=index, error_code=0, base_offset=done.base_offset, log_append_time_ms=append_time_ms,
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
        return R(throttle_time_ms=0, topics=await per_partition_in_turns(
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
