"""The coordinator runtime: applies the state machine's Results on the event loop.

For each group request: build the context (token, version, client, now), run the pure coordinator,
then apply the Result in the one safe order - append the records to __consumer_offsets, then release
the responses (to this request or to parked ones), then arm/cancel the keyed timers with
loop.call_later. A parked request is just a future waiting for its token.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Callable, Iterator

from dataclasses import dataclass, field

import tenure.protocol  # noqa: F401 - first: it loads kafka-python without its import-time warning
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from tenure.broker.dataplane import Broker
from tenure.broker.topics import OFFSETS_TOPIC, Topic
from tenure.broker.transactions import COMMIT, marker_type
from tenure.coordinator import GROUP_APIS, GroupCoordinator, RequestContext, Result, TimerKey  # noqa: F401 - GROUP_APIS: the listener reads it here
from tenure.protocol import records as rec
from tenure.protocol.codec import Request
from tenure.storage import BatchHeader, Log
from tenure.storage.durability import Durability

from tenure.control.metrics import Metrics

log = logging.getLogger("tenure.coordinator")

_SKIPS_LOGGED = 20                  # unreadable records named one by one at load; the rest counted


@dataclass
class LoadReport:
    batches: int = 0
    records: int = 0
    replayed: int = 0                       # the latest record of each key
    groups: int = 0
    seconds: float = 0.0
    unknown: dict[int, int] = field(default_factory=dict)       # key version -> records skipped
    undecodable: list[tuple[int, int, str]] = field(default_factory=list)   # (partition, offset, why) skipped

    def skip(self, plog, part: int, offset: int, what: str, reason: str) -> None:
        """A record or batch the loader cannot read: skipped, named (file, byte, offset) in an ERROR line."""
        self.undecodable.append((part, offset, reason))
        if len(self.undecodable) <= _SKIPS_LOGGED:
            log.error("%s: %s, skipped: %s", plog.locate(offset), what, reason)


def iter_batches(plog: Log) -> Iterator[tuple[BatchHeader, bytes]]:
    """(header, batch bytes) of every batch of a partition log (on disk: read by the segment reader, which
    checks each batch again)."""
    return plog.batches(plog.log_start_offset)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's rule: Utils.abs(groupId.hashCode) % offsets.topic.num.partitions, where Utils.abs maps
    Integer.MIN_VALUE to 0 and is Math.abs otherwise (not a mask of the sign bit)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# The coordinator's clock never passes 9999-12-31T23:59:59.999Z: every timestamp tenure writes (commit and
# expiry times, record timestamps, timer deadlines: now + an int32 timeout) stays a valid date for any
# reader and far inside Kafka's int64 milliseconds, so no advance_clock can leave the coordinator unable
# to write its records.
CLOCK_MAX_MS = 253_402_300_799_999


class CoordinatorRuntime:
    def __init__(self, coordinator: GroupCoordinator, offsets_topic: Topic, broker: Broker,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
                 durability: Durability | None = None,
                 on_fatal: Callable[[BaseException], None] | None = None,
                 metrics: Metrics | None = None, codec=rec) -> None:
        self.coordinator = coordinator
        self.offsets_topic = offsets_topic
        # the records' codec (encode, decode, partition_key, UnknownRecordType): the group coordinator's
        # __consumer_offsets records by default, the transaction coordinator's for __transaction_state
        self.codec = codec
        self.topic_name = getattr(offsets_topic, "name", OFFSETS_TOPIC)
        self.broker = broker
        self._wall_ms = clock_ms
        self.clock_offset_ms = 0             # advance_clock: the coordinator's time runs ahead of the wall
        self.metrics = metrics or Metrics()
        self.durability = durability or Durability("never")
        self.on_fatal = on_fatal
        self.failed: BaseException | None = None
        self._tokens = itertools.count(1)
        self._waiting: dict[int, asyncio.Future] = {}
        self._timers: dict[TimerKey, asyncio.TimerHandle] = {}
        self._deadlines: dict[TimerKey, int] = {}     # timer key -> deadline (coordinator time, ms)
        self._syncing: set[asyncio.Task] = set()

    def clock_ms(self) -> int:
        """The coordinator's time: the wall clock plus whatever `advance_clock` added."""
        return self._wall_ms() + self.clock_offset_ms

    # ------------------------------------------------------------------ start-up
    def load(self) -> LoadReport:
        """Load __consumer_offsets through the coordinator's `replay` (before serving).

        As Kafka's loader: only the latest record of each key counts (records are full-value upserts,
        so this is the state a full replay in log order reaches - the compaction property - without
        decoding the superseded ones). The survivors are replayed in the order of their offsets."""
        report = LoadReport()
        t0 = time.monotonic()
        for part, plog in enumerate(self.offsets_topic.partitions):
            latest: dict[bytes, tuple[bytes | None, int]] = {}
            # transactional batches (offsets committed in a transaction): held per producer until its
            # marker, then counted at the marker's place (commit) or dropped (abort); still open at the
            # end: replayed as pending
            pending: dict[int, tuple[int, list]] = {}
            for h, raw in iter_batches(plog):
                report.batches += 1
                if h.is_control:
                    held = pending.pop(h.producer_id, None)
                    if held is not None and h.is_transactional and marker_type(raw) == COMMIT:
                        for key, value, offset in held[1]:
                            latest.pop(key, None)
                            latest[key] = (value, offset)
                    continue
                try:                                   # a batch is one coordinator write: all of it or none
                    batch = [(r.key, r.value, r.offset) for r in DefaultRecordBatch(raw)]
                except Exception as exc:               # under a valid CRC: written so, not damaged on disk
                    report.skip(plog, part, h.base_offset, f"a batch of {h.records_count} record(s) that cannot "
                                f"be read", f"{type(exc).__name__}: {exc}")
                    continue
                for key, value, offset in batch:
                    report.records += 1
                    if key is None:
                        report.skip(plog, part, offset, "a record", "record without a key")
                        continue
                    if h.is_transactional:
                        pending.setdefault(h.producer_id, (h.producer_epoch, []))[1].append((key, value, offset))
                        continue
                    latest.pop(key, None)              # keep the dict in order of each key's last offset
                    latest[key] = (value, offset)
            for key, (value, offset) in latest.items():
                try:
                    record = self.codec.decode(key, value)
                except self.codec.UnknownRecordType as exc:
                    report.unknown[exc.key_version] = report.unknown.get(exc.key_version, 0) + 1
                    continue
                except Exception as exc:               # a record that does not decode under a valid CRC
                    report.skip(plog, part, offset, "a record that does not decode", f"{type(exc).__name__}: {exc}")
                    continue
                self.coordinator.replay(record)
                report.replayed += 1
            for pid, (epoch, held) in pending.items():
                for key, value, offset in held:
                    try:
                        record = self.codec.decode(key, value)
                    except Exception as exc:
                        report.skip(plog, part, offset, "a transactional record that does not decode",
                                    f"{type(exc).__name__}: {exc}")
                        continue
                    self.coordinator.replay(rec.TransactionalOffsetCommit(pid, epoch, record))
        if len(report.undecodable) > _SKIPS_LOGGED:
            log.error("%s: %d more unreadable record(s) or batch(es) skipped (the first %d are named above)",
                      self.topic_name, len(report.undecodable) - _SKIPS_LOGGED, _SKIPS_LOGGED)
        for kv, n in sorted(report.unknown.items()):
            log.warning("%s: skipped %d record key(s) of unknown type (key version %d)", self.topic_name, n, kv)
        report.groups = len(getattr(self.coordinator, "groups", ()))
        report.seconds = time.monotonic() - t0
        return report

    def start_timers(self) -> None:
        """After `load`, on the running loop: restart every loaded member's session timer."""
        self.apply(self.coordinator.loaded(self.clock_ms()))

    async def handle(self, req: Request, client_host: str):
        loop = asyncio.get_running_loop()
        token = next(self._tokens)
        fut = loop.create_future()
        self._waiting[token] = fut
        try:
            ctx = RequestContext(token, req.api_version, req.client_id or "", client_host, self.clock_ms())
            if log.isEnabledFor(logging.DEBUG):
                self._log_request(req, client_host)
            self.apply(self.coordinator.handle(req.api_key, ctx, req.body))
            return await fut
        finally:
            self._waiting.pop(token, None)

    def apply(self, result: Result) -> None:
        if self.failed is not None:
            raise self.failed
        logs = self._persist(result.records) if result.records else []
        if getattr(result, "markers", None):
            result = self._write_markers(result, logs)
        if self.durability.needed and (logs or self._syncing):
            # an answer with no records of its own can still show state whose records are not durable
            # yet (a follower's SyncGroup right after the leader's, an OffsetFetch right after a commit):
            # it waits for them too, as Kafka's coordinator runtime defers it behind pending writes
            task = asyncio.get_running_loop().create_task(
                self._release_when_durable(logs or list(self.offsets_topic.partitions), result.responses))
            self._syncing.add(task)
            task.add_done_callback(self._syncing.discard)
        else:
            self._release(result.responses)
        now = self.clock_ms()
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
            g = self.coordinator.groups.get(gid)
            generation, members = (g.generation, len(g.members)) if g is not None else (-1, 0)
            log.info("group %s: rebalance started (cause %s; generation %d, %d member(s))",
                     gid, cause, generation, members,
                     extra={"event": "rebalance", "group": gid, "cause": cause, "generation": generation,
                            "members": members})
        for op in result.timers:
            self._arm(op.key, op.deadline_ms, now)

    def _write_markers(self, result, logs: list):
        """A transaction coordinator's Result: after its records (the prepared transactions), the markers go
        into the data partitions, then the records completing those transactions; the answers leave after
        all of them, and wait for all of them to be durable."""
        now = self.clock_ms()
        try:
            logs += self.broker.write_txn_markers(result.markers, now)
        except OSError as exc:
            self._fail(exc)
            raise
        done = self.coordinator.markers_written(result.markers, now)
        if done.records:
            logs += self._persist(done.records)
        result.responses += done.responses
        result.timers += done.timers
        result.records += done.records
        return result

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

    def _arm(self, key: TimerKey, deadline_ms: int | None, now: int) -> None:
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        self._deadlines.pop(key, None)
        if deadline_ms is not None:
            delay = max(deadline_ms - now, 0) / 1000.0
            self._timers[key] = asyncio.get_running_loop().call_later(delay, self._fire, key)
            self._deadlines[key] = deadline_ms

    # ------------------------------------------------------------------ test controls (on the loop)
    def fire_now(self, key: TimerKey) -> bool:
        """Fire one armed timer now (e.g. a member's session: HeartbeatKey); False if none is armed."""
        if key not in self._timers:
            return False
        self._arm(key, None, self.clock_ms())
        self._fire(key)
        return True

    def advance_clock(self, ms: int) -> list[str]:
        """Move the coordinator's clock `ms` ahead: every timer due by then fires, in deadline order, each
        with the clock at its deadline (as if the time had passed; timers they arm that are due fire
        too), then the clock is `ms` ahead and the rest are re-armed for their remaining time.
        Returns the names of the timers fired (`heartbeat/<group>/<member>`, `join/<group>`, ...)."""
        if isinstance(ms, bool) or not isinstance(ms, int):
            raise ValueError(f"ms must be a whole number of milliseconds, not {ms!r}")
        if ms < 0:
            raise ValueError("the clock only moves forward")
        room = CLOCK_MAX_MS - self.clock_ms()
        if ms > room:
            raise ValueError(f"the coordinator's clock stops at 9999-12-31T23:59:59.999Z ({CLOCK_MAX_MS} ms): "
                             f"at most {max(room, 0)} ms more")
        start, base = self.clock_ms(), self.clock_offset_ms
        target = start + ms
        fired = []
        for _ in range(100000):                 # bounded: a timer re-arming itself in the past
            due = sorted((d, k) for k, d in self._deadlines.items() if d <= target)
            if not due:
                break
            deadline, key = due[0]
            self.clock_offset_ms = max(self.clock_offset_ms, base + deadline - start)
            self._arm(key, None, self.clock_ms())
            self._fire(key)
            fired.append(key.name)
        self.clock_offset_ms = base + ms
        now = self.clock_ms()
        for key, deadline in list(self._deadlines.items()):
            self._arm(key, deadline, now)
        return fired

    def _release(self, responses) -> None:
        for token, body in responses:
            fut = self._waiting.get(token)
            if fut is not None and not fut.done():
                fut.set_result(body)

    async def _release_when_durable(self, logs, responses) -> None:
        try:
            await self.durability.sync(logs)
        except Exception as exc:
            self._fail(exc)
            return
        self._release(responses)

    def _fail(self, exc: BaseException, what: str = f"cannot write {OFFSETS_TOPIC}") -> None:
        """A write or fsync of group state failed, or a timer could not do its work: stop acknowledging
        anything (fail-stop)."""
        if self.failed is None:
            self.failed = exc
            log.critical("%s (%s); no further group request is answered", what, exc,
                         exc_info=None if isinstance(exc, OSError) else exc)
            if self.on_fatal is not None:
                self.on_fatal(exc)

    def _fire(self, key: TimerKey) -> None:
        self._timers.pop(key, None)
        self._deadlines.pop(key, None)
        if self.failed is not None:
            return                                   # stopped: a timer acknowledges nothing either
        try:
            result = self.coordinator.on_timer(key, self.clock_ms())
        except Exception as exc:
            # A bug in the coordinator. Its state is as before (a shard replays only what a handler returned),
            # but what the timer owed - a session expiry, the end of a join or sync phase - will never happen:
            # groups would wait on it silently. Fail-stop, as after a failed write; the caller (a loop
            # callback, fire_now, advance_clock) sees the exception too.
            self._fail(exc, f"timer {key.name} failed")
            raise
        self.apply(result)

    def _persist(self, records: list) -> list:
        by_partition: dict[tuple[int, tuple[int, int] | None], list] = {}
        n = len(self.offsets_topic.partitions)
        for r in records:       # one batch per partition, and per producer for transactional offsets
            key = (partition_for(self.codec.partition_key(r), n), self.codec.batch_producer(r))
            by_partition.setdefault(key, []).append(r)
        now = self.clock_ms()
        written = []
        for (part, producer), recs in by_partition.items():
            pid, epoch = producer or (-1, -1)
            b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=producer is not None,
                                          producer_id=pid, producer_epoch=epoch, base_sequence=-1,
                                          batch_size=2**31 - 1)
            for i, r in enumerate(recs):
                key, value = self.codec.encode(r)
                b.append(i, timestamp=now, key=key, value=value, headers=[])
            plog = self.offsets_topic.partitions[part]
            try:
                plog.append(bytes(b.build()))
            except OSError as exc:
                self._fail(exc)
                raise
            written.append(plog)
            self.broker.notify_append(self.topic_name, part)
        return written

    def close(self) -> None:
        for h in self._timers.values():
            h.cancel()
        self._timers.clear()
        self._deadlines.clear()
