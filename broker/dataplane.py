"""The `Broker`: the data-plane and admin APIs, answered as the broker the request came in on (its context's
`broker_id`) from the cluster table (cluster.py; with one broker, node 0 leads every partition at leader epoch
0) and this broker's partitions (the replica manager, replica_manager.py: the one append path and the one read
path). This file holds the Broker's state, its handler table, ApiVersions, Metadata, DescribeCluster and
FindCoordinator; the other handlers are by job: topic_apis.py (CreateTopics, DeleteTopics, CreatePartitions),
produce.py (Produce, InitProducerId, DescribeProducers, transaction markers), fetch.py (Fetch, ListOffsets,
OffsetsForLeaderEpoch), admin.py (configs, DeleteRecords, log dirs, assignments, elections).

Each handler takes a decoded `Request` and its `RequestContext` and returns the response body (or None when
no response is due, i.e. Produce with acks=0). Kafka errors are per-topic/partition values in the response;
only malformed bytes close a connection, and that happens in the protocol layer before we get here.
"""
from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tenure.protocol.acl import (
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    CREATE,
    DESCRIBE,
    GROUP,
    TOPIC,
    TRANSACTIONAL_ID,
    authorized_operations,
)
from tenure.protocol.codec import Request, api_versions_body
from tenure.protocol.context import RequestContext
from tenure.protocol.errors import ErrorCode
from tenure.protocol.internal_topics import SHARE_STATE_TOPIC, parse_share_coordinator_key, partition_for
from tenure.storage.durability import Durability

from .base import NODE_ID, Node, TransactionSide, resp
from .cluster import NO_LEADER, BrokerNode, Cluster
from .fetch import READ_COMMITTED, FetchApis
from .produce import CLOSE_CONNECTION, MAX_BATCH_BYTES, ProduceApis
from .producers import ProducerIds
from .replica_manager import ReplicaManager
from .share_apis import ShareApis
from .topic_apis import MAX_PARTITIONS_PER_REQUEST, TopicApis
from .topics import OFFSETS_TOPIC, TRANSACTION_TOPIC, TopicError, TopicRegistry, validate_topic_name

if TYPE_CHECKING:
    from .share import ShareStateSide

__all__ = ["Broker", "Node", "NODE_ID", "CLOSE_CONNECTION", "MAX_BATCH_BYTES", "MAX_PARTITIONS_PER_REQUEST",
           "READ_COMMITTED"]

log = logging.getLogger("tenure.broker")

# FindCoordinator key types
KEY_GROUP = 0
KEY_TRANSACTION = 1
KEY_SHARE = 2                     # a share partition's key at the share coordinator, from version 6


class _NodeBroker(BrokerNode):
    """Broker 0 of a Broker made without a cluster table: its host and port are its Node's (bound late)."""

    def __init__(self, node: Node) -> None:
        super().__init__(node.node_id, node.host, node.port)
        self._node = node

    host = property(lambda self: self._node.host, lambda self, v: None)
    port = property(lambda self: self._node.port, lambda self, v: None)


class Broker(TopicApis, ProduceApis, FetchApis, ShareApis):
    def __init__(self, node: Node, topics: TopicRegistry, cluster_id: str | None = None,
                 auto_create_topics: bool = True,
                 clock: Callable[[], float] = time.monotonic, durability: Durability | None = None,
                 server_configs: Callable[[], dict[str, str | None]] | None = None,
                 cluster: Cluster | None = None, txn_side: TransactionSide | None = None,
                 transaction_version: int = 2, replica_selector: str | None = None,
                 share_clock: Callable[[], int] = lambda: int(time.time() * 1000),
                 share_group: Callable[[str], tuple[str, frozenset[str]] | None] = lambda group_id: None,
                 share_state: ShareStateSide | None = None) -> None:
        self.node = node
        self.replica_selector = replica_selector   # replica.selector.class (None: the leader serves every fetch)
        self.cluster = cluster if cluster is not None else Cluster(1, node.host)
        if cluster is None:                    # one broker: node 0 at the node's own (late bound) port
            self.cluster.brokers[0] = _NodeBroker(node)
        topics.brokers = len(self.cluster.brokers)
        self.server_configs = server_configs   # broker configs the server's options set (DescribeConfigs)
        self.topics = topics
        # the partitions: made and dropped with their topics; the one append path (client produce, markers,
        # the coordinators' records) and the one read path; `durability` (None: in memory) its commit point
        self.replicas = ReplicaManager(topics, self.cluster, durability)
        self.cluster.storage = self.replicas   # the cluster table reads log end offsets and last epochs there
        self.cluster_id = cluster_id or "tenure-" + uuid.uuid4().hex[:14]
        self.auto_create_topics = auto_create_topics
        self.producers = ProducerIds()
        self.clock = clock
        # the coordinators' side of transactions (base.TransactionSide): started on the first transactional
        # FindCoordinator, asked by Produce, writer of an internal partition's markers
        self.txn_side = txn_side
        self.transaction_version = transaction_version     # the transaction.version feature ApiVersions finalizes
        # share groups (KIP-932, share.py): the share partitions and sessions (`shares`, made at the first share
        # request); their acquisition locks run on the coordinators' clock, and a group of another kind is asked
        # of the group coordinator (build.py)
        self.share_clock = share_clock
        self.share_group = share_group
        self.share_state = share_state            # the share coordinator (None: share partitions in memory only)
        self.handlers: dict[int, Callable[[Request, RequestContext], Any]] = {
            0: self.produce, 1: self.fetch, 2: self.list_offsets, 3: self.metadata,
            10: self.find_coordinator, 18: self.api_versions, 19: self.create_topics,
            20: self.delete_topics, 22: self.init_producer_id, 23: self.offset_for_leader_epoch,
            37: self.create_partitions, 60: self.describe_cluster, 61: self.describe_producers,
            78: self.share_fetch, 79: self.share_acknowledge, 90: self.describe_share_group_offsets,
            91: self.alter_share_group_offsets, 92: self.delete_share_group_offsets,
            **self._share_state_handlers(),
            **self._admin_handlers(),
        }

    def stop_waiting(self) -> None:
        """The server is stopping: long-polling fetches answer now."""
        self.replicas.stop_waiting()

    # ---------------------------------------------------------------- ApiVersions / Metadata
    async def api_versions(self, req: Request, ctx: RequestContext) -> Any:
        """FinalizedFeaturesEpoch is the cluster's metadata offset (DescribeQuorum's high watermark: the changes
        of the cluster table), as a KRaft broker's is the offset of its metadata image: the same on every
        broker, never going back while the server runs, moving with every change of the cluster's metadata."""
        return api_versions_body(req.api_version, served=req.served, transaction_version=self.transaction_version,
                                 features_epoch=self.cluster.metadata_records)

    async def metadata(self, req: Request, ctx: RequestContext) -> Any:
        body, v = req.body, req.api_version
        R = resp(3)
        every = body.topics is None or (v == 0 and not body.topics)
        if every:          # all topics: those the principal may not describe are left out, as Kafka does
            wanted = [(t.name, None) for t in self.topics.all() if ctx.allows(DESCRIBE, TOPIC, t.name)]
        else:
            # a set, as Kafka reads it: a name asked for twice is answered once (in first-asked order)
            wanted = list(dict.fromkeys((t.name, t.topic_id) for t in body.topics))
        auto = body.allow_auto_topic_creation if v >= 4 else True
        asked = v >= 8 and body.include_topic_authorized_operations
        cluster_ops = self._cluster_ops(ctx, 8 <= v <= 10 and body.include_cluster_authorized_operations)
        out = []
        for name, topic_id in wanted:
            # asked by topic id (v10+): a non-zero id with no name - Java sends "" (its default), not null
            if not name and topic_id is not None and topic_id.int != 0:
                topic = self.topics.by_id(topic_id)
                if topic is None:
                    out.append(R.MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                                                       topic_id=topic_id, partitions=[],
                                                       authorized_operations=authorized_operations(
                                                           ctx, TOPIC, "", asked)))
                    continue
                name = topic.name
            if not every and not ctx.allows(DESCRIBE, TOPIC, name or ""):
                # a topic named: its error, as Kafka answers (by id: the id, which is not secret; else the name)
                out.append(R.MetadataResponseTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=None if topic_id else name,
                    topic_id=topic_id or uuid.UUID(int=0), is_internal=False, partitions=[]))
                continue
            topic_ops = authorized_operations(ctx, TOPIC, name or "", asked)
            topic = self.topics.get(name)
            if topic is None:
                try:
                    validate_topic_name(name)
                except TopicError as exc:
                    out.append(self._missing_topic(R, name, exc.code, topic_ops))
                    continue
                if auto and self.auto_create_topics and not (ctx.allows_cluster(CREATE)
                                                             or ctx.allows(CREATE, TOPIC, name)):
                    out.append(self._missing_topic(R, name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, topic_ops))
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
        return R(throttle_time_ms=0, brokers=self._brokers(R.MetadataResponseBroker, "node_id", ctx.listener),
                 cluster_id=self.cluster_id, controller_id=self.cluster.controller_id, topics=out,
                 authorized_operations=cluster_ops, error_code=0)     # v13's top-level code (KIP-1102)

    @staticmethod
    def _missing_topic(R: Any, name: str | None, code: int, ops: frozenset[int] | None) -> Any:
        return R.MetadataResponseTopic(error_code=code, name=name, topic_id=uuid.UUID(int=0),
                                       is_internal=False, partitions=[],
                                       authorized_operations=ops)

    def _brokers(self, cls, id_field: str, listener: str) -> list:
        """The live brokers, as Kafka's metadata cache lists them (a stopped one is left out), each at its address
        on the request's listener."""
        return [cls(**{id_field: b.id}, host=b.address(listener)[0], port=b.address(listener)[1], rack=b.rack)
                for b in self.cluster.up()]

    async def describe_cluster(self, req: Request, ctx: RequestContext) -> Any:
        """DescribeCluster: the live brokers; from v2 with include_fenced_brokers (KIP-1073) the stopped ones too,
        fenced (a stopped broker keeps its registration, fenced, as a Kafka broker that shut down)."""
        R = resp(60)
        B = R.DescribeClusterBroker
        brokers = [B(broker_id=b.id, host=b.address(ctx.listener)[0], port=b.address(ctx.listener)[1], rack=b.rack,
                     is_fenced=not b.up)
                   for b in self.cluster.brokers.values() if b.up or (req.api_version >= 2
                                                                     and req.body.include_fenced_brokers)]
        return R(throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
                 cluster_id=self.cluster_id, controller_id=self.cluster.controller_id,
                 brokers=sorted(brokers, key=lambda b: b.broker_id),
                 authorized_operations=self._cluster_ops(ctx, req.body.include_cluster_authorized_operations))

    @staticmethod
    def _cluster_ops(ctx: RequestContext, asked: bool) -> frozenset[int] | None:
        """The cluster's authorized operations, as Kafka: none at all without DESCRIBE on the cluster."""
        if asked and not ctx.allows_cluster(DESCRIBE):
            return frozenset()
        return authorized_operations(ctx, CLUSTER, CLUSTER_NAME, asked)

    async def find_coordinator(self, req: Request, ctx: RequestContext) -> Any:
        body, v = req.body, req.api_version
        R = resp(10)
        key_type = body.key_type if v >= 1 else KEY_GROUP
        if key_type == KEY_TRANSACTION and self.txn_side is not None:
            self.txn_side.start()         # as Kafka: __transaction_state is created on the first lookup
        if v < 4:
            code, msg, node = self._coordinator_for(key_type, body.key, ctx, v)
            host, port = node.address(ctx.listener)
            return R(throttle_time_ms=0, error_code=code, error_message=msg, node_id=node.id, host=host, port=port)
        coords = []
        for key in body.coordinator_keys:
            code, msg, node = self._coordinator_for(key_type, key, ctx, v)
            host, port = node.address(ctx.listener)
            coords.append(R.Coordinator(key=key, node_id=node.id, host=host, port=port, error_code=code,
                                        error_message=msg))
        return R(throttle_time_ms=0, coordinators=coords)

    def _coordinator_for(self, key_type: int, key: str, ctx: RequestContext,
                         version: int = 6) -> tuple[int, str | None, BrokerNode]:
        """(error, message, node) of a FindCoordinator key: the leader of the key's partition of
        __consumer_offsets (a group), __transaction_state (a transactional id) or __share_group_state (a share
        partition's "group:topic id:partition"), as Kafka answers; a key the principal may not describe:
        GROUP_AUTHORIZATION_FAILED / TRANSACTIONAL_ID_AUTHORIZATION_FAILED; a share key: INVALID_REQUEST below
        version 6 or when it is not a share partition key, CLUSTER_AUTHORIZATION_FAILED without CLUSTER_ACTION
        (brokers ask it, not clients)."""
        none = BrokerNode(-1, "", -1)
        if key_type == KEY_SHARE and self.share_state is not None:
            return self._share_coordinator_for(key, ctx, version, none)
        if key_type not in (KEY_GROUP, KEY_TRANSACTION):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"tenure has no coordinator of key type {key_type}", none
        if key_type == KEY_GROUP and not ctx.allows(DESCRIBE, GROUP, key or ""):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, None, none
        if key_type == KEY_TRANSACTION and not ctx.allows(DESCRIBE, TRANSACTIONAL_ID, key or ""):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, none
        topic = self.topics.get(OFFSETS_TOPIC if key_type == KEY_GROUP else TRANSACTION_TOPIC)
        if topic is None:                      # not created yet (a Broker without a coordinator, in tests)
            return ErrorCode.NONE, None, self.cluster.brokers[0]
        return self._leader_node(topic.name, partition_for(key or "", len(topic.partitions)), none)

    def _leader_node(self, topic: str, partition: int, none: BrokerNode) -> tuple[int, str | None, BrokerNode]:
        leader = self.cluster.leader_of(topic, partition)
        if leader == NO_LEADER:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic} has no leader for that key", none
        return ErrorCode.NONE, None, self.cluster.brokers[leader]

    def _share_coordinator_for(self, key: str, ctx: RequestContext, version: int,
                               none: BrokerNode) -> tuple[int, str | None, BrokerNode]:
        """The share coordinator of a share partition key: the leader of its __share_group_state partition
        (Kafka's ShareCoordinatorService.partitionFor); the share coordinator starts on the first lookup."""
        assert self.share_state is not None
        if version < 6:
            return ErrorCode.INVALID_REQUEST, "The share coordinator key type needs FindCoordinator v6.", none
        if not ctx.allows_cluster(CLUSTER_ACTION):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, none
        try:
            group_id, topic_id, partition = parse_share_coordinator_key(key)
        except ValueError as exc:
            return ErrorCode.INVALID_REQUEST, str(exc), none
        return self._leader_node(SHARE_STATE_TOPIC, self.share_state.partition_of(group_id, topic_id, partition),
                                 none)
