"""The asyncio shell: accept connections, move frames to the sans-IO codec and the handlers, write
responses back in request order. Nothing here knows Kafka semantics beyond "one request, at most one
response, in order" - that lives in protocol/, broker/ and coordinator/.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import itertools
import logging
import os
import shutil
import socket
import threading
import time
from pathlib import Path

from tenure.broker.dataplane import Broker, Node
from tenure.broker.offsets_gate import merge_commit, request_order, split_commit
from tenure.broker.topics import OFFSETS_TOPIC, TopicError, TopicRegistry
from tenure.coordinator import GroupCoordinator
from tenure.protocol.apis import API_VERSIONS_KEY
from tenure.protocol.codec import (
    UnsupportedApiVersions, decode_request, encode_api_versions_error, encode_response,
    encode_unsupported_api_versions,
)
from tenure.protocol.error_responses import error_response
from tenure.protocol.errors import ClientProtocolError, ErrorCode, FrameTooLarge, RequestLimitExceeded, UnsupportedApi
from tenure.protocol.framing import FrameDecoder
from tenure.storage.compaction import CleanStats, CompactionPolicy, Compactor, is_compacted
from tenure.storage.datadir import DataDir
from tenure.storage.durability import Durability
from tenure.storage.segments import LogConfig, SegmentLog

from tenure.config import ServerConfig
from tenure.control.faults import Faults, error_name
from tenure.control.metrics import Metrics
from tenure.server.ratelog import RateLimitedLog
from tenure.coordinator.runtime import GROUP_APIS, CoordinatorRuntime, iter_batches, partition_for
from tenure.coordinator.transactions import TRANSACTION_TOPIC, TransactionCoordinator, is_transaction_request
from tenure.protocol import txn_records
from tenure.protocol.records import TransactionEnd

OFFSET_COMMIT_KEY = 8
TXN_OFFSET_COMMIT_KEY = 28
from tenure.control.views import GroupView, group_view, groups_view

log = logging.getLogger("tenure.server")
READ_CHUNK = 256 * 1024
DEFAULT_MAX_CONNECTIONS = 1000
ACCEPT_RETRY_S = 0.1           # after accept() failed for want of descriptors/memory, try again this much later
_ACCEPT_RESOURCE_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
FD_RESERVE = 32                # descriptors a topic creation leaves free (see descriptor_room)


def fd_limit() -> int | None:
    """The soft RLIMIT_NOFILE of this process (None where there is no such limit)."""
    try:
        import resource
    except ImportError:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def raise_fd_limit() -> tuple[int, int] | None:
    """Raise the soft descriptor limit to the hard one (what `tenure serve` does at start); returns
    (before, after), or None where the platform has no such limit."""
    try:
        import resource
    except ImportError:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:      # e.g. a hard limit above the kernel's nr_open
            log.warning("could not raise the descriptor limit from %d to %d: %s", soft, hard, exc)
            return soft, soft
    return soft, hard


def descriptor_room(what: str, n: int) -> None:
    """Refuse (KAFKA_STORAGE_ERROR) to open `n` more partition logs - one descriptor each - unless
    FD_RESERVE descriptors stay free after them, for the logs' own needs (segment rolls, the catalog,
    directory fsyncs): a creation must not leave a later group commit without a descriptor."""
    limit = fd_limit()
    if limit is None or not os.path.isdir("/proc/self/fd"):
        return                                     # no limit, or no cheap way to count (not Linux)
    try:
        used = len(os.listdir("/proc/self/fd"))
    except OSError as exc:                         # EMFILE: no room at all
        raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"{what} needs {n} file descriptor(s) (one per "
                                                        f"partition log) and none is free: {exc}") from exc
    if used + n + FD_RESERVE > limit:
        raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"{what} needs {n} file descriptor(s) (one per partition "
                                                        f"log): {used} of the limit of {limit} are open and "
                                                        f"{FD_RESERVE} are kept free for the logs")


def effective_max_connections(config: ServerConfig) -> int:
    """--max-connections, or by default 1000 or half the descriptor limit, whichever is lower (the
    other half is for segment files, the admin endpoint and the listener)."""
    if config.max_connections is not None:
        return config.max_connections
    limit = fd_limit()
    return DEFAULT_MAX_CONNECTIONS if limit is None else max(1, min(DEFAULT_MAX_CONNECTIONS, limit // 2))


def listen(host: str, port: int, backlog: int = 1024) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for every address `host` resolves to (one port for all)."""
    infos = dict.fromkeys((fam, typ, proto, addr) for fam, typ, proto, _, addr in
                          socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE))
    socks: list[socket.socket] = []
    try:
        for fam, typ, proto, addr in infos:
            s = socket.socket(fam, typ, proto)
            socks.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if fam == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(socks) > 1:
                addr = (addr[0], socks[0].getsockname()[1], *addr[2:])
            s.bind(addr)
            s.listen(backlog)
            s.setblocking(False)
    except BaseException:
        for s in socks:
            s.close()
        raise
    return socks


def response_error(body, depth: int = 3) -> int:
    """The first non-zero error code in a response body (top level first, then its arrays), or 0."""
    code = getattr(body, "error_code", 0) or 0
    if code or depth == 0:
        return code
    for name in getattr(body, "fields", {}):
        value = getattr(body, name, None)
        if isinstance(value, list):
            for item in value:
                if hasattr(item, "fields"):
                    code = response_error(item, depth - 1)
                    if code:
                        return code
    return 0


class Server:
    def __init__(self, config: ServerConfig = ServerConfig(), *, faults: Faults | None = None,
                 metrics: Metrics | None = None) -> None:
        self.config = config
        self.node = Node(config.advertised_host or config.host, config.port)
        self.faults = faults or Faults()          # request-level fault injection (tenure/control/faults.py)
        self.metrics = metrics or Metrics()       # counters for /metrics and inspection (tenure/control/metrics.py)
        self.durability = Durability(config.fsync if config.data_dir else "never")
        self.durability.observe = self.metrics.fsync_seconds.observe
        self.data: DataDir | None = None
        self._cleaner_task: asyncio.Task | None = None   # the log cleaner (see "log cleaner" below)
        self._cleaner_lock = asyncio.Lock()
        self._cleaner_next = 0
        self._compactor: Compactor | None = None
        self.cleaner_stats = CleanStats()                 # what the log cleaner has done since start
        try:
            self._open(config)
        except BaseException:
            if self.data is not None:              # release the data dir (its lock) for a retry
                for plog in self.data.logs.values():
                    plog.close()
                self.data.close()
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
                             server_configs=self.static_configs)
        self.handlers = dict(self.broker.handlers)
        offsets = self.topics.get(OFFSETS_TOPIC)
        if offsets is None:
            offsets = self.topics.create(OFFSETS_TOPIC, config.offsets_partitions, internal=True,
                                         configs={"cleanup.policy": "compact"})
        elif len(offsets.partitions) != config.offsets_partitions:
            log.warning("%s keeps its %d partition(s) from the data dir (--offsets-partitions %d ignored: "
                        "groups map to partitions by that count)", OFFSETS_TOPIC, len(offsets.partitions),
                        config.offsets_partitions)
        self.coordinator = GroupCoordinator(config.coordinator_config())
        self.stop_requested = asyncio.Event()
        self.restart_requested = asyncio.Event()  # the admin endpoint's POST /restart (see reopen())
        self.fatal_error: BaseException | None = None
        self.runtime = CoordinatorRuntime(self.coordinator, offsets, self.broker, durability=self.durability,
                                          on_fatal=self._fatal, metrics=self.metrics)
        self.load_report = self.runtime.load()
        self.txn_runtime: CoordinatorRuntime | None = None     # the transaction coordinator, once asked for
        self.broker.start_transactions = self._start_transactions
        if self.topics.get(TRANSACTION_TOPIC) is not None:      # transactions from a previous run: load them
            self._start_transactions()
        if self.data is not None:
            r = self.load_report
            log.info("loaded %s: %d record(s) in %d batch(es), %d group(s), in %.3fs (%d latest per key "
                     "replayed)", OFFSETS_TOPIC, r.records, r.batches, r.groups, r.seconds, r.replayed)
        self._listeners: list[socket.socket] = []
        self._loop_handler = None                  # (loop, its exception handler before start())
        self._accepting: list[asyncio.Task] = []
        self._conns: dict[int, asyncio.Task] = {}
        self.max_connections = effective_max_connections(config)
        self.buffered_request_bytes = 0            # partial requests held by all connections (the budget's use)
        self.ratelog = RateLimitedLog(log, config.log_window_ms / 1000, config.log_burst)
        self._ids = itertools.count(1)
        self.port: int | None = None
        self._admin = None                         # the HTTP admin endpoint's runner (tenure/control/admin.py)
        self._admin_sock = None                    # ... its listening socket, bound in start()
        self._admin_task: asyncio.Task | None = None
        self._close_task: asyncio.Future | None = None
        self.admin_port: int | None = None

    def static_configs(self) -> dict[str, str | None]:
        """The broker configs DescribeConfigs reports as set by the server's options (STATIC_BROKER_CONFIG; the
        broker adds those it knows itself)."""
        c = self.config
        offsets = self.topics.get(OFFSETS_TOPIC)
        return {"listeners": f"PLAINTEXT://{c.host}:{self.port if self.port is not None else c.port}",
                "offsets.topic.num.partitions": str(len(offsets.partitions) if offsets else c.offsets_partitions),
                "socket.request.max.bytes": str(c.max_frame_bytes),
                "group.initial.rebalance.delay.ms": str(c.initial_rebalance_delay_ms),
                "group.min.session.timeout.ms": str(c.min_session_timeout_ms),
                "group.max.session.timeout.ms": str(c.max_session_timeout_ms),
                "group.max.size": str(c.max_group_size if c.max_group_size is not None else 2**31 - 1),
                "log.cleaner.backoff.ms": str(c.cleaner_interval_ms),
                **({"log.segment.bytes": str(c.segment_bytes)} if c.data_dir else {})}

    @property
    def bootstrap(self) -> str:
        return f"{self.node.host}:{self.port}"

    async def start(self) -> None:
        self._listeners = listen(self.config.host, self.config.port)
        self.port = self._listeners[0].getsockname()[1]
        self.node.port = self.port
        loop = asyncio.get_running_loop()
        self._accepting = [loop.create_task(self._accept_loop(s)) for s in self._listeners]
        self._loop_handler = (loop, loop.get_exception_handler())
        loop.set_exception_handler(self._loop_exception)
        self.runtime.start_timers()
        if self.txn_runtime is not None:
            self.txn_runtime.start_timers()
        if self.data is not None and self.config.cleaner_interval_ms > 0:
            self._cleaner_task = asyncio.get_running_loop().create_task(self._cleaner_loop())
        if self.config.admin_port is not None:
            await self._start_admin()

    async def _start_admin(self) -> None:
        """Bind the admin endpoint's socket now (connections wait in its backlog) and serve it as soon as
        the HTTP library is imported, in the background: that import is most of a start-up's time."""
        from tenure.control.admin import bind_admin, is_loopback
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
        from tenure.control.admin import serve_admin
        try:
            self._admin = await serve_admin(self, self._admin_sock, token=self.config.admin_token)
        except Exception:
            log.exception("the admin endpoint could not start; it is off")
            self._admin_sock.close()

    def kafka_sockets(self) -> list[tuple[str, int]]:
        """(address, port) of each socket the Kafka listener accepts on."""
        return [tuple(sock.getsockname()[:2]) for sock in self._listeners]

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

    async def _accept_loop(self, sock: socket.socket) -> None:
        """Accept connections on one listening socket until cancelled. A connection beyond
        --max-connections is closed at once; when accept() fails for want of descriptors or memory
        (EMFILE, ...) the loop waits ACCEPT_RETRY_S and tries again; the first failure and the first success
        after failures are logged, once per log window each (the rest are counted)."""
        loop = asyncio.get_running_loop()
        failures, failing_since = 0, 0.0
        while True:
            try:
                conn, peer = await loop.sock_accept(sock)
            except OSError as exc:
                if exc.errno not in _ACCEPT_RESOURCE_ERRORS:
                    if sock.fileno() < 0:
                        return
                    log.debug("accept on %s: %s", sock.getsockname(), exc)     # e.g. ECONNABORTED
                    continue
                if failures == 0:
                    failing_since = time.monotonic()
                    self.ratelog.log("accept", logging.ERROR, "cannot accept connections: %s (%d open, descriptor "
                                     "limit %s); retrying every %d ms", exc, len(self._conns), fd_limit(),
                                     ACCEPT_RETRY_S * 1000, burst=1)
                failures += 1
                self.metrics.accept_errors += 1
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            if failures:
                self.ratelog.log("accepting again", logging.WARNING, "accepting connections again after %d failed "
                                 "accept(s) in %.1fs", failures, time.monotonic() - failing_since, burst=1)
                failures = 0
            if len(self._conns) >= self.max_connections:
                conn.close()
                self.metrics.closed_connections["max_connections"] += 1
                self.ratelog.log("max connections", logging.WARNING, "closing a new connection from %s: %d "
                                 "connections are open, as many as --max-connections allows", peer, len(self._conns),
                                 burst=1)
                continue
            conn_id = next(self._ids)
            self._conns[conn_id] = loop.create_task(self._accept(conn_id, conn, peer))

    async def _accept(self, conn_id: int, conn: socket.socket, peer) -> None:
        self.metrics.connections_open += 1
        self.metrics.connections_total += 1
        client_host = "/" + (peer[0] if peer else "unknown")
        writer = None
        try:
            reader, writer = await asyncio.open_connection(sock=conn)
            await self._serve(conn_id, peer, client_host, reader, writer)
        except asyncio.CancelledError:
            pass
        except (ConnectionError, OSError) as exc:
            log.debug("connection %d from %s: %s", conn_id, peer, exc)
        except Exception:
            log.exception("connection %d from %s: internal error; closing it", conn_id, peer)
        finally:
            self.metrics.connections_open -= 1
            self._conns.pop(conn_id, None)
            if writer is None:
                conn.close()
            else:
                writer.close()
                try:
                    await asyncio.wait_for(writer.wait_closed(), 1.0)
                except (Exception, asyncio.CancelledError):
                    pass

    async def _serve(self, conn_id: int, peer, client_host: str, reader, writer) -> None:
        decoder = FrameDecoder(self.config.max_frame_bytes)
        limits = self.config.decode_limits()
        held = 0                                   # this connection's share of buffered_request_bytes
        try:
            while True:
                data = await self._read(conn_id, peer, reader)
                if not data:
                    return
                if self.buffered_request_bytes + len(data) > self.config.max_buffered_request_bytes:
                    self.metrics.closed_connections["request_buffer_budget"] += 1
                    self.ratelog.log("request buffer budget", logging.WARNING, "connection %d from %s: closing: "
                                     "%d more byte(s) would pass the budget of %d bytes for requests buffered by all "
                                     "connections (--max-buffered-request-bytes); %d are buffered (%d by this one)",
                                     conn_id, peer, len(data), self.config.max_buffered_request_bytes,
                                     self.buffered_request_bytes, held)
                    return
                self.buffered_request_bytes += len(data)
                held += len(data)
                try:
                    if not await self._handle(conn_id, peer, client_host, decoder.feed(data), limits, writer):
                        return
                finally:
                    self.buffered_request_bytes -= held - decoder.buffered
                    held = decoder.buffered
        except ClientProtocolError as exc:
            self.ratelog.log("bad input", logging.WARNING, "connection %d from %s: closing: %s", conn_id, peer, exc)
            reason = ("frame_too_large" if isinstance(exc, FrameTooLarge) else
                      "unsupported_api" if isinstance(exc, UnsupportedApi) else
                      "request_limit" if isinstance(exc, RequestLimitExceeded) else "malformed_request")
            self.metrics.closed_connections[reason] += 1
        finally:
            self.buffered_request_bytes -= held

    async def _read(self, conn_id: int, peer, reader: asyncio.StreamReader) -> bytes:
        """The next bytes of a connection; b"" at its end, or once it has sent nothing for
        connections_max_idle_ms while no request of it was being served (then it is closed)."""
        idle_ms = self.config.connections_max_idle_ms
        try:
            async with asyncio.timeout(idle_ms / 1000 if idle_ms > 0 else None):
                return await reader.read(READ_CHUNK)
        except TimeoutError:
            self.metrics.closed_connections["idle"] += 1
            self.ratelog.log("idle connections", logging.INFO, "connection %d from %s: closing: idle for %d ms "
                             "(connections.max.idle.ms)", conn_id, peer, idle_ms)
            return b""

    async def _handle(self, conn_id: int, peer, client_host: str, frames: list[bytes], limits, writer) -> bool:
        """Serve each whole request of `frames` in order; False if the connection is to be closed."""
        for payload in frames:
            await asyncio.sleep(0)               # one request per loop turn: other connections get theirs
            req = decode_request(payload, limits)
            if isinstance(req, UnsupportedApiVersions):
                self.ratelog.log("unsupported ApiVersions", logging.INFO, "connection %d: ApiVersions v%d is not "
                                 "served; answering v0 with error 35", conn_id, req.api_version)
                writer.write(encode_unsupported_api_versions(req))
                await writer.drain()
                continue
            t0 = time.perf_counter()
            fault = self.faults.decide(req.api_key)
            if fault.rules:
                if not await self._inject(fault, req, conn_id, peer):
                    return False                       # an injected close
            if fault.error is not None:
                body = error_response(req, fault.error)
            elif req.api_key in GROUP_APIS:
                body = await self._group_request(req, client_host)
            elif is_transaction_request(req.api_key, req.body):
                self._start_transactions()
                body = await self.txn_runtime.handle(req, client_host)
            else:
                body = await self.handlers[req.api_key](req)
            if body is not None:
                if fault.error is not None and req.api_key == API_VERSIONS_KEY:
                    writer.write(encode_api_versions_error(req.correlation_id, fault.error))
                else:
                    writer.write(encode_response(req, body))
                await writer.drain()
            code = response_error(body) if body is not None else 0
            self.metrics.request(req.name, error_name(code) if code else "NONE", time.perf_counter() - t0)
        return True

    def _start_transactions(self) -> None:
        """Start the transaction coordinator (once): on the first transactional request, as Kafka creates
        __transaction_state on the first lookup of a transaction coordinator, or at start-up when the data
        dir holds one. Loading replays its records; the data partitions' open and aborted transactions are
        read back from their logs."""
        if self.txn_runtime is not None:
            return
        topic = self.topics.get(TRANSACTION_TOPIC)
        if topic is None:
            topic = self.topics.create(TRANSACTION_TOPIC, 1, internal=True, configs={"cleanup.policy": "compact"})
        else:
            for t in self.topics.all():
                if not t.internal:
                    for i, plog in enumerate(t.partitions):
                        self.broker.txn_index.rebuild(t.name, i, iter_batches(plog))

        def partitions_of(name: str) -> int | None:
            t = self.topics.get(name)
            return len(t.partitions) if t is not None and not t.internal else None

        offsets = self.topics.get(OFFSETS_TOPIC)

        def offsets_partition_of(group_id: str) -> tuple[str, int]:
            return OFFSETS_TOPIC, partition_for(group_id, len(offsets.partitions))

        def internal_marker(m) -> None:      # the group coordinator replays its offsets topic's markers
            if m.topic == OFFSETS_TOPIC:
                self.coordinator.replay(TransactionEnd(m.producer_id, m.producer_epoch, m.commit))

        self.broker.internal_marker = internal_marker
        coordinator = TransactionCoordinator(self.broker.producers.next_producer_id, partitions_of,
                                             offsets_partition_of)
        runtime = CoordinatorRuntime(coordinator, topic, self.broker, clock_ms=self.runtime._wall_ms,
                                     durability=self.durability, on_fatal=self._fatal, metrics=self.metrics,
                                     codec=txn_records)
        runtime.clock_offset_ms = self.runtime.clock_offset_ms     # one coordinator time (advance_clock)
        report = runtime.load()
        self.broker.producers.reserve(coordinator.max_producer_id())
        log.info("loaded %s: %d transactional id(s) in %.3fs", TRANSACTION_TOPIC, len(coordinator.transactions),
                 report.seconds)
        self.txn_runtime, self.broker.transactions = runtime, coordinator
        if getattr(self, "_accepting", None):       # started lazily while serving: its timers now
            runtime.start_timers()

    async def _group_request(self, req, client_host: str):
        """A group API request to the coordinator; an OffsetCommit or TxnOffsetCommit first passes the
        broker's topic check (broker/offsets_gate.py): partitions of unknown topics are answered 3 here and
        never reach it. A TxnOffsetCommit first passes the transaction coordinator's check: its producer's
        open transaction holds the group's offsets partition (AddOffsetsToTxn first), as Kafka verifies it."""
        if req.api_key == TXN_OFFSET_COMMIT_KEY:
            self._start_transactions()
            body = req.body
            code = self.txn_runtime.coordinator.verify(
                body.transactional_id, body.producer_id, body.producer_epoch, OFFSETS_TOPIC,
                partition_for(body.group_id, len(self.runtime.offsets_topic.partitions)))
            if code:
                return error_response(req, code)
        if req.api_key not in (OFFSET_COMMIT_KEY, TXN_OFFSET_COMMIT_KEY):
            return await self.runtime.handle(req, client_host)
        order = request_order(req.body)
        kept, refused = split_commit(req.body, self.topics)
        if not refused:
            return await self.runtime.handle(req, client_host)
        answer = await self.runtime.handle(req, client_host) if kept is not None else None
        return merge_commit(order, answer, refused, req.spec.response)

    async def _inject(self, fault, req, conn_id: int, peer) -> bool:
        """Apply an injected fault's delay; False if the connection is to be closed instead of answered."""
        if fault.delay_ms:
            self.metrics.faults[(req.name, "delay")] += 1
            await asyncio.sleep(fault.delay_ms / 1000)
        if fault.close:
            self.metrics.faults[(req.name, "close")] += 1
            self.metrics.closed_connections["injected_fault"] += 1
            log.info("connection %d from %s: closing instead of answering %s v%d (injected fault)",
                     conn_id, peer, req.name, req.api_version)
            return False
        if fault.error is not None:
            self.metrics.faults[(req.name, "fail")] += 1
            log.info("connection %d: answering %s v%d with %s (injected fault)", conn_id, req.name,
                     req.api_version, error_name(fault.error))
        return True

    # ------------------------------------------------------------------ log cleaner (storage/compaction.py)
    # With --data-dir, every cleaner_interval_ms one bounded pass (cleaner_pass_bytes of segment reads in
    # all) over the partitions of compacted topics, round robin; parsing runs on a worker thread, every
    # file and segment-list change on this loop. `compact_now` cleans until there is nothing left to do.
    def _compacted_logs(self) -> list[tuple[SegmentLog, CompactionPolicy]]:
        out = []
        for topic in self.topics.all():
            if is_compacted(topic.config("cleanup.policy")):
                policy = CompactionPolicy.from_configs(topic.config)
                out += [(plog, policy) for plog in topic.partitions if isinstance(plog, SegmentLog)]
        return out

    @property
    def compactor(self) -> Compactor:
        if self._compactor is None:
            self._compactor = Compactor(clock_ms=self.runtime.clock_ms,
                                        pass_bytes=self.config.cleaner_pass_bytes)
        return self._compactor

    async def _clean_pass(self, budget: int | None) -> CleanStats:
        """One pass over the compacted logs, starting where the last pass stopped."""
        total = CleanStats()
        async with self._cleaner_lock:
            logs = self._compacted_logs()
            for k in range(len(logs)):
                i = (self._cleaner_next + k) % len(logs)
                left = None if budget is None else budget - total.bytes_read
                if left is not None and left <= 0:
                    total.more = True
                    self._cleaner_next = i
                    break
                plog, policy = logs[i]
                total += await self.compactor.clean_async(plog, policy, 1 << 62 if left is None else left)
        self.cleaner_stats += total
        return total

    async def _cleaner_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.cleaner_interval_ms / 1000)
            try:
                st = await self._clean_pass(self.config.cleaner_pass_bytes)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log cleaner pass failed; the next one runs in %d ms",
                              self.config.cleaner_interval_ms)
                continue
            if st.groups_cleaned:
                log.debug("log cleaner: %d segment(s) -> %d, %d -> %d byte(s), %d tombstone(s) dropped",
                          st.segments_before, st.segments_after, st.bytes_before, st.bytes_after,
                          st.tombstones_dropped)

    async def compact_now(self) -> CleanStats:
        """Clean every compacted log until a pass finds nothing to do (call on the server's loop)."""
        total = CleanStats()
        while True:
            st = await self._clean_pass(None)
            total += st
            if not st.did_work:
                return total
    # ------------------------------------------------------------------ end of log cleaner

    # ------------------------------------------------------------------ inspection and test controls
    # Call these on the server's loop (ServerThread does); they are what the admin endpoint serves.
    def group(self, group_id: str) -> GroupView | None:
        return group_view(self, group_id)

    def groups(self) -> list[GroupView]:
        return groups_view(self)

    def expire_session(self, group_id: str, member: str) -> bool:
        """Expire one member's session now, as if its heartbeats had stopped (`member`: member id or
        group.instance.id). False if the group or member is unknown or it has no session timer running
        (a member parked in a JoinGroup/SyncGroup is not expired, as in Kafka)."""
        from tenure.coordinator import HeartbeatKey
        g = self.coordinator.groups.get(group_id)
        if g is None:
            return False
        mid = g.static_members.get(member, member)
        if mid not in g.members:
            return False
        if not self.runtime.fire_now(HeartbeatKey(group_id, mid)):
            return False
        after = self.coordinator.groups.get(group_id)
        return after is None or mid not in after.members or mid in after.offline_since

    def advance_clock(self, ms: int) -> list[str]:
        """Move the coordinator's clock ahead by `ms`: session, rebalance, sync and KIP-345 timers due by
        then fire, in order, each at its deadline. Returns the names of the timers that fired
        (`heartbeat/<group>/<member>`, `join/<group>`, `registration/<group>`, ...). (The wall clock is
        untouched: the offset stays for the server's life, and commit timestamps and the cleaner's lag
        use it too.) Transaction timeouts due by then fire too."""
        fired = self.runtime.advance_clock(ms)
        if self.txn_runtime is not None:
            fired += self.txn_runtime.advance_clock(ms)
        return fired

    def force_rebalance(self, group_id: str) -> None:
        """Start one rebalance of a static group now (the KIP-345 draft's forceStaticRebalance).
        Raises tenure.coordinator.AdminError if the group is unknown, already rebalancing,
        empty, or has dynamic members. Call on the server's loop (ServerThread.force_rebalance does)."""
        self.runtime.apply(self.coordinator.force_rebalance(group_id, self.runtime.clock_ms()))

    async def close(self) -> None:
        """Close once; a second caller waits for the first close, and cancelling a caller does not
        interrupt the close (the data dir's lock is always released)."""
        if self._close_task is None:
            self._close_task = asyncio.ensure_future(self._close())
        await asyncio.shield(self._close_task)

    async def _close(self) -> None:
        if self._cleaner_task is not None:          # stop the log cleaner before its logs close
            self._cleaner_task.cancel()
            await asyncio.wait([self._cleaner_task], timeout=self.config.shutdown_timeout_s)
            self._cleaner_task = None
        self.runtime.close()
        if self.txn_runtime is not None:
            self.txn_runtime.close()
        if self._admin_task is not None:
            self._admin_task.cancel()
            await asyncio.wait([self._admin_task], timeout=self.config.shutdown_timeout_s)
            self._admin_task = None
        if self._admin is not None:
            await self._admin.cleanup()
            self._admin = None
        if self._admin_sock is not None:
            self._admin_sock.close()
        for t in self._accepting:                   # stop accepting, then close the listeners
            t.cancel()
        if self._accepting:
            await asyncio.wait(self._accepting, timeout=self.config.shutdown_timeout_s)
        for sock in self._listeners:
            sock.close()
        tasks = list(self._conns.values())
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=self.config.shutdown_timeout_s)
        self.ratelog.close()
        if self._loop_handler is not None:
            loop, previous = self._loop_handler
            if loop.get_exception_handler() == self._loop_exception:
                loop.set_exception_handler(previous)
            self._loop_handler = None
        syncing = [*self.runtime._syncing, *(self.txn_runtime._syncing if self.txn_runtime is not None else ())]
        if syncing:
            await asyncio.wait(syncing, timeout=self.config.shutdown_timeout_s)
        for topic in self.topics.all():
            for plog in topic.partitions:
                if self.fatal_error is None:
                    try:
                        plog.flush()
                    except OSError as exc:
                        log.error("flushing %s at shutdown: %s", plog.name, exc)
                plog.close()
        if self.data is not None:
            self.data.close()


async def reopen(server: Server, *, wipe: bool = False, metrics: Metrics | None = None) -> Server:
    """Restart a server in place: close it (flushing its logs), then open a new one on the same ports,
    data dir, fault rules and metrics - what a broker restart is to its clients (connections drop,
    they reconnect). With a data dir everything acknowledged comes back from the log; without one the
    new server starts empty. `wipe` empties the data dir in between (a fresh server at the same
    address: the pytest plugin's per-test reset), `metrics` replaces the counters."""
    config = dataclasses.replace(server.config, port=server.port or server.config.port,
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


class ServerThread:
    """An in-process server on its own event loop thread: for tests driving synchronous clients.

    Besides `bootstrap`, it offers the inspection and fault-injection surface of docs/testing.md, each
    call run on the server's loop: `group(id)`, `groups()`, `rebalances(id)`, `no_rebalance(id)`,
    `faults` (fail/close/delay rules), `expire_session`, `advance_clock`, `force_rebalance`, `restart`,
    `metrics` and `metrics_text()`."""

    def __init__(self, config: ServerConfig | None = None) -> None:
        self.config = config or ServerConfig(port=0)
        self.loop = asyncio.new_event_loop()
        self.server: Server | None = None
        self.faults = Faults()
        self.metrics = Metrics()
        self._thread = threading.Thread(target=self._run, name="tenure-server", daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._watcher: asyncio.Task | None = None
        self._restart_lock = asyncio.Lock()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.server = Server(self.config, faults=self.faults, metrics=self.metrics)
            self.loop.run_until_complete(self.server.start())
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
            self._ready.set()
            return
        self._watcher = self.loop.create_task(self._watch_restarts())
        self._ready.set()
        self.loop.run_forever()
        self._watcher.cancel()
        self.loop.run_until_complete(asyncio.wait([self._watcher]))
        self.loop.run_until_complete(self.server.close())
        self.loop.close()

    async def _watch_restarts(self) -> None:
        """POST /restart on the admin endpoint asks the server for a restart; this performs it. A storage
        failure (fail-stop, Server._fatal) closes the server: its clients see their connections closed,
        nothing more is acknowledged, as when `tenure serve` exits with code 3."""
        while True:
            server = self.server
            waits = [asyncio.ensure_future(server.restart_requested.wait()),
                     asyncio.ensure_future(server.stop_requested.wait())]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
            if server.stop_requested.is_set():
                log.critical("stopping after a storage failure: %s", server.fatal_error)
                await server.close()
                return
            await self._restart()

    async def _restart(self, wipe: bool = False) -> None:
        async with self._restart_lock:
            if wipe:
                self.metrics = Metrics()
            self.server = await reopen(self.server, wipe=wipe, metrics=self.metrics)

    def start(self) -> "ServerThread":
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self

    @property
    def bootstrap(self) -> str:
        assert self.server is not None
        return self.server.bootstrap

    @property
    def port(self) -> int:
        assert self.server is not None and self.server.port is not None
        return self.server.port

    @property
    def admin_port(self) -> int | None:
        assert self.server is not None
        return self.server.admin_port

    def call(self, fn, *args):
        """Run fn(*args) on the server's loop and return its result (for inspection in tests)."""
        async def run():
            return fn(*args)
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    # ------------------------------------------------------------------ inspection
    def group(self, group_id: str) -> GroupView | None:
        """The group as a frozen view (members, instance ids, assignments, generation, offsets,
        rebalances), or None if the server does not know it."""
        return self.call(lambda: self.server.group(group_id))

    def groups(self) -> list[GroupView]:
        return self.call(lambda: self.server.groups())

    def rebalances(self, group_id: str) -> int:
        """Rebalances the group started since this server (thread) started, restarts included."""
        return self.call(self.metrics.rebalance_count, group_id)

    @contextlib.contextmanager
    def no_rebalance(self, *group_ids: str):
        """`with server.no_rebalance("g"): ...` fails (AssertionError) if any of the groups started a
        rebalance or changed generation inside the block; the message names the causes of the
        rebalances started inside the block."""
        def now(g):
            return (self.rebalances(g), getattr(self.group(g), "generation", None),
                    self.call(self.metrics.rebalance_causes, g))
        before = {g: now(g) for g in group_ids}
        yield
        after = {g: now(g) for g in group_ids}
        changed = {g: (before[g], after[g]) for g in group_ids if before[g][:2] != after[g][:2]}

        def causes(b: dict, a: dict) -> dict:
            return {c: n - b.get(c, 0) for c, n in a.items() if n > b.get(c, 0)}
        if changed:
            raise AssertionError("rebalance(s) happened: " + ", ".join(
                f"{g}: rebalances {b[0]} -> {a[0]}, generation {b[1]} -> {a[1]} (causes in the block: "
                f"{causes(b[2], a[2])})" for g, (b, a) in changed.items()))

    def wait_for_group(self, group_id: str, state: str | None = "Stable", members: int | None = None,
                       timeout: float = 30.0) -> GroupView:
        """Wait until the group exists, is in `state` (None: any) and has `members` members (None: any);
        returns its view. Raises TimeoutError after `timeout` seconds, naming what it saw last."""
        deadline = time.monotonic() + timeout
        while True:
            view = self.group(group_id)
            if group_is(view, state, members):
                return view
            if time.monotonic() >= deadline:
                raise TimeoutError(waited_too_long(group_id, state, members, timeout, view))
            time.sleep(0.02)

    def create_topics(self, topics: dict[str, int]) -> None:
        """Create topics now ({name: partitions}); an existing name is an error (tenure.broker's)."""
        def create():
            for name, partitions in topics.items():
                self.server.topics.create(name, partitions)
        self.call(create)

    def metrics_text(self) -> str:
        """The Prometheus exposition the admin endpoint serves at /metrics."""
        from tenure.control.metrics import render
        return self.call(lambda: render(self.server)).decode()

    # ------------------------------------------------------------------ fault injection and controls
    def expire_session(self, group_id: str, member: str) -> bool:
        """Expire a member's session now (member id or group.instance.id); see Server.expire_session."""
        return self.call(self.server.expire_session, group_id, member)

    def advance_clock(self, ms: int) -> list[str]:
        """Move the coordinator's clock ahead by ms; due timers fire now (see Server.advance_clock)."""
        return self.call(self.server.advance_clock, ms)

    def force_rebalance(self, group_id: str) -> None:
        assert self.server is not None
        self.call(self.server.force_rebalance, group_id)

    def restart(self) -> "ServerThread":
        """Close the server and start it again on the same port and data dir (see reopen())."""
        asyncio.run_coroutine_threadsafe(self._restart(), self.loop).result(120)
        return self

    def reset(self) -> "ServerThread":
        """As new, at the same address: fault rules and metrics cleared, the data dir (if any) emptied,
        the server restarted - no groups, topics, offsets or clock offset left."""
        self.faults.clear()
        asyncio.run_coroutine_threadsafe(self._restart(wipe=True), self.loop).result(120)
        return self

    def compact_now(self) -> CleanStats:
        """Server.compact_now on the server's loop (log cleaner; for tests)."""
        assert self.server is not None
        return asyncio.run_coroutine_threadsafe(self.server.compact_now(), self.loop).result(120)

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)

    def __enter__(self) -> "ServerThread":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def group_is(view: GroupView | None, state: str | None, members: int | None) -> bool:
    """Whether a group view (None: the group is unknown) is what `wait_for_group` waits for."""
    return (view is not None and (state is None or view.state == state)
            and (members is None or len(view.members) == members))


def waited_too_long(group_id: str, state: str | None, members: int | None, timeout: float,
                    view: GroupView | None) -> str:
    want = ", ".join(f"{k} {v}" for k, v in (("state", state), ("members", members)) if v is not None)
    seen = "unknown to the server" if view is None else \
        f"state {view.state}, {len(view.members)} member(s), generation {view.generation}"
    return f"group {group_id!r} not {want or 'known'} after {timeout} s: last seen {seen}"


class AsyncServerThread:
    """A `ServerThread` for async tests (aiokafka): the waits are coroutines, so the test's own event
    loop - and the clients' heartbeats on it - keeps running while a test waits. Everything else is the
    ServerThread's own attribute (`bootstrap`, `group`, `no_rebalance`, `faults`, ...): those calls
    return at once. The pytest plugin's `tenure_server_async` fixture is one of these."""

    def __init__(self, server: ServerThread) -> None:
        self.sync = server

    def __getattr__(self, name: str):
        return getattr(self.sync, name)

    async def wait_for_group(self, group_id: str, state: str | None = "Stable", members: int | None = None,
                             timeout: float = 30.0) -> GroupView:
        """ServerThread.wait_for_group, awaiting between looks."""
        deadline = time.monotonic() + timeout
        while True:
            view = self.sync.group(group_id)
            if group_is(view, state, members):
                return view
            if time.monotonic() >= deadline:
                raise TimeoutError(waited_too_long(group_id, state, members, timeout, view))
            await asyncio.sleep(0.02)

    async def restart(self) -> "AsyncServerThread":
        """ServerThread.restart, awaited (the server restarts on its own thread)."""
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.sync._restart(), self.sync.loop))
        return self
