"""Producing, as the `Broker` (dataplane.py) answers it: InitProducerId (idempotent producers), Produce (each
partition's batches checked, then appended through the replica manager - the producer dedup first -, then
acknowledged once durable), DescribeProducers, and the transaction markers the transaction coordinator writes
into data partitions (Kafka's WriteTxnMarkers, in process)."""
from __future__ import annotations

import logging
from typing import Any

from kafka.record.default_records import DefaultRecordBatch

from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.errors import ErrorCode
from tenure.protocol.markers import TxnMarker
from tenure.storage import BatchHeader, InvalidBatch, Log, parse_batches, stamp_log_append_time

from .base import BrokerBase, per_partition, resp
from .topics import DEFAULT_TOPIC_CONFIGS, TopicError

log = logging.getLogger("tenure.broker")

MAX_BATCH_BYTES = int(DEFAULT_TOPIC_CONFIGS["max.message.bytes"])

# a handler's answer meaning "close this connection instead of answering" (the dispatcher closes it)
CLOSE_CONNECTION = object()


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
        for td in body.topic_data:
            parts = []
            topic = self.topics.by_id(td.topic_id) if by_id else None
            name = (topic.name if topic is not None else None) if by_id else td.name
            for pd in td.partition_data:
                if code or name is None:
                    parts.append(PR(index=pd.index, error_code=code or ErrorCode.UNKNOWN_TOPIC_ID, base_offset=-1))
                    continue
                parts.append(self._produce_partition(PR, name, pd.index, pd.records, written,
                                                     body.transactional_id, ctx.broker_id, ctx.now_ms))
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

    def _produce_partition(self, PR: Any, topic: str, index: int, records: bytes | None, written: list[Log],
                           transactional_id: str | None = None, broker: int | None = None,
                           now_ms: int = -1) -> Any:
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
                    code = self._check_transactional(transactional_id, topic, index, h)
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

    def _check_transactional(self, transactional_id: str | None, topic: str, index: int, h: BatchHeader) -> int:
        """A transactional batch is appended only inside its producer's transaction, which holds the
        partition (AddPartitionsToTxn first), as Kafka verifies it."""
        if transactional_id is None:
            return ErrorCode.INVALID_REQUEST if h.producer_id < 0 else ErrorCode.INVALID_TXN_STATE
        verdict = None if self.txn_side is None else self.txn_side.verify(
            transactional_id, h.producer_id, h.producer_epoch, topic, index)
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING if verdict is None else verdict

    async def describe_producers(self, req: Request, ctx: RequestContext) -> Any:
        """DescribeProducers: the producers each partition knows (idempotent and transactional), with the
        first offset of the transaction each has open there (-1: none)."""
        R = resp(61)
        T, P = R.TopicResponse, R.TopicResponse.PartitionResponse

        def answer(topic: str, i: int) -> Any:
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
