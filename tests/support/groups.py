"""Group members driven by the real client libraries, for the static-membership tests.

Every member owns one thread that creates its consumer, polls it and finally closes it, so each client
keeps heartbeating the way an application would (librdkafka's background threads, kafka-python's
heartbeat thread, aiokafka's tasks on that thread's own event loop). Rebalance callbacks are recorded as
events; `call(fn)` runs fn(consumer) on the member's thread between polls (aiokafka: fn may be async).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import struct
import threading
import time

CLIENTS = ("confluent", "kafka-python", "aiokafka")
log = logging.getLogger("tests.groups")


def wait_for(pred, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def group_view(server_thread, group_id: str):
    """A consistent copy of one group's state, read on the server's loop (None if unknown)."""
    def read():
        g = server_thread.server.runtime.group(group_id)
        if g is None:
            return None
        return {
            "state": g.state, "generation": g.generation, "leader": g.leader_id,
            "members": {mid: (m.group_instance_id, m.client_id) for mid, m in g.members.items()},
            "static": dict(g.static_members),
        }
    return server_thread.call(read)


def committed_offsets(server_thread, group_id: str) -> dict[tuple[str, int], int]:
    return server_thread.call(lambda: {k: r.offset for k, r in
                                       server_thread.server.runtime.committed_offsets(group_id).items()})


class GroupMember:
    """One consumer in a group, on its own thread."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, instance_id: str | None = None,
                 *, name: str | None = None, session_timeout_ms: int = 6000, heartbeat_interval_ms: int = 300,
                 rebalance_timeout_ms: int = 20000, commit_each_poll: bool = False) -> None:
        assert client in CLIENTS, client
        assert not commit_each_poll or client == "confluent", "commit_each_poll: confluent-kafka members only"
        self.client, self.bootstrap, self.group, self.topic = client, bootstrap, group, topic
        self.instance_id = instance_id
        self.name = name or instance_id or f"{client}-dyn"
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.events: list[tuple[str, frozenset[int]]] = []       # ("assign"|"revoke"|"lost", partitions)
        self.assignment: frozenset[int] = frozenset()
        self.errors: list = []                                    # client errors, in order
        self.records: list[tuple[int, int, bytes]] = []           # (partition, offset, value)
        # commit_each_poll: a synchronous commit after every record polled; the acknowledged ones as
        # (time.time() when acknowledged, {partition: offset}), the failed ones as (time, error)
        self.commit_each_poll = commit_each_poll
        self.commits: list[tuple[float, dict[int, int]]] = []
        self.commit_errors: list[tuple[float, object]] = []
        self.generations: list[int] = []                          # confluent: the generation at each callback
        self.closed = threading.Event()
        self._stop = threading.Event()
        self._calls: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._main, name=f"member-{self.name}", daemon=True)
        self.crash: BaseException | None = None

    # ------------------------------------------------------------------ control
    def start(self) -> GroupMember:
        self._thread.start()
        return self

    def stop(self, timeout: float = 30) -> None:
        """Close the consumer (the client's own close()) on its thread and wait for it."""
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.name}: close() did not finish within {timeout}s"

    def call(self, fn, timeout: float = 30):
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._calls.put((fn, fut))
        return fut.result(timeout)

    def wait_assigned(self, timeout: float = 30) -> frozenset[int]:
        wait_for(lambda: self.assignment or self.crash, timeout, f"{self.name} to get an assignment")
        assert self.crash is None, self.crash
        return self.assignment

    def clear_events(self) -> None:
        with self._lock:
            self.events.clear()

    def events_copy(self) -> list:
        with self._lock:
            return list(self.events)

    # ------------------------------------------------------------------ callbacks (any client)
    def _on(self, kind: str, partitions, generation: int | None = None) -> None:
        parts = frozenset(p for p in partitions)
        with self._lock:
            if generation is not None:
                self.generations.append(generation)
            self.events.append((kind, parts))
            if kind == "assign":
                self.assignment = parts
            else:
                self.assignment = frozenset()
        log.info("%s %s %s", self.name, kind, sorted(parts))

    def _pending_calls(self):
        """The (fn, future) pairs queued for the consumer's thread, taken one by one until none is left."""
        while True:
            try:
                yield self._calls.get_nowait()
            except queue.Empty:
                return

    def _drain_calls(self, consumer) -> None:
        for fn, fut in self._pending_calls():
            try:
                fut.set_result(fn(consumer))
            except BaseException as exc:
                fut.set_exception(exc)

    async def _adrain_calls(self, consumer) -> None:
        for fn, fut in self._pending_calls():
            try:
                r = fn(consumer)
                if asyncio.iscoroutine(r):
                    r = await r
                fut.set_result(r)
            except BaseException as exc:
                fut.set_exception(exc)

    def _main(self) -> None:
        try:
            {"confluent": self._run_confluent, "kafka-python": self._run_kafka_python,
             "aiokafka": lambda: asyncio.run(self._run_aiokafka())}[self.client]()
        except BaseException as exc:       # reported to the test through .crash
            log.exception("%s crashed", self.name)
            self.crash = exc
        finally:
            self.closed.set()
            while not self._calls.empty():
                _, fut = self._calls.get_nowait()
                fut.set_exception(RuntimeError(f"{self.name} is closed"))

    # ------------------------------------------------------------------ confluent-kafka (librdkafka)
    def _run_confluent(self) -> None:
        from confluent_kafka import Consumer

        conf = {
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "client.id": self.name,
            "session.timeout.ms": self.session_timeout_ms, "heartbeat.interval.ms": self.heartbeat_interval_ms,
            "max.poll.interval.ms": self.rebalance_timeout_ms, "partition.assignment.strategy": "range",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "error_cb": self.errors.append,
        }
        if self.instance_id is not None:
            conf["group.instance.id"] = self.instance_id
        c = Consumer(conf)
        c.subscribe([self.topic],
                    on_assign=lambda cons, ps: self._on("assign", [p.partition for p in ps],
                                                        confluent_generation(cons)),
                    on_revoke=lambda cons, ps: self._on("revoke", [p.partition for p in ps],
                                                        confluent_generation(cons)),
                    on_lost=lambda cons, ps: self._on("lost", [p.partition for p in ps],
                                                      confluent_generation(cons)))
        try:
            while not self._stop.is_set():
                self._drain_calls(c)
                m = c.poll(0.05)
                if m is None:
                    continue
                if m.error() is not None:
                    self.errors.append(m.error())
                    continue
                self.records.append((m.partition(), m.offset(), m.value()))
                if self.commit_each_poll:
                    self._commit_confluent(c, m)
            self._drain_calls(c)
        finally:
            c.close()

    def _commit_confluent(self, c, m) -> None:
        from confluent_kafka import KafkaException
        try:
            res = c.commit(message=m, asynchronous=False)
        except KafkaException as exc:
            self.commit_errors.append((time.time(), exc.args[0]))
            return
        failed = [tp for tp in res if tp.error is not None]
        if failed:
            self.commit_errors.append((time.time(), failed))
        else:
            self.commits.append((time.time(), {tp.partition: tp.offset for tp in res}))

    # ------------------------------------------------------------------ kafka-python
    def _run_kafka_python(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                member._on("revoke", [tp.partition for tp in revoked])

            def on_partitions_assigned(self, assigned):
                member._on("assign", [tp.partition for tp in assigned])

            def on_partitions_lost(self, lost):
                member._on("lost", [tp.partition for tp in lost])

        c = KafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, group_instance_id=self.instance_id,
            client_id=self.name, session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms, max_poll_interval_ms=self.rebalance_timeout_ms,
            partition_assignment_strategy=(RangePartitionAssignor,), enable_auto_commit=False,
            auto_offset_reset="earliest", request_timeout_ms=30000)
        # kafka-python 3.0.12 bug: if the leader assigns before the coordinator has seen a metadata
        # update since subscribe() (its metadata snapshot is still {}), the next update makes it rejoin
        # with base.rejoin_needed False; performing the new assignment makes need_rejoin() False while
        # its SyncGroup is still in flight, and a poll() whose timeout expires just then leaves that join
        # task un-awaited for good: the member never completes the generation, keeps heartbeats disabled,
        # is expired by the coordinator and never rejoins. A metadata refresh after subscribe() (topics()
        # forces one) fills the snapshot first, so that rejoin never happens.
        c.subscribe([self.topic], listener=Listener())
        assert self.topic in c.topics()
        try:
            while not self._stop.is_set():
                self._drain_calls(c)
                try:
                    batch = c.poll(timeout_ms=100)
                except Exception as exc:
                    self.errors.append(exc)
                    time.sleep(0.05)
                    continue
                for _tp, msgs in batch.items():
                    self.records += [(m.partition, m.offset, m.value) for m in msgs]
            self._drain_calls(c)
        finally:
            c.close(timeout_ms=10000)

    # ------------------------------------------------------------------ aiokafka
    async def _run_aiokafka(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.abc import ConsumerRebalanceListener
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor

        member = self

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                member._on("revoke", [tp.partition for tp in revoked])

            async def on_partitions_assigned(self, assigned):
                member._on("assign", [tp.partition for tp in assigned])

        c = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, group_instance_id=self.instance_id,
            client_id=self.name, session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms, rebalance_timeout_ms=self.rebalance_timeout_ms,
            max_poll_interval_ms=self.rebalance_timeout_ms, partition_assignment_strategy=(RangePartitionAssignor,),
            enable_auto_commit=False, auto_offset_reset="earliest")
        c.subscribe([self.topic], listener=Listener())
        await c.start()
        try:
            while not self._stop.is_set():
                await self._adrain_calls(c)
                try:
                    batch = await c.getmany(timeout_ms=50)
                except Exception as exc:
                    self.errors.append(exc)
                    await asyncio.sleep(0.05)
                    continue
                for _tp, msgs in batch.items():
                    self.records += [(m.partition, m.offset, m.value) for m in msgs]
            await self._adrain_calls(c)
        finally:
            await asyncio.wait_for(c.stop(), 15)


def confluent_generation(consumer) -> int:
    """The group generation a confluent-kafka consumer is in: librdkafka's serialised consumer group
    metadata is b"CGMDv2:" + int32 generation (host byte order) + group id, member id, instance id."""
    b = consumer.consumer_group_metadata()
    assert isinstance(b, bytes) and b.startswith(b"CGMDv2:"), b
    return struct.unpack_from("=i", b, 7)[0]


# ---------------------------------------------------------------------- per-client offset operations
# Each runs on the member's own thread through GroupMember.call.

def commit_offsets(member: GroupMember, offsets: dict[int, int]) -> None:
    """Synchronously commit {partition: offset} for member.topic."""
    t = member.topic
    if member.client == "confluent":
        from confluent_kafka import TopicPartition
        res = member.call(lambda c: c.commit(offsets=[TopicPartition(t, p, o) for p, o in offsets.items()],
                                             asynchronous=False))
        assert all(tp.error is None for tp in res), res
    elif member.client == "kafka-python":
        from kafka import OffsetAndMetadata, TopicPartition
        member.call(lambda c: c.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1)
                                        for p, o in offsets.items()}))
    else:
        from aiokafka import TopicPartition
        member.call(lambda c: c.commit({TopicPartition(t, p): o for p, o in offsets.items()}))


def committed(member: GroupMember, partitions) -> dict[int, int | None]:
    t = member.topic
    if member.client == "confluent":
        from confluent_kafka import TopicPartition
        res = member.call(lambda c: c.committed([TopicPartition(t, p) for p in partitions], timeout=10))
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in res}
    if member.client == "kafka-python":
        from kafka import TopicPartition
        return member.call(lambda c: {p: c.committed(TopicPartition(t, p)) for p in partitions})
    from aiokafka import TopicPartition

    async def get(c):
        return {p: await c.committed(TopicPartition(t, p)) for p in partitions}
    return member.call(get)


def position(member: GroupMember, partitions) -> dict[int, int]:
    t = member.topic
    if member.client == "confluent":
        from confluent_kafka import TopicPartition
        return {tp.partition: tp.offset
                for tp in member.call(lambda c: c.position([TopicPartition(t, p) for p in partitions]))}
    if member.client == "kafka-python":
        from kafka import TopicPartition
        return member.call(lambda c: {p: c.position(TopicPartition(t, p)) for p in partitions})
    from aiokafka import TopicPartition

    async def get(c):
        return {p: await c.position(TopicPartition(t, p)) for p in partitions}
    return member.call(get)


# ---------------------------------------------------------------------- what the server received
class RequestLog:
    """Records every group-API request the server handles, with its answer. Installed on the running
    server object only (wraps Server.runtime.handle); nothing on disk changes.
    entries: (api_key, api_version, client_id, request body), in arrival order;
    calls: [arrived (monotonic), client_id, request, answered (monotonic) or None, response or None]."""
    LEAVE_GROUP = 13

    def __init__(self, server_thread) -> None:
        self.entries: list[tuple[int, int, str, object]] = []
        self.calls: list[list] = []

        def install():
            runtime = server_thread.server.runtime
            orig = runtime.handle

            async def handle(req, client_host, *args):         # args: the broker it came in on
                self.entries.append((req.api_key, req.api_version, req.client_id or "", req.body))
                call = [time.monotonic(), req.client_id or "", req.body, None, None]
                self.calls.append(call)
                resp = await orig(req, client_host, *args)
                call[3:] = [time.monotonic(), resp]
                return resp
            runtime.handle = handle
        server_thread.call(install)

    def dump(self, client_id: str, skip=(12,)) -> str:
        """One line per request of one client (heartbeats skipped by default), for failure messages."""
        t0 = self.calls[0][0] if self.calls else 0.0
        return "\n".join(f"  {t - t0:8.3f} {req} -> " + (f"{done - t0:8.3f} {resp}" if done else "NOT ANSWERED")
                         for t, cid, req, done, resp in list(self.calls)
                         if cid == client_id and req.API_KEY not in skip)

    def count(self, api_key: int, client_ids=None) -> int:
        return sum(1 for k, _, cid, _ in list(self.entries)
                   if k == api_key and (client_ids is None or cid in client_ids))


# ---------------------------------------------------------------------- a member in its own process
def member_main(argv: list[str]) -> None:
    """python -c '...member_main(sys.argv[1:])' client bootstrap group topic instance_id session_timeout_ms:
    joins, then prints one JSON line per assignment change ({"assigned": [...]}) until killed."""
    import json
    import sys
    client, bootstrap, group, topic, instance_id, session_ms = argv
    m = GroupMember(client, bootstrap, group, topic, instance_id, session_timeout_ms=int(session_ms)).start()
    last = None
    while True:
        if m.crash is not None:
            print(json.dumps({"crash": repr(m.crash)}), flush=True)
            sys.exit(1)
        a = m.assignment
        if a != last:
            print(json.dumps({"assigned": sorted(a)}), flush=True)
            last = a
        time.sleep(0.05)


def member_id(member: GroupMember) -> str:
    """The member id the client currently believes it has."""
    if member.client == "confluent":
        return member.call(lambda c: c.memberid())
    if member.client == "kafka-python":
        return member.call(lambda c: c.group_metadata().member_id)
    return member.call(lambda c: c._coordinator.member_id)     # aiokafka has no public accessor
