"""The group coordinator's runtime: the coordinator runtime (runtime.py) over `__consumer_offsets`, whose
shards are GroupShards, with the queries and operations the controls and the server ask of groups."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tenure.inspection import GroupInfo
from tenure.protocol import records as rec
from tenure.protocol.errors import AdminError, ErrorCode
from tenure.protocol.markers import TxnMarker
from tenure.protocol.records import OffsetCommitRecord, TransactionEnd

from .kinds import Group
from .result import GroupSnapshot, Result
from .runtime import CoordinatorRuntime
from .shard import GroupShard

log = logging.getLogger("tenure.coordinator")


class GroupRuntime(CoordinatorRuntime[GroupShard]):
    def __init__(self, *args: Any, on_group_deleted: Callable[[str], None] | None = None, **kwargs: Any) -> None:
        """`on_group_deleted(group_id)`: told after a group is deleted (DeleteGroups), so what lives outside
        the coordinator for it goes too (a share group's share partitions: the broker's)."""
        super().__init__(*args, **kwargs)
        self.on_group_deleted = on_group_deleted

    # ------------------------------------------------------------------ queries
    def group_ids(self) -> list[str]:
        """Every group of every loaded shard, sorted."""
        return sorted(gid for shard in self.shards.values() for gid in shard.group_ids())

    def group(self, group_id: str) -> Group | None:
        """A copy of one group's state, from its shard (None if unknown or its partition is not loaded)."""
        shard = self.shards.get(self.partition_of(group_id))
        return None if shard is None else shard.group(group_id)

    def group_info(self, group_id: str) -> GroupInfo | None:
        """One group as its kind describes it for inspection (None if unknown or its partition is not loaded)."""
        shard = self.shards.get(self.partition_of(group_id))
        return None if shard is None else shard.group_info(group_id)

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], OffsetCommitRecord]:
        """A copy of one group's committed offsets: {(topic, partition): record} (records are frozen)."""
        shard = self.shards.get(self.partition_of(group_id))
        return {} if shard is None else shard.committed_offsets(group_id)

    # ------------------------------------------------------------------ operations
    def force_rebalance(self, group_id: str) -> None:
        """The KIP-345 draft's forced static rebalance of one group, on its shard (AdminError if refused,
        NOT_COORDINATOR if its offsets partition is not loaded here)."""
        shard = self.shards.get(self.partition_of(group_id))
        if shard is None:
            raise AdminError(ErrorCode.NOT_COORDINATOR, f"the offsets partition of group {group_id!r} is not loaded")
        self.apply(shard.force_rebalance(group_id, self.clock_ms()))

    def expire_session(self, group_id: str, member: str) -> bool:
        """Expire one member's session now, as if its heartbeats had stopped (`member`: its member id or
        group.instance.id), whatever the group's kind: its shard's Result (GroupAdmin.expire_session: the
        session timer cancelled, then what that timer firing does) applied as any other - records written,
        answers released once durable, timers set. True if the member lost its session: removed (a classic
        group's member, or a consumer group's, fenced with one group epoch bump) or kept offline (a classic
        static member under --static-registration-timeout-ms); False if the group or member is unknown here,
        no session timer of it is armed, or it is parked in a JoinGroup or SyncGroup (Kafka's rule). Work
        that raises is fail-stop, as when the timer fires by itself."""
        if self.failed is not None:
            raise self.failed
        shard = self.shards.get(self.partition_of(group_id))
        g = None if shard is None else shard.group(group_id)
        if shard is None or g is None:
            return False
        mid = g.static_members.get(member, member)
        result = self._timer_work(f"session of {member!r} in group {group_id!r}",
                                  lambda: shard.expire_session(group_id, member, self.clock_ms()))
        if result is None:
            return False
        self.apply(result)
        after = shard.group(group_id)
        return after is None or not after.in_session(mid)

    def write_marker(self, marker: TxnMarker, now_ms: int):
        """A transaction's marker for one partition of this runtime's topic (offsets committed in the
        transaction): written through the CoordinatorWriter, then replayed by that partition's shard (the
        offsets become committed, or are dropped); an unloaded partition's shard reads it at its load.
        Returns the log written."""
        plog = self.writer.write_marker(marker.partition, marker.producer_id, marker.producer_epoch,
                                        marker.commit, marker.coordinator_epoch, now_ms)
        shard = self.shards.get(marker.partition)
        end = TransactionEnd(marker.producer_id, marker.producer_epoch, marker.commit)
        if shard is not None:
            shard.replay(end)
        elif marker.partition in self.loading:     # past the loader's end offset: replayed when it is done
            self._markers_while_loading.setdefault(marker.partition, []).append(end)
        return plog

    def _observe(self, result: Result) -> None:
        """A Result's static-member events and rebalances: counted and logged; its deleted groups told."""
        if self.on_group_deleted is not None:
            for e in result.events:
                if isinstance(e, GroupSnapshot) and e.group is None and self.group(e.group_id) is None:
                    self.on_group_deleted(e.group_id)
        for r in result.records:
            if isinstance(r, rec.StaticMemberEventRecord) and not r.tombstone:
                self.metrics.static_event(r.group_id, r.cause)
                log.info("group %s: static member %s %s (member %s -> %s, generation %d, client %s %s)",
                         r.group_id, r.group_instance_id, r.cause, r.old_member_id, r.new_member_id,
                         r.generation, r.client_id, r.client_host,
                         extra={"event": "static_member", "group": r.group_id, "instance_id": r.group_instance_id,
                                "cause": r.cause, "old_member_id": r.old_member_id,
                                "new_member_id": r.new_member_id, "generation": r.generation,
                                "client_id": r.client_id, "client_host": r.client_host})
        for gid, cause in result.rebalances:
            self.metrics.rebalance(gid, cause)
            g = self.group(gid)
            generation, members = (g.generation, len(g.members)) if g is not None else (-1, 0)
            log.info("group %s: rebalance started (cause %s; generation %d, %d member(s))",
                     gid, cause, generation, members,
                     extra={"event": "rebalance", "group": gid, "cause": cause, "generation": generation,
                            "members": members})
