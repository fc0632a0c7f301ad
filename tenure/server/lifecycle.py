"""The server's lifecycle: recover (off the event loop), start serving, stop (stop accepting, drain the
connections within a bound, close the coordinator runtime, flush and close the logs), restart in place.

    server = Server(config)       # nothing opened yet
    await server.start()          # recovery on a worker thread, then listeners, timers, cleaner, admin
    ...
    await server.close()
"""
from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import shutil
from pathlib import Path

from tenure.broker.cluster import NO_LEADER, Cluster, LeaderChange
from tenure.broker.dataplane import Broker, Node
from tenure.broker.topics import TopicRegistry
from tenure.config import ServerConfig
from tenure.control.faults import Faults
from tenure.coordinator import GroupCoordinator
from tenure.coordinator.clock import CoordinatorClock
from tenure.coordinator.loader import iter_batches
from tenure.coordinator.runtime import CoordinatorRuntime
from tenure.coordinator.transactions import TransactionCoordinator, TxnTimeoutKey
from tenure.counters import Metrics
from tenure.protocol import txn_records
from tenure.protocol.apis import BROKER, GROUP, TRANSACTION
from tenure.protocol.internal_topics import OFFSETS_TOPIC, TRANSACTION_TOPIC, partition_for
from tenure.protocol.records import CoordinatorLoadRecord
from tenure.server.cleaner import LogCleaner
from tenure.server.connection import Connection, Peer, RequestBudget
from tenure.server.dispatch import Dispatcher
from tenure.server.listener import Listener, descriptor_room, effective_max_connections, fd_limit
from tenure.server.ratelog import RateLimitedLog
from tenure.server.routes import BrokerRoute, GroupRoute, TransactionRoute
from tenure.storage.compaction import CleanStats
from tenure.storage.datadir import DataDir
from tenure.storage.durability import Durability
from tenure.storage.segments import LogConfig

log = logging.getLogger("tenure.server")


class Server:
    def __init__(self, config: ServerConfig | None = None, *, faults: Faults | None = None,
                 metrics: Metrics | None = None) -> None:
        self.config = config = config if config is not None else ServerConfig()
        self.node = Node(config.advertised_host or config.host, config.port)       # broker 0
        # the brokers and every partition's replicas, leader and epoch (broker/cluster.py)
        self.cluster = Cluster(config.brokers, self.node.host, config.racks, config.replicas)
        self.cluster.on_leader_change.append(self._leader_changed)
        self._moving: set[asyncio.Task] = set()    # coordinator loads after a move (see _leader_changed)
        self.faults = faults or Faults()          # request-level fault injection (tenure/control/faults.py)
        self.metrics = metrics or Metrics()       # counters for /metrics and inspection (tenure/control/metrics.py)
        self.durability = Durability(config.fsync if config.data_dir else "never")
        self.durability.observe = self.metrics.fsync_seconds.observe
        self.data: DataDir | None = None
        self.topics: TopicRegistry | None = None  # set by start()'s recovery, as are broker and runtime
        self.runtime: CoordinatorRuntime | None = None
        self.clock: CoordinatorClock | None = None      # set by start()'s recovery, shared by the runtimes
        self.txn_runtime: CoordinatorRuntime | None = None     # the transaction coordinator, once asked for
        self._serving = False
        self.load_report = None
        self.cleaner: LogCleaner | None = None
        self.stop_requested = asyncio.Event()
        self.restart_requested = asyncio.Event()  # the admin endpoint's POST /restart (see reopen())
        self.fatal_error: BaseException | None = None
        self.max_connections = effective_max_connections(config)
        self.budget = RequestBudget(config.max_buffered_request_bytes)   # partial requests of all connections
        self.ratelog = RateLimitedLog(log, config.log_window_ms / 1000, config.log_burst)
        ids = itertools.count(1)                   # connection ids, unique across the brokers' listeners
        self.listeners = {b: Listener(self._connection, max_connections=self.max_connections, metrics=self.metrics,
                                      ratelog=self.ratelog, broker_id=b, ids=ids,
                                      refuse=lambda b=b: self.cluster.brokers[b].unreachable)
                          for b in self.cluster.brokers}
        self.dispatch: Dispatcher | None = None
        self.port: int | None = None
        self._loop_handler = None                  # (loop, its exception handler before start())
        self._admin = None                         # the HTTP admin endpoint's runner (tenure/control/http_server.py)
        self._admin_sock = None                    # ... its listening socket, bound in start()
        self._admin_task: asyncio.Task | None = None
        self._close_task: asyncio.Future | None = None
        self.admin_port: int | None = None

    # ------------------------------------------------------------------ recovery (on a worker thread)
    def _recover(self) -> None:
        """Open the data dir, recover and verify its logs, load __consumer_offsets into the coordinator:
        everything start() needs before it may listen. Runs on a worker thread (a large load must not
        stop the loop: timers, the admin endpoint and a restarting ServerThread's callers go on); it
        touches no loop object."""
        config = self.config
        try:
            self._open(config)
        except BaseException:
            self._close_logs(flush=False)          # release the data dir (its lock) for a retry
            self.topics = None
            raise

    def _open(self, config: ServerConfig) -> None:
        if config.data_dir is not None:
            self.data = DataDir.open(config.data_dir, LogConfig(segment_bytes=config.segment_bytes,
                                                                segment_ms=config.segment_ms))
            self.topics = TopicRegistry(config.default_partitions, self.data.open_log, self.data.catalog,
                                        config.max_partitions_per_topic, config.max_partitions,
                                        room=descriptor_room)
            self.topics.load()                     # opens (and verifies) every log; refuses before any cut
            self.data.finish_recovery()
            cluster_id = config.cluster_id or self.data.cluster_id()
        else:
            self.topics = TopicRegistry(config.default_partitions,
                                        max_partitions_per_topic=config.max_partitions_per_topic,
                                        max_partitions=config.max_partitions)
            cluster_id = config.cluster_id
        self.broker = Broker(self.node, self.topics, cluster_id=cluster_id,
                             auto_create_topics=config.auto_create_topics, durability=self.durability,
                             server_configs=self.static_configs, cluster=self.cluster)
        if self.cluster.has_racks:                 # the topic hashes (KIP-1101) cover the replicas' racks
            self.topics.replica_racks = self.cluster.replica_racks
        self.handlers = dict(self.broker.handlers)
        offsets = self.topics.get(OFFSETS_TOPIC)
        if offsets is None:
            offsets = self.topics.create(OFFSETS_TOPIC, config.offsets_partition_count, internal=True,
                                         configs={"cleanup.policy": "compact"})
        elif len(offsets.partitions) != config.offsets_partition_count:
            log.warning("%s keeps its %d partition(s) from the data dir (--offsets-partitions %d ignored: "
                        "groups map to partitions by that count)", OFFSETS_TOPIC, len(offsets.partitions),
                        config.offsets_partition_count)
        coordinator_config = config.coordinator_config()
        # the coordinators' one clock and timer wheel (the group and the transaction coordinator's runtimes)
        self.clock = CoordinatorClock()
        self.runtime = CoordinatorRuntime(lambda p: GroupCoordinator(coordinator_config, partition=p, topics=self.topics), offsets,
                                          clock=self.clock, on_fatal=self._fatal, metrics=self.metrics,
                                          hosted_on=lambda p: self.cluster.leader_of(OFFSETS_TOPIC, p),
                                          partition_writer=self.broker.replicas)
        self.load_report = self.runtime.load()
        for part in range(len(offsets.partitions)):     # the coordinators are placed from the start
            self.cluster.state(OFFSETS_TOPIC, part)
        if self.data is not None:
            r = self.load_report
            log.info("loaded %s: %d record(s) in %d batch(es), %d group(s), in %.3fs (%d latest per key "
                     "replayed)", OFFSETS_TOPIC, r.records, r.batches, r.groups, r.seconds, r.replayed)
        self.broker.start_transactions = self._start_transactions
        # a transaction's marker for __consumer_offsets: the group runtime's writer, replayed by its shard
        self.broker.internal_marker = self.runtime.write_marker
        if self.topics.get(TRANSACTION_TOPIC) is not None:      # transactions from a previous run: load them
            self._start_transactions()
        broker_route = BrokerRoute(self.handlers)
        routes = {BROKER: broker_route, GROUP: GroupRoute(self.runtime, self.topics, self._start_transactions),
                  TRANSACTION: TransactionRoute(self._start_transactions, broker_route)}
        self.dispatch = Dispatcher(faults=self.faults, metrics=self.metrics, routes=routes,
                                   clock_ms=self.runtime.clock_ms, cluster=self.cluster)

    def _start_transactions(self) -> CoordinatorRuntime:
        """The transaction coordinator's runtime, started once: on the first transactional request, as
        Kafka creates __transaction_state on the first lookup of a transaction coordinator, or at start-up
        when the data dir holds one. Loading replays its records; the data partitions' open and aborted
        transactions are read back from their logs."""
        if self.txn_runtime is not None:
            return self.txn_runtime
        topic = self.topics.get(TRANSACTION_TOPIC)
        if topic is None:
            topic = self.topics.create(TRANSACTION_TOPIC, 1, internal=True, configs={"cleanup.policy": "compact"})
        else:
            for t in self.topics.all():     # __consumer_offsets too: offsets committed in a transaction
                for p in self.broker.replicas.of_topic(t.name):
                    p.txns.rebuild(iter_batches(p.log))

        def partitions_of(name: str) -> int | None:
            t = self.topics.get(name)
            return len(t.partitions) if t is not None and not t.internal else None

        groups = self.runtime

        def offsets_partition_of(group_id: str) -> tuple[str, int]:
            return OFFSETS_TOPIC, partition_for(group_id, groups.partitions)

        def new_coordinator(part: int) -> TransactionCoordinator:    # one per load (a move loads a new one)
            return TransactionCoordinator(self.broker.producers.next_producer_id, partitions_of,
                                          offsets_partition_of)
        # its own runtime over the shared clock and timer wheel
        runtime = CoordinatorRuntime(new_coordinator, topic, clock=self.clock, partition_writer=self.broker.replicas,
                                     on_fatal=self._fatal, metrics=self.metrics,
                                     codec=txn_records, write_markers=self.broker.write_txn_markers,
                                     timer_keys=(TxnTimeoutKey,),
                                     hosted_on=lambda p: self.cluster.leader_of(TRANSACTION_TOPIC, p))
        report = runtime.load()
        coordinator = runtime.shards[0]
        self.broker.producers.reserve(coordinator.max_producer_id())
        log.info("loaded %s: %d transactional id(s) in %.3fs", TRANSACTION_TOPIC, len(coordinator.transactions),
                 report.seconds)
        self.txn_runtime, self.broker.transactions = runtime, coordinator
        if self._serving:                       # started lazily while serving: its timers now
            runtime.start_timers()
        return runtime

    def static_configs(self) -> dict[str, str | None]:
        """The broker configs DescribeConfigs reports as set by the server's options (STATIC_BROKER_CONFIG; the
        broker adds those it knows itself)."""
        c = self.config
        offsets = self.topics.get(OFFSETS_TOPIC)
        return {"listeners": f"PLAINTEXT://{c.host}:{self.port if self.port is not None else c.port}",
                "offsets.topic.num.partitions": str(len(offsets.partitions) if offsets else
                                                    c.offsets_partition_count),
                "socket.request.max.bytes": str(c.max_frame_bytes),
                "group.initial.rebalance.delay.ms": str(c.initial_rebalance_delay_ms),
                "group.min.session.timeout.ms": str(c.min_session_timeout_ms),
                "group.max.session.timeout.ms": str(c.max_session_timeout_ms),
                "group.max.size": str(c.max_group_size if c.max_group_size is not None else 2**31 - 1),
                "log.cleaner.backoff.ms": str(c.cleaner_interval_ms),
                **({"log.segment.bytes": str(c.segment_bytes)} if c.data_dir else {})}

    @property
    def bootstrap(self) -> str:
        """H:P1,H:P2,...: every broker (a `bootstrap.servers` string)."""
        return ",".join(f"{b.host}:{b.port}" for b in self.cluster.brokers.values())

    @property
    def ports(self) -> tuple[int, ...]:
        return tuple(b.port for b in self.cluster.brokers.values())

    # ------------------------------------------------------------------ start
    async def start(self) -> None:
        """Recover on a worker thread (the loop keeps running meanwhile), then serve."""
        await asyncio.get_running_loop().run_in_executor(None, self._recover)
        await self._start_serving()

    async def _start_serving(self) -> None:
        """After recovery: bind and accept, session timers, the log cleaner, the admin endpoint."""
        loop = asyncio.get_running_loop()
        for b, port in zip(self.cluster.brokers, self.config.ports(), strict=True):
            self.cluster.brokers[b].port = self.listeners[b].start(self.config.host, port)
        self.port = self.node.port = self.cluster.brokers[0].port
        self._loop_handler = (loop, loop.get_exception_handler())
        loop.set_exception_handler(self._loop_exception)
        self.runtime.start_timers()
        if self.txn_runtime is not None:
            self.txn_runtime.start_timers()
        self._serving = True
        self.cleaner = LogCleaner(self.topics, self.runtime.clock_ms, interval_ms=self.config.cleaner_interval_ms,
                                  pass_bytes=self.config.cleaner_pass_bytes)
        if self.data is not None:
            self.cleaner.start()
        if self.config.admin_port is not None:
            await self._start_admin()

    def _connection(self, peer: Peer, reader, writer) -> Connection:
        """The Listener's factory: a Connection served by this server's dispatcher."""
        c = self.config
        return Connection(peer, reader, writer, self.dispatch, max_frame_bytes=c.max_frame_bytes,
                          limits=c.decode_limits(), budget=self.budget, idle_ms=c.connections_max_idle_ms,
                          metrics=self.metrics, ratelog=self.ratelog)

    @property
    def buffered_request_bytes(self) -> int:
        """Bytes of partial requests all connections hold now (the --max-buffered-request-bytes budget's use)."""
        return self.budget.used

    async def _start_admin(self) -> None:
        """Bind the admin endpoint's socket now (connections wait in its backlog) and serve it as soon as
        the HTTP library is imported, in the background: that import is most of a start-up's time."""
        from tenure.control.http_server import bind_admin, is_loopback
        c = self.config
        try:
            self._admin_sock, fell_back = bind_admin(c.admin_host, c.admin_port, fallback=c.admin_port_fallback)
        except OSError as exc:
            raise OSError(exc.errno, f"admin endpoint on {c.admin_host}:{c.admin_port}: {exc.strerror or exc} "
                                     "(--admin-port 0 picks a free port, --no-admin turns it off)") from exc
        self.admin_port = self._admin_sock.getsockname()[1]
        self._admin_task = asyncio.get_running_loop().create_task(self._serve_admin())
        host = f"[{c.admin_host}]" if ":" in c.admin_host else c.admin_host
        notes = [f"port {c.admin_port} was in use"] if fell_back else []
        if is_loopback(c.admin_host):
            notes.append("loopback only; --admin-host to change")
        else:
            notes.append("reachable from other machines (--admin-host)")
        notes.append("token required" if c.admin_token else "no token")
        log.info("admin endpoint on http://%s:%d (%s)", host, self.admin_port, "; ".join(notes))
        if not is_loopback(c.admin_host) and not c.admin_token:
            log.warning("the admin endpoint listens on %s without a token: whoever reaches it can change this "
                        "server (faults, clock, restart); set --admin-token", c.admin_host)

    async def _serve_admin(self) -> None:
        from tenure.control.http_server import serve_admin
        try:
            self._admin = await serve_admin(self, self._admin_sock, token=self.config.admin_token)
        except Exception:
            log.exception("the admin endpoint could not start; it is off")
            self._admin_sock.close()

    def kafka_sockets(self) -> list[tuple[str, int]]:
        """(address, port) of each socket the Kafka listener accepts on."""
        return [tuple(sock.getsockname()[:2]) for lst in self.listeners.values() for sock in lst.sockets]

    def admin_sockets(self) -> list[tuple[str, int]]:
        """(address, port) the admin endpoint listens on (none when it is off)."""
        return [tuple(self._admin_sock.getsockname()[:2])] if self._admin_sock is not None else []

    @property
    def admin_address(self) -> str | None:
        """H:P to reach the admin endpoint from this machine (a wildcard bind is reached on loopback)."""
        if self.admin_port is None:
            return None
        host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.config.admin_host,
                                                                          self.config.admin_host)
        return f"[{host}]:{self.admin_port}" if ":" in host else f"{host}:{self.admin_port}"

    def _fatal(self, exc: BaseException) -> None:
        self.fatal_error = exc
        self.stop_requested.set()

    def _loop_exception(self, loop, context: dict) -> None:
        """asyncio's own accept loops (the admin endpoint's) report every failed accept() - thousands a
        second at the descriptor limit; those go to the rate-limited log, everything else on as before."""
        if context.get("message") == "socket.accept() out of system resource":
            self.metrics.accept_errors += 1
            self.ratelog.log("accept", logging.ERROR, "cannot accept connections on %s: %s (descriptor limit %s)",
                             context.get("socket"), context.get("exception"), fd_limit(), burst=1)
            return
        previous = self._loop_handler[1] if self._loop_handler else None
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    # ------------------------------------------------------------------ the cluster's controls (docs/cluster.md)
    def _leader_changed(self, change: LeaderChange, cause: str) -> None:
        """A partition's leader changed. An offsets partition's coordinator moves with it: the shard unloads
        now, the new leader loads it in the background (14 meanwhile) and writes a CoordinatorLoadRecord.
        (__transaction_state's coordinator is answered by its new leader at once: its one shard stays.)"""
        runtime = {OFFSETS_TOPIC: self.runtime, TRANSACTION_TOPIC: self.txn_runtime}.get(change.topic)
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
        record = CoordinatorLoadRecord(part, to, change.old, cause, change.epoch, self.runtime.clock_ms()) \
            if runtime is self.runtime else None
        task = asyncio.get_running_loop().create_task(self._finish_move(runtime, change.topic, part, to, record))
        self._moving.add(task)
        task.add_done_callback(self._moving.discard)

    async def _finish_move(self, runtime: CoordinatorRuntime, topic: str, part: int, to: int,
                           record: CoordinatorLoadRecord | None) -> None:
        try:
            report = await runtime.finish_move(part, record)
        except Exception:
            log.exception("loading %s-%d on broker %d failed", topic, part, to)
            return
        if report is None:
            return
        if runtime is self.txn_runtime:          # the broker's Produce checks ask the loaded coordinator
            self.broker.transactions = runtime.shards[part]
        log.info("broker %d loaded %s-%d: %d record(s) in %.3fs", to, topic, part, report.records, report.seconds)

    async def moves_done(self) -> None:
        """Wait until every coordinator move under way has loaded (a control returns after it)."""
        while self._moving:
            await asyncio.wait(list(self._moving))

    def _check_broker(self, broker_id) -> int:
        if isinstance(broker_id, bool) or not isinstance(broker_id, int) or broker_id not in self.cluster.brokers:
            raise ValueError(f"no broker {broker_id!r}: the brokers are 0..{len(self.cluster.brokers) - 1}")
        return broker_id

    async def stop_broker(self, broker_id: int) -> None:
        """Stop one broker: its listener closes, its connections drop, each partition it led moves to
        another in-sync replica (epochs bump) and the coordinators it hosted load there."""
        b = self.cluster.brokers[self._check_broker(broker_id)]
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
        b = self.cluster.brokers[self._check_broker(broker_id)]
        if b.up:
            return
        self.listeners[broker_id].start(self.config.host, b.port)
        self.cluster.start(broker_id)
        self.topics.topics_changed()
        log.info("broker %d started", broker_id, extra={"event": "broker_started", "broker": broker_id})
        await self.moves_done()

    async def move_leader(self, topic: str, partition: int, to_broker: int) -> None:
        if self.topics.partition(topic, partition) is None:
            raise ValueError(f"unknown topic-partition {topic}-{partition}")
        self.cluster.move_leader(topic, partition, self._check_broker(to_broker))
        self.topics.topics_changed([topic])        # a new leader may be a new replica (on another rack)
        await self.moves_done()

    async def move_coordinator(self, group_id: str, to_broker: int) -> int:
        """Move the coordinator of a group (its offsets partition's leadership) to `to_broker`; returns
        the offsets partition moved."""
        part = self.runtime.partition_of(group_id)
        await self.move_leader(OFFSETS_TOPIC, part, to_broker)
        return part

    def coordinator_of(self, group_id: str) -> int:
        return self.cluster.leader_of(OFFSETS_TOPIC, self.runtime.partition_of(group_id))

    # ------------------------------------------------------------------ log cleaner (tenure/server/cleaner.py)
    @property
    def cleaner_stats(self) -> CleanStats:
        """What the log cleaner has done since start."""
        return self.cleaner.stats if self.cleaner is not None else CleanStats()

    async def compact_now(self) -> CleanStats:
        """Clean every compacted log until a pass finds nothing to do (call on the server's loop)."""
        return await self.cleaner.compact_now()

    # ------------------------------------------------------------------ stop
    async def close(self) -> None:
        """Close once; a second caller waits for the first close, and cancelling a caller does not
        interrupt the close (the data dir's lock is always released)."""
        if self._close_task is None:
            self._close_task = asyncio.ensure_future(self._close())
        await asyncio.shield(self._close_task)

    async def _close(self) -> None:
        """Stop accepting (Kafka and admin), drain the connections within shutdown_timeout_s - a request
        being served is answered (writes waiting for their fsync get it; requests parked in the coordinator,
        a JoinGroup or SyncGroup waiting for the group, are answered NOT_COORDINATOR as when a coordinator
        unloads; a long-polling Fetch answers what it has at once) or its connection closed after the bound -
        then close the runtime, the cleaner, the logs."""
        bound = self.config.shutdown_timeout_s
        for listener in self.listeners.values():
            await listener.stop_accepting(bound)
        await self._stop_admin(bound)
        for task in list(self._moving):
            task.cancel()
        if self.runtime is not None:
            for listener in self.listeners.values():
                listener.begin_drain()
            self.broker.stop_waiting()                 # long-polling fetches answer now
            if self._syncing():                        # writes in flight: their answers follow their fsync
                await asyncio.wait(self._syncing(), timeout=bound)
            self.runtime.unload()
        await asyncio.gather(*(listener.drain(bound) for listener in self.listeners.values()))
        if self.runtime is not None:
            self.runtime.close()
        if self.txn_runtime is not None:
            self.txn_runtime.close()
        if self.runtime is not None:
            self.clock.close()
        if self.cleaner is not None:                   # stop the log cleaner before its logs close
            await self.cleaner.stop(bound)
        self.ratelog.close()
        if self._loop_handler is not None:
            loop, previous = self._loop_handler
            if loop.get_exception_handler() == self._loop_exception:
                loop.set_exception_handler(previous)
            self._loop_handler = None
        if self._syncing():
            await asyncio.wait(self._syncing(), timeout=bound)
        self._close_logs(flush=self.fatal_error is None)

    def _syncing(self) -> list:
        """The coordinators' writes waiting for their fsync."""
        return [task for rt in (self.runtime, self.txn_runtime) if rt is not None for task in rt._syncing]

    async def _stop_admin(self, bound: float) -> None:
        if self._admin_task is not None:
            self._admin_task.cancel()
            await asyncio.wait([self._admin_task], timeout=bound)
            self._admin_task = None
        if self._admin is not None:
            await self._admin.cleanup()
            self._admin = None
        if self._admin_sock is not None:
            self._admin_sock.close()

    def _close_logs(self, *, flush: bool) -> None:
        """Flush (unless after a storage failure) and close every partition log, then release the data dir."""
        for topic in self.topics.all() if self.topics is not None else ():
            for plog in topic.partitions:
                if flush:
                    try:
                        plog.flush()
                    except OSError as exc:
                        log.error("flushing %s at shutdown: %s", plog.name, exc)
                plog.close()
        if self.data is not None:
            self.data.close()
            self.data = None


async def reopen(server: Server, *, wipe: bool = False, metrics: Metrics | None = None) -> Server:
    """Restart a server in place: close it (flushing its logs), then open a new one on the same ports,
    data dir, fault rules and metrics - what a broker restart is to its clients (connections drop,
    they reconnect). With a data dir everything acknowledged comes back from the log; without one the
    new server starts empty. `wipe` empties the data dir in between (a fresh server at the same
    address: the pytest plugin's per-test reset), `metrics` replaces the counters."""
    config = dataclasses.replace(server.config, port=server.port or server.config.port,
                                 broker_ports=server.ports if server.port else server.config.broker_ports,
                                 admin_port=server.admin_port if server.config.admin_port is not None else None)
    faults, metrics = server.faults, metrics or server.metrics
    await server.close()
    if server.fatal_error is not None:
        raise RuntimeError(f"not restarting a server stopped by a storage failure: {server.fatal_error}")
    if wipe and config.data_dir:
        for child in list(Path(config.data_dir).iterdir()):
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    new = Server(config, faults=faults, metrics=metrics)
    try:
        await new.start()
    except BaseException:
        await new.close()
        raise
    log.info("restarted on %s", new.bootstrap)
    return new

