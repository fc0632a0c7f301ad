"""Handlers for the data-plane APIs, answered as the broker the request came in on (its context's `broker_id`) from
the cluster table (broker/cluster.py): with one broker, node 0 leads every partition at leader epoch 0.

Each handler takes a decoded `Request` and returns the response body (or None when no response is
due, i.e. Produce with acks=0). Kafka errors are per-topic/partition values in the response; only
malformed bytes close a connection, and that happens in the protocol layer before we get here.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tenure.protocol.acl import authorized_operations
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request, api_versions_body
from tenure.protocol.context import RequestContext
from tenure.protocol.errors import ErrorCode
from tenure.protocol.internal_topics import partition_for
from tenure.storage import InvalidBatch, parse_batches

from .admin import AdminApis
from .cluster import NO_LEADER, BrokerNode, Cluster
from .configs import RESOURCE_TOPIC
from .producers import ProducerStates
from .topics import (
    DEFAULT_TOPIC_CONFIGS,
    OFFSETS_TOPIC,
    TRANSACTION_TOPIC,
    TopicError,
    TopicRegistry,
    validate_topic_name,
)
from .transactions import TxnIndex, TxnMarker, control_batch, cut_at

log = logging.getLogger("tenure.broker")

NODE_ID = 0
MAX_BATCH_BYTES = int(DEFAULT_TOPIC_CONFIGS["max.message.bytes"])
MAX_PARTITIONS_PER_REQUEST = 10000    # Kafka's cap on a CreateTopics request's partitions in all (POLICY_VIOLATION)

# FindCoordinator key types
KEY_GROUP = 0
KEY_TRANSACTION = 1
READ_COMMITTED = 1      # Fetch isolation level


# a handler's answer meaning "close this connection instead of answering" (the dispatcher closes it)
CLOSE_CONNECTION = object()


@dataclass
class Node:
    host: str
    port: int
    node_id: int = NODE_ID


class _NodeBroker(BrokerNode):
    """Broker 0 of a Broker made without a cluster table: its host and port are its Node's (bound late)."""

    def __init__(self, node: Node) -> None:
        super().__init__(node.node_id, node.host, node.port)
        self._node = node

    host = property(lambda self: self._node.host, lambda self, v: None)
    port = property(lambda self: self._node.port, lambda self, v: None)


def _resp(api_key: int):
    return SUPPORTED[api_key].response


class Broker(AdminApis):
    def __init__(self, node: Node, topics: TopicRegistry, cluster_id: str | None = None,
                 auto_create_topics: bool = True,
                 clock: Callable[[], float] = time.monotonic, durability=None,
                 server_configs: Callable[[], dict[str, str | None]] | None = None,
                 cluster: Cluster | None = None) -> None:
        self.node = node
        self.cluster = cluster if cluster is not None else Cluster(1, node.host)
        if cluster is None:                    # one broker: node 0 at the node's own (late bound) port
            self.cluster.brokers[0] = _NodeBroker(node)
        topics.brokers = len(self.cluster.brokers)
        self.server_configs = server_configs   # broker configs the server's options set (DescribeConfigs)
        self.topics = topics
        self.cluster_id = cluster_id or "tenure-" + uuid.uuid4().hex[:14]
        self.auto_create_topics = auto_create_topics
        self.producers = ProducerStates()
        self.durability = durability           # storage.durability.Durability, or None (in memory)
        self._clock = clock
        self._waiters: dict[tuple[str, int], set[asyncio.Future]] = {}
        self._stopping = False                 # the server is stopping: long-polling fetches answer now
        self.txn_index = TxnIndex()            # open and aborted transactions of the data partitions
        # the transaction coordinator (coordinator/transactions.py) once a client asked for transactions:
        # `start_transactions` (set by the server) starts it; Produce asks it whether a transactional
        # batch's partition is in its transaction
        self.transactions = None
        self.start_transactions: Callable[[], None] | None = None
        # a marker for an internal topic's partition (__consumer_offsets: offsets committed in the
        # transaction): written by that topic's coordinator runtime (its PartitionWriter, the one writer
        # there) and replayed by the partition's shard; returns the log written (set by the server)
        self.internal_marker: Callable[[TxnMarker, int], Any] | None = None
        self.handlers: dict[int, Callable[[Request, RequestContext], Any]] = {
            0: self.produce, 1: self.fetch, 2: self.list_offsets, 3: self.metadata,
            10: self.find_coordinator, 18: self.api_versions, 19: self.create_topics,
            20: self.delete_topics, 22: self.init_producer_id, 23: self.offset_for_leader_epoch,
            37: self.create_partitions, 60: self.describe_cluster, 61: self.describe_producers,
            **self._admin_handlers(),
        }

    # ---------------------------------------------------------------- ApiVersions / Metadata
    async def api_versions(self, req: Request, ctx: RequestContext):
        return api_versions_body(req.api_version)

    async def metadata(self, req: Request, ctx: RequestContext):
        body, v = req.body, req.api_version
        R = _resp(3)
        if body.topics is None or (v == 0 and not body.topics):
            wanted = [(t.name, None) for t in self.topics.all()]
        else:
            # a set, as Kafka reads it: a name asked for twice is answered once (in first-asked order)
            wanted = list(dict.fromkeys((t.name, t.topic_id) for t in body.topics))
        auto = body.allow_auto_topic_creation if v >= 4 else True
        topic_ops = authorized_operations("topic", v >= 8 and body.include_topic_authorized_operations)
        cluster_ops = authorized_operations("cluster", 8 <= v <= 10 and body.include_cluster_authorized_operations)
        out = []
        for name, topic_id in wanted:
            if name is None and topic_id is not None:
                topic = self.topics.by_id(topic_id)
                if topic is None:
                    out.append(R.MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                                                       topic_id=topic_id, partitions=[],
                                                       authorized_operations=topic_ops))
                    continue
                name = topic.name
            topic = self.topics.get(name)
            if topic is None:
                try:
                    validate_topic_name(name)
                except TopicError as exc:
                    out.append(self._missing_topic(R, name, exc.code, topic_ops))
                    continue
                if auto and self.auto_create_topics:
                    try:                     # a cap or a storage failure answers that topic, as CreateTopics does
                        topic = self.topics.create(name)
                    except TopicError as exc:
                        out.append(self._missing_topic(R, name, exc.code, topic_ops))
                        continue
                    log.info("auto-created topic %s with %d partitions", name, len(topic.partitions))
                else:
                    out.append(self._missing_topic(R, name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topic_ops))
                    continue
            P = R.MetadataResponseTopic.MetadataResponsePartition
            parts = []
            for i in range(len(topic.partitions)):
                st = self.cluster.state(topic.name, i)
                parts.append(P(error_code=ErrorCode.LEADER_NOT_AVAILABLE if st.leader == NO_LEADER else 0,
                               partition_index=i, leader_id=st.leader, leader_epoch=st.leader_epoch,
                               replica_nodes=list(st.replicas), isr_nodes=list(st.isr),
                               offline_replicas=[b for b in st.replicas if not self.cluster.brokers[b].up]))
            out.append(R.MetadataResponseTopic(error_code=0, name=topic.name, topic_id=topic.topic_id,
                                               is_internal=topic.internal, partitions=parts,
                                               authorized_operations=topic_ops))
        return R(throttle_time_ms=0, brokers=self._brokers(R.MetadataResponseBroker, "node_id"),
                 cluster_id=self.cluster_id, controller_id=self.cluster.controller_id, topics=out,
                 authorized_operations=cluster_ops)

    @staticmethod
    def _missing_topic(R, name, code, ops: int):
        return R.MetadataResponseTopic(error_code=code, name=name, topic_id=uuid.UUID(int=0),
                                       is_internal=False, partitions=[],
                                       authorized_operations=ops)

    def _brokers(self, cls, id_field: str) -> list:
        """The live brokers, as Kafka's metadata cache lists them (a stopped one is left out)."""
        return [cls(**{id_field: b.id}, host=b.host, port=b.port, rack=b.rack) for b in self.cluster.up()]

    async def describe_cluster(self, req: Request, ctx: RequestContext):
        R = _resp(60)
        return R(throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
                 cluster_id=self.cluster_id, controller_id=self.cluster.controller_id,
                 brokers=self._brokers(R.DescribeClusterBroker, "broker_id"),
                 authorized_operations=authorized_operations(
                     "cluster", req.body.include_cluster_authorized_operations))

    async def find_coordinator(self, req: Request, ctx: RequestContext):
        body, v = req.body, req.api_version
        R = _resp(10)
        key_type = body.key_type if v >= 1 else KEY_GROUP
        if key_type == KEY_TRANSACTION and self.start_transactions is not None:
            self.start_transactions()         # as Kafka: __transaction_state is created on the first lookup
        if v < 4:
            code, msg, node = self._coordinator_for(key_type, body.key)
            return R(throttle_time_ms=0, error_code=code, error_message=msg, node_id=node.id,
                     host=node.host, port=node.port)
        coords = []
        for key in body.coordinator_keys:
            code, msg, node = self._coordinator_for(key_type, key)
            coords.append(R.Coordinator(key=key, node_id=node.id, host=node.host, port=node.port,
                                        error_code=code, error_message=msg))
        return R(throttle_time_ms=0, coordinators=coords)

    def _coordinator_for(self, key_type: int, key: str) -> tuple[int, str | None, BrokerNode]:
        """(error, message, node) of a FindCoordinator key: the leader of the key's partition of
        __consumer_offsets (a group) or __transaction_state (a transactional id), as Kafka answers."""
        none = BrokerNode(-1, "", -1)
        if key_type not in (KEY_GROUP, KEY_TRANSACTION):
            kind = {2: "share group"}.get(key_type, f"key type {key_type}")
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"tenure has no {kind} coordinator", none
        topic = self.topics.get(OFFSETS_TOPIC if key_type == KEY_GROUP else TRANSACTION_TOPIC)
        if topic is None:                      # not created yet (a Broker without a coordinator, in tests)
            return ErrorCode.NONE, None, self.cluster.brokers[0]
        leader = self.cluster.leader_of(topic.name, partition_for(key or "", len(topic.partitions)))
        if leader == NO_LEADER:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic.name} has no leader for that key", none
        return ErrorCode.NONE, None, self.cluster.brokers[leader]

    # ---------------------------------------------------------------- topics admin
    async def create_topics(self, req: Request, ctx: RequestContext):
        body, v = req.body, req.api_version
        R = _resp(19)
        results = []
        too_many = self._partitions_requested(body.topics) > MAX_PARTITIONS_PER_REQUEST
        for t in body.topics:
            configs = {c.name: c.value for c in t.configs}
            res = R.CreatableTopicResult(name=t.name, topic_id=uuid.UUID(int=0), error_code=0,
                                         error_message=None, num_partitions=-1, replication_factor=-1,
                                         configs=[])
            try:
                if too_many:                 # Kafka's rule: the whole request is refused, before anything else
                    raise TopicError(ErrorCode.POLICY_VIOLATION,
                                     "Excessively large number of partitions per request.")
                partitions, factor = t.num_partitions, t.replication_factor
                if t.assignments:
                    partitions, factor = self.check_assignment(t)
                n = self.topics.check_create(t.name, partitions, factor, configs)
                self.configs.check(RESOURCE_TOPIC, list(configs), configs)     # the values, as Kafka does
                if body.validate_only:
                    res.num_partitions = n
                    res.replication_factor = factor if factor != -1 else self.cluster.replication_factor
                else:
                    topic = self.topics.create(t.name, partitions, factor, configs)
                    self.place_topic(t.name, factor, 0, t.assignments)
                    res.topic_id = topic.topic_id
                    res.num_partitions = len(topic.partitions)
                    res.replication_factor = self.cluster.factor_of(t.name)
                    log.info("created topic %s with %d partitions", t.name, len(topic.partitions))
                if v >= 5:       # what DescribeConfigs will say of the topic
                    res.configs = [R.CreatableTopicResult.CreatableTopicConfigs(
                        name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                        is_sensitive=False) for e in self.configs.topic_entries(configs, self.answering(ctx))]
            except TopicError as exc:
                res.error_code, res.error_message = exc.code, exc.message
            results.append(res)
        return R(throttle_time_ms=0, topics=results)

    def _partitions_requested(self, topics) -> int:
        """A CreateTopics request's partitions in all, counted as Kafka counts them against its cap."""
        total = 0
        for t in topics:
            if t.assignments:
                total += len(t.assignments)
            elif t.num_partitions == -1:
                total += self.topics.default_partitions
            elif t.num_partitions > 0:
                total += t.num_partitions
        return total

    async def delete_topics(self, req: Request, ctx: RequestContext):
        body, v = req.body, req.api_version
        R = _resp(20)
        wanted = [(s.name, s.topic_id) for s in body.topics] if v >= 6 else [(n, None) for n in body.topic_names]
        out = []
        for name, topic_id in wanted:
            res = R.DeletableTopicResult(name=name, topic_id=topic_id or uuid.UUID(int=0), error_code=0,
                                         error_message=None)
            try:
                if name is None and topic_id is not None:
                    topic = self.topics.by_id(topic_id)
                    if topic is None:
                        raise TopicError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {topic_id}")
                    name = res.name = topic.name
                topic = self.topics.delete(name)
                self.cluster.forget(name)
                res.topic_id = topic.topic_id
                self.producers.forget_topic(name)
                self.txn_index.forget_topic(name)
                self._wake_topic(name, len(topic.partitions))
                log.info("deleted topic %s", name)
            except TopicError as exc:
                res.error_code, res.error_message = exc.code, exc.message
            out.append(res)
        return R(throttle_time_ms=0, responses=out)

    async def create_partitions(self, req: Request, ctx: RequestContext):
        body = req.body
        R = _resp(37)
        out = []
        for t in body.topics:
            res = R.CreatePartitionsTopicResult(name=t.name, error_code=0, error_message=None)
            try:
                before = len(self.topics.get(t.name).partitions) if self.topics.get(t.name) is not None else 0
                if t.assignments:
                    self.check_new_partition_assignment(t)
                self.topics.add_partitions(t.name, t.count, body.validate_only)
                if t.assignments and not body.validate_only:
                    self.place_topic(t.name, -1, before, t.assignments)
            except TopicError as exc:
                res.error_code, res.error_message = exc.code, exc.message
            out.append(res)
        return R(throttle_time_ms=0, results=out)

    # ---------------------------------------------------------------- producing
    async def init_producer_id(self, req: Request, ctx: RequestContext):
        """An idempotent producer's id (one with a transactional id goes to the transaction coordinator)."""
        body, v = req.body, req.api_version
        R = _resp(22)
        pid, epoch = self.producers.allocate(body.producer_id if v >= 3 else -1,
                                             body.producer_epoch if v >= 3 else -1)
        return R(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=epoch)

    async def produce(self, req: Request, ctx: RequestContext):
        body = req.body
        R = _resp(0)
        TR, PR = R.TopicProduceResponse, R.TopicProduceResponse.PartitionProduceResponse
        if body.acks not in (0, 1, -1):
            code = ErrorCode.INVALID_REQUIRED_ACKS
        else:
            code = ErrorCode.NONE
        out = []
        written = []
        for td in body.topic_data:
            parts = []
            for pd in td.partition_data:
                if code:
                    parts.append(PR(index=pd.index, error_code=code, base_offset=-1))
                    continue
                parts.append(self._produce_partition(PR, td.name, pd.index, pd.records, written,
                                                     body.transactional_id, ctx.broker_id))
            out.append(TR(name=td.name, partition_responses=parts))
        if body.acks == 0:
            # no answer is due; a refused partition closes the connection instead, as Kafka does, so the
            # producer refreshes its metadata (e.g. finds a moved leader) rather than keep sending there
            if any(p.error_code for t in out for p in t.partition_responses):
                return CLOSE_CONNECTION
            return None
        if written and self.durability is not None and self.durability.needed:
            try:
                await self.durability.sync(written)
            except OSError as exc:
                log.error("fsync failed after a produce: %s; answering KAFKA_STORAGE_ERROR", exc)
                for t in out:
                    for p in t.partition_responses:
                        if p.error_code == 0:
                            p.error_code, p.base_offset = ErrorCode.KAFKA_STORAGE_ERROR, -1
        return R(responses=out, throttle_time_ms=0)

    def _produce_partition(self, PR, topic: str, index: int, records, written: list,
                           transactional_id: str | None = None, broker: int | None = None):
        try:                                   # first, as Kafka's ReplicaManager: any partition, existing or not
            self.topics.refuse_internal(topic, "append to")
        except TopicError as exc:
            log.info("refused a produce to %s-%d: %s", topic, index, exc.message)
            return PR(index=index, error_code=exc.code, base_offset=-1, error_message=exc.message)
        log_ = self.topics.partition(topic, index)
        if log_ is None:
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
                    code = self._check_transactional(transactional_id, topic, index, h)
                    if code:
                        return PR(index=index, error_code=code, base_offset=-1,
                                  log_start_offset=log_.log_start_offset)
        except InvalidBatch as exc:
            log.info("rejected produce to %s-%d: %s", topic, index, exc)
            return PR(index=index, error_code=exc.error_code, base_offset=-1, error_message=str(exc))
        if len(headers) == 1:
            code, dup = self.producers.check(topic, index, headers[0])
            if code:
                return PR(index=index, error_code=code, base_offset=-1, log_start_offset=log_.log_start_offset)
            if dup is not None:
                return PR(index=index, error_code=0, base_offset=dup, log_append_time_ms=-1,
                          log_start_offset=log_.log_start_offset)
        try:
            base, stamped = log_.append(bytes(records), self.cluster.state(topic, index).leader_epoch)
        except OSError as exc:
            log.error("append to %s-%d failed: %s", topic, index, exc)
            return PR(index=index, error_code=ErrorCode.KAFKA_STORAGE_ERROR, base_offset=-1,
                      error_message=f"cannot write the log: {exc}")
        written.append(log_)
        for h in stamped:
            self.producers.appended(topic, index, h)
            self.txn_index.appended(topic, index, h)
        self.notify_append(topic, index)
        return PR(index=index, error_code=0, base_offset=base, log_append_time_ms=-1,
                  log_start_offset=log_.log_start_offset, record_errors=[], error_message=None)

    def _check_transactional(self, transactional_id: str | None, topic: str, index: int, h) -> int:
        """A transactional batch is appended only inside its producer's transaction, which holds the
        partition (AddPartitionsToTxn first), as Kafka verifies it."""
        if transactional_id is None:
            return ErrorCode.INVALID_REQUEST if h.producer_id < 0 else ErrorCode.INVALID_TXN_STATE
        if self.transactions is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        return self.transactions.verify(transactional_id, h.producer_id, h.producer_epoch, topic, index)

    async def describe_producers(self, req: Request, ctx: RequestContext):
        """DescribeProducers: the producers each partition knows (idempotent and transactional), with the
        first offset of the transaction each has open there (-1: none)."""
        R = _resp(61)
        T, P = R.TopicResponse, R.TopicResponse.PartitionResponse
        out = []
        for t in req.body.topics:
            parts = []
            for i in t.partition_indexes:
                if self.topics.partition(t.name, i) is None:
                    parts.append(P(partition_index=i, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   error_message=f"unknown topic-partition {t.name}-{i}", active_producers=[]))
                    continue
                code = self.cluster.check(t.name, i, broker=ctx.broker_id, require_leader=False)   # any replica answers
                if code:
                    parts.append(P(partition_index=i, error_code=code, error_message=None, active_producers=[]))
                    continue
                parts.append(P(partition_index=i, error_code=0, error_message=None, active_producers=[
                    P.ProducerState(producer_id=pid, producer_epoch=epoch, last_sequence=seq, last_timestamp=ts,
                                    coordinator_epoch=-1,
                                    current_txn_start_offset=self.txn_index.open_at(t.name, i, pid))
                    for pid, epoch, seq, ts in self.producers.active(t.name, i)]))
            out.append(T(name=t.name, partitions=parts))
        return R(throttle_time_ms=0, topics=out)

    def write_txn_markers(self, markers: list[TxnMarker], now_ms: int) -> list:
        """Append each transaction marker (a control batch) to its data partition; the logs written.
        (Kafka's WriteTxnMarkers from the coordinator to the partition's leader, in process.)"""
        written = []
        for m in markers:
            if self.topics.is_internal(m.topic):
                if self.internal_marker is None:
                    raise AssertionError(f"no writer for the transaction markers of {m.topic}")
                written.append(self.internal_marker(m, now_ms))
                continue
            plog = self.topics.partition(m.topic, m.partition)
            if plog is None:                   # the topic was deleted while the transaction was open
                continue
            batch = control_batch(m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch, now_ms)
            base, stamped = plog.append(batch, self.cluster.state(m.topic, m.partition).leader_epoch)
            for h in stamped:
                self.producers.appended(m.topic, m.partition, h)
            self.txn_index.ended(m.topic, m.partition, m.producer_id, m.commit, base)
            written.append(plog)
            self.notify_append(m.topic, m.partition)
        return written

    # ---------------------------------------------------------------- fetching
    def notify_append(self, topic: str, index: int) -> None:
        """Wake long-polling fetches of this partition (called after every append)."""
        for fut in self._waiters.pop((topic, index), ()):
            if not fut.done():
                fut.set_result(None)

    def stop_waiting(self) -> None:
        """The server is stopping: every long-polling fetch answers now with what it has (a fetch may
        always return fewer than min_bytes), so a drain does not wait out max_wait_ms."""
        self._stopping = True
        for key in list(self._waiters):
            self.notify_append(*key)

    def _wake_topic(self, topic: str, partitions: int) -> None:
        for i in range(partitions):
            self.notify_append(topic, i)

    def _resolve_fetch_topic(self, t, v):
        if v >= 13:
            topic = self.topics.by_id(t.topic_id)
            return topic, (topic.name if topic else None)
        return self.topics.get(t.topic), t.topic

    async def fetch(self, req: Request, ctx: RequestContext):
        body, v = req.body, req.api_version
        deadline = self._clock() + max(body.max_wait_ms, 0) / 1000.0
        while True:
            resp, total, had_error, keys = self._fetch_once(body, v, ctx.broker_id)
            remaining = deadline - self._clock()
            if total >= body.min_bytes or had_error or remaining <= 0 or not keys or self._stopping:
                return resp
            loop = asyncio.get_running_loop()
            fut = loop.create_future()
            for key in keys:
                self._waiters.setdefault(key, set()).add(fut)
            try:
                await asyncio.wait_for(fut, remaining)
            except TimeoutError:
                pass
            finally:
                for key in keys:
                    s = self._waiters.get(key)
                    if s is not None:
                        s.discard(fut)
                        if not s:
                            del self._waiters[key]

    def _fetch_once(self, body, v, broker: int | None):
        R = _resp(1)
        TR, PD = R.FetchableTopicResponse, R.FetchableTopicResponse.PartitionData
        budget = body.max_bytes if v >= 3 else 2**31 - 1
        total = 0
        had_error = False
        keys: list[tuple[str, int]] = []
        topics_out = []
        for t in body.topics:
            topic, name = self._resolve_fetch_topic(t, v)
            parts = []
            for p in t.partitions:
                pd = PD(partition_index=p.partition, error_code=0, high_watermark=-1, last_stable_offset=-1,
                        log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1, records=b"")
                parts.append(pd)
                if topic is None or not 0 <= p.partition < len(topic.partitions):
                    pd.error_code = (ErrorCode.UNKNOWN_TOPIC_ID if v >= 13 and topic is None
                                     else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    had_error = True
                    continue
                # a consumer's Fetch v11+ carries client metadata (KIP-392): as Kafka, a follower serves it too
                code = self.cluster.check(name, p.partition, p.current_leader_epoch if v >= 9 else -1,
                                          broker=broker, require_leader=v < 11)
                if code:
                    pd.error_code = code
                    had_error = True
                    continue
                plog = topic.partitions[p.partition]
                pd.high_watermark = plog.log_end_offset
                pd.last_stable_offset = self.txn_index.last_stable_offset(name, p.partition, plog.log_end_offset)
                pd.log_start_offset = plog.log_start_offset
                if not plog.log_start_offset <= p.fetch_offset <= plog.log_end_offset:
                    pd.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                    had_error = True
                    continue
                keys.append((name, p.partition))
                committed = v >= 4 and body.isolation_level == READ_COMMITTED
                end = pd.last_stable_offset if committed else plog.log_end_offset
                if committed:
                    pd.aborted_transactions = []
                if p.fetch_offset >= end:
                    continue
                # Kafka's ReplicaManager.readFromLog: each partition reads min(its own max, what is left of
                # the request's max_bytes); only the first partition that returns data may exceed that by
                # returning its first batch whole, so that a consumer always progresses
                limit = min(p.partition_max_bytes, budget - total)
                if limit <= 0 and total:
                    continue
                data = plog.read(p.fetch_offset, max(limit, 1))
                if committed:                        # read_committed stops at the last stable offset
                    data = cut_at(data, end)
                    AT = PD.AbortedTransaction
                    pd.aborted_transactions = [AT(producer_id=pid, first_offset=first) for pid, first in
                                               self.txn_index.aborted(name, p.partition, p.fetch_offset, end)]
                if total and len(data) > limit:      # a single batch larger than what is left: not now
                    continue
                pd.records = data
                total += len(data)
            topics_out.append(TR(topic=name or "", topic_id=getattr(t, "topic_id", None) if v >= 13 else None,
                                 partitions=parts))
        resp = R(throttle_time_ms=0, error_code=0, session_id=0, responses=topics_out)
        return resp, total, had_error, keys

    async def list_offsets(self, req: Request, ctx: RequestContext):
        body, v = req.body, req.api_version
        R = _resp(2)
        TR, PR = R.ListOffsetsTopicResponse, R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
        out = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                # leader_epoch stays -1 (as Kafka answers) unless an offset is found
                pr = PR(partition_index=p.partition_index, error_code=0, timestamp=-1, offset=-1,
                        leader_epoch=-1)
                parts.append(pr)
                plog = self.topics.partition(t.name, p.partition_index)
                if plog is None:
                    pr.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                code = self.cluster.check(t.name, p.partition_index, p.current_leader_epoch if v >= 4 else -1,
                                          broker=ctx.broker_id)
                if code:
                    pr.error_code = code
                    continue
                ts = p.timestamp
                found = None
                if ts == -1:            # LATEST
                    found = plog.log_end_offset, -1
                elif ts in (-2, -4):    # EARLIEST, EARLIEST_LOCAL
                    found = plog.log_start_offset, -1
                elif ts == -3:          # MAX_TIMESTAMP
                    found = plog.max_timestamp()
                elif ts == -5 and v >= 9:   # LATEST_TIERED: no tiered storage, -1 as Kafka answers then
                    pass
                elif ts < 0:
                    pr.error_code = ErrorCode.INVALID_REQUEST
                else:
                    found = plog.offset_for_timestamp(ts)
                if found:
                    (pr.offset, pr.timestamp) = found
                    pr.leader_epoch = self.cluster.state(t.name, p.partition_index).leader_epoch
            out.append(TR(name=t.name, partitions=parts))
        return R(throttle_time_ms=0, topics=out)

    async def offset_for_leader_epoch(self, req: Request, ctx: RequestContext):
        body = req.body
        R = _resp(23)
        TR, E = R.OffsetForLeaderTopicResult, R.OffsetForLeaderTopicResult.EpochEndOffset
        out = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                plog = self.topics.partition(t.topic, p.partition)
                e = E(error_code=0, partition=p.partition, leader_epoch=-1, end_offset=-1)
                if plog is None:
                    e.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    e.error_code = self.cluster.check(t.topic, p.partition, p.current_leader_epoch, broker=ctx.broker_id)
                if not e.error_code and plog is not None:
                    # the epoch cache: the latest epoch ends at the log end; an older one where the next
                    # began; -1 (no epoch) and newer epochs: -1/-1, as Kafka
                    e.leader_epoch, e.end_offset = self.cluster.state(t.topic, p.partition).end_offset_for(
                        p.leader_epoch, plog.log_end_offset)
                parts.append(e)
            out.append(TR(topic=t.topic, partitions=parts))
        return R(throttle_time_ms=0, topics=out)
