"""The admin APIs, mixed into `Broker`: configs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs),
DeleteRecords, DescribeLogDirs, DescribeTopicPartitions, ElectLeaders and the partition reassignment APIs, plus
the manual replica assignment checks of CreateTopics/CreatePartitions.

Each answers what a Kafka cluster of tenure's brokers answers: assignments, reassignments and elections read and
change the cluster table (broker/cluster.py) and the broker configs are those of the broker answering. With one
broker that is a one-node cluster: node 0 leads every partition and is every partition's preferred leader.
"""
from __future__ import annotations

import logging
import shutil
import uuid

from tenure.protocol.acl import (
    ALTER_CONFIGS,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    TOPIC,
    authorized_operations,
    bits,
)
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.errors import ErrorCode

from .base import per_partition_in_turns
from .configs import RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC, ConfigError, ConfigStore, incremental
from .quorum_apis import ClusterMetadataApis
from .topics import TopicError

log = logging.getLogger("tenure.broker")

DESCRIBE_TOPIC_PARTITIONS_LIMIT = 2000    # Kafka's max.request.partition.size.limit default
UNKNOWN_VOLUME_BYTES = -1
ELECTION_MESSAGES: dict[int, str] = {   # Kafka's default messages of these errors
    ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Eligible topic partition leaders are not available.",
}


def _resp(api_key: int):
    return SUPPORTED[api_key].response


def check_replicas(replicas, brokers, want: int | None = None) -> None:
    """One partition's manual replica list, checked as Kafka's controller does: not empty, registered
    brokers only (`brokers`: the cluster's ids; a stopped broker is still registered), no broker twice, the
    same replica count as the other partitions (`want`)."""
    if not replicas:
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
    seen = set()
    for b in replicas:
        if b not in brokers:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes broker {b}, but no such broker is "
                             f"registered.")
        if b in seen:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes the broker {b} more than once.")
        seen.add(b)
    if want is not None and len(replicas) != want:
        raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"The manual partition assignment includes a partition with {len(replicas)} replica(s), "
                         f"but this is not consistent with previous partitions, which have {want} replica(s).")


class AdminApis(ClusterMetadataApis):
    """Admin handlers, mixed into the `Broker` (its state: base.py)."""

    def _admin_handlers(self) -> dict:
        self.configs = ConfigStore(self.topics, self.static_configs)
        self.cluster.stored_factor = self._stored_factor
        self.cluster.stored_replicas = self._stored_replicas
        return {21: self.delete_records, 32: self.describe_configs, 33: self.alter_configs,
                35: self.describe_log_dirs, 43: self.elect_leaders, 44: self.incremental_alter_configs,
                45: self.alter_partition_reassignments, 46: self.list_partition_reassignments,
                75: self.describe_topic_partitions, **self._metadata_handlers()}

    def answering(self, ctx: RequestContext) -> int:
        """The broker answering a request: the one it came in on, else (a handler called directly) this node."""
        return self.node.node_id if ctx.broker_id is None else ctx.broker_id

    def static_configs(self, node_id: int) -> dict[str, str | None]:
        """Broker configs set by tenure's options: the server's (Server.static_configs), then those of the
        broker answering (its id, rack, listener; each broker of a cluster its own)."""
        node = self.cluster.brokers[node_id]
        address = (",".join(f"{name}://{h}:{p}" for name, (h, p) in node.endpoints.items()) if node.endpoints
                   else f"PLAINTEXT://{node.host}:{node.port}")
        own = {"broker.id": str(node.id), "node.id": str(node.id), "process.roles": "broker,controller",
               "listeners": address, "advertised.listeners": address,
               **({"broker.rack": node.rack} if node.rack is not None else {}),
               "num.partitions": str(self.topics.default_partitions),
               "auto.create.topics.enable": str(self.auto_create_topics).lower(),
               "default.replication.factor": str(self.cluster.replication_factor),
               "offsets.topic.replication.factor": str(self.cluster.replication_factor),
               "log.dirs": self._log_dir()}
        return {**(self.server_configs() if self.server_configs is not None else {}), **own}

    # ---------------------------------------------------------------- manual replica assignment
    def _check_live(self, index: int, replicas) -> None:
        """A new partition needs a live replica to lead it (Kafka: its ISR would be empty)."""
        if not any(self.cluster.brokers[b].up for b in replicas):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"All brokers specified in the manual partition assignment for partition {index} "
                             f"are fenced or in controlled shutdown.")

    def check_assignment(self, t) -> tuple[int, int]:
        """CreateTopics with `assignments`: the partition count and replication factor they give (checked;
        see check_replicas)."""
        if t.num_partitions != -1 or t.replication_factor != -1:
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             "A manual partition assignment was specified, but numPartitions was not set to -1."
                             if t.num_partitions != -1 else
                             "A manual partition assignment was specified, but replicationFactor was not set "
                             "to -1.")
        indexes = sorted(a.partition_index for a in t.assignments)
        if indexes != list(range(len(indexes))):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "partitions should be a consecutive 0-based integer sequence")
        want = len(t.assignments[0].broker_ids)
        for a in t.assignments:
            check_replicas(a.broker_ids, self.cluster.brokers, want)
            self._check_live(a.partition_index, a.broker_ids)
        return len(indexes), want

    def place_topic(self, name: str, factor: int, first: int, assignments) -> None:
        """A created topic (or its new partitions): its replication factor (-1: the default) and manual
        replica assignment into the cluster table, and both into the data dir's catalog."""
        if factor != -1:
            self.cluster.set_factor(name, factor)
        placed = {first + i: list(a.broker_ids)
                  for i, a in enumerate(sorted(assignments, key=lambda a: getattr(a, "partition_index", 0)))}
        for p, replicas in placed.items():
            self.cluster.assign(name, p, replicas)
        if factor != -1 or placed:
            self._keep_placement(name, factor if factor != -1 else None, placed)

    def _keep_placement(self, name: str, factor: int | None, replicas: dict[int, list[int]]) -> None:
        try:
            self.topics.set_placement(name, factor, replicas)
        except OSError as exc:
            raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"could not record the replicas of topic {name!r} in the catalog: {exc}") from exc

    def _stored_factor(self, name: str) -> int:
        topic = self.topics.get(name)
        return -1 if topic is None else topic.replication_factor

    def _stored_replicas(self, name: str, partition: int) -> list[int] | None:
        topic = self.topics.get(name)
        return None if topic is None else topic.replicas.get(partition)

    def check_new_partition_assignment(self, t) -> None:
        """CreatePartitions with `assignments`: one per new partition, each with as many replicas as the
        topic's first partition (see check_replicas)."""
        topic = self.topics.get(t.name)
        if topic is None:
            return                                   # add_partitions answers the unknown topic
        adding = t.count - len(topic.partitions)
        if adding > 0 and len(t.assignments) != adding:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Attempted to add {adding} additional partition(s), but only {len(t.assignments)} "
                             f"assignment(s) were specified.")
        want = len(self.cluster.state(t.name, 0).replicas)
        for i, a in enumerate(t.assignments):
            check_replicas(a.broker_ids, self.cluster.brokers, want)
            self._check_live(len(topic.partitions) + i, a.broker_ids)

    # ---------------------------------------------------------------- configs
    def _config_resource_error(self, resource_type: int, name: str, me: int) -> tuple[ErrorCode, str] | None:
        """Why a config resource cannot be described or altered on broker `me` (None: it can)."""
        if resource_type == RESOURCE_TOPIC:
            if self.topics.get(name) is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist."
        elif resource_type == RESOURCE_BROKER:
            if name not in ("", str(me)):
                return (ErrorCode.INVALID_REQUEST,
                        f"Unexpected broker id, expected {me} or empty string, but received {name}")
        elif resource_type == RESOURCE_GROUP:
            if not name:
                return ErrorCode.INVALID_REQUEST, "Group name must not be empty"
        else:
            return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}"
        return None

    @staticmethod
    def _config_auth_error(ctx: RequestContext, resource_type: int, name: str,
                           operation: int) -> tuple[ErrorCode, str] | None:
        """As Kafka: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, the group or (a broker) the cluster."""
        if resource_type == RESOURCE_TOPIC and not ctx.allows(operation, TOPIC, name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
        if resource_type == RESOURCE_GROUP and not ctx.allows(operation, GROUP, name):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, "Authorization failed."
        if resource_type == RESOURCE_BROKER and not ctx.allows_cluster(operation):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed."
        return None

    async def describe_configs(self, req: Request, ctx: RequestContext):
        body, v = req.body, req.api_version
        R = _resp(32)
        C = R.DescribeConfigsResult.DescribeConfigsResourceResult
        S = C.DescribeConfigsSynonym
        synonyms = v >= 1 and body.include_synonyms
        docs = v >= 3 and body.include_documentation
        results = []
        for res in body.resources:
            entry = R.DescribeConfigsResult(error_code=0, error_message=None, resource_type=res.resource_type,
                                            resource_name=res.resource_name, configs=[])
            results.append(entry)
            err = (self._config_auth_error(ctx, res.resource_type, res.resource_name, DESCRIBE_CONFIGS)
                   or self._config_resource_error(res.resource_type, res.resource_name, self.answering(ctx)))
            if err is not None:
                entry.error_code, entry.error_message = err
                continue
            topic = self.topics.get(res.resource_name)
            if res.resource_type == RESOURCE_TOPIC and topic is not None:    # an unknown topic: an error above
                items = self.configs.topic_entries(topic.configs, self.answering(ctx))
            elif res.resource_type == RESOURCE_BROKER:
                items = self.configs.broker_entries(res.resource_name, self.answering(ctx))
            else:
                items = self.configs.group_entries(res.resource_name)
            keys = res.configuration_keys
            entry.configs = [
                C(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                  is_default=e.source == 5, is_sensitive=False,
                  synonyms=[S(name=n, value=val, source=src) for n, val, src in e.synonyms] if synonyms else [],
                  config_type=e.type if v >= 3 else 0, documentation=e.doc if docs else None)
                for e in items if keys is None or e.name in keys]
        return R(throttle_time_ms=0, results=results)

    def _alter(self, R, body, changes_of, me: int, ctx: RequestContext) -> list:
        out = []
        for res in body.resources:
            r = R.AlterConfigsResourceResponse(error_code=0, error_message=None, resource_type=res.resource_type,
                                               resource_name=res.resource_name)
            out.append(r)
            try:
                err = (self._config_auth_error(ctx, res.resource_type, res.resource_name, ALTER_CONFIGS)
                       or self._config_resource_error(res.resource_type, res.resource_name, me))
                if err is not None:
                    raise TopicError(*err)
                names = [c.name for c in res.configs]
                if len(set(names)) != len(names):
                    raise TopicError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
                current = self.configs.current_overrides(res.resource_type, res.resource_name)
                new = changes_of(res, current)
                self.configs.check(res.resource_type, names, new)
                if not body.validate_only:
                    self.configs.replace(res.resource_type, res.resource_name, new)
                    log.info("altered configs of resource %d %r: %s", res.resource_type, res.resource_name, new)
            except TopicError as exc:
                r.error_code, r.error_message = exc.code, exc.message
            except OSError as exc:
                r.error_code, r.error_message = ErrorCode.KAFKA_STORAGE_ERROR, f"cannot save the configs: {exc}"
        return out

    async def alter_configs(self, req: Request, ctx: RequestContext):
        """AlterConfigs: the given configs become the resource's whole set of overrides."""
        R = _resp(33)

        def replace_all(res, current):
            for c in res.configs:
                if c.value is None:
                    raise ConfigError(f"Null value not supported for : {c.name}", ErrorCode.INVALID_REQUEST)
            return {c.name: c.value for c in res.configs}
        return R(throttle_time_ms=0, responses=self._alter(R, req.body, replace_all, self.answering(ctx), ctx))

    async def incremental_alter_configs(self, req: Request, ctx: RequestContext):
        """IncrementalAlterConfigs: SET, DELETE, APPEND (LIST configs) and SUBTRACT on the current overrides."""
        R = _resp(44)

        def apply(res, current):
            return incremental(self.configs.defs_for(res.resource_type), current,
                               [(c.name, c.config_operation, c.value) for c in res.configs],
                               broker=res.resource_type == RESOURCE_BROKER)
        return R(throttle_time_ms=0, responses=self._alter(R, req.body, apply, self.answering(ctx), ctx))

    # ---------------------------------------------------------------- records and log dirs
    async def delete_records(self, req: Request, ctx: RequestContext):
        """DeleteRecords: raise each partition's log start offset (-1: to the high watermark); records below
        it are gone for Fetch (OFFSET_OUT_OF_RANGE) and ListOffsets' earliest moves; kept across restarts."""
        R = _resp(21)
        T, P = R.DeleteRecordsTopicResult, R.DeleteRecordsTopicResult.DeleteRecordsPartitionResult

        def answer(name: str, p) -> object:
            # each partition on its own, as Kafka's ReplicaManager.deleteRecords: in turns (per_partition_in_turns)
            pr = P(partition_index=p.partition_index, low_watermark=-1, error_code=0)
            topic = self.topics.get(name)
            part = self.replicas.get(name, p.partition_index)
            if not ctx.allows(DELETE, TOPIC, name):
                pr.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                return pr
            if topic is not None and topic.internal:        # Kafka refuses it first, by the topic's name
                pr.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
                return pr
            if part is None:
                pr.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                return pr
            offset = part.high_watermark if p.offset == -1 else p.offset
            if not 0 <= offset <= part.high_watermark:
                pr.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                return pr
            try:
                pr.low_watermark = part.log.advance_start(offset)
            except OSError as exc:
                log.error("DeleteRecords on %s-%d failed: %s", name, p.partition_index, exc)
                pr.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                return pr
            log.info("deleted records of %s-%d below offset %d", name, p.partition_index, pr.low_watermark)
            return pr
        return R(throttle_time_ms=0, topics=await per_partition_in_turns(
            req.body.topics, answer, lambda name, parts: T(name=name, partitions=parts)))

    async def describe_log_dirs(self, req: Request, ctx: RequestContext):
        body = req.body
        R = _resp(35)
        Res = R.DescribeLogDirsResult
        T, P = Res.DescribeLogDirsTopic, Res.DescribeLogDirsTopic.DescribeLogDirsPartition
        if body.topics is None:
            wanted = [(t.name, range(len(t.partitions))) for t in self.topics.all()]
        else:
            wanted = [(t.topic, t.partitions) for t in body.topics]
        topics = []
        for name, indexes in wanted:
            parts = []
            for i in indexes:
                plog = self.topics.partition(name, i)
                if plog is not None:
                    parts.append(P(partition_index=i, partition_size=plog.size_bytes,
                                   offset_lag=0, is_future_key=False))
            if parts:
                topics.append(T(name=name, partitions=parts))
        log_dir = self._log_dir()
        total = usable = UNKNOWN_VOLUME_BYTES
        if log_dir is not None:
            usage = shutil.disk_usage(log_dir)
            total, usable = usage.total, usage.free
        result = Res(error_code=0, log_dir=log_dir or "(memory)", topics=topics, total_bytes=total,
                     usable_bytes=usable, is_cordoned=False)
        return R(throttle_time_ms=0, error_code=0, results=[result])

    # ---------------------------------------------------------------- partitions and leaders
    async def describe_topic_partitions(self, req: Request, ctx: RequestContext):
        """DescribeTopicPartitions (KIP-966): topics by name (none named: all), sorted, paged by the cursor
        and the partition limit (at most Kafka's default of 2000)."""
        body = req.body
        R = _resp(75)
        T = R.DescribeTopicPartitionsResponseTopic
        P = T.DescribeTopicPartitionsResponsePartition
        names = sorted({t.name for t in body.topics}) if body.topics else sorted(
            t.name for t in self.topics.all() if ctx.allows(DESCRIBE, TOPIC, t.name))   # all: the describable
        cursor = body.cursor
        if cursor is not None:
            names = [n for n in names if n >= cursor.topic_name]
        budget = max(1, min(body.response_partition_limit, DESCRIBE_TOPIC_PARTITIONS_LIMIT))
        # a plain int32 in this response's schema (kafka-python reads the others as a set): the bits themselves
        out, next_cursor = [], None
        for name in names:
            # a plain int32 in this response's schema (kafka-python reads the others as a set): the bits
            ops = bits(authorized_operations(ctx, TOPIC, name, True))
            if not ctx.allows(DESCRIBE, TOPIC, name):
                out.append(T(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=uuid.UUID(int=0),
                             is_internal=False, partitions=[], topic_authorized_operations=-(2**31)))
                continue
            topic = self.topics.get(name)
            if topic is None:
                out.append(T(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=uuid.UUID(int=0),
                             is_internal=False, partitions=[], topic_authorized_operations=ops))
                continue
            first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
            count = len(topic.partitions)
            if budget <= 0:
                next_cursor = R.Cursor(topic_name=name, partition_index=first)
                break
            last = min(count, first + budget)
            parts = []
            for i in range(first, last):           # from the cluster table, as Metadata answers
                st = self.cluster.state(name, i)
                parts.append(P(error_code=0, partition_index=i, leader_id=st.leader, leader_epoch=st.leader_epoch,
                               replica_nodes=list(st.replicas), isr_nodes=list(st.isr), eligible_leader_replicas=[],
                               last_known_elr=[], offline_replicas=[b for b in st.replicas
                                                                    if not self.cluster.brokers[b].up]))
            budget -= last - first
            out.append(T(error_code=0, name=name, topic_id=topic.topic_id, is_internal=topic.internal,
                         partitions=parts, topic_authorized_operations=ops))
            if last < count:
                next_cursor = R.Cursor(topic_name=name, partition_index=last)
                break
        return R(throttle_time_ms=0, topics=out, next_cursor=next_cursor)

    async def elect_leaders(self, req: Request, ctx: RequestContext):
        """ElectLeaders on the cluster table (Cluster.elect): preferred - the first replica leads again;
        unclean - a partition without a leader gets one. With no partitions named (all of them), as Kafka's
        controller: every topic is listed, with only its partitions whose answer is not ELECTION_NOT_NEEDED."""
        body, v = req.body, req.api_version
        R = _resp(43)
        T, P = R.ReplicaElectionResult, R.ReplicaElectionResult.PartitionResult
        election = body.election_type if v >= 1 else 0
        if election not in (0, 1):
            return R(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, replica_election_results=[])
        everything = body.topic_partitions is None
        wanted = ([(t.name, range(len(t.partitions))) for t in self.topics.all()] if everything else
                  [(t.topic, t.partitions) for t in body.topic_partitions])
        out = []
        for name, indexes in wanted:
            parts = []
            for i in indexes:
                if self.topics.partition(name, i) is None:
                    parts.append(P(partition_id=i, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   error_message="The partition does not exist."))
                    continue
                code = self.cluster.elect(name, i, unclean=election == 1)
                if code == ErrorCode.NONE:
                    log.info("%s election: %s-%d led by broker %d", "unclean" if election else "preferred",
                             name, i, self.cluster.leader_of(name, i))
                elif everything and code == ErrorCode.ELECTION_NOT_NEEDED:
                    continue
                parts.append(P(partition_id=i, error_code=code, error_message=ELECTION_MESSAGES.get(code)))
            out.append(T(topic=name, partition_result=parts))
        return R(throttle_time_ms=0, error_code=0, replica_election_results=out)

    async def alter_partition_reassignments(self, req: Request, ctx: RequestContext):
        """AlterPartitionReassignments on the cluster table (Cluster.reassign): done at once when every target
        broker is up, ongoing until the stopped ones start; null replicas cancel an ongoing one (none:
        NO_REASSIGNMENT_IN_PROGRESS, 85). From v1 (KIP-860) a request that does not allow a replication factor
        change refuses one with INVALID_REPLICATION_FACTOR (38)."""
        R = _resp(45)
        allow_rf_change = req.api_version < 1 or req.body.allow_replication_factor_change
        T, P = R.ReassignableTopicResponse, R.ReassignableTopicResponse.ReassignablePartitionResponse
        out = []
        for t in req.body.topics:
            parts = []
            for p in t.partitions:
                pr = P(partition_index=p.partition_index, error_code=0, error_message=None)
                parts.append(pr)
                try:
                    if self.topics.partition(t.name, p.partition_index) is None:
                        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
                    if p.replicas is None:
                        if self.cluster.state(t.name, p.partition_index).target is None:
                            raise TopicError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                             "No ongoing reassignment for this partition.")
                    else:
                        check_replicas(p.replicas, self.cluster.brokers)
                        st = self.cluster.state(t.name, p.partition_index)
                        rf = len(st.target or st.replicas)
                        if not allow_rf_change and len(p.replicas) != rf:
                            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                             f"The replication factor is changed from {rf} to {len(p.replicas)}")
                    self.cluster.reassign(t.name, p.partition_index,
                                          None if p.replicas is None else list(p.replicas))
                    st = self.cluster.state(t.name, p.partition_index)   # kept: where it ends up
                    self._keep_placement(t.name, None, {p.partition_index: st.target or st.replicas})
                    log.info("reassigned %s-%d to %s", t.name, p.partition_index, p.replicas)
                except TopicError as exc:
                    pr.error_code, pr.error_message = exc.code, exc.message
            out.append(T(name=t.name, partitions=parts))
        return R(throttle_time_ms=0, error_code=0, error_message=None, responses=out)

    async def list_partition_reassignments(self, req: Request, ctx: RequestContext):
        """The ongoing reassignments (all, or of the partitions named): replicas, adding, removing."""
        R = _resp(46)
        T, P = R.OngoingTopicReassignment, R.OngoingTopicReassignment.OngoingPartitionReassignment
        ongoing = self.cluster.reassignments()
        if req.body.topics is not None:
            named = {(t.name, i) for t in req.body.topics for i in t.partition_indexes}
            ongoing = {k: st for k, st in ongoing.items() if k in named}
        by_topic: dict[str, list] = {}
        for (name, i), st in sorted(ongoing.items()):
            by_topic.setdefault(name, []).append(P(partition_index=i, replicas=list(st.replicas),
                                                   adding_replicas=st.adding, removing_replicas=st.removing))
        return R(throttle_time_ms=0, error_code=0, error_message=None,
                 topics=[T(name=n, partitions=ps) for n, ps in by_topic.items()])
