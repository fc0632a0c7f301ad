"""The admin APIs about the cluster's metadata and log dirs, as the `Broker` answers them (mixed into AdminApis):
DescribeQuorum (the controller quorum tenure presents), AlterReplicaLogDirs (one log dir per broker) and
ListConfigResources (KIP-1142, Kafka 4.1+)."""
from __future__ import annotations

import os
import uuid

from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request
from tenure.protocol.context import PLAINTEXT, RequestContext
from tenure.protocol.errors import ErrorCode

from .base import BrokerBase
from .configs import RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_GROUP, RESOURCE_TOPIC

METADATA_TOPIC = "__cluster_metadata"       # the KRaft metadata log's topic, partition 0
RESOURCE_CLIENT_METRICS = 16
# ListConfigResources' resource types: v0 (ListClientMetricsResources) client metrics only; v1 the types Kafka's
# broker lists, in its order
CONFIG_RESOURCE_TYPES = {0: (RESOURCE_CLIENT_METRICS,),
                         1: (RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS,
                             RESOURCE_GROUP)}
UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."


class ClusterMetadataApis(BrokerBase):
    def _metadata_handlers(self) -> dict:
        return {34: self.alter_replica_log_dirs, 55: self.describe_quorum, 74: self.list_config_resources}

    def _log_dir(self) -> str | None:
        """The one log dir of every broker: the data dir (None: in memory)."""
        catalog = self.topics.catalog
        return None if catalog is None else os.path.dirname(os.path.abspath(catalog))

    # ---------------------------------------------------------------- DescribeQuorum
    async def describe_quorum(self, req: Request, ctx: RequestContext):
        """The controller quorum of a cluster whose brokers are all combined broker+controller nodes: every broker
        a voter, the controller (the lowest live broker) the leader; its epoch moves with the controller, its high
        watermark counts the changes of the cluster table (broker/cluster.py), which every live voter has (one
        storage); a stopped voter's log end is unknown (-1). Only __cluster_metadata-0 exists: any other partition
        answers UNKNOWN_TOPIC_OR_PARTITION, as Kafka's raft client."""
        R = SUPPORTED[55].response
        T = R.fields["topics"].data_class
        P = T.fields["partitions"].data_class
        S = P.fields["current_voters"].data_class
        N = R.fields["nodes"].data_class
        L = N.fields["listeners"].data_class
        c = self.cluster
        hw = c.metadata_records
        leader = c.controller_id

        def voter(b) -> object:
            if not b.up:
                return S(replica_id=b.id, replica_directory_id=uuid.UUID(int=0), log_end_offset=-1,
                         last_fetch_timestamp=-1, last_caught_up_timestamp=-1)
            # the leader reports -1 as its own last fetch, and now as its caught-up time
            return S(replica_id=b.id, replica_directory_id=uuid.UUID(int=0), log_end_offset=hw,
                     last_fetch_timestamp=-1 if b.id == leader else ctx.now_ms, last_caught_up_timestamp=ctx.now_ms)

        topics = []
        for t in req.body.topics:
            parts = []
            for p in t.partitions:
                if (t.topic_name, p.partition_index) != (METADATA_TOPIC, 0):
                    parts.append(P(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   error_message=UNKNOWN_PARTITION_MESSAGE, leader_id=-1, leader_epoch=-1,
                                   high_watermark=-1, current_voters=[], observers=[]))
                    continue
                parts.append(P(partition_index=0, error_code=0, error_message=None, leader_id=leader,
                               leader_epoch=c.quorum_epoch, high_watermark=hw,
                               current_voters=[voter(b) for b in sorted(c.brokers.values(), key=lambda b: b.id)],
                               observers=[]))
            topics.append(T(topic_name=t.topic_name, partitions=parts))
        nodes = [N(node_id=b.id, listeners=[L(name=PLAINTEXT, host=b.host, port=b.port)])
                 for b in sorted(c.brokers.values(), key=lambda b: b.id)]
        return R(error_code=0, error_message=None, topics=topics, nodes=nodes)

    # ---------------------------------------------------------------- AlterReplicaLogDirs
    async def alter_replica_log_dirs(self, req: Request, ctx: RequestContext):
        """Each broker has one log dir (the data dir; in memory "(memory)"): moving a replica there is done
        already (NONE); another path is LOG_DIR_NOT_FOUND (57); a partition this broker holds no replica of
        REPLICA_NOT_AVAILABLE (9); an unknown one UNKNOWN_TOPIC_OR_PARTITION, as Kafka's replica manager."""
        R = SUPPORTED[34].response
        T = R.fields["results"].data_class
        P = T.fields["partitions"].data_class
        here = self._log_dir()
        broker = self.node.node_id if ctx.broker_id is None else ctx.broker_id
        out: dict[str, list] = {}
        for d in req.body.dirs:
            path = os.path.abspath(d.path) if here is not None else d.path
            for t in d.topics:
                for i in t.partitions:
                    if path != (here or "(memory)"):
                        code = ErrorCode.LOG_DIR_NOT_FOUND
                    elif self.topics.partition(t.name, i) is None:
                        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    elif broker not in self.cluster.state(t.name, i).replicas:
                        code = ErrorCode.REPLICA_NOT_AVAILABLE
                    else:
                        code = ErrorCode.NONE
                    out.setdefault(t.name, []).append(P(partition_index=i, error_code=code))
        return R(throttle_time_ms=0, results=[T(topic_name=n, partitions=ps) for n, ps in out.items()])

    # ---------------------------------------------------------------- ListConfigResources
    async def list_config_resources(self, req: Request, ctx: RequestContext):
        """The config resources of the asked types (none asked: every type of the version): topics, each broker
        (as a broker and as its loggers), the groups with configs of their own; no client metrics subscriptions.
        A type the version does not list: UNSUPPORTED_VERSION and nothing, as Kafka."""
        R = SUPPORTED[74].response
        C = R.fields["config_resources"].data_class
        v = req.api_version
        supported = CONFIG_RESOURCE_TYPES[min(v, 1)]
        asked = list(req.body.resource_types or ()) if v >= 1 else []
        if any(t not in supported for t in asked):
            return R(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION, config_resources=[])
        brokers = [str(b) for b in sorted(self.cluster.brokers)]
        names = {RESOURCE_TOPIC: sorted(t.name for t in self.topics.all()),
                 RESOURCE_BROKER: brokers, RESOURCE_BROKER_LOGGER: brokers, RESOURCE_CLIENT_METRICS: [],
                 RESOURCE_GROUP: sorted(g for g, c in self.topics.dynamic_configs.get("group", {}).items() if c)}
        out = [C(resource_name=n, resource_type=t) for t in (asked or supported) for n in names[t]]
        return R(throttle_time_ms=0, error_code=0, config_resources=out)
