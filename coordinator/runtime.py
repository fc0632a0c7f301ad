"""The coordinator runtime: one coordinator shard per `__consumer_offsets` partition, driven on the event loop.

A shard owns the groups and offsets of one offsets partition (`shards[p]`, loaded from partition p's
log). A group request goes to the shard of its group (`partition_for`, coordinator/routing.py); a
request naming several groups is split by shard and the answers merged in request order; ListGroups
asks every shard. For each request: build the context (token, version, client, now), run the shard,
then apply its Result in the one safe order - append the records to __consumer_offsets through the
`CoordinatorWriter` (the only code that writes there, through the broker's `PartitionWriter`), then
release the responses (to this request or to parked ones) once durable, then arm/cancel the keyed timers
with loop.call_later. A parked request is just a future waiting for its token.
"""
from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from tenure.coordinator import (
    AdminError,
    GroupShard,
    RequestContext,
    Result,
    TimerWheel,
)
from tenure.counters import Metrics
from tenure.protocol import records as rec
from tenure.protocol.codec import Request
from tenure.protocol.error_responses import error_response
from tenure.protocol.errors import ErrorCode
from tenure.protocol.markers import TxnMarker
from tenure.protocol.records import OffsetCommitRecord, TransactionEnd
from tenure.storage.durability import Durability

from . import routing
from .clock import CoordinatorClock
from .inspection import GroupInfo
from .kinds import Group
from .loader import LoadReport, finish_report, replay_partition
from .routing import partition_for
from .timers import KEY_TYPES, Timer
from .transactions import TransactionCoordinator
from .writer import CoordinatorWriter, InternalTopic, LogAppender, PartitionWriter

log = logging.getLogger("tenure.coordinator")

T = TypeVar("T")

Shard = GroupShard


def _routing_key(x) -> str:
    """What picks the partition (so the shard) of a request body or a timer key: its group id, or for the
    transaction coordinator its transactional id ("" when it names none: partition 0)."""
    gid = getattr(x, "group_id", None)
    return gid if gid is not None else getattr(x, "transactional_id", None) or ""


class CoordinatorRuntime:
    """`new_shard(partition)` makes the (empty) shard of one offsets partition; the runtime holds one per
    partition of `offsets_topic` and writes through its `CoordinatorWriter`, which appends through
    `partition_writer` (the broker's replica manager; without one, straight to the topic's logs, calling
    `notify_append(topic, partition)` after each append).

    The transaction coordinator runs on this runtime too, over `__transaction_state` (one partition, one
    shard: `codec` is its records' codec, protocol/txn_records.py): its Results carry `markers`, written by
    `write_markers` (the broker's, into the data partitions; a marker for __consumer_offsets goes through
    the group runtime's `write_marker`), then its shard's `markers_written` completes the transactions.
    Made with `host` (the group coordinator's runtime) and its `timer_keys`, it has no clock or timer wheel
    of its own: its timers go into the host's one wheel (fired in one deadline order with the group
    timers, handed back to it by key type) and it reads the host's clock, so one `advance_clock` moves
    both."""

    def __init__(self, new_shard: Callable[[int], Shard], offsets_topic: InternalTopic,
                 notify_append: Callable[[str, int], None] | None = None,
                 clock: CoordinatorClock | None = None,
                 durability: Durability | None = None,
                 on_fatal: Callable[[BaseException], None] | None = None,
                 metrics: Metrics | None = None, codec=rec,
                 write_markers: Callable[[list[TxnMarker], int], list] | None = None,
                 timer_keys: tuple[type, ...] = tuple(KEY_TYPES.values()),
                 hosted_on: Callable[[int], int] | None = None,
                 partition_writer: PartitionWriter | None = None) -> None:
        self.codec = codec
        # the broker coordinating each partition (the leader of the offsets partition, broker/cluster.py):
        # a request that came in on another broker is answered NOT_COORDINATOR; None: one broker
        self.hosted_on = hosted_on
        self.loading: set[int] = set()       # partitions being loaded after a move: COORDINATOR_LOAD_IN_PROGRESS
        self._moves = asyncio.Lock()         # one move (unload, load) at a time
        self._markers_while_loading: dict[int, list] = {}
        self.write_markers = write_markers
        self.offsets_topic = offsets_topic
        self.partitions = len(offsets_topic.partitions)
        self._new_shard = new_shard
        self.shards: dict[int, Shard] = {p: new_shard(p) for p in range(self.partitions)}
        # the clock and timer wheel shared with the server's other coordinator runtimes (coordinator/clock.py):
        # this runtime's timers are those of `timer_keys`, fired here
        self._own_clock = clock is None          # made here: closed with this runtime
        self.clock = clock if clock is not None else CoordinatorClock()
        self._timer_keys = timer_keys
        self.clock.register(timer_keys, self._fire)
        self.metrics = metrics or Metrics()
        self.writer = CoordinatorWriter(
            offsets_topic, self.clock_ms,
            partition_writer if partition_writer is not None else LogAppender(offsets_topic, durability, notify_append),
            on_fatal=on_fatal, codec=codec)
        self._tokens = itertools.count(1)
        self._waiting: dict[int, asyncio.Future] = {}
        self._syncing: set[asyncio.Task] = set()

    @property
    def failed(self) -> BaseException | None:
        return self.writer.failed

    def clock_ms(self) -> int:
        """The coordinators' time: the wall clock plus whatever `advance_clock` added."""
        return self.clock.now_ms()

    @property
    def timers(self) -> TimerWheel:
        """The one timer wheel (every coordinator runtime's timers)."""
        return self.clock.timers

    # ------------------------------------------------------------------ routing and queries
    def partition_of(self, group_id: str) -> int:
        """The offsets partition (and so the shard) of a group: Kafka's `partition_for`."""
        return partition_for(group_id, self.partitions)

    def _partition_of_key(self, key: Timer) -> int:
        return partition_for(_routing_key(key), self.partitions)

    def shard_for(self, group_id: str) -> Shard:
        return self.shards[self.partition_of(group_id)]

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

    # ------------------------------------------------------------------ start-up
    def load(self) -> LoadReport:
        """Load every offsets partition into its shard (before serving): see `load_partition`."""
        report = LoadReport()
        t0 = time.monotonic()
        for part in range(self.partitions):
            replay_partition(self.offsets_topic.partitions[part], part, self.shards[part], self.codec, report)
        return finish_report(report, self.writer.topic_name, self.shards.values(), t0)

    def load_partition(self, part: int) -> LoadReport:
        """Load partition `part` into its shard through the shard's `replay` (coordinator/loader.py)."""
        report = LoadReport()
        t0 = time.monotonic()
        replay_partition(self.offsets_topic.partitions[part], part, self.shards[part], self.codec, report)
        return finish_report(report, self.writer.topic_name, [self.shards[part]], t0)

    def start_timers(self) -> None:
        """After `load`, on the running loop: restart every loaded member's session timer."""
        now = self.clock_ms()
        for shard in self.shards.values():
            self.apply(shard.loaded(now))

    # ------------------------------------------------------------------ requests
    async def handle(self, req: Request, ctx: RequestContext):
        """Answer one request; `ctx.broker_id` is the broker it came in on (None: no hosting check). The
        shards see a copy of `ctx` with this runtime's token for it and the coordinator's clock now."""
        loop = asyncio.get_running_loop()
        token = next(self._tokens)
        fut = loop.create_future()
        self._waiting[token] = fut
        try:
            ctx = dataclasses.replace(ctx, token=token, now_ms=self.clock_ms())
            if log.isEnabledFor(logging.DEBUG):
                self._log_request(req, ctx.client_host)
            self._route(req, ctx)
            return await fut
        finally:
            self._waiting.pop(token, None)

    def _route(self, req: Request, ctx: RequestContext) -> None:
        """Run the request on the shard(s) of the groups it names and apply their Results. A group whose
        partition is not loaded here (see `unload`) or is coordinated by another broker than the request's is
        answered NOT_COORDINATOR (16); one whose partition is being loaded COORDINATOR_LOAD_IN_PROGRESS (14)."""
        if self.failed is not None:
            raise self.failed
        api_key, body = req.api_key, req.body
        if api_key == routing.LIST_GROUPS:             # the groups of every loaded shard
            calls = [(p, req) for p in sorted(self.shards) if not self._refusal(p, ctx.broker_id)]
            if not calls:
                self.apply(Result(responses=[(ctx.token, error_response(req, ErrorCode.NONE))]))
                return
            self._fan_out(ctx, calls, routing.merge_lists)
        elif routing.names_several_groups(api_key, ctx.api_version):
            pieces, order = routing.split(api_key, body, self.partitions)
            if len(pieces) == 1:
                self._run(pieces[0][0], req, ctx)
                return
            subs = [(p, dataclasses.replace(req, body=sub)) for p, sub in pieces]
            self._fan_out(ctx, subs, lambda answers: routing.merge(api_key, order, [
                (p, sub, a) for (p, sub), a in zip(pieces, answers, strict=True)]))
        else:
            self._run(partition_for(_routing_key(body), self.partitions), req, ctx)

    def _refusal(self, part: int, broker: int | None) -> int:
        """The error a request for partition `part` that came in on `broker` gets instead of its shard's
        answer (0: none): a partition coordinated elsewhere 16, one loading here 14, one not loaded 16."""
        if broker is not None and self.hosted_on is not None and self.hosted_on(part) != broker:
            return ErrorCode.NOT_COORDINATOR
        if part in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE if part in self.shards else ErrorCode.NOT_COORDINATOR

    def _run(self, part: int, req: Request, ctx: RequestContext) -> None:
        code = self._refusal(part, ctx.broker_id)
        if code:
            self._release([(ctx.token, error_response(req, code))])
            return
        self.apply(self.shards[part].handle(req.api_key, ctx, req.body))

    def _fan_out(self, ctx: RequestContext, calls: list[tuple[int, Request]], merge: Callable[[list], object]) -> None:
        """Each (partition, request) on its shard with a token of its own; its records and timers
        applied as its shard's; then the merged answer released on `ctx.token` (after every shard's
        records are durable: see `apply`)."""
        answers = []
        for part, req in calls:
            shard = self.shards.get(part)
            code = self._refusal(part, ctx.broker_id)
            if code:
                answers.append(error_response(req, code))
                continue
            assert shard is not None, "a partition with no shard here is refused (_refusal)"
            sub = dataclasses.replace(ctx, token=next(self._tokens))
            result = shard.handle(req.api_key, sub, req.body)
            mine = [body for token, body in result.responses if token == sub.token]
            if len(mine) != 1:
                raise AssertionError(f"shard {part} gave {len(mine)} answers to one request")
            answers.append(mine[0])
            result.responses = [(t, b) for t, b in result.responses if t != sub.token]
            self.apply(result)
        self.apply(Result(responses=[(ctx.token, merge(answers))]))

    # ------------------------------------------------------------------ load and unload one partition
    def unload(self, part: int | None = None) -> None:
        """Stop coordinating offsets partition `part` (on the loop): its shard answers every parked
        request NOT_COORDINATOR (16) and its timers are cancelled; afterwards requests for its groups
        are answered 16 until `reload(part)`. Nothing is written: its state is in its log.
        `part` None: every partition, then `close` (the server is stopping; after a storage failure
        nothing more is answered: fail-stop)."""
        if part is None:
            if self.failed is None:
                for p in sorted(self.shards):
                    self.unload(p)
            self.close()
            return
        shard = self.shards.pop(part)
        result = shard.unload(self.clock_ms())
        if result.records:
            raise AssertionError(f"unloading shard {part} wrote records")
        self._release(result.responses)
        self._set_timers(result.timers)
        left = [k.name for k in self.timers if type(k) in self._timer_keys and self._partition_of_key(k) == part]
        if left:
            raise AssertionError(f"timers of unloaded partition {part} still armed: {left}")

    def reload(self, part: int) -> LoadReport:
        """Coordinate offsets partition `part` again (on the loop, after `unload`): a new shard loaded
        from the partition's log, its members' session timers restarted."""
        if part in self.shards:
            raise ValueError(f"offsets partition {part} is loaded")
        self.shards[part] = self._new_shard(part)
        report = self.load_partition(part)
        self.apply(self.shards[part].loaded(self.clock_ms()))
        return report

    # ------------------------------------------------------------------ a coordinator move (cluster mode)
    def begin_move(self, part: int, loading: bool = True) -> None:
        """Partition `part`'s coordinator moves (its leader changed): the shard unloads now - its parked
        requests are answered NOT_COORDINATOR (16), its timers cancelled - and, when a broker is to load it
        (`loading`), its groups are answered COORDINATOR_LOAD_IN_PROGRESS (14) until `finish_move`."""
        if part in self.shards:
            self.unload(part)
        if loading:
            self.loading.add(part)
        else:
            self.loading.discard(part)

    async def finish_move(self, part: int, record=None) -> LoadReport | None:
        """Load partition `part` into a new shard through replay, on a worker thread while the loop
        serves (reading the log below its end of now; a transaction marker written meanwhile is replayed
        after), write `record` (the move, e.g. a CoordinatorLoadRecord) through the writer and wait for it
        to be durable, then serve: the shard is in place and its members' session timers restart. Moves
        run one at a time; a move begun while another loads reloads after it. None if no move is due."""
        async with self._moves:
            if part in self.shards:                # an earlier move's load completed after this one began
                self.begin_move(part)
            if part not in self.loading:           # moved to no broker meanwhile (no leader)
                return None
            shard = self._new_shard(part)
            report, t0 = LoadReport(), time.monotonic()
            end = self.offsets_topic.partitions[part].log_end_offset
            self._markers_while_loading[part] = []
            try:
                await asyncio.get_running_loop().run_in_executor(
                    None, replay_partition, self.offsets_topic.partitions[part], part, shard, self.codec, report, end)
                for marker in self._markers_while_loading.pop(part, []):
                    shard.replay(marker)
                if record is not None:
                    logs = self.writer.write([record])
                    if not await self.writer.sync(logs):
                        return None
                    shard.replay(record)
            except BaseException:
                self._markers_while_loading.pop(part, None)
                raise
            if part not in self.loading:           # moved away to no leader while loading
                return None
            self.loading.discard(part)
            self.shards[part] = shard
            self.apply(shard.loaded(self.clock_ms()))
            return finish_report(report, self.writer.topic_name, [shard], t0)

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

    def apply(self, result: Result) -> None:
        """Apply a shard's Result: records written (then a transaction coordinator's markers, see
        `_write_markers`), responses released once durable, timers set."""
        if self.failed is not None:
            raise self.failed
        logs = self.writer.write(result.records) if result.records else []
        if getattr(result, "markers", None):
            self._write_markers(result, logs)
        if self.writer.durable_needed and (logs or self._syncing):
            # an answer with no records of its own can still show state whose records are not durable
            # yet (a follower's SyncGroup right after the leader's, an OffsetFetch right after a commit):
            # it waits for them too, as Kafka's coordinator runtime defers it behind pending writes
            task = asyncio.get_running_loop().create_task(
                self._release_when_durable(logs or list(self.offsets_topic.partitions), result.responses))
            self._syncing.add(task)
            task.add_done_callback(self._syncing.discard)
        else:
            self._release(result.responses)
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
        self._set_timers(result.timers)

    def _write_markers(self, result, logs: list) -> None:
        """A transaction coordinator's Result: after its records (the prepared transactions), the markers go
        into their partitions, then the records completing those transactions (by the shard of their
        transactional ids, which made the Result); the answers leave after all of them, and wait for all of
        them to be durable."""
        shard = self.shards[partition_for(result.markers[0].transactional_id, self.partitions)]
        assert isinstance(shard, TransactionCoordinator), "only the transaction coordinator's Results carry markers"
        assert self.write_markers is not None, "a runtime whose shards write markers is given write_markers"
        now = self.clock_ms()
        try:
            logs += self.write_markers(result.markers, now)
        except OSError as exc:
            self.writer.fail(exc, "cannot write transaction markers")
            raise
        done = shard.markers_written(result.markers, now)
        if done.records:
            logs += self.writer.write(done.records)
        result.responses += done.responses
        result.timers += done.timers
        result.records += done.records

    @staticmethod
    def _log_request(req: Request, client_host: str) -> None:
        body = req.body
        gid = getattr(body, "group_id", None)
        mid = getattr(body, "member_id", None)
        iid = getattr(body, "group_instance_id", None)
        log.debug("%s v%d from %s (%s): group %s, member %s, instance %s", req.name, req.api_version,
                  req.client_id, client_host, gid, mid, iid,
                  extra={"event": "request", "api": req.name, "api_version": req.api_version, "group": gid,
                         "member_id": mid, "instance_id": iid, "client_id": req.client_id,
                         "client_host": client_host})

    def _set_timers(self, ops) -> None:
        self.clock.set_timers(ops)

    # ------------------------------------------------------------------ test controls (on the loop)
    def advance_clock(self, ms: int) -> list[str]:
        """Move the coordinators' clock `ms` ahead, firing what falls due (CoordinatorClock.advance_clock)."""
        return self.clock.advance_clock(ms)

    @property
    def clock_offset_ms(self) -> int:
        """How far advance_clock has moved the coordinators' time ahead of the wall clock."""
        return self.clock.offset_ms

    def _release(self, responses) -> None:
        for token, body in responses:
            fut = self._waiting.get(token)
            if fut is not None and not fut.done():
                fut.set_result(body)

    async def _release_when_durable(self, logs, responses) -> None:
        if await self.writer.sync(logs):
            self._release(responses)

    def _fire(self, key: Timer) -> None:
        """One of this runtime's timers (already disarmed, see CoordinatorClock) on its group's shard."""
        if self.failed is not None:
            return                                   # stopped: a timer acknowledges nothing either
        shard = self.shards.get(self._partition_of_key(key))

        def work() -> Result:
            if shard is None:
                raise AssertionError(f"timer {key.name} of an unloaded offsets partition")
            return shard.on_timer(key, self.clock_ms())
        self.apply(self._timer_work(key.name, work))

    def _timer_work(self, name: str, work: Callable[[], T]) -> T:
        """Run a timer's work on its shard (`work()`: the shard's Result, not applied yet)."""
        try:
            return work()
        except Exception as exc:
            # A bug in the coordinator. Its state is as before (a shard replays only what a handler returned),
            # but what the timer owed - a session expiry, the end of a join or sync phase - will never happen:
            # groups would wait on it silently. Fail-stop, as after a failed write; the caller (a loop
            # callback, expire_session, advance_clock) sees the exception too.
            self.writer.fail(exc, f"timer {name} failed")
            raise

    def close(self) -> None:
        """This runtime's timers go (a shared clock's loop callback goes with the clock: CoordinatorClock.close)."""
        self.clock.cancel_all(self._timer_keys)
        if self._own_clock:
            self.clock.close()
