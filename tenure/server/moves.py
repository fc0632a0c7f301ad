"""Leadership moves in a cluster (`--brokers N`, docs/cluster.md), in one place: a broker stopped or started, a
partition's leader moved, a group's coordinator moved. The cluster table (broker/cluster.py) decides the new
leaders and tells `leader_changed`; the coordinator of a moved internal partition unloads here and loads on its
new leader in the background (COORDINATOR_LOAD_IN_PROGRESS meanwhile)."""
from __future__ import annotations

import asyncio
import dataclasses
import logging

from tenure.broker.cluster import NO_LEADER, Cluster, LeaderChange
from tenure.broker.topics import TopicRegistry
from tenure.config import ServerConfig
from tenure.coordinator.group_runtime import GroupRuntime
from tenure.coordinator.loader import LoadAbandoned, LoadReport
from tenure.coordinator.runtime import CoordinatorRuntime
from tenure.protocol.internal_topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TRANSACTION_TOPIC
from tenure.protocol.records import CoordinatorLoadRecord

from .build import ShareStateHandle, TransactionCoordinatorHandle
from .listener import Listener

log = logging.getLogger("tenure.server")


class Moves:
    def __init__(self, config: ServerConfig, cluster: Cluster, listeners: dict[int, Listener],
                 topics: TopicRegistry, groups: GroupRuntime, txn_coordinator: TransactionCoordinatorHandle,
                 share_state: ShareStateHandle | None = None) -> None:
        self.config, self.cluster, self.listeners, self.topics = config, cluster, listeners, topics
        self.groups, self.txn_coordinator, self.share_state = groups, txn_coordinator, share_state
        self._moving: set[asyncio.Task] = set()    # coordinator loads after a move (see leader_changed)

    def cancel(self) -> None:
        """The server stops: loads under way are abandoned (their partitions' logs stay as they are)."""
        for task in list(self._moving):
            task.cancel()

    def leader_changed(self, change: LeaderChange, cause: str) -> None:
        """A partition's leader changed. An offsets partition's coordinator moves with it: the shard unloads
        now, the new leader loads it in the background (14 meanwhile) and writes a CoordinatorLoadRecord.
        __transaction_state's and __share_group_state's coordinators move the same way (no record of the move:
        their records have no such type)."""
        share = self.share_state.runtime if self.share_state is not None else None
        runtime = {OFFSETS_TOPIC: self.groups, TRANSACTION_TOPIC: self.txn_coordinator.runtime,
                   SHARE_STATE_TOPIC: share}.get(change.topic)
        if runtime is None:
            return
        part = change.partition
        to = change.new if change.new != NO_LEADER else None
        runtime.begin_move(part, loading=to is not None)
        log.info("coordinator of %s-%d moves from broker %s to broker %s (%s; leader epoch %d)", change.topic,
                 part, change.old, change.new, cause, change.epoch,
                 extra={"event": "coordinator_move", "partition": part, "from_broker": change.old,
                        "to_broker": change.new, "cause": cause})
        if to is None:
            return
        # the group coordinator's move is a record in the partition (the audit shows it); the transaction
        # coordinator's records have no such type
        record = CoordinatorLoadRecord(part, to, change.old, cause, change.epoch, self.groups.clock_ms()) \
            if runtime is self.groups else None
        task = asyncio.get_running_loop().create_task(self._finish_move(runtime, change.topic, part, to, record))
        self._moving.add(task)
        task.add_done_callback(self._moving.discard)

    async def _finish_move(self, runtime: CoordinatorRuntime, topic: str, part: int, to: int,
                           record: CoordinatorLoadRecord | None) -> None:
        try:
            report = await runtime.finish_move(part, record)
        except LoadAbandoned:                      # the server stops
            return
        except Exception:
            log.exception("loading %s-%d on broker %d failed", topic, part, to)
            return
        if report is None:
            return
        if runtime is self.txn_coordinator.runtime:   # the broker's Produce checks ask the loaded coordinator
            self.txn_coordinator.loaded = runtime.shards[part]
        log.info("broker %d loaded %s-%d: %d record(s) in %.3fs", to, topic, part, report.records, report.seconds)

    def load_at_start(self, report: LoadReport) -> None:
        """`--load-in-background`: the group coordinator's partitions load now, while the server serves (14
        for their groups meanwhile); `report` (the server's load report) gets the totals when all are loaded."""
        async def load() -> None:
            try:
                total = await self.groups.load_deferred()
            except LoadAbandoned:
                return
            except Exception:
                log.exception("loading %s failed", OFFSETS_TOPIC)
                return
            for f in dataclasses.fields(total):
                setattr(report, f.name, getattr(total, f.name))
            log.info("loaded %s: %d record(s) in %d batch(es), %d group(s), in %.3fs (%d latest per key replayed; "
                     "in the background, while serving)", OFFSETS_TOPIC, total.records, total.batches, total.groups,
                     total.seconds, total.replayed)
        task = asyncio.get_running_loop().create_task(load())
        self._moving.add(task)
        task.add_done_callback(self._moving.discard)

    async def moves_done(self) -> None:
        """Wait until every coordinator move under way has loaded (a control returns after it)."""
        while self._moving:
            await asyncio.wait(list(self._moving))

    async def stop_broker(self, broker_id: int) -> None:
        """Stop one broker: its listener closes, its connections drop, each partition it led moves to
        another in-sync replica (epochs bump) and the coordinators it hosted load there."""
        b = self.cluster.brokers[self.cluster.known_broker(broker_id)]
        if not b.up:
            return
        listener = self.listeners[broker_id]
        await listener.stop_accepting(self.config.shutdown_timeout_s)
        self.cluster.stop(broker_id)
        self.topics.topics_changed()               # every ISR it was in changed: topic hashes are computed again
        await listener.drop_connections(self.config.shutdown_timeout_s)
        log.info("broker %d stopped", broker_id, extra={"event": "broker_stopped", "broker": broker_id})
        await self.moves_done()

    async def start_broker(self, broker_id: int) -> None:
        """Start a stopped broker again on its port: it rejoins the ISR of its partitions and leads those
        left without a leader."""
        b = self.cluster.brokers[self.cluster.known_broker(broker_id)]
        if b.up:
            return
        self.listeners[broker_id].start()      # each listener on the port it had
        self.cluster.start(broker_id)
        self.topics.topics_changed()
        log.info("broker %d started", broker_id, extra={"event": "broker_started", "broker": broker_id})
        await self.moves_done()

    async def move_leader(self, topic: str, partition: int, to_broker: int) -> None:
        if self.topics.partition(topic, partition) is None:
            raise ValueError(f"unknown topic-partition {topic}-{partition}")
        self.cluster.move_leader(topic, partition, self.cluster.known_broker(to_broker))
        self.topics.topics_changed([topic])        # a new leader may be a new replica (on another rack)
        await self.moves_done()

    async def move_coordinator(self, group_id: str, to_broker: int) -> int:
        """Move the coordinator of a group (its offsets partition's leadership) to `to_broker`; returns
        the offsets partition moved."""
        part = self.groups.partition_of(group_id)
        await self.move_leader(OFFSETS_TOPIC, part, to_broker)
        return part

    def coordinator_of(self, group_id: str) -> int:
        return self.cluster.leader_of(OFFSETS_TOPIC, self.groups.partition_of(group_id))
