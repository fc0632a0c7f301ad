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
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

from tenure.coordinator import RequestContext, Result, TimerWheel
from tenure.counters import Metrics
from tenure.gcpause import gc_paused
from tenure.protocol import records as rec
from tenure.protocol.codec import Request
from tenure.protocol.error_responses import error_response
from tenure.protocol.errors import ErrorCode
from tenure.storage.durability import Durability

from . import routing
from .clock import CoordinatorClock
from .loader import LoadReport, finish_report, replay_partition
from .routing import partition_for
from .timers import KEY_TYPES, Timer
from .writer import CoordinatorWriter, InternalTopic, LogAppender, PartitionWriter, PreparedBatch

log = logging.getLogger("tenure.coordinator")

T = TypeVar("T")
_NOT_YET = object()                            # no answer released yet
PARTITIONS_KEPT = 65536                        # group ids whose partition `_direct_partition` remembers

class Shard(Protocol):
    """What the runtime asks of a shard, whatever coordinator it is (the group coordinator's GroupShard, the
    transaction coordinator's TransactionCoordinator)."""

    def handle(self, api_key: int, ctx: RequestContext, body: Any) -> Result: ...
    def on_timer(self, key: Any, now_ms: int) -> Result: ...
    def replay(self, event: Any) -> None: ...
    def loaded(self, now_ms: int) -> Result: ...
    def unload(self, now_ms: int) -> Result: ...


S = TypeVar("S", bound=Shard)


def _routing_key(x) -> str:
    """What picks the partition (so the shard) of a request body or a timer key: its group id, or for the
    transaction coordinator its transactional id ("" when it names none: partition 0)."""
    gid = getattr(x, "group_id", None)
    return gid if gid is not None else getattr(x, "transactional_id", None) or ""


class CoordinatorRuntime(Generic[S]):
    """`new_shard(partition)` makes the (empty) shard of one offsets partition; the runtime holds one per
    partition of `offsets_topic` and writes through its `CoordinatorWriter`, which appends through
    `partition_writer` (the broker's replica manager; without one, straight to the topic's logs, calling
    `notify_append(topic, partition)` after each append).

    Two kinds of runtime: the group coordinator's (group_runtime.py, over `__consumer_offsets`) and the
    transaction coordinator's (txn_runtime.py, over `__transaction_state`; `codec` is its records' codec). Each
    arms its own `timer_keys` on the one `clock` they share (coordinator/clock.py), so their timers fire in one
    deadline order and one `advance_clock` moves both."""

    # APIs whose every request names one group by `group_id`, is answered in one go and is handled no way of its
    # own (`_special`): run straight on that group's shard (`_handle` with its partition)
    direct_apis: frozenset[int] = frozenset()

    def __init__(self, new_shard: Callable[[int], S], offsets_topic: InternalTopic,
                 notify_append: Callable[[str, int], None] | None = None,
                 clock: CoordinatorClock | None = None,
                 durability: Durability | None = None,
                 on_fatal: Callable[[BaseException], None] | None = None,
                 metrics: Metrics | None = None, codec: Any = rec,
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
        self.offsets_topic = offsets_topic
        self.partitions = len(offsets_topic.partitions)
        self._new_shard = new_shard
        self.shards: dict[int, S] = {p: new_shard(p) for p in range(self.partitions)}
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
        self.closed = False                   # set by close(): a load on a worker thread gives up
        self._tokens = itertools.count(1)
        self._waiting: dict[int, asyncio.Future] = {}
        self._routing = 0                     # the token of the request `_start` is routing now (0: none)
        self._answered: Any = _NOT_YET        # its answer, if released while it is routed
        # the answers waiting for durability (every one: a stop waits for them), and of them those whose Result
        # wrote records, with the logs it wrote; how many such writes each log has in flight (what an answer
        # writing nothing waits for: `apply`)
        self._syncing: set[asyncio.Task] = set()
        self._writing: dict[asyncio.Task, list] = {}
        self._in_flight: dict[Any, int] = {}
        self._partition_by_id: dict[str, int] = {}    # `_direct_partition`'s
        # whether this runtime's kind adds work after a Result's records (`_after_records`): the group
        # coordinator's does not, and a heartbeat skips the call
        self._adds_after_records = type(self)._after_records is not CoordinatorRuntime._after_records

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

    def shard_for(self, group_id: str) -> S:
        return self.shards[self.partition_of(group_id)]

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

    def defer_load(self) -> None:
        """Serve before loading (`--load-in-background`; before serving, with no shard loaded yet): every
        partition is answered COORDINATOR_LOAD_IN_PROGRESS (14) until `load_deferred` has loaded it."""
        for part in range(self.partitions):
            self.shards.pop(part, None)            # still empty: nothing to unload
            self.loading.add(part)

    async def load_deferred(self) -> LoadReport:
        """Load the partitions `defer_load` left loading, one after another on a worker thread while the loop
        serves (as a move's load: `finish_move`); each partition is served once it is loaded. The report adds
        up every partition's."""
        total, t0 = LoadReport(), time.monotonic()
        for part in sorted(self.loading):
            report = await self.finish_move(part)
            if report is None:
                continue
            total.batches += report.batches
            total.records += report.records
            total.replayed += report.replayed
            total.groups += report.groups
            total.undecodable += report.undecodable
            for kv, n in report.unknown.items():
                total.unknown[kv] = total.unknown.get(kv, 0) + n
        total.seconds = time.monotonic() - t0
        return total

    def start_timers(self) -> None:
        """After `load`, on the running loop: restart every loaded member's session timer."""
        now = self.clock_ms()
        for shard in self.shards.values():
            self.apply(shard.loaded(now))

    # ------------------------------------------------------------------ requests
    def handle(self, req: Request, ctx: RequestContext) -> Awaitable[Any]:
        """Answer one request (an awaitable of its answer); `ctx.broker_id` is the broker it came in on (None: no
        hosting check). The shards see a copy of `ctx` with this runtime's token for it and the coordinator's clock
        now. A large read-only request is answered chunk by chunk, a loop turn between chunks (routing.chunks,
        routing.partition_chunks). A request the runtime's kind handles its own way first (`_special`) is answered
        by that."""
        if req.api_key in self.direct_apis:
            return self._handle(req, ctx, self._direct_partition(req.body.group_id or ""))
        special = self._special(req, ctx)
        return special if special is not None else self._dispatch(req, ctx)

    def handle_now(self, req: Request, ctx: RequestContext) -> Any:
        """`handle` without a coroutine when it can answer at once: what a caller on the loop gets tells whether
        the request was answered as it ran or waits (the tests of when answers leave read it so; the server's
        dispatcher awaits `handle`: calling this instead measured no gain, docs/benchmarks.md "hp6conn").

        Returns the answer itself when the request was answered without waiting: a request of `direct_apis`
        (JoinGroup, Heartbeat, LeaveGroup, SyncGroup for the group coordinator) whose Result released its answer
        as the request was run - a heartbeat, a refusal (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS), any
        answer that wrote no records while no write of this runtime awaits durability, or any answer at all
        under `--fsync never`. Otherwise returns an `asyncio.Future` of the answer, to be awaited (never handed
        in again: the request has been run, or is running): a request of `direct_apis` parked (a JoinGroup
        waiting for its rebalance, a follower's SyncGroup) or waiting for durability, and any other request
        (a Task running `handle`). An answer is never a Future, so `isinstance(x, asyncio.Future)` tells the
        two apart. Raises what `handle` raises for a request of `direct_apis` after a storage failure (the
        runtime's fail-stop error). Runs on the loop, as `handle`."""
        if req.api_key in self.direct_apis:
            return self._start(req, ctx, self._direct_partition(req.body.group_id or ""))
        return asyncio.ensure_future(self.handle(req, ctx))

    def _direct_partition(self, group_id: str) -> int:
        """`partition_of`, remembered per group id (the ids a server sees are few: up to PARTITIONS_KEPT, then
        the table starts again): a member's every heartbeat asks it."""
        part = self._partition_by_id.get(group_id)
        if part is None:
            if len(self._partition_by_id) >= PARTITIONS_KEPT:
                self._partition_by_id.clear()
            part = self._partition_by_id[group_id] = partition_for(group_id, self.partitions)
        return part

    def _special(self, req: Request, ctx: RequestContext) -> Awaitable[Any] | None:
        """The answer of a request this runtime handles its own way before the usual path (the group
        coordinator's heavy commits and joins), or None (the usual path: `_dispatch`)."""
        return None

    def _dispatch(self, req: Request, ctx: RequestContext) -> Awaitable[Any]:
        """The usual path of a request, as an awaitable: in one go (most requests; one coroutine), or in chunks."""
        subs = routing.chunks(req.api_key, ctx.api_version, req.body, routing.CHUNK_ITEMS)
        if subs is not None:
            return self._chunked(req, ctx, subs)
        parts = routing.partition_chunks(req.api_key, ctx.api_version, req.body, routing.CHUNK_PARTITIONS)
        return self._handle(req, ctx) if parts is None else self._partition_turns(req, ctx, parts)

    async def _chunked(self, req: Request, ctx: RequestContext, subs):
        """`req` answered by the chunks `subs` of its items (routing.chunks), a loop turn between them."""
        asked: list[Any] = []
        answers: list[Any] = []
        with gc_paused():                          # no full collection walking the answer as it grows
            for sub in subs:
                if answers:
                    await asyncio.sleep(0)         # the other clients' turn
                asked.append(sub)
                answers.append(await self._in_partition_turns(dataclasses.replace(req, body=sub), ctx))
            return routing.join_chunks(req.api_key, asked, answers)

    async def _in_partition_turns(self, req: Request, ctx: RequestContext):
        """`req` (or a chunk of its items) answered CHUNK_PARTITIONS partitions at a time when it is an OffsetFetch
        naming more (routing.partition_chunks), a loop turn between; else in one go."""
        parts = routing.partition_chunks(req.api_key, ctx.api_version, req.body, routing.CHUNK_PARTITIONS)
        if parts is None:
            return await self._handle(req, ctx)
        return await self._partition_turns(req, ctx, parts)

    async def _partition_turns(self, req: Request, ctx: RequestContext, parts: routing.PartitionChunks):
        """`req` answered by the chunks `parts` of its partitions, a loop turn between them."""
        answers: list[Any] = []
        with gc_paused():
            for sub in parts:
                if answers:
                    await asyncio.sleep(0)         # the other clients' turn
                answers.append(await self._handle(dataclasses.replace(req, body=sub), ctx))
            return parts.join(answers)

    async def _handle(self, req: Request, ctx: RequestContext, part: int | None = None):
        """`_start`'s answer, awaited when it must wait."""
        answer = self._start(req, ctx, part)
        if isinstance(answer, asyncio.Future):
            return await answer
        return answer

    def _start(self, req: Request, ctx: RequestContext, part: int | None) -> Any:
        """Route the request (`part`: run it on that partition's shard, a request of `direct_apis`, without
        `_route`'s questions of a request that may name several groups); its answer when its Result released it
        at once (a heartbeat), else a future of it waiting for its token (a parked join, an answer waiting for
        durability), forgotten once done."""
        token = next(self._tokens)
        ctx = ctx.for_input(token, self.clock.now_ms())
        if log.isEnabledFor(logging.DEBUG):
            self._log_request(req, ctx.client_host)
        self._routing = token
        try:
            if part is None:
                self._route(req, ctx)
            else:                                      # `_run`, written out
                if self.writer.failed is not None:
                    raise self.writer.failed
                shard = self.shards.get(part)
                broker = ctx.broker_id
                if shard is None or part in self.loading or (
                        broker is not None and self.hosted_on is not None and self.hosted_on(part) != broker):
                    self._release([(token, error_response(req, self._refusal(part, broker)))])
                else:
                    self.apply(shard.handle(req.api_key, ctx, req.body), part=part)
        finally:
            answer, self._routing, self._answered = self._answered, 0, _NOT_YET
        if answer is not _NOT_YET:
            return answer
        fut = asyncio.get_running_loop().create_future()
        waiting = self._waiting
        waiting[token] = fut
        fut.add_done_callback(lambda _: waiting.pop(token, None))
        return fut

    def _route(self, req: Request, ctx: RequestContext) -> None:
        """Run the request on the shard(s) of the groups it names and apply their Results. A group whose
        partition is not loaded here (see `unload`) or is coordinated by another broker than the request's is
        answered NOT_COORDINATOR (16); one whose partition is being loaded COORDINATOR_LOAD_IN_PROGRESS (14)."""
        if self.failed is not None:
            raise self.failed
        api_key, body = req.api_key, req.body
        if api_key == routing.LIST_GROUPS:             # the groups of every loaded shard
            if any(self._refusal(p, ctx.broker_id) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS for p in self.loading):
                # as Kafka's ListGroups, which reads every partition this broker coordinates: one still
                # loading fails the whole request with COORDINATOR_LOAD_IN_PROGRESS (the client retries)
                self._release([(ctx.token, error_response(req, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))])
                return
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
        shard = self.shards.get(part)
        broker = ctx.broker_id
        if shard is None or part in self.loading or (
                broker is not None and self.hosted_on is not None and self.hosted_on(part) != broker):
            # refused (`_refusal` says with what: none of these cases is answered by the shard)
            self._release([(ctx.token, error_response(req, self._refusal(part, broker)))])
            return
        self.apply(shard.handle(req.api_key, ctx, req.body), part=part)

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
            self.apply(result, part=part)
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
        self.clock.set_timers(result.timers)
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
                    None, replay_partition, self.offsets_topic.partitions[part], part, shard, self.codec, report, end,
                    lambda: self.closed)
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

    def apply(self, result: Result, prepared: PreparedBatch | None = None, part: int | None = None) -> None:
        """Apply a shard's Result: records written (then what the runtime's kind adds: `_after_records`),
        responses released once durable, timers set. `prepared`: a batch of its records encoded ahead
        (CoordinatorWriter.prepare). `part`: the partition whose shard made it (None: unknown, or several - a
        merged answer), which its answers wait for when it wrote nothing."""
        writer = self.writer
        if writer.failed is not None:
            raise writer.failed
        logs = writer.write(result.records, prepared) if result.records else []
        if self._adds_after_records:
            self._after_records(result, logs)
        waits_for = logs
        if not logs and self._in_flight:
            # an answer with no records of its own can still show state whose records are not durable
            # yet (a follower's SyncGroup right after the leader's, an OffsetFetch right after a commit):
            # it waits for them too, as Kafka's coordinator runtime defers it behind its partition's pending
            # writes - the writes of its shard's partition (of every partition when that is not one), not the
            # other answers waiting so (which would chain every answer behind the one before for as long as
            # they keep coming)
            if part is None:
                waits_for = list(self._in_flight)
            else:
                plog = self.offsets_topic.partitions[part]
                waits_for = [plog] if plog in self._in_flight else []
        if waits_for and writer.durable_needed:
            task = asyncio.get_running_loop().create_task(self._release_when_durable(waits_for, result.responses))
            self._syncing.add(task)
            task.add_done_callback(self._syncing.discard)
            if logs:
                self._writing[task] = logs
                for plog in set(logs):
                    self._in_flight[plog] = self._in_flight.get(plog, 0) + 1
                task.add_done_callback(self._written)
        else:
            self._release(result.responses)
        if result.events or result.notes or result.rebalances:
            self._observe(result)
        if result.timers:
            self.clock.set_timers(result.timers)

    def _written(self, task: asyncio.Task) -> None:
        """A write's wait for durability is over (or failed): it holds no answer back any more."""
        logs = self._writing.pop(task, None)
        if logs:
            in_flight = self._in_flight
            for plog in set(logs):
                n = in_flight[plog] - 1
                if n:
                    in_flight[plog] = n
                else:
                    del in_flight[plog]

    def _after_records(self, result: Result, logs: list) -> None:
        """After a Result's records are written, before its answers wait for durability (the transaction
        coordinator's runtime writes its markers here); `logs` gains what is written."""

    def _observe(self, result: Result) -> None:
        """What a Result that changed something (events, notes or rebalances: `apply` asks for no other) tells
        the counters and the log (the group coordinator's: rebalances, static members)."""

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
            if token == self._routing:                 # the request being routed now: answered at once
                if self._answered is _NOT_YET:
                    self._answered = body
                continue
            fut = self._waiting.get(token)
            if fut is not None and not fut.done():
                fut.set_result(body)

    async def _release_when_durable(self, logs, responses) -> None:
        durable = await self.writer.sync(logs)
        # its write (if it wrote) no longer holds back the answers writing nothing, from now on: not from the
        # task's done callback (`_written`, after it ends: still there when a heartbeat after this answer comes)
        task = asyncio.current_task()
        if task is not None:
            self._written(task)
        if durable:
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
        self.apply(self._timer_work(key.name, work), part=self._partition_of_key(key))

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
        """This runtime's timers go (a shared clock's loop callback goes with the clock: CoordinatorClock.close);
        a load under way on a worker thread stops at its next batches (its logs are closed next)."""
        self.closed = True
        self.clock.cancel_all(self._timer_keys)
        if self._own_clock:
            self.clock.close()
