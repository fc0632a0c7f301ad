"""The group coordinator's runtime: the coordinator runtime (runtime.py) over `__consumer_offsets`, whose
shards are GroupShards, with the queries and operations the controls and the server ask of groups."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from kafka.protocol.consumer.group import OffsetCommitResponse

from tenure.deferred import deferred
from tenure.gcpause import gc_paused
from tenure.protocol import records as rec
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request
from tenure.protocol.error_responses import error_response, offset_commit_error
from tenure.protocol.errors import AdminError, ErrorCode
from tenure.protocol.records import OffsetCommitRecord, TransactionEnd

from . import routing
from .kinds import Group
from .offsets import CommitPlan, commit_plan, txn_commit_plan
from .result import GroupSnapshot, RequestContext, Result
from .runtime import CoordinatorRuntime
from .shard import GroupShard
from .writer import PreparedBatch, ahead_key

if TYPE_CHECKING:
    from tenure.inspection import GroupInfo
    from tenure.protocol.txn_records import TxnMarker

log = logging.getLogger("tenure.coordinator")
# the consumer group kind (coordinator/kinds.py LazyKind): imported by a heavy KIP-848 join's first guess, if no
# shard made the kind before
consumer_heartbeat = deferred("tenure.coordinator.consumer.heartbeat")

T = TypeVar("T")
OffLoop = Callable[..., Awaitable[Any]]

OFFSET_COMMIT, TXN_OFFSET_COMMIT, CONSUMER_HEARTBEAT = 8, 28, 68
# a KIP-848 join (epoch 0) subscribing at least this many names has its member record encoded off the loop first
HEAVY_NAMES = 1000
# an OffsetCommit naming more partitions than this, or whose batch may be larger than HEAVY_COMMIT_BYTES, has
# its records made and encoded off the loop before its handler runs (GroupRuntime._commit_heavy)
HEAVY_COMMIT_PARTITIONS = 1000
HEAVY_COMMIT_BYTES = 64 * 1024


def commit_bound(body, limit: int) -> bool:
    """Whether an OffsetCommit's batch may be larger than `limit` bytes: an upper bound of each record (the
    key's and value's fixed fields, a record's varints, 4 bytes a character of the strings) summed, the
    walk stopping at HEAVY_COMMIT_PARTITIONS partitions (more is heavy whatever their size)."""
    g = len(body.group_id or "")
    total, n = 61, 0                                   # a batch's header
    for t in body.topics or ():
        tl = len(t.name or "")
        for p in t.partitions or ():
            n += 1
            if n > HEAVY_COMMIT_PARTITIONS:
                return True
            total += 80 + 4 * (g + tl + len(p.committed_metadata or ""))
    return total > limit


async def _default_off_loop(fn: Callable[..., T], *args) -> T:
    """A coordinator run without the server's worker (tests): the loop's default executor, no collection."""
    def run() -> T:
        with gc_paused():
            return fn(*args)
    return await asyncio.get_running_loop().run_in_executor(None, run)


class GroupRuntime(CoordinatorRuntime[GroupShard]):
    direct_apis = routing.ONE_GROUP_APIS
    def __init__(self, *args: Any, expectations: dict[str, int] | None = None,
                 on_group_deleted: Callable[[str], None] | None = None, off_loop: OffLoop | None = None,
                 **kwargs: Any) -> None:
        """`expectations`: the table of `expect_group`, the same dict the shards are made with (their
        factory's), so that a shard made by a later move reads it too. `on_group_deleted(group_id)`: told after a
        group is deleted (DeleteGroups), so what lives outside the coordinator for it goes too (a share group's
        share partitions: the broker's)."""
        self.expectations: dict[str, int] = expectations if expectations is not None else {}
        super().__init__(*args, **kwargs)
        self.on_group_deleted = on_group_deleted
        # runs a pure function off the loop and awaits it (the server's worker thread: tenure/server/offload.py)
        self.off_loop: OffLoop = off_loop if off_loop is not None else _default_off_loop

    # ------------------------------------------------------------------ requests
    def _special(self, req: Request, ctx: RequestContext) -> Awaitable[Any] | None:
        """A large commit (`_commit_heavy`) or a KIP-848 join subscribing many names (`_join_heavy`); else None."""
        api_key = req.api_key
        if api_key in (OFFSET_COMMIT, TXN_OFFSET_COMMIT) and commit_bound(req.body, min(HEAVY_COMMIT_BYTES,
                                                                   self.writer.max_batch_bytes() // 2)):
            return self._commit_heavy(req, ctx)
        if api_key == CONSUMER_HEARTBEAT and req.body.member_epoch == 0 and \
                len(req.body.subscribed_topic_names or ()) >= HEAVY_NAMES:
            return self._join_heavy(req, ctx)
        return None

    async def _join_heavy(self, req: Request, ctx: RequestContext):
        """A KIP-848 join subscribing many names: the member metadata record it is expected to write
        (`ConsumerGroups.expected_member_record`) is made and encoded on the worker thread first, then the
        heartbeat is handled as any; the writer takes that encoding for a record equal to it (else encodes as
        always). The loop is spared the record's encoding, the most of such a join."""
        expected = await self.off_loop(self._encode_expected, req.body, ctx.client_id, ctx.client_host)
        if expected is None:
            return await self._dispatch(req, ctx)
        key = ahead_key(expected[0])
        self.writer.ahead[key] = expected
        try:
            return await self._dispatch(req, ctx)
        finally:
            if self.writer.ahead.get(key) is expected:
                del self.writer.ahead[key]

    def _encode_expected(self, body, client_id: str, client_host: str) -> tuple[Any, bytes, bytes | None] | None:
        """On the worker thread: the expected member record and its key and value (None: no guess)."""
        record = consumer_heartbeat.ConsumerGroups.expected_member_record(body, client_id, client_host)
        if record is None:
            return None
        key, value = self.codec.encode(record)
        return record, key, value

    async def _commit_heavy(self, req: Request, ctx: RequestContext):
        """A large OffsetCommit. Its plan (`offsets.commit_plan`: its records and its answer, a pure function of
        the request and the time) is made and its records encoded into their one batch on the worker thread
        while the loop serves the others; then, on the loop and in one step as any input, the shard's handler
        decides with that plan on the state as it is now (at the time the records carry) and the Result is
        applied with that batch. Nothing of the
        commit is in the shard or the log before that step, so the partition's other writes meanwhile come
        before it in the log as in the shard. Kafka's coordinator writes a commit as one atomic batch and its
        log refuses a batch over the topic's `max.message.bytes` (RecordTooLargeException), answered
        UNKNOWN_SERVER_ERROR for every partition and the write reverted: a batch over it is refused here
        the same way, before anything is replayed."""
        body = req.body
        part = self.partition_of(body.group_id)
        if self.failed is not None:
            raise self.failed
        if self._refusal(part, ctx.broker_id):
            return await self._dispatch(req, ctx)
        if log.isEnabledFor(logging.DEBUG):
            self._log_request(req, ctx.client_host)
        now = self.clock_ms()
        max_meta = self.shards[part].config.offset_metadata_max_bytes
        max_bytes = self.writer.max_batch_bytes()
        plan, prepared, refusal = await self.off_loop(self._prepare_commit, req.api_key, part, body,
                                                      ctx.api_version, now, max_meta, max_bytes)
        loop = asyncio.get_running_loop()
        token = next(self._tokens)
        fut = loop.create_future()
        self._waiting[token] = fut
        try:
            if self.failed is not None:
                raise self.failed
            code = self._refusal(part, ctx.broker_id)     # moved or unloaded meanwhile
            if code:
                self._release([(token, error_response(req, code))])
            else:
                shard = self.shards[part]
                res = shard.decide_commit(req.api_key, ctx.for_input(token, now), body, plan)
                if refusal is not None and res.records and prepared.matches(res.records):
                    log.warning("%s of group %s: its batch of %d records is %d bytes, over %s's "
                                "max.message.bytes (%d): refused (UNKNOWN_SERVER_ERROR), nothing written",
                                req.name, body.group_id, len(res.records), len(prepared.batch), self.writer.topic_name,
                                max_bytes)
                    self._release([(token, refusal)])
                else:
                    self.apply(shard.done(res), prepared, part)
            return await fut
        finally:
            self._waiting.pop(token, None)

    def _prepare_commit(self, api_key: int, part: int, body, version: int, now: int, max_meta: int,
                        max_bytes: int) -> tuple[CommitPlan, PreparedBatch, Any]:
        """On the worker thread: the commit's plan (its records and answer), its records' batch (a
        TxnOffsetCommit's: its producer's transactional batch), and the answer refusing it if that batch is
        over `max_bytes` (else None). Pure: reads only the request."""
        if api_key == TXN_OFFSET_COMMIT:
            plan = txn_commit_plan(body, version, now, max_meta)
            producer: tuple[int, int] | None = (body.producer_id, body.producer_epoch)
        else:
            plan, producer = commit_plan(body, version, now, max_meta), None
        prepared = self.writer.prepare(part, plan.records, now, producer)
        refusal = offset_commit_error(body.topics, ErrorCode.UNKNOWN_SERVER_ERROR,
                                      SUPPORTED[TXN_OFFSET_COMMIT].response if producer else OffsetCommitResponse) \
            if len(prepared.batch) > max_bytes else None
        return plan, prepared, refusal

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

    def expect_group(self, group_id: str, members: int | None) -> None:
        """A test says group `group_id` starts with `members` members (None: forget it). While the group's
        first rebalance waits out its initial delay, it ends as soon as that many members have joined (a
        classic group); a new consumer group holds its target assignment until that many have joined and then
        computes it once, for all of them (coordinator/consumer/expectation.py); with fewer, the initial delay
        ends the wait, and the log says so. It is a test's hint, not group state: never written to the log,
        forgotten at a restart."""
        if members is None:
            self.expectations.pop(group_id, None)
            return
        if isinstance(members, bool) or not isinstance(members, int) or members < 1:
            raise ValueError(f"members must be a positive integer, not {members!r}")
        self.expectations[group_id] = members

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
        """A Result's static-member events and rebalances: counted and logged; its deleted groups told; a group
        that rebalanced and is Stable again (or Empty, or gone) says so, with how long that took on the
        coordinator's clock."""
        if not (result.events or result.notes or result.rebalances):
            return                           # changed nothing (a heartbeat): nothing to count, log or close
        if self.on_group_deleted is not None:
            for e in result.events:
                if isinstance(e, GroupSnapshot) and e.group is None and self.group(e.group_id) is None:
                    self.on_group_deleted(e.group_id)
        for r in result.records:
            if isinstance(r, rec.StaticMemberEventRecord) and not r.tombstone:
                self.metrics.static_event(r.group_id, r.cause)
                log.info("group %s: static member %s %s (%s, generation %d, %s)",
                         r.group_id, r.group_instance_id, r.cause, _members_text(r.old_member_id, r.new_member_id),
                         r.generation, _client_text(r.client_id, r.client_host),
                         extra={"event": "static_member", "group": r.group_id, "instance_id": r.group_instance_id,
                                "cause": r.cause, "old_member_id": r.old_member_id,
                                "new_member_id": r.new_member_id, "generation": r.generation,
                                "client_id": r.client_id, "client_host": r.client_host})
        for gid, text in result.notes:
            log.info("group %s: %s", gid, text, extra={"event": "note", "group": gid})
        for gid, cause in result.rebalances:
            self.metrics.rebalance(gid, cause)
            info = self._live_group(gid)
            # the generation the rebalance leaves: a rebalance that already ended in this input (a classic group
            # no longer preparing one), or a consumer group's (whose group epoch a rebalance bumps at once), is
            # one past it
            if info is None:
                generation, members = -1, 0
            else:
                bumped = info.state != "PreparingRebalance"
                generation, members = max(info.generation - 1, 0) if bumped else info.generation, len(info.members)
            self._rebalancing().setdefault(gid, (self.clock_ms(), generation))
            log.info("group %s: rebalance started (cause %s; from generation %d, %d member(s))",
                     gid, cause, generation, members,
                     extra={"event": "rebalance", "group": gid, "cause": cause, "generation": generation,
                            "members": members})
        open_ = self._rebalancing()
        if open_:
            for gid in _groups_of(result) & open_.keys():
                info = self._live_group(gid)
                if info is not None and info.state not in ("Stable", "Empty"):
                    continue
                started, before = open_.pop(gid)
                took = self.clock_ms() - started
                state = "gone" if info is None else info.state
                generation = -1 if info is None else info.generation
                what = (("Stable again" if before > 0 else "Stable") if state == "Stable"
                        else f"{state} after its rebalance")
                log.info("group %s: %s (generation %d, took %d ms)", gid, what, generation, took,
                         extra={"event": "rebalance_done", "group": gid, "state": state, "generation": generation,
                                "took_ms": took})

    def _live_group(self, group_id: str) -> Group | None:
        """The shard's own value of one group, for the rebalance lines of `_observe` to read its state, generation
        and member count: not a copy, nor the read model `group_info` builds (which decodes every member's
        assignment), and never changed here."""
        shard = self.shards.get(self.partition_of(group_id))
        return None if shard is None else shard.groups.get(group_id)

    def _rebalancing(self) -> dict[str, tuple[int, int]]:
        """Group id -> (the coordinator clock's ms, the generation) when its unfinished rebalance started: what
        the log line of its end says it took (made on first use)."""
        return self.__dict__.setdefault("_rebalance_started", {})


def _groups_of(result: Result) -> set[str]:
    """The groups a Result changed (each change is a snapshot or a record of its group)."""
    out = set()
    for e in result.events:
        gid = getattr(e, "group_id", None)
        if isinstance(gid, str):
            out.add(gid)
    return out


def _members_text(old: str | None, new: str | None) -> str:
    if old is not None and new is not None:
        return f"member {old} -> {new}"
    if new is not None:
        return f"member {new}"
    return f"member {old} removed" if old is not None else "no member"


def _client_text(client_id: str | None, client_host: str | None) -> str:
    return f"client {client_id or '(none)'} at {client_host or 'an unknown host'}"
