"""ShareFetch (78) and ShareAcknowledge (79), as the `Broker` (dataplane.py) answers them: share sessions, the
acknowledgements a request carries (piggybacked on a fetch or alone), then - a fetch - records acquired for the
member from each partition of its session, read through the replica manager's one read path (share.py holds
the share partitions' state).

Share sessions (one per member and broker): epoch 0 opens one (replacing the member's previous session, whose
records are released; acknowledgements are refused: INVALID_REQUEST), -1 closes it after its acknowledgements
(the member's acquired records are released), any other epoch must be the session's next one
(INVALID_SHARE_SESSION_EPOCH; no session: SHARE_SESSION_NOT_FOUND). A fetch's topics join the session and its
forgotten topics leave it; a fetch answers the session's partitions that have records, an error or an
acknowledgement result, long-polling up to `max_wait_ms` while nothing can be acquired.
"""
from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

from tenure.deferred import deferred
from tenure.protocol.acl import DESCRIBE, GROUP, READ, TOPIC
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.errors import ErrorCode
from tenure.protocol.internal_topics import OFFSETS_TOPIC, partition_for

from .base import BrokerBase, resp
from .partition import Partition

if TYPE_CHECKING:
    from . import share
    from .share import SharePartition, ShareSession, ShareState, ShareStateSide
else:   # the share partitions and sessions (share.py): at the first share request (tenure/deferred.py)
    share = deferred("tenure.broker.share")

# the share sessions this file keeps (each a share.py ShareSession): Kafka's limit and the sessions' errors
MAX_SESSIONS = 2000                 # group.share.max.share.sessions
SHARE_SESSION_NOT_FOUND = 122
INVALID_SHARE_SESSION_EPOCH = 123
SHARE_SESSION_LIMIT_REACHED = 133

RECORD_LIMIT_MODE = 1          # ShareFetch v2 ShareAcquireMode: at most max_records, even inside a batch
FINAL_EPOCH = -1
DEFAULT_MAX_RECORDS = 500


class ShareApis(BrokerBase):
    share_clock: Callable[[], int]                     # the coordinators' clock (ms): acquisition locks
    share_group: Callable[[str], tuple[str, frozenset[str]] | None]   # a group id's group: (kind, member ids)
    share_state: ShareStateSide | None                  # where share partitions' state is persisted

    @cached_property
    def shares(self) -> ShareState:
        """Every share partition and share session of the broker: made at the first share request."""
        return share.ShareState()

    # ---------------------------------------------------------------- group configs
    def _group_config(self, group_id: str, name: str, default: str) -> str:
        return self.topics.dynamic_configs.get("group", {}).get(group_id, {}).get(name, default)

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self._group_config(group_id, "share.record.lock.duration.ms", "30000"))

    def delivery_limit(self, group_id: str) -> int:
        return int(self._group_config(group_id, "share.delivery.count.limit", str(share.DELIVERY_COUNT_LIMIT)))

    def max_in_flight(self, group_id: str) -> int:
        return int(self._group_config(group_id, "share.partition.max.record.locks", str(share.MAX_IN_FLIGHT)))

    def share_partition(self, group_id: str, p: Partition) -> SharePartition:
        """The group's share partition of `p`, made on first use from the share coordinator's state or else at
        `share.auto.offset.reset` (latest: the high watermark; earliest: the log start); its start past the
        log's, its expired locks released, and the records of members the group no longer has (left, or their
        session expired) released."""
        sp = self.shares.partition(group_id, p.topic, p.index)
        topic = self.topics.get(p.topic)
        if sp is not None and topic is not None and sp.topic_id not in (None, topic.topic_id):
            self.shares.drop(group_id, p.topic, p.index)        # the topic was deleted and made again
            sp = None
        if sp is None:
            saved = None if self.share_state is None or topic is None else self.share_state.read(
                group_id, topic.topic_id, p.index)
            tid = None if topic is None else topic.topic_id
            if saved is not None:
                sp = self.shares.open(group_id, p.topic, p.index, saved[0], tid)
                sp.restore(*saved)
            else:
                latest = self._group_config(group_id, "share.auto.offset.reset", "latest") == "latest"
                sp = self.shares.open(group_id, p.topic, p.index,
                                      p.high_watermark if latest else p.log_start_offset, tid)
        sp.cut(p.log_start_offset)
        freed = sp.expire(self.share_clock(), self.delivery_limit(group_id))
        g = self.share_group(group_id)
        if g is not None and g[0] == "share":       # records of members the group no longer has: released
            acquired = share.ACQUIRED
            held = {r.member_id for r in sp.records.values() if r.state == acquired and r.member_id is not None}
            for holder in held - g[1]:
                freed |= sp.release_member(holder, self.delivery_limit(group_id))
        if freed:
            p.wake()
        return sp

    async def _state_ready(self) -> None:
        """Wait while a share coordinator shard moves (its state is read back by replay on the new leader): the
        reads of share partitions' state that follow, with no wait between, find every shard loaded."""
        if self.share_state is not None:
            await self.share_state.ready()

    async def persist_share_state(self, group_id: str) -> None:
        """Write every share partition of the group whose state changed since it was last written to the share
        coordinator, and wait until durable (a request's answer leaves after its state is persisted)."""
        if self.share_state is None:
            return
        for sp in self.shares.of_group(group_id):
            state = sp.pending_write()
            topic = self.topics.get(sp.topic)
            if state is None or topic is None:
                continue
            sp.written()
            await self.share_state.write(group_id, topic.topic_id, sp.index, *state)

    def _read_committed(self, group_id: str) -> bool:
        return self._group_config(group_id, "share.isolation.level", "read_uncommitted") == "read_committed"

    # ---------------------------------------------------------------- sessions
    def _session(self, ctx: RequestContext, group_id: str, member_id: str, epoch: int,
                 opening: bool) -> tuple[ShareSession | None, int, str | None]:
        key = (ctx.broker_id or 0, group_id, member_id)
        if opening:
            old = self.shares.sessions.pop(key, None)
            if old is not None:
                self._release_session(group_id, member_id, old)
            if len(self.shares.sessions) >= MAX_SESSIONS:
                self._evict_sessions()
            if len(self.shares.sessions) >= MAX_SESSIONS:
                return None, SHARE_SESSION_LIMIT_REACHED, "The limit of share sessions is reached."
            s = self.shares.sessions[key] = share.ShareSession()
            return s, 0, None
        found = self.shares.sessions.get(key)
        if found is None:
            return None, SHARE_SESSION_NOT_FOUND, f"No share session for member {member_id} of group {group_id}."
        if epoch != FINAL_EPOCH and epoch != found.epoch:
            return None, INVALID_SHARE_SESSION_EPOCH, f"Share session epoch {epoch}, expected {found.epoch}."
        return found, 0, None

    def _evict_sessions(self) -> None:
        """At the limit: the sessions of members their group no longer has (killed clients never close theirs)
        go, their records released."""
        for key, session in list(self.shares.sessions.items()):
            g = self.share_group(key[1])
            if g is None or key[2] not in g[1]:
                del self.shares.sessions[key]
                self._release_session(key[1], key[2], session)

    def _release_session(self, group_id: str, member_id: str, s: ShareSession) -> None:
        for name, index in s.partitions.values():
            p = self.replicas.get(name, index)
            sp = self.shares.partition(group_id, name, index)
            if p is not None and sp is not None and sp.release_member(member_id, self.delivery_limit(group_id)):
                p.wake()

    def _close(self, ctx: RequestContext, group_id: str, member_id: str) -> None:
        s = self.shares.sessions.pop((ctx.broker_id or 0, group_id, member_id), None)
        if s is not None:
            self._release_session(group_id, member_id, s)

    def _refusal(self, group_id: str | None, member_id: str | None) -> tuple[int, str] | None:
        """A request's group and member before any session: both named. The group's kind is not asked: Kafka's
        broker serves a ShareFetch or ShareAcknowledge for any group id (its KafkaApis and SharePartitionManager
        never ask the group coordinator; the share coordinator answers a share partition it has no state for
        with start offset -1, and the share partition starts at share.auto.offset.reset), so a consumer or
        classic group's id gets share partitions of its own, beside that group's committed offsets."""
        if not group_id or not member_id:
            return ErrorCode.INVALID_REQUEST, "A share request names its group and member."
        return None

    # ---------------------------------------------------------------- partitions
    def _resolve(self, ctx: RequestContext, topic_id: uuid.UUID, index: int) -> tuple[Partition | None, int]:
        """A share request's partition, checked as Kafka's KafkaApis checks a ShareFetch's and a
        ShareAcknowledge's: a topic id it does not know UNKNOWN_TOPIC_ID, a topic the principal may not READ
        TOPIC_AUTHORIZATION_FAILED, a partition the topic does not have UNKNOWN_TOPIC_OR_PARTITION, then the
        leader check."""
        topic = self.topics.by_id(topic_id)
        if topic is None or topic.internal:
            return None, ErrorCode.UNKNOWN_TOPIC_ID
        if not ctx.allows(READ, TOPIC, topic.name):
            return None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
        p = self.replicas.get(topic.name, index)
        if p is None:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return p, self.cluster.check(p.topic, p.index, broker=ctx.broker_id)

    def _leader(self, p: Partition | None) -> tuple[int, int]:
        if p is None:
            return -1, -1
        st = self.cluster.state(p.topic, p.index)
        return st.leader, st.leader_epoch

    def _acknowledge(self, ctx: RequestContext, group_id: str, member_id: str, topic_id: uuid.UUID, index: int,
                     batches, renew_allowed: bool) -> tuple[int, str | None]:
        p, code = self._resolve(ctx, topic_id, index)
        if p is None or code:
            return code, None
        try:
            checked = share.check_batches(batches, renew_allowed)
            sp = self.share_partition(group_id, p)
            if sp.acknowledge(member_id, checked, self.share_clock(), self.lock_duration_ms(group_id),
                              self.delivery_limit(group_id)):
                p.wake()
        except share.AckError as exc:
            return exc.code, exc.message
        return 0, None

    # ---------------------------------------------------------------- ShareFetch
    async def share_fetch(self, req: Request, ctx: RequestContext) -> Any:
        body, v = req.body, req.api_version
        R = resp(78)
        gid, mid, epoch = body.group_id, body.member_id, body.share_session_epoch
        lock_ms = self.lock_duration_ms(gid) if gid else 0

        def top(code: int, message: str | None) -> Any:
            return R(throttle_time_ms=0, error_code=code, error_message=message, acquisition_lock_timeout_ms=0,
                     responses=[], node_endpoints=[])
        refused = self._refusal(gid, mid)
        if refused:
            return top(*refused)
        await self._state_ready()
        opening = epoch == 0
        if opening and any(fp.acknowledgement_batches for t in body.topics or [] for fp in t.partitions or []):
            return top(ErrorCode.INVALID_REQUEST, "Acknowledge data present in the request opening a share session.")
        session, code, message = self._session(ctx, gid, mid, epoch, opening)
        if session is None:
            return top(code, message)
        if epoch not in (0, FINAL_EPOCH):
            session.bump()
        renew_only = v >= 2 and body.is_renew_ack
        # the acknowledgements, then the session's partitions
        out: dict[tuple[uuid.UUID, int], dict] = {}
        for t in body.topics or []:
            for fp in t.partitions or []:
                entry = out.setdefault((t.topic_id, fp.partition_index), {})
                if fp.acknowledgement_batches:
                    entry["ack"] = self._acknowledge(ctx, gid, mid, t.topic_id, fp.partition_index,
                                                     fp.acknowledgement_batches, v >= 2)
                if epoch != FINAL_EPOCH:
                    topic = self.topics.by_id(t.topic_id)
                    session.partitions[(t.topic_id, fp.partition_index)] = (
                        topic.name if topic is not None else "", fp.partition_index)
        for ft in body.forgotten_topics_data or []:
            for index in ft.partitions or []:
                session.partitions.pop((ft.topic_id, index), None)
        if epoch == FINAL_EPOCH:
            self._close(ctx, gid, mid)
        elif not renew_only:
            await self._acquire_into(ctx, body, v, gid, mid, session, out)
        await self.persist_share_state(gid)
        return self._fetch_response(R, out, lock_ms)

    async def _acquire_into(self, ctx: RequestContext, body: Any, v: int, gid: str, mid: str, session: ShareSession,
                            out: dict[tuple[uuid.UUID, int], dict]) -> None:
        max_records = body.max_records if body.max_records > 0 else DEFAULT_MAX_RECORDS
        strict = v >= 2 and body.share_acquire_mode == RECORD_LIMIT_MODE
        budget = body.max_bytes if body.max_bytes > 0 else 2**31 - 1
        deadline = self.clock() + max(body.max_wait_ms, 0) / 1000.0
        committed = self._read_committed(gid)
        while True:
            await self._state_ready()
            got, waiting = 0, []
            for key in list(session.partitions):
                p, code = self._resolve(ctx, *key)
                entry = out.setdefault(key, {})
                if p is None or code:
                    entry["error"] = code
                    continue
                waiting.append(p)
                if got >= max_records or budget <= 0:
                    continue
                sp = self.share_partition(gid, p)
                start = sp.first_available()
                if start >= self.replicas.read_end(p, committed):
                    continue
                read = self.replicas.read(p, start, budget, committed)
                ranges, data = sp.acquire(mid, read.records, read.aborted, max_records - got, strict,
                                          self.share_clock(), self.lock_duration_ms(gid), self.max_in_flight(gid))
                if ranges:
                    entry["acquired"], entry["records"] = ranges, data
                    got += sum(last - first + 1 for first, last, _ in ranges)
                    budget -= len(data)
            remaining = deadline - self.clock()
            if got or remaining <= 0 or not waiting or self.replicas.stopping:
                return
            await self.replicas.wait_for_append(waiting, remaining)

    def _fetch_response(self, R: Any, out: dict[tuple[uuid.UUID, int], dict], lock_ms: int) -> Any:
        TR = R.ShareFetchableTopicResponse
        PD = TR.PartitionData
        LE = PD.fields["current_leader"].data_class
        AR = PD.fields["acquired_records"].data_class
        topics: dict[uuid.UUID, list] = {}
        for (tid, index), e in out.items():
            if not e:
                continue
            ack_code, ack_message = e.get("ack", (0, None))
            p = self._partition_of(tid, index)
            leader, leader_epoch = self._leader(p)
            topics.setdefault(tid, []).append(PD(
                partition_index=index, error_code=e.get("error", 0), error_message=None,
                acknowledge_error_code=ack_code, acknowledge_error_message=ack_message,
                current_leader=LE(leader_id=leader, leader_epoch=leader_epoch),
                records=e.get("records", b""),
                acquired_records=[AR(first_offset=f, last_offset=last, delivery_count=n)
                                  for f, last, n in e.get("acquired", [])]))
        return R(throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=lock_ms,
                 responses=[TR(topic_id=tid, partitions=parts) for tid, parts in topics.items()],
                 node_endpoints=self._endpoints(R, out))

    def _partition_of(self, tid: uuid.UUID, index: int) -> Partition | None:
        topic = self.topics.by_id(tid)
        return None if topic is None else self.replicas.get(topic.name, index)

    def _endpoints(self, R: Any, out: dict[tuple[uuid.UUID, int], dict]) -> list:
        """The leaders of the partitions answered NOT_LEADER_OR_FOLLOWER, so the client fetches there."""
        NE = R.fields["node_endpoints"].data_class
        leaders = set()
        for (tid, index), e in out.items():
            if e.get("error") == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                leaders.add(self._leader(self._partition_of(tid, index))[0])
        nodes = []
        for b in sorted(leaders):
            node = self.cluster.node(b)
            if node is not None:
                nodes.append(NE(node_id=b, host=node.host, port=node.port, rack=getattr(node, "rack", None)))
        return nodes

    # ---------------------------------------------------------------- ShareAcknowledge
    async def share_acknowledge(self, req: Request, ctx: RequestContext) -> Any:
        body, v = req.body, req.api_version
        R = resp(79)
        gid, mid, epoch = body.group_id, body.member_id, body.share_session_epoch

        def top(code: int, message: str | None) -> Any:
            return R(throttle_time_ms=0, error_code=code, error_message=message, acquisition_lock_timeout_ms=0,
                     responses=[], node_endpoints=[])
        refused = self._refusal(gid, mid)
        if refused:
            return top(*refused)
        await self._state_ready()
        if epoch == 0:
            return top(INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a share session.")
        session, code, message = self._session(ctx, gid, mid, epoch, False)
        if session is None:
            return top(code, message)
        if epoch != FINAL_EPOCH:
            session.bump()
        TR = R.ShareAcknowledgeTopicResponse
        PD = TR.PartitionData
        LE = PD.fields["current_leader"].data_class
        topics = []
        for t in body.topics or []:
            parts = []
            for ap in t.partitions or []:
                ack_code, ack_message = self._acknowledge(ctx, gid, mid, t.topic_id, ap.partition_index,
                                                          ap.acknowledgement_batches or [], v >= 2)
                leader, leader_epoch = self._leader(self._partition_of(t.topic_id, ap.partition_index))
                parts.append(PD(partition_index=ap.partition_index, error_code=ack_code, error_message=ack_message,
                                current_leader=LE(leader_id=leader, leader_epoch=leader_epoch)))
            topics.append(TR(topic_id=t.topic_id, partitions=parts))
        if epoch == FINAL_EPOCH:
            self._close(ctx, gid, mid)
        await self.persist_share_state(gid)
        return R(throttle_time_ms=0, error_code=0, error_message=None,
                 acquisition_lock_timeout_ms=self.lock_duration_ms(gid), responses=topics, node_endpoints=[])

    def _background(self, work) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self.shares.writing.add(task)
        task.add_done_callback(self.shares.writing.discard)

    def forget_share_group(self, group_id: str) -> None:
        """A group was deleted: its share partitions and sessions go, and so does its persisted state (its
        tombstones written without waiting), as Kafka deletes a share group's state with the group."""
        for key in [k for k in self.shares.sessions if k[1] == group_id]:
            del self.shares.sessions[key]
        gone = [(sp.topic, sp.index) for sp in self.shares.of_group(group_id)]
        for topic, index in gone:
            self.shares.drop(group_id, topic, index)
        if self.share_state is not None:
            keys = set(self.share_state.partitions_of(group_id))
            keys |= {(t.topic_id, i) for name, i in gone if (t := self.topics.get(name)) is not None}
            if keys:
                state = self.share_state

                async def delete() -> None:
                    for tid, index in sorted(keys):
                        await state.delete(group_id, tid, index)
                self._background(delete())

    # ---------------------------------------------------------------- test controls (tenure/control/registry.py)
    def share_partition_view(self, group_id: str, topic: str, index: int) -> dict | None:
        """One share partition as the test controls show it: its start and end offsets, the members whose share
        sessions fetch it, and every in-flight record (offset, state, delivery count, holder, lock deadline),
        its expired locks released first. None if the group has never fetched from it (nor has its state from
        before a restart)."""
        p, t = self.replicas.get(topic, index), self.topics.get(topic)
        if p is None or t is None:
            return None
        if self.shares.partition(group_id, topic, index) is None and (
                self.share_state is None or self.share_state.read(group_id, t.topic_id, index) is None):
            return None
        sp = self.share_partition(group_id, p)
        fetching = sorted({m for (_, g, m), session in self.shares.sessions.items()
                           if g == group_id and (topic, index) in session.partitions.values()})
        return {"group": group_id, "topic": topic, "partition": index, "start_offset": sp.start,
                "end_offset": sp.end, "fetching": fetching, "records": [vars(r) for r in sp.view()]}

    def expire_share_locks(self, group_id: str) -> int:
        """Expire every acquisition lock of the group now, as if each lock's duration had passed: each record
        held is released (archived at the delivery limit). Returns how many records were held."""
        now, limit, held, acquired = self.share_clock(), self.delivery_limit(group_id), 0, share.ACQUIRED
        for sp in self.shares.of_group(group_id):
            sp.expire(now, limit)                  # the locks that have passed already are not counted
            for r in sp.records.values():
                if r.state == acquired:
                    r.deadline_ms = now
                    held += 1
            p = self.replicas.get(sp.topic, sp.index)
            if sp.expire(now, limit) and p is not None:
                p.wake()
        if held and self.share_state is not None:     # archived at the limit: written without waiting
            self._background(self.persist_share_state(group_id))
        return held

    # ---------------------------------------------------------------- the share group offset admin APIs
    def _share_partitions_of(self, group_id: str) -> list[tuple[str, int]]:
        """(topic name, partition) of every share partition of the group: in memory, or with persisted state."""
        out = {(sp.topic, sp.index) for sp in self.shares.of_group(group_id)}
        if self.share_state is not None:
            for tid, index in self.share_state.partitions_of(group_id):
                topic = self.topics.by_id(tid)
                if topic is not None:
                    out.add((topic.name, index))
        return sorted(out)

    def _admin_group_error(self, group_id: str, need_empty: bool,
                           ctx: RequestContext | None = None) -> tuple[int, str | None]:
        """A share group offset API's group: asked of its coordinator - the leader of the group's
        __consumer_offsets partition, as Kafka's group coordinator answers them - else NOT_COORDINATOR (16); a
        share group (else GROUP_ID_NOT_FOUND, 69), empty when it must be (else NON_EMPTY_GROUP, 68)."""
        offsets = self.topics.get(OFFSETS_TOPIC)
        if ctx is not None and ctx.broker_id is not None and offsets is not None and self.cluster.leader_of(
                OFFSETS_TOPIC, partition_for(group_id or "", len(offsets.partitions))) != ctx.broker_id:
            return ErrorCode.NOT_COORDINATOR, None
        g = self.share_group(group_id)
        if g is None or g[0] != "share":
            return ErrorCode.GROUP_ID_NOT_FOUND, (f"Group {group_id} not found." if g is None else
                                                  f"Group {group_id} is not a share group.")
        if need_empty and g[1]:
            return ErrorCode.NON_EMPTY_GROUP, f"Share group {group_id} has members: it must be empty."
        return 0, None

    def _share_lag(self, sp: SharePartition, p: Partition, group_id: str) -> int:
        """The records from the start up to the end of what can be read that are not yet acknowledged or
        archived (KIP-1226's lag)."""
        finished = (share.ACKNOWLEDGED, share.ARCHIVED)
        done = sum(1 for o, r in sp.records.items() if r.state in finished)
        return max(self.replicas.read_end(p, self._read_committed(group_id)) - sp.start - done, 0)

    async def describe_share_group_offsets(self, req: Request, ctx: RequestContext) -> Any:
        """DescribeShareGroupOffsets (90): each share partition's start offset (and, v1, its lag); a partition
        the group has no state for -1; a group unknown or of another kind GROUP_ID_NOT_FOUND."""
        await self._state_ready()
        R = resp(90)
        G = R.DescribeShareGroupOffsetsResponseGroup
        T = G.DescribeShareGroupOffsetsResponseTopic
        P = T.DescribeShareGroupOffsetsResponsePartition
        groups = []
        for q in req.body.groups or []:
            if not ctx.allows(DESCRIBE, GROUP, q.group_id or ""):
                groups.append(G(group_id=q.group_id, topics=[], error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                error_message=None))
                continue
            code, message = self._admin_group_error(q.group_id, False, ctx)
            if code:
                groups.append(G(group_id=q.group_id, topics=[], error_code=code, error_message=message))
                continue
            if q.topics is None:              # every share partition of the group: those it may describe
                wanted: dict[str, list[int]] = {}
                for name, index in self._share_partitions_of(q.group_id):
                    if ctx.allows(DESCRIBE, TOPIC, name):
                        wanted.setdefault(name, []).append(index)
            else:
                wanted = {t.topic_name: list(t.partitions or []) for t in q.topics}
            topics = []
            for name, indexes in wanted.items():
                topic = self.topics.get(name)
                parts = []
                if not ctx.allows(DESCRIBE, TOPIC, name):
                    parts = [P(partition_index=i, start_offset=-1, leader_epoch=-1, lag=-1,
                               error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None) for i in indexes]
                    indexes = []
                for index in indexes:
                    p = self.replicas.get(name, index) if topic is not None else None
                    if p is None:
                        parts.append(P(partition_index=index, start_offset=-1, leader_epoch=-1, lag=-1,
                                       error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=None))
                        continue
                    view = self.share_partition_view(q.group_id, name, index)
                    sp = self.shares.partition(q.group_id, name, index)
                    start, lag = (-1, -1) if view is None or sp is None else (sp.start, self._share_lag(sp, p, q.group_id))
                    parts.append(P(partition_index=index, start_offset=start, leader_epoch=p.leader_epoch, lag=lag,
                                   error_code=0, error_message=None))
                topics.append(T(topic_name=name, topic_id=topic.topic_id if topic is not None else uuid.UUID(int=0),
                                partitions=parts))
            groups.append(G(group_id=q.group_id, topics=topics, error_code=0, error_message=None))
        return R(throttle_time_ms=0, groups=groups)

    async def alter_share_group_offsets(self, req: Request, ctx: RequestContext) -> Any:
        """AlterShareGroupOffsets (91), on an empty share group: each named share partition starts again at
        the given offset (nothing in flight), persisted before the answer."""
        await self._state_ready()
        R = resp(91)
        T = R.AlterShareGroupOffsetsResponseTopic
        P = T.AlterShareGroupOffsetsResponsePartition
        gid = req.body.group_id
        code, message = self._admin_group_error(gid, True, ctx)
        if code:
            return R(throttle_time_ms=0, error_code=code, error_message=message, responses=[])
        out = []
        for t in req.body.topics or []:
            topic = self.topics.get(t.topic_name)
            readable = ctx.allows(READ, TOPIC, t.topic_name)
            parts = []
            for q in t.partitions or []:
                if not readable:
                    parts.append(P(partition_index=q.partition_index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                   error_message=None))
                    continue
                p = self.replicas.get(t.topic_name, q.partition_index) if topic is not None else None
                if p is None:
                    parts.append(P(partition_index=q.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   error_message=None))
                    continue
                if q.start_offset < 0:
                    parts.append(P(partition_index=q.partition_index, error_code=ErrorCode.INVALID_REQUEST,
                                   error_message=f"Invalid start offset {q.start_offset}."))
                    continue
                self.shares.drop(gid, p.topic, p.index)
                sp = self.shares.open(gid, p.topic, p.index, max(q.start_offset, p.log_start_offset))
                if self.share_state is not None and topic is not None:
                    await self._initialize_share_state(gid, topic.topic_id, sp)
                parts.append(P(partition_index=q.partition_index, error_code=0, error_message=None))
            out.append(T(topic_name=t.topic_name, topic_id=topic.topic_id if topic is not None else uuid.UUID(int=0),
                         partitions=parts))
        await self.persist_share_state(gid)
        return R(throttle_time_ms=0, error_code=0, error_message=None, responses=out)

    async def _initialize_share_state(self, gid: str, topic_id: uuid.UUID, sp: SharePartition) -> None:
        """A share partition started again at an offset: its state replaced, as Kafka's AlterShareGroupOffsets
        initializes it (InitializeShareGroupState: a snapshot of the start offset, nothing in flight, a new state
        epoch), not merged over what was recorded."""
        assert self.share_state is not None
        if self.share_state.refusal(gid, topic_id, sp.index, None):
            return                               # not loaded here: the write after the answer carries the start
        _, st = self.share_state.summary(gid, topic_id, sp.index, -1)
        code = await self.share_state.initialize(gid, topic_id, sp.index, 0 if st is None else st.state_epoch + 1,
                                                 sp.start)
        if code == 0:
            sp.written()

    async def delete_share_group_offsets(self, req: Request, ctx: RequestContext) -> Any:
        """DeleteShareGroupOffsets (92), on an empty share group: the named topics' share partitions are
        forgotten (their state deleted; the next fetch starts at share.auto.offset.reset)."""
        await self._state_ready()
        R = resp(92)
        T = R.DeleteShareGroupOffsetsResponseTopic
        gid = req.body.group_id
        code, message = self._admin_group_error(gid, True, ctx)
        if code:
            return R(throttle_time_ms=0, error_code=code, error_message=message, responses=[])
        out = []
        for t in req.body.topics or []:
            topic = self.topics.get(t.topic_name)
            if not ctx.allows(READ, TOPIC, t.topic_name):
                out.append(T(topic_name=t.topic_name, topic_id=uuid.UUID(int=0),
                             error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None))
                continue
            if topic is None:
                out.append(T(topic_name=t.topic_name, topic_id=uuid.UUID(int=0),
                             error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=None))
                continue
            for name, index in self._share_partitions_of(gid):
                if name == t.topic_name:
                    self.shares.drop(gid, name, index)
                    if self.share_state is not None:
                        await self.share_state.delete(gid, topic.topic_id, index)
            out.append(T(topic_name=t.topic_name, topic_id=topic.topic_id, error_code=0, error_message=None))
        return R(throttle_time_ms=0, error_code=0, error_message=None, responses=out)

    # ---------------------------------------------------------------- the share coordinator's APIs (83-87)
    def _share_state_handlers(self) -> dict:
        """InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState and
        ReadShareGroupStateSummary: what a broker asks the share coordinator (Kafka's persister), answered by
        the same share coordinator this broker's own share partitions persist through - its shards, its one
        writer, replay as its one mutator. CLUSTER_ACTION is checked by the access hook (security/access.py)."""
        return {83: self.initialize_share_group_state, 84: self.read_share_group_state,
                85: self.write_share_group_state, 86: self.delete_share_group_state,
                87: self.read_share_group_state_summary}

    def _state_key_error(self, ctx: RequestContext, gid: str, topic_id: uuid.UUID, index: int) -> tuple[int, str | None]:
        """A share partition key's error before the share coordinator looks at its state: NOT_COORDINATOR (16)
        off the leader of its __share_group_state partition, COORDINATOR_LOAD_IN_PROGRESS (14) while it loads,
        INVALID_REQUEST (42) for a negative partition, UNKNOWN_TOPIC_OR_PARTITION (3) for a topic-partition the
        cluster does not have."""
        assert self.share_state is not None
        code = self.share_state.refusal(gid, topic_id, index, ctx.broker_id)
        if code:
            return code, None
        if index < 0:
            return ErrorCode.INVALID_REQUEST, "The partition id cannot be negative."
        topic = self.topics.by_id(topic_id)
        if topic is None or topic.internal or index >= len(topic.partitions):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        return 0, None

    async def _each_state_key(self, req: Request, ctx: RequestContext, answer) -> Any:
        """The answer to a share coordinator API: for each (topic, partition) of the request, its key's error
        or `answer(group, topic id, partition data)` -> (error code, the partition result's other fields).
        An empty group id answers INVALID_GROUP_ID for every partition, as Kafka's share coordinator does."""
        R = resp(req.api_key)
        T = R.fields["results"].data_class
        P = T.fields["partitions"].data_class
        gid = req.body.group_id
        if self.share_state is not None:
            await self._state_ready()
        results = []
        for t in req.body.topics or []:
            parts = []
            for pd in t.partitions or []:
                code: int
                message: str | None
                extra: dict[str, Any]
                if self.share_state is None:
                    code, message, extra = ErrorCode.COORDINATOR_NOT_AVAILABLE, "No share coordinator.", {}
                elif not gid:
                    code, message, extra = ErrorCode.INVALID_GROUP_ID, "Group id must be specified and non-empty.", {}
                else:
                    code, message = self._state_key_error(ctx, gid, t.topic_id, pd.partition)
                    extra = {}
                    if not code:
                        code, extra = await answer(gid, t.topic_id, pd)
                fields = {k: v for k, v in _STATE_DEFAULTS.items() if k in P.fields}
                fields.update(extra)
                parts.append(P(partition=pd.partition, error_code=code, error_message=message, **fields))
            results.append(T(topic_id=t.topic_id, partitions=parts))
        return R(results=results)

    async def initialize_share_group_state(self, req: Request, ctx: RequestContext) -> Any:
        """InitializeShareGroupState (83): the share partition's state epoch and start offset, nothing in
        flight (FENCED_STATE_EPOCH, 124, for an older state epoch)."""
        state = self.share_state

        async def answer(gid: str, tid: uuid.UUID, pd: Any) -> tuple[int, dict]:
            assert state is not None
            return await state.initialize(gid, tid, pd.partition, pd.state_epoch, pd.start_offset), {}
        return await self._each_state_key(req, ctx, answer)

    async def read_share_group_state(self, req: Request, ctx: RequestContext) -> Any:
        """ReadShareGroupState (84): the state epoch, start offset and state batches; start offset -1 and no
        batches for a share partition without state (FENCED_LEADER_EPOCH, 74, for an older leader epoch)."""
        state = self.share_state
        B = resp(84).fields["results"].data_class.fields["partitions"].data_class.fields["state_batches"].data_class

        async def answer(gid: str, tid: uuid.UUID, pd: Any) -> tuple[int, dict]:
            assert state is not None
            code, st = await state.read_state(gid, tid, pd.partition, pd.leader_epoch)
            if code or st is None:
                return code, {}
            return 0, {"state_epoch": st.state_epoch, "start_offset": st.start_offset, "state_batches": [
                B(first_offset=f, last_offset=last, delivery_state=ds, delivery_count=n)
                for f, last, ds, n in st.batches()]}
        return await self._each_state_key(req, ctx, answer)

    async def write_share_group_state(self, req: Request, ctx: RequestContext) -> Any:
        """WriteShareGroupState (85): the start offset and state batches written as a snapshot or an update
        (FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH for older epochs)."""
        state = self.share_state

        async def answer(gid: str, tid: uuid.UUID, pd: Any) -> tuple[int, dict]:
            assert state is not None
            batches = tuple((b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                            for b in pd.state_batches or [])
            return await state.write_state(gid, tid, pd.partition, pd.state_epoch, pd.leader_epoch,
                                           pd.start_offset, batches), {}
        return await self._each_state_key(req, ctx, answer)

    async def delete_share_group_state(self, req: Request, ctx: RequestContext) -> Any:
        """DeleteShareGroupState (86): the share partition's state tombstoned."""
        state = self.share_state

        async def answer(gid: str, tid: uuid.UUID, pd: Any) -> tuple[int, dict]:
            assert state is not None
            ok = await state.delete(gid, tid, pd.partition)
            return (0 if ok else ErrorCode.COORDINATOR_NOT_AVAILABLE), {}
        return await self._each_state_key(req, ctx, answer)

    async def read_share_group_state_summary(self, req: Request, ctx: RequestContext) -> Any:
        """ReadShareGroupStateSummary (87): the state epoch, leader epoch, start offset and (v1) how many
        records are acknowledged or archived, written nothing (FENCED_LEADER_EPOCH for an older leader
        epoch); start offset -1 for a share partition without state."""
        state = self.share_state

        async def answer(gid: str, tid: uuid.UUID, pd: Any) -> tuple[int, dict]:
            assert state is not None
            code, st = state.summary(gid, tid, pd.partition, pd.leader_epoch)
            if code or st is None:
                return code, {}
            done = sum(1 for ds, _ in st.records.values() if ds in (ACKNOWLEDGED_STATE, ARCHIVED_STATE))
            return 0, {"state_epoch": st.state_epoch, "leader_epoch": st.leader_epoch,
                       "start_offset": st.start_offset, "delivery_complete_count": done}
        return await self._each_state_key(req, ctx, answer)


# a share coordinator answer's partition fields when it has no state to give (Kafka: start offset -1)
_STATE_DEFAULTS: dict[str, Any] = {"state_epoch": 0, "leader_epoch": -1, "start_offset": -1, "state_batches": [],
                                   "delivery_complete_count": -1}
ACKNOWLEDGED_STATE, ARCHIVED_STATE = 2, 4        # the delivery states a state batch persists as done
