"""The one place that builds the server's parts (the composition root): the data dir and its recovered logs, the
topics, the broker with its partitions, the coordinators over one clock, the routes and the dispatcher. Every
part is made with what it needs; nothing is set on a part after it is made, but for the cycles closed here
(the broker asks the transaction coordinator, and the group coordinator of a ShareFetch's group, both of which
write through the broker). Runs on recovery's worker
thread.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka.protocol.api_key import ApiKey

from tenure.broker.cluster import Cluster
from tenure.broker.dataplane import Broker, Node
from tenure.broker.topics import TopicRegistry
from tenure.config import ServerConfig
from tenure.control.capture import Capture
from tenure.control.faults import Faults
from tenure.control.hooks import Hooks
from tenure.coordinator import GroupShard
from tenure.coordinator.clock import CoordinatorClock
from tenure.coordinator.group_runtime import GroupRuntime
from tenure.coordinator.loader import LoadReport, iter_batches
from tenure.counters import Metrics
from tenure.deferred import deferred
from tenure.protocol.apis import BROKER, GROUP, TRANSACTION
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.errors import ErrorCode
from tenure.protocol.internal_topics import (
    OFFSETS_TOPIC,
    SHARE_STATE_PARTITIONS,
    SHARE_STATE_TOPIC,
    TRANSACTION_TOPIC,
    partition_for,
)
from tenure.security.access import acl_access
from tenure.security.apis import handlers as security_api_handlers
from tenure.security.users import USERS_FILE, UserStore, parse_user, read_users_file
from tenure.storage import Log
from tenure.storage.durability import Durability

from .dispatch import Dispatcher
from .listener import descriptor_room
from .offload import off_loop
from .routes import BrokerRoute, GroupRoute, Route, TransactionRoute

if TYPE_CHECKING:
    from tenure.coordinator.share_state import ShareStateRuntime
    from tenure.coordinator.transactions import TransactionCoordinator
    from tenure.coordinator.txn_runtime import TransactionRuntime
    from tenure.protocol.txn_records import TxnMarker
    from tenure.security.authorizer import Authorizer
    from tenure.storage.datadir import DataDir

log = logging.getLogger("tenure.server")

# The parts a plain `serve` does not start with, imported when first started (tenure/deferred.py; docs/README.md,
# "Start-up: the parts imported on first use"): the transaction coordinator and the share coordinator, with their
# internal topics' records
transactions = deferred("tenure.coordinator.transactions")
txn_runtime = deferred("tenure.coordinator.txn_runtime")
txn_records = deferred("tenure.protocol.txn_records")
share_coordinator = deferred("tenure.coordinator.share_state")
share_state_records = deferred("tenure.protocol.share_state_records")
# the ACLs: the authorizer when --authorizer is on or an --acl is given, the ACL APIs at their first request
# (`acl_handlers`)
authorizers = deferred("tenure.security.authorizer")
acls = deferred("tenure.security.acls")
acl_apis = deferred("tenure.security.acl_apis")
# the data dir and its segment logs: a server with --data-dir opens them (`open_topics`); one in memory never does
datadir = deferred("tenure.storage.datadir")
segments = deferred("tenure.storage.segments")
ACL_APIS = (int(ApiKey.DescribeAcls), int(ApiKey.CreateAcls), int(ApiKey.DeleteAcls))


class TransactionCoordinatorHandle:
    """The transaction coordinator, started once (`start`): on the first request that needs it, as Kafka creates
    __transaction_state on the first lookup of a transaction coordinator, or at start-up when the data dir holds
    one. Its own runtime over the shared clock; loading replays its records, and the partitions' open and
    aborted transactions are read back from their logs. It is also the broker's side of transactions
    (broker/base.py TransactionSide)."""

    def __init__(self, topics: TopicRegistry, cluster: Cluster, clock: CoordinatorClock, metrics: Metrics,
                 on_fatal: Callable[[BaseException], None], serving: Callable[[], bool],
                 transaction_version: int = 2) -> None:
        self.topics, self.cluster, self.clock = topics, cluster, clock
        self.transaction_version = transaction_version       # the transaction.version feature level finalized
        self.metrics, self.on_fatal, self.serving = metrics, on_fatal, serving
        self.runtime: TransactionRuntime | None = None
        self.loaded: TransactionCoordinator | None = None    # the shard last loaded (a move loads a new one)
        self.broker: Broker | None = None                     # both made by build(), which wires them
        self.groups: GroupRuntime | None = None

    def start(self) -> TransactionRuntime:
        if self.runtime is not None:
            return self.runtime
        assert self.broker is not None and self.groups is not None, "built by build()"
        broker, groups, topics = self.broker, self.groups, self.topics
        topic = topics.get(TRANSACTION_TOPIC)
        if topic is None:
            topic = topics.create(TRANSACTION_TOPIC, 1, internal=True, configs={"cleanup.policy": "compact"})
        else:
            for t in topics.all():           # __consumer_offsets too: offsets committed in a transaction
                for p in broker.replicas.of_topic(t.name):
                    p.txns.rebuild(iter_batches(p.log))

        def partitions_of(name: str) -> int | None:
            t = topics.get(name)
            return len(t.partitions) if t is not None and not t.internal else None

        def offsets_partition_of(group_id: str) -> tuple[str, int]:
            return OFFSETS_TOPIC, partition_for(group_id, groups.partitions)

        def new_coordinator(part: int) -> TransactionCoordinator:    # one per load (a move loads a new one)
            return transactions.TransactionCoordinator(broker.producers.next_producer_id, partitions_of,
                                                       offsets_partition_of,
                                                       transaction_version=self.transaction_version,
                                                       offsets_partitions=lambda: groups.partitions)
        runtime = txn_runtime.TransactionRuntime(new_coordinator, topic, clock=self.clock,
                                                 partition_writer=broker.replicas, on_fatal=self.on_fatal,
                                                 metrics=self.metrics, codec=txn_records.module,
                                                 write_markers=broker.write_txn_markers,
                                                 timer_keys=(transactions.TxnTimeoutKey,),
                                                 hosted_on=lambda p: self.cluster.leader_of(TRANSACTION_TOPIC, p))
        report = runtime.load()
        coordinator = runtime.shards[0]
        broker.producers.reserve(coordinator.max_producer_id())
        log.info("loaded %s: %d transactional id(s) in %.3fs", TRANSACTION_TOPIC, len(coordinator.transactions),
                 report.seconds)
        self.runtime, self.loaded = runtime, coordinator
        if self.serving():                   # started lazily while serving: its timers now
            runtime.start_timers()
        return runtime

    # ---- the broker's side of transactions (broker/base.py TransactionSide)
    def verify(self, transactional_id: str | None, producer_id: int, producer_epoch: int, topic: str,
               partition: int) -> int | None:
        """The coordinator serving now answers (while a move loads it: COORDINATOR_LOAD_IN_PROGRESS, which the
        broker reports as Kafka's does: a retriable error)."""
        if self.runtime is None:
            return None
        shard = self.runtime.shards.get(0)
        if shard is None:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if 0 in self.runtime.loading else ErrorCode.NOT_COORDINATOR
        return shard.verify(transactional_id, producer_id, producer_epoch, topic, partition)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[tuple[str, int]], ctx: RequestContext) -> dict[tuple[str, int], int]:
        if self.runtime is None:             # no transaction coordinator yet: no transaction can be
            return {key: ErrorCode.INVALID_PRODUCER_ID_MAPPING for key in partitions}
        return await self.runtime.add_partitions(transactional_id, producer_id, producer_epoch, partitions, ctx)

    def internal_marker(self, marker: TxnMarker, now_ms: int) -> Log:
        assert self.groups is not None, "built by build()"
        return self.groups.write_marker(marker, now_ms)


class ShareStateHandle:
    """The share coordinator (coordinator/share_state/), started once: on the first share partition a share
    group uses, on the first FindCoordinator of a share partition's key, or at start-up when the data dir holds
    __share_group_state (made with `partitions` partitions, Kafka's share.coordinator.state.topic.num.partitions;
    a data dir's keeps its count). Its own runtime over the shared clock, one shard per partition, each hosted by
    its partition's leader and moved with it (tenure/server/moves.py), writing through the broker's replica
    manager; it is the broker's side of share state (broker/share.py ShareStateSide)."""

    def __init__(self, topics: TopicRegistry, cluster: Cluster, clock: CoordinatorClock, metrics: Metrics,
                 on_fatal: Callable[[BaseException], None], partitions: int = SHARE_STATE_PARTITIONS) -> None:
        self.topics, self.cluster, self.clock, self.metrics, self.on_fatal = topics, cluster, clock, metrics, on_fatal
        self.partitions = partitions
        self.runtime: ShareStateRuntime | None = None
        self.broker: Broker | None = None                     # made by build(), which wires it

    def start(self) -> ShareStateRuntime:
        if self.runtime is not None:
            return self.runtime
        assert self.broker is not None, "built by build()"
        topic = self.topics.get(SHARE_STATE_TOPIC)
        policy = {"cleanup.policy": "delete", "retention.ms": "-1"}      # as KIP-932 has it: updates are deltas
        if topic is None:
            topic = self.topics.create(SHARE_STATE_TOPIC, self.partitions, internal=True, configs=policy)
        elif topic.config("cleanup.policy") != "delete":                # made compacted by an older tenure
            self.topics.set_topic_configs(SHARE_STATE_TOPIC, {**topic.configs, **policy})
        runtime = share_coordinator.ShareStateRuntime(
            share_coordinator.ShareStateShard, topic, clock=self.clock, partition_writer=self.broker.replicas,
            on_fatal=self.on_fatal, metrics=self.metrics, codec=share_state_records.module, timer_keys=(),
            hosted_on=lambda p: self.cluster.leader_of(SHARE_STATE_TOPIC, p))
        report = runtime.load()
        for part in range(len(topic.partitions)):     # the share coordinator's shards are placed from the start
            self.cluster.state(SHARE_STATE_TOPIC, part)
        log.info("loaded %s: %d record(s) in %.3fs", SHARE_STATE_TOPIC, report.records, report.seconds)
        self.runtime = runtime
        return runtime

    def partition_of(self, group_id: str, topic_id, partition: int) -> int:
        """The __share_group_state partition of a share partition (Kafka's ShareCoordinatorService.partitionFor)."""
        return self.start().partition_of_key((group_id, topic_id, partition))

    # ---- the broker's side of share state (broker/share.py ShareStateSide)
    async def ready(self) -> None:
        await self.start().ready()

    def read(self, group_id: str, topic_id, partition: int):
        return self.start().read((group_id, topic_id, partition))

    async def write(self, group_id: str, topic_id, partition: int, start_offset: int, batches) -> bool:
        return await self.start().write((group_id, topic_id, partition), start_offset, batches)

    async def delete(self, group_id: str, topic_id, partition: int) -> bool:
        return await self.start().delete((group_id, topic_id, partition))

    # ---- the share coordinator's APIs, asked over the wire (broker/share_apis.py)
    def refusal(self, group_id: str, topic_id, partition: int, broker_id: int | None) -> int:
        return self.start().refusal((group_id, topic_id, partition), broker_id)

    async def initialize(self, group_id: str, topic_id, partition: int, state_epoch: int, start_offset: int) -> int:
        return await self.start().initialize((group_id, topic_id, partition), state_epoch, start_offset)

    async def read_state(self, group_id: str, topic_id, partition: int, leader_epoch: int):
        return await self.start().read_state((group_id, topic_id, partition), leader_epoch)

    async def write_state(self, group_id: str, topic_id, partition: int, state_epoch: int, leader_epoch: int,
                          start_offset: int, batches) -> int:
        return await self.start().write_state((group_id, topic_id, partition), state_epoch, leader_epoch,
                                              start_offset, batches)

    def summary(self, group_id: str, topic_id, partition: int, leader_epoch: int):
        runtime, key = self.start(), (group_id, topic_id, partition)
        code = runtime.shards[runtime.partition_of_key(key)].fencing(key, leader_epoch=leader_epoch)
        return code, None if code else runtime.state_of(key)

    def partitions_of(self, group_id: str) -> list:
        """(topic id, partition) of every share partition of the group with state (none before the share
        coordinator has started: asking does not start it)."""
        if self.runtime is None and self.topics.get(SHARE_STATE_TOPIC) is None:
            return []
        return [(t, p) for _, t, p in self.start().keys(group_id)]


class Parts:
    """What recovery builds: everything a server serves with. (A plain class: the server reads its fields, nothing
    compares or prints it, and a dataclass's build cost ~0.4 ms of every server's start-up.)"""

    __slots__ = ("data", "topics", "broker", "handlers", "clock", "groups", "txn_coordinator", "dispatch",
                 "load_report", "users", "authorizer", "share_state")

    def __init__(self, data: DataDir | None, topics: TopicRegistry, broker: Broker, handlers: dict,
                 clock: CoordinatorClock, groups: GroupRuntime, txn_coordinator: TransactionCoordinatorHandle,
                 dispatch: Dispatcher, load_report: LoadReport, users: UserStore,
                 authorizer: Authorizer | None = None, share_state: ShareStateHandle | None = None) -> None:
        self.data = data
        self.topics = topics
        self.broker = broker
        self.handlers = handlers                # the broker's handlers by API key (a test may wrap one)
        self.clock = clock                      # the coordinators' one clock and timer wheel
        self.groups = groups                    # the group coordinator's runtime
        self.txn_coordinator = txn_coordinator  # the transaction coordinator, started on first use
        self.dispatch = dispatch
        self.load_report = load_report
        self.users = users                      # the SASL users (security/users.py)
        self.authorizer = authorizer            # the ACLs (--authorizer); None: everything is allowed
        self.share_state = share_state          # the share coordinator, started on first use


def open_topics(config: ServerConfig, cluster: Cluster) -> tuple[DataDir | None, TopicRegistry, str | None]:
    """The data dir (None: in memory) with every log recovered and verified, the topic registry over it, and
    the cluster id."""
    racks = cluster.replica_racks if cluster.has_racks else None   # the topic hashes (KIP-1101) cover them
    if config.data_dir is None:
        return None, TopicRegistry(config.default_partitions, max_partitions_per_topic=config.max_partitions_per_topic,
                                   max_partitions=config.max_partitions, replica_racks=racks), config.cluster_id
    data = datadir.DataDir.open(config.data_dir, segments.LogConfig(segment_bytes=config.segment_bytes,
                                                                   segment_ms=config.segment_ms))
    try:
        topics = TopicRegistry(config.default_partitions, data.open_log, data.catalog,
                               config.max_partitions_per_topic, config.max_partitions, room=descriptor_room,
                               replica_racks=racks)
        topics.load()                        # opens (and verifies) every log; refuses before any cut
        data.finish_recovery()
    except BaseException:
        data.close(refused=True)
        raise
    return data, topics, config.cluster_id or data.cluster_id()


def open_users(config: ServerConfig, data: DataDir | None) -> UserStore:
    """The SASL users: those kept in the data dir, then --users-file's and --user's (a flag sets the password)."""
    users = UserStore(Path(data.path) / USERS_FILE if data is not None else None, config.scram_iterations)
    given = read_users_file(config.users_file) if config.users_file else []
    given += [parse_user(u) for u in config.users or ()]
    for name, password in given:
        users.add(name, password)
    return users


def acl_handlers(authorizer: Authorizer | None) -> dict[int, Route]:
    """The ACL APIs' handlers (security/acl_apis.py over the authorizer, or answering SECURITY_DISABLED without
    one), made at the first ACL request: a server that is never asked about ACLs never imports them."""
    made: dict[int, Route] = {}

    def handler(key: int) -> Route:
        async def handle(req: Request, ctx: RequestContext) -> Any:
            if not made:
                made.update(acl_apis.AclApis(authorizer).handlers())
            return await made[key](req, ctx)
        return handle
    return {key: handler(key) for key in ACL_APIS}


def build(config: ServerConfig, data: DataDir | None, topics: TopicRegistry, cluster_id: str | None, *, node: Node,
          cluster: Cluster, durability: Durability, faults: Faults, metrics: Metrics,
          hooks: Hooks | None = None, capture: Capture | None = None, on_fatal: Callable[[BaseException], None], static_configs: Callable[[], dict[str, str | None]],
          serving: Callable[[], bool]) -> Parts:
    """The server's parts over recovered topics; loads __consumer_offsets (and __transaction_state when the
    data dir holds one) into the coordinators."""
    clock = CoordinatorClock()
    txn = TransactionCoordinatorHandle(topics, cluster, clock, metrics, on_fatal, serving,
                                       transaction_version=config.finalized_transaction_version)
    groups_of: list[GroupRuntime] = []          # the group runtime, made below over the broker's partitions

    def share_group(group_id: str) -> tuple[str, frozenset[str]] | None:   # a share request's group, as the
        g = groups_of[0].group_info(group_id) if groups_of else None       # group coordinator holds it: its
        return None if g is None else (g.kind, frozenset(m.member_id for m in g.members))   # kind, members
    share_state = ShareStateHandle(topics, cluster, clock, metrics, on_fatal, config.share_state_partitions)
    broker = Broker(node, topics, cluster_id=cluster_id, auto_create_topics=config.auto_create_topics,
                    durability=durability, server_configs=static_configs, cluster=cluster, txn_side=txn,
                    transaction_version=config.finalized_transaction_version,
                    replica_selector=config.replica_selector_class,
                    share_clock=clock.now_ms, share_group=share_group, share_state=share_state)
    share_state.broker = broker
    broker.configs.present(config.release)          # the broker configs of the Kafka release presented
    offsets = topics.get(OFFSETS_TOPIC)
    if offsets is None:
        offsets = topics.create(OFFSETS_TOPIC, config.offsets_partition_count, internal=True,
                                configs={"cleanup.policy": "compact"})
    elif len(offsets.partitions) != config.offsets_partition_count:
        log.warning("%s keeps its %d partition(s) from the data dir (--offsets-partitions %d ignored: groups map "
                    "to partitions by that count)", OFFSETS_TOPIC, len(offsets.partitions),
                    config.offsets_partition_count)
    coordinator_config = config.coordinator_config()
    expectations: dict[str, int] = {}              # expect_group's table: the runtime writes, its shards read
    groups = GroupRuntime(lambda p: GroupShard(coordinator_config, partition=p, topics=topics,
                                               expectations=expectations), offsets,
                          expectations=expectations, clock=clock, on_fatal=on_fatal, metrics=metrics,
                          hosted_on=lambda p: cluster.leader_of(OFFSETS_TOPIC, p), partition_writer=broker.replicas,
                          on_group_deleted=broker.forget_share_group, off_loop=off_loop)
    txn.broker, txn.groups = broker, groups
    groups_of.append(groups)
    if config.load_in_background and data is not None:
        groups.defer_load()                          # loaded once serving (lifecycle.py), 14 meanwhile
        load_report = LoadReport()
    else:
        load_report = groups.load()
    for part in range(len(offsets.partitions)):     # the coordinators are placed from the start
        cluster.state(OFFSETS_TOPIC, part)
    if data is not None and not config.load_in_background:
        r = load_report
        log.info("loaded %s: %d record(s) in %d batch(es), %d group(s), in %.3fs (%d latest per key replayed)",
                 OFFSETS_TOPIC, r.records, r.batches, r.groups, r.seconds, r.replayed)
    if topics.get(TRANSACTION_TOPIC) is not None:   # transactions from a previous run: load them
        txn.start()
    if topics.get(SHARE_STATE_TOPIC) is not None:   # share partitions' state from a previous run
        share_state.start()
    users = open_users(config, data)
    authorizer = None
    if config.acls_checked:                          # the ACLs, kept in the data dir (docs/security.md#acls)
        authorizer = authorizers.Authorizer(super_users=config.super_users,
                                            allow_if_no_acl=config.allow_everyone_if_no_acl,
                                            data_dir=data.path if data is not None else None,
                                            initial=[acls.parse_acl(a) for a in config.acls])
    handlers = {**broker.handlers, **security_api_handlers(users), **acl_handlers(authorizer)}
    broker_route = BrokerRoute(handlers)
    routes: dict[str, Route] = {BROKER: broker_route, GROUP: GroupRoute(groups, topics, txn.start),
                                TRANSACTION: TransactionRoute(txn.start, broker_route)}
    dispatch = Dispatcher(faults=faults, metrics=metrics, routes=routes, clock_ms=clock.now_ms, cluster=cluster,
                          hooks=hooks, capture=capture, access=acl_access, authorizer=authorizer)
    return Parts(data, topics, broker, handlers, clock, groups, txn, dispatch, load_report, users, authorizer,
                 share_state)
