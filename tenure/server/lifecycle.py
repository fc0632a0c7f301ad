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
import os
import shutil
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from tenure.broker.cluster import Cluster
from tenure.broker.dataplane import Broker, Node
from tenure.broker.retention import enforce_retention
from tenure.broker.topics import TopicRegistry
from tenure.config import ServerConfig
from tenure.control.capture import Capture
from tenure.control.faults import Faults
from tenure.control.hooks import Hooks
from tenure.control.network import Network
from tenure.coordinator.clock import CoordinatorClock
from tenure.coordinator.group_runtime import GroupRuntime
from tenure.coordinator.loader import LoadReport
from tenure.counters import Metrics
from tenure.deferred import deferred
from tenure.protocol.internal_topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC
from tenure.server import eventloop
from tenure.server.build import Parts, TransactionCoordinatorHandle, build, open_topics
from tenure.server.cleaner import LogCleaner, RetentionChecker, compaction
from tenure.server.connection import Connection, Peer, RequestBudget
from tenure.server.dispatch import Dispatcher
from tenure.server.listener import Listener, effective_max_connections, fd_limit, resolve_ip_overrides
from tenure.server.moves import Moves
from tenure.server.ratelog import RateLimitedLog
from tenure.server.security import ServerSecurity
from tenure.storage.durability import Durability

if TYPE_CHECKING:            # imported when first used (deferred.py)
    from tenure.coordinator.txn_runtime import TransactionRuntime
    from tenure.security.authorizer import Authorizer
    from tenure.security.tls import ClientCert
    from tenure.storage.compaction import CleanStats
    from tenure.storage.datadir import DataDir

log = logging.getLogger("tenure.server")
datadir = deferred("tenure.storage.datadir")     # the data dir: opened by build.py's open_topics with --data-dir
T = TypeVar("T")


class StartupError(OSError):
    """A start-up step failed: the message names what failed, the value and the flag that set it (the errno of
    the OSError behind it is kept)."""

    def __init__(self, cause: OSError, what: str, value: object = None, hint: str = "") -> None:
        # the system's message for the errno (socket.create_server adds the address to its own), else the cause's
        reason = os.strerror(cause.errno) if cause.errno and cause.errno > 0 else (cause.strerror or str(cause))
        if cause.filename is not None and str(cause.filename) != str(value):
            reason += f" ({cause.filename})"
        super().__init__(cause.errno, f"{what}: {reason}" + (f"; {hint}" if hint else ""))

    def __str__(self) -> str:
        return str(self.strerror)


def _flag_value(flag: str, value: object) -> str:
    return f"{flag} {value}" if value not in ("", None) else f"{flag} ''"


class _Built(Generic[T]):
    """A server attribute that is one of its built Parts (build.py): RuntimeError before start()."""

    def __init__(self, field: str) -> None:
        self.field = field

    def __get__(self, server: Server, owner: type) -> T:
        return getattr(server._parts(), self.field)


class Server:
    def __init__(self, config: ServerConfig | None = None, *, faults: Faults | None = None,
                 metrics: Metrics | None = None, hooks: Hooks | None = None, network: Network | None = None,
                 capture: Capture | None = None) -> None:
        self.config = config = config if config is not None else ServerConfig()
        self.node = Node(config.advertised_host or config.host, config.port)       # broker 0
        # the brokers and every partition's replicas, leader and epoch (broker/cluster.py)
        self.cluster = Cluster(config.brokers, self.node.host, config.racks, config.replicas)
        self.served = config.served_apis()        # the APIs, versions and features presented (--kafka-version)
        self.faults = faults or Faults()          # request-level fault injection (tenure/control/faults.py)
        self.metrics = metrics or Metrics()       # counters for /metrics and inspection (tenure/control/metrics.py)
        self.hooks = hooks or Hooks()             # a test's request hooks (tenure/control/hooks.py)
        self.network = network or Network()       # network faults (tenure/control/network.py)
        self.capture = capture or Capture(config.capture_requests)     # request capture (control/capture.py)
        self.durability = Durability(config.fsync if config.data_dir else "never",
                                     observe=self.metrics.fsync_seconds.observe)
        self.data: DataDir | None = None
        self._topics: TopicRegistry | None = None     # opened by start()'s recovery, first
        self.parts: Parts | None = None               # then built from them (build.py)
        self.moves: Moves | None = None           # leadership moves (moves.py), once built
        self._serving = False
        self.cleaner: LogCleaner | None = None
        self.retention: RetentionChecker | None = None
        self.stop_requested = asyncio.Event()
        self.restart_requested = asyncio.Event()  # the admin endpoint's POST /restart (see reopen())
        self.fatal_error: BaseException | None = None
        self.max_connections = effective_max_connections(config)
        self.budget = RequestBudget(config.max_buffered_request_bytes)   # partial requests of all connections
        self.ratelog = RateLimitedLog(log, config.log_window_ms / 1000, config.log_burst)
        ids = itertools.count(1)                   # connection ids, unique across the brokers' listeners
        self.security = ServerSecurity(config)     # the listeners every broker has, TLS, SASL (security.py)
        self.listener_specs = self.security.specs
        self.listeners = {b: Listener(self._connection, max_connections=self.max_connections, metrics=self.metrics,
                                      ratelog=self.ratelog, broker_id=b, ids=ids,
                                      refuse=self._unreachable(b), max_per_ip=config.max_connections_per_ip,
                                      endpoints=self.security.endpoints(b))
                          for b in self.cluster.brokers}
        self.port: int | None = None
        self._loop_handler: tuple[asyncio.AbstractEventLoop, Any] | None = None   # the loop's handler before start()
        self._admin: Any = None                    # the HTTP admin endpoint's runner (tenure/control/http_server.py)
        self._admin_sock: socket.socket | None = None    # ... its listening socket, bound in start()
        self._admin_task: asyncio.Task | None = None
        self._close_task: asyncio.Future | None = None
        self._checkpointer: asyncio.Task | None = None   # the recovery-point checkpoint's period (with a data dir)
        self.admin_port: int | None = None

    # ---- listeners, TLS, users, connections (security.py; the admin endpoint's /users and /connections)
    def listener_bootstrap(self) -> dict[str, str]:
        """{listener name: "H:P1,H:P2,..."}: every broker's address on each listener."""
        return self.security.bootstrap(list(self.cluster.brokers.values()))

    @property
    def ca_file(self) -> str | None:
        """The CA certificate (PEM) clients of the TLS listeners trust (None: no TLS listener)."""
        return self.security.ca_file

    def issue_client_cert(self, common_name: str, directory: str | None = None) -> ClientCert:
        """A client certificate for `common_name` from the generated CA (SSL listeners with client auth)."""
        return self.security.issue_client_cert(common_name, directory)

    def list_users(self) -> list[dict]:
        """Each SASL user and its SCRAM credentials' mechanisms and iterations (never a secret)."""
        return [{"name": name, "credentials": [{"mechanism": m, "iterations": i} for m, i in creds]}
                for name, creds in self._parts().users.describe().items()]

    def add_user(self, name: str, password: str) -> None:
        """Add (or set the password of) a SASL user: both SCRAM credentials, PLAIN checks against them."""
        self._parts().users.add(name, password)

    def remove_user(self, name: str) -> bool:
        """Remove a SASL user (its connections stay; it cannot authenticate again); False if unknown."""
        return self._parts().users.remove(name)

    def connections(self) -> list[dict]:
        """The open client connections: id, broker, listener, security protocol, principal, client address."""
        out = []
        for b, lst in self.listeners.items():
            for conn in lst.connections():
                p = conn.peer
                address = f"{p.address[0]}:{p.address[1]}" if isinstance(p.address, tuple) else str(p.address)
                out.append({"id": p.conn_id, "broker": b, "listener": p.listener, "protocol": p.protocol,
                            "principal": p.principal, "address": address})
        return sorted(out, key=lambda c: c["id"])

    def _unreachable(self, broker_id: int) -> Callable[[], bool]:
        """Whether broker `broker_id` refuses connections now (set_broker_unreachable)."""
        return lambda: self.cluster.brokers[broker_id].unreachable

    # ------------------------------------------------------------------ recovery (on a worker thread)
    def _recover(self) -> None:
        """Open the data dir, recover and verify its logs, load __consumer_offsets into the coordinator:
        everything start() needs before it may listen. Runs on a worker thread (a large load must not
        stop the loop: timers, the admin endpoint and a restarting ServerThread's callers go on); it
        touches no loop object."""
        config = self.config
        try:
            self._open(config)
        except BaseException as exc:
            self._close_logs(flush=False, refused=True)   # release the data dir (its lock) for a retry
            self._topics = None
            if isinstance(exc, OSError) and not isinstance(exc, datadir.DataDirLocked | StartupError) and config.data_dir:
                raise StartupError(exc, f"cannot use the data dir {config.data_dir} (--data-dir)",
                                   config.data_dir) from exc
            raise

    def _open(self, config: ServerConfig) -> None:
        self.data, self._topics, cluster_id = open_topics(config, self.cluster)
        parts = self.parts = build(config, self.data, self._topics, cluster_id, node=self.node, cluster=self.cluster,
                                   durability=self.durability, faults=self.faults, metrics=self.metrics,
                                   hooks=self.hooks, capture=self.capture, on_fatal=self._fatal, static_configs=self.static_configs,
                                   serving=lambda: self._serving)
        self.moves = Moves(config, self.cluster, self.listeners, parts.topics, parts.groups, parts.txn_coordinator,
                           parts.share_state)
        self.cluster.on_leader_change.append(self.moves.leader_changed)

    # the parts, once built (an error before start())
    def _parts(self) -> Parts:
        if self.parts is None:
            raise RuntimeError("the server is not started")
        return self.parts

    topics = _Built[TopicRegistry]("topics")
    broker = _Built[Broker]("broker")
    handlers = _Built[dict]("handlers")                     # the broker's handlers by API key (a test may wrap one)
    runtime = _Built[GroupRuntime]("groups")                # the group coordinator's runtime
    txn_coordinator = _Built[TransactionCoordinatorHandle]("txn_coordinator")
    dispatch = _Built[Dispatcher]("dispatch")
    clock = _Built[CoordinatorClock]("clock")
    load_report = _Built[LoadReport]("load_report")

    @property
    def authorizer(self) -> Authorizer | None:
        """The ACLs (--authorizer); None: no authorizer. (A property, not a `_Built`: its class is imported only
        when --authorizer is on.)"""
        return self._parts().authorizer

    @property
    def txn_runtime(self) -> TransactionRuntime | None:
        """The transaction coordinator's runtime, once started (tenure/server/build.py Transactions)."""
        return self.txn_coordinator.runtime if self.parts is not None else None

    def static_configs(self) -> dict[str, str | None]:
        """The broker configs DescribeConfigs reports as set by the server's options (STATIC_BROKER_CONFIG; the
        broker adds those it knows itself)."""
        c = self.config
        offsets = self.topics.get(OFFSETS_TOPIC)
        share = self.topics.get(SHARE_STATE_TOPIC)
        return {**self.security.static_configs(self.listeners[0].endpoints),
                "offsets.topic.num.partitions": str(len(offsets.partitions) if offsets else
                                                    c.offsets_partition_count),
                "socket.request.max.bytes": str(c.max_frame_bytes),
                "group.initial.rebalance.delay.ms": str(c.initial_rebalance_delay_ms),
                "group.min.session.timeout.ms": str(c.min_session_timeout_ms),
                "group.max.session.timeout.ms": str(c.max_session_timeout_ms),
                "group.max.size": str(c.max_group_size if c.max_group_size is not None else 2**31 - 1),
                "group.consumer.session.timeout.ms": str(c.consumer_session_timeout_ms),
                "group.consumer.heartbeat.interval.ms": str(c.consumer_heartbeat_interval_ms),
                "group.consumer.migration.policy": c.consumer_migration_policy,
                "group.share.session.timeout.ms": str(c.share_session_timeout_ms),
                "group.share.heartbeat.interval.ms": str(c.share_heartbeat_interval_ms),
                "share.coordinator.state.topic.num.partitions": str(len(share.partitions) if share else
                                                                    c.share_state_partitions),
                "log.cleaner.backoff.ms": str(c.cleaner_interval_ms),
                "log.retention.check.interval.ms": str(c.retention_check_interval_ms),
                **({"replica.selector.class": c.replica_selector_class} if c.replica_selector_class else {}),
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
        c = self.config
        try:
            by_address = resolve_ip_overrides(c.max_connections_per_ip_overrides)
        except OSError as exc:
            raise StartupError(exc, f"cannot resolve the hosts of --max-connections-per-ip-overrides "
                                    f"{c.max_connections_per_ip_overrides}") from exc
        for b in self.cluster.brokers:
            node = self.cluster.brokers[b]
            try:
                node.port = self.listeners[b].start(ip_overrides=by_address)
            except OSError as exc:
                ep = getattr(exc, "endpoint", self.listeners[b].endpoints[0])
                which = "" if c.brokers == 1 else f"broker {b} "
                if c.listeners:
                    how = "" if c.brokers == 1 else ": broker N listens on the listener's port + N"
                    flags = f"--listener {ep.name}{how}"
                else:
                    how = "" if c.brokers == 1 else ": broker N listens on --port + N"
                    flags = f"{_flag_value('--host', c.host)}, --port {c.port}{how}"
                raise StartupError(exc, f"{which}cannot listen on {ep.host}:{ep.port} ({flags})") from exc
            node.endpoints = {ep.name: (c.advertised_host or ep.host, ep.port) for ep in self.listeners[b].endpoints}
        self.port = self.node.port = self.cluster.brokers[0].port
        log.info("event loop: %s", eventloop.describe(loop))     # uvloop's or asyncio's (eventloop.py)
        self._loop_handler = (loop, loop.get_exception_handler())
        loop.set_exception_handler(self._loop_exception)
        self.runtime.start_timers()
        if self.runtime.loading and self.config.load_in_background:
            self._moves().load_at_start(self.load_report)      # --load-in-background: 14 until loaded
        if self.txn_runtime is not None:
            self.txn_runtime.start_timers()
        self._serving = True
        self.cleaner = LogCleaner(self.topics, self.runtime.clock_ms, interval_ms=self.config.cleaner_interval_ms,
                                  pass_bytes=self.config.cleaner_pass_bytes)
        if self.data is not None:
            self.cleaner.start()
        broker = self.broker
        self.retention = RetentionChecker(lambda now: enforce_retention(broker.topics, broker.replicas, now),
                                          self.runtime.clock_ms, self.config.retention_check_interval_ms)
        self.retention.start()
        if self.data is not None and c.log_flush_offset_checkpoint_interval_ms > 0:
            self._checkpointer = loop.create_task(self._checkpoint_recovery_points(
                self.data, c.log_flush_offset_checkpoint_interval_ms / 1000))
        if self.config.admin_port is not None:
            await self._start_admin()

    async def _checkpoint_recovery_points(self, data: DataDir, interval_s: float) -> None:
        """Kafka's kafka-recovery-point-checkpoint task: the recovery points to their file (storage/datadir.py)."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval_s)
            try:
                await loop.run_in_executor(None, data.checkpoint_recovery_points)
            except OSError as exc:
                log.error("writing the recovery-point checkpoint: %s (the next try in %g s)", exc, interval_s)

    def _connection(self, peer: Peer, reader, writer) -> Connection:
        """The Listener's factory: a Connection served by this server's dispatcher."""
        c = self.config
        sasl = self.security.authenticator(peer.protocol, lambda: self._parts().users, self.clock.now_ms)
        return Connection(peer, reader, writer, self.dispatch, max_frame_bytes=c.max_frame_bytes,
                          limits=c.decode_limits(), budget=self.budget, idle_ms=c.connections_max_idle_ms,
                          metrics=self.metrics, ratelog=self.ratelog, network=self.network, sasl=sasl,
                          failed_auth_delay_ms=c.failed_authentication_delay_ms, served=self.served)

    @property
    def buffered_request_bytes(self) -> int:
        """Bytes of partial requests all connections hold now (the --max-buffered-request-bytes budget's use)."""
        return self.budget.used

    async def _start_admin(self) -> None:
        """Bind the admin endpoint's socket now (connections wait in its backlog) and serve it as soon as
        the HTTP library is imported, in the background: that import is most of a start-up's time."""
        from tenure.control.admin_socket import bind_admin, is_loopback
        c = self.config
        assert c.admin_port is not None, "the admin endpoint is on"
        try:
            sock, fell_back = bind_admin(c.admin_host, c.admin_port, fallback=c.admin_port_fallback)
        except OSError as exc:
            raise StartupError(exc, f"the admin endpoint on {c.admin_host}:{c.admin_port} "
                                    f"({_flag_value('--admin-host', c.admin_host)}, --admin-port {c.admin_port}) "
                                    "cannot listen",
                               hint="--admin-port 0 picks a free port, --no-admin turns it off") from exc
        self._admin_sock = sock
        self.admin_port = sock.getsockname()[1]
        self._admin_task = asyncio.get_running_loop().create_task(self._serve_admin(sock))
        host = f"[{c.admin_host}]" if ":" in c.admin_host else c.admin_host
        notes = [f"port {c.admin_port} was in use"] if fell_back else []
        if is_loopback(c.admin_host):
            notes.append("loopback only; --admin-host to change")
        elif c.admin_token:
            notes.append("reachable from other machines (--admin-host)")
        else:                       # other addresses may read; changes come from this machine only (http_server)
            notes.append("reachable from other machines (--admin-host): read-only for them without a token")
        notes.append("token required" if c.admin_token else "no token")
        log.info("admin endpoint on http://%s:%d (%s)", host, self.admin_port, "; ".join(notes))

    async def _serve_admin(self, sock: socket.socket) -> None:
        from tenure.control.admin_socket import import_in_thread
        try:
            http_server = await import_in_thread("tenure.control.http_server")   # (its routes, the controls' table)
            self._admin = await http_server.serve_admin(self, sock, token=self.config.admin_token)
        except Exception:
            log.exception("the admin endpoint could not start; it is off")
            sock.close()

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

    # ------------------------------------------------------------------ the cluster's controls (moves.py)
    async def stop_broker(self, broker_id: int) -> None:
        await self._moves().stop_broker(broker_id)

    async def start_broker(self, broker_id: int) -> None:
        await self._moves().start_broker(broker_id)

    async def move_leader(self, topic: str, partition: int, to_broker: int) -> None:
        await self._moves().move_leader(topic, partition, to_broker)

    async def move_coordinator(self, group_id: str, to_broker: int) -> int:
        return await self._moves().move_coordinator(group_id, to_broker)

    def coordinator_of(self, group_id: str) -> int:
        return self._moves().coordinator_of(group_id)

    async def moves_done(self) -> None:
        await self._moves().moves_done()

    def _moves(self) -> Moves:
        if self.moves is None:
            raise RuntimeError("the server is not started")
        return self.moves

    # ------------------------------------------------------------------ log cleaner (tenure/server/cleaner.py)
    @property
    def cleaner_stats(self) -> CleanStats:
        """What the log cleaner has done since start."""
        return self.cleaner.stats if self.cleaner is not None else compaction.CleanStats()

    async def compact_now(self) -> CleanStats:
        """Clean every compacted log until a pass finds nothing to do (call on the server's loop)."""
        if self.cleaner is None:
            raise RuntimeError("the server is not started")
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
        if self.moves is not None:
            self.moves.cancel()
        if self.parts is not None:
            for listener in self.listeners.values():
                listener.begin_drain()
            self.broker.stop_waiting()                 # long-polling fetches answer now
            if self._syncing():                        # writes in flight: their answers follow their fsync
                await asyncio.wait(self._syncing(), timeout=bound)
            self.runtime.unload()
        await asyncio.gather(*(listener.drain(bound) for listener in self.listeners.values()))
        if self.parts is not None:
            self.runtime.close()
        if self.txn_runtime is not None:
            self.txn_runtime.close()
        if self.parts is not None:
            self.clock.close()
        if self.cleaner is not None:                   # stop the log cleaner before its logs close
            await self.cleaner.stop(bound)
        if self.retention is not None:
            await self.retention.stop(bound)
        if self._checkpointer is not None:
            self._checkpointer.cancel()
            await asyncio.wait([self._checkpointer], timeout=bound)
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
        if self.parts is None:
            return []
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
            from tenure.control.admin_socket import imports_done
            await imports_done(bound)           # its modules' import, if still running: never exit under it

    def _close_logs(self, *, flush: bool, refused: bool = False) -> None:
        """Flush (unless after a storage failure) and close every partition log, then release the data dir;
        when every flush succeeded, leave the clean-shutdown marker first (storage/cleanshut.py)."""
        closed, clean = [], flush
        for topic in self._topics.all() if self._topics is not None else ():
            for plog in topic.partitions:
                if flush:
                    try:
                        plog.flush()
                    except OSError as exc:
                        clean = False
                        log.error("flushing %s at shutdown: %s", plog.name, exc)
                plog.close()
                closed.append(plog)
        if self.data is not None:
            if clean:
                try:
                    self.data.mark_clean_shutdown(closed)
                except OSError as exc:
                    log.error("writing the clean-shutdown marker: %s (the next start verifies every log)", exc)
            self.data.close(refused=refused)
            self.data = None


async def reopen(server: Server, *, wipe: bool = False, metrics: Metrics | None = None) -> Server:
    """Restart a server in place: close it (flushing its logs), then open a new one on the same ports,
    data dir, fault rules and metrics - what a broker restart is to its clients (connections drop,
    they reconnect). With a data dir everything acknowledged comes back from the log; without one the
    new server starts empty. `wipe` empties the data dir in between (a fresh server at the same
    address: the pytest plugin's per-test reset), `metrics` replaces the counters."""
    config = dataclasses.replace(server.config, port=server.port or server.config.port,
                                 broker_ports=server.ports if server.port else server.config.broker_ports,
                                 listener_ports=tuple(tuple(ep.port for ep in server.listeners[b].endpoints)
                                                      for b in server.cluster.brokers) if server.port
                                 else server.config.listener_ports,
                                 tls_dir=str(server.security.tls.directory) if server.security.tls is not None
                                 and server.security.tls.directory else server.config.tls_dir,
                                 admin_port=server.admin_port if server.config.admin_port is not None else None)
    faults, metrics = server.faults, metrics or server.metrics
    await server.close()
    if server.fatal_error is not None:
        raise RuntimeError(f"not restarting a server stopped by a storage failure: {server.fatal_error}")
    if wipe and config.data_dir:
        for child in list(Path(config.data_dir).iterdir()):
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    new = Server(config, faults=faults, metrics=metrics, hooks=server.hooks, network=server.network,
                 capture=server.capture)
    try:
        await new.start()
    except BaseException:
        await new.close()
        raise
    log.info("restarted on %s", new.bootstrap)
    return new

