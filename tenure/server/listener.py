"""The Kafka listener of one broker: its endpoints (one per --listener: name, security protocol, address; TLS
for SSL and SASL_SSL), bound sockets, the accept loops (--max-connections, accept failures), one `Connection` task
per client (told its listener and, on SSL, the principal of its client certificate), and the drain that ends them
at shutdown.

Also the descriptor budget: the process's descriptor limit, raised at start, split between client
connections and partition logs."""
from __future__ import annotations

import asyncio
import errno
import ipaddress
import itertools
import logging
import os
import socket
import ssl
import time
from collections import Counter
from collections.abc import Callable, Iterator

from tenure.broker.topics import TopicError
from tenure.config import ServerConfig, parse_ip_overrides
from tenure.counters import Metrics
from tenure.deferred import deferred
from tenure.protocol.context import ANONYMOUS, PLAINTEXT
from tenure.protocol.errors import ErrorCode
from tenure.security.listeners import HANDSHAKE_TIMEOUT_S, SSL
from tenure.server.connection import Connection, Peer, Reader, Writer
from tenure.server.ratelog import RateLimitedLog
from tenure.server.stream import Stream

log = logging.getLogger("tenure.server")
certificates = deferred("tenure.security.tls")     # a client certificate's principal: on a TLS listener's connection
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


def client_address(peer) -> str:
    """The address a connection came from, as the per-address limit counts it ("127.0.0.1", "::1")."""
    host = str(peer[0]) if peer else "unknown"
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).compressed
    except ValueError:
        return host


def resolve_ip_overrides(text: str | None) -> dict[str, int]:
    """--max-connections-per-ip-overrides ("HOST:N,...") by address: each host name's every address gets its
    count (an address literal is itself), as Kafka resolves its overrides once at start; OSError for a name
    that does not resolve (the caller names the flag)."""
    out: dict[str, int] = {}
    for host, count in parse_ip_overrides(text or "").items():
        for *_, addr in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM):
            out[client_address(addr)] = count
    return out


async def accept(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> tuple[socket.socket, object]:
    """The next connection of a listening (non-blocking) socket: one already waiting is taken at once, without a
    loop turn, as asyncio's own sock_accept does; uvloop's takes a loop turn per connection, which let a burst of
    100 connections wait ~0.7 s to be accepted while the loop served the ones before them. A new connection is
    non-blocking."""
    try:
        conn, peer = sock.accept()
    except BlockingIOError:
        return await loop.sock_accept(sock)
    conn.setblocking(False)
    return conn, peer


def listen(host: str, port: int, backlog: int = 1024) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for every address `host` resolves to (one port for all). An ASCII
    host (an address, `localhost`) is resolved as its bytes: what the IDNA codec makes of it, without importing
    that codec (with unicodedata: ~1.5 ms of a process's first server); another name goes through IDNA."""
    name = (host.encode("ascii") if host.isascii() else host) if host else None
    infos = dict.fromkeys((fam, typ, proto, addr) for fam, typ, proto, _, addr in
                          socket.getaddrinfo(name, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE))
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



# make_connection(peer, reader, writer) -> the Connection serving it (the listener's: one Stream both)
ConnectionFactory = Callable[[Peer, Reader, Writer], Connection]


class Endpoint:
    """One listener of a broker: its name, security protocol, the address it binds (`port`: asked for, then the
    one bound, which a restart of the broker binds again) and its TLS context (SSL, SASL_SSL). (A plain class:
    nothing compares or prints it, and a dataclass's build cost ~0.3 ms of every server's start-up.)"""

    __slots__ = ("name", "protocol", "host", "port", "tls")

    def __init__(self, name: str = PLAINTEXT, protocol: str = PLAINTEXT, host: str = "127.0.0.1", port: int = 0,
                 tls: ssl.SSLContext | None = None) -> None:
        self.name = name
        self.protocol = protocol
        self.host = host
        self.port = port
        self.tls = tls


class Listener:
    """Accept on every socket of `host`:`port` and serve each client with a `Connection` task. In a
    cluster each broker has one (`broker_id`, told to each connection's `Peer`); `refuse()` true closes
    each new connection at once (an unreachable broker); connection ids come from `ids` (shared by the
    brokers' listeners). `endpoints`: its listeners (default: one PLAINTEXT listener, bound by `start`)."""

    def __init__(self, make_connection: ConnectionFactory, *, max_connections: int, metrics: Metrics,
                 ratelog: RateLimitedLog, broker_id: int = 0, ids: Iterator[int] | None = None,
                 refuse: Callable[[], bool] = lambda: False, max_per_ip: int | None = None,
                 endpoints: list[Endpoint] | None = None) -> None:
        self.make_connection = make_connection
        self.max_connections = max_connections
        # Kafka's max.connections.per.ip (None: unlimited) and its overrides by address (set by start())
        self.max_per_ip = max_per_ip
        self.ip_overrides: dict[str, int] = {}
        self._per_ip: Counter[str] = Counter()         # open connections by client address
        self.metrics, self.ratelog = metrics, ratelog
        self.broker_id, self.refuse = broker_id, refuse
        self.sockets: list[socket.socket] = []
        self._accepting: list[asyncio.Task] = []
        self._tasks: dict[int, asyncio.Task] = {}
        self._conns: dict[int, Connection] = {}
        self._ids = ids if ids is not None else itertools.count(1)
        self.endpoints = endpoints if endpoints else [Endpoint()]
        self.handshake_timeout_s = HANDSHAKE_TIMEOUT_S

    @property
    def open_connections(self) -> int:
        return len(self._tasks)

    def connections(self) -> list[Connection]:
        """The connections being served now."""
        return list(self._conns.values())

    def start(self, host: str | None = None, port: int | None = None,
              ip_overrides: dict[str, int] | None = None) -> int:
        """Bind every endpoint and start accepting (on the running loop); `host`/`port` replace the first
        endpoint's. Returns the first endpoint's port; each endpoint keeps the port it bound. `ip_overrides`:
        the per-address limits by address (resolve_ip_overrides)."""
        self.ip_overrides = dict(ip_overrides or {})
        loop = asyncio.get_running_loop()
        first = self.endpoints[0]
        if host is not None:
            first.host = host
        if port is not None:
            first.port = port
        self.sockets, self._accepting = [], []
        try:
            for ep in self.endpoints:
                try:
                    socks = listen(ep.host, ep.port)
                except OSError as exc:
                    exc.endpoint = ep               # type: ignore[attr-defined]  # which one: the caller names it
                    raise
                self.sockets += socks
                ep.port = socks[0].getsockname()[1]
                self._accepting += [loop.create_task(self._accept_loop(s, ep)) for s in socks]
        except BaseException:
            for t in self._accepting:
                t.cancel()
            for s in self.sockets:
                s.close()
            raise
        return first.port

    async def stop_accepting(self, timeout_s: float) -> None:
        """Stop the accept loops and close the listening sockets (new connections are refused)."""
        for t in self._accepting:
            t.cancel()
        if self._accepting:
            await asyncio.wait(self._accepting, timeout=timeout_s)
        self._accepting = []
        for sock in self.sockets:
            sock.close()

    async def drop_connections(self, timeout_s: float) -> None:
        """Close every connection now, answering nothing more (a broker stopped: its clients see their
        connections closed, as when a Kafka broker dies)."""
        tasks = list(self._tasks.values())
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)

    def begin_drain(self) -> None:
        """Every connection answers the request it is serving, if any, and is closed; one that is
        between requests is closed now."""
        for conn_id, conn in list(self._conns.items()):
            conn.draining = True
            if not conn.serving:
                self._tasks[conn_id].cancel()

    async def drain(self, timeout_s: float) -> None:
        """begin_drain, then wait up to `timeout_s` for the connections serving a request to send its
        answer; those still serving then are closed without it."""
        self.begin_drain()
        tasks = list(self._tasks.values())
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=timeout_s)
            for t in late:
                log.info("closing a connection whose request was not answered within the shutdown bound "
                         "(%.1f s)", timeout_s)
                t.cancel()
            if late:
                await asyncio.wait(late, timeout=timeout_s)

    async def _accept_loop(self, sock: socket.socket, endpoint: Endpoint) -> None:
        """Accept connections on one listening socket until cancelled. A connection beyond
        --max-connections is closed at once; when accept() fails for want of descriptors or memory
        (EMFILE, ...) the loop waits ACCEPT_RETRY_S and tries again; the first failure and the first success
        after failures are logged, once per log window each (the rest are counted)."""
        loop = asyncio.get_running_loop()
        failures, failing_since = 0, 0.0
        while True:
            try:
                conn, peer = await accept(loop, sock)
            except OSError as exc:
                if exc.errno not in _ACCEPT_RESOURCE_ERRORS:
                    if sock.fileno() < 0:
                        return
                    log.debug("accept on %s: %s", sock.getsockname(), exc)     # e.g. ECONNABORTED
                    continue
                if failures == 0:
                    failing_since = time.monotonic()
                    self.ratelog.log("accept", logging.ERROR, "cannot accept connections: %s (%d open, descriptor "
                                     "limit %s); retrying every %d ms", exc, len(self._tasks), fd_limit(),
                                     ACCEPT_RETRY_S * 1000, burst=1)
                failures += 1
                self.metrics.accept_errors += 1
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            if failures:
                self.ratelog.log("accepting again", logging.WARNING, "accepting connections again after %d failed "
                                 "accept(s) in %.1fs", failures, time.monotonic() - failing_since, burst=1)
                failures = 0
            if self.refuse():
                conn.close()
                self.metrics.closed_connections["broker_unreachable"] += 1
                continue
            address = client_address(peer)
            most = self.ip_overrides.get(address, self.max_per_ip)
            if most is not None and self._per_ip[address] >= most:
                conn.close()
                self.metrics.closed_connections["max_connections_per_ip"] += 1
                self.ratelog.log("max connections per ip", logging.WARNING, "closing a new connection from %s: "
                                 "that address has %d connection(s) open, as many as %s allows", address,
                                 self._per_ip[address], "--max-connections-per-ip-overrides"
                                 if address in self.ip_overrides else "--max-connections-per-ip", burst=1)
                continue
            if len(self._tasks) >= self.max_connections:
                conn.close()
                self.metrics.closed_connections["max_connections"] += 1
                self.ratelog.log("max connections", logging.WARNING, "closing a new connection from %s: %d "
                                 "connections are open, as many as --max-connections allows", peer, len(self._tasks),
                                 burst=1)
                continue
            conn_id = next(self._ids)
            self._per_ip[address] += 1
            self._tasks[conn_id] = loop.create_task(self._serve(conn_id, conn, peer, endpoint, address))

    def connections_from(self, address: str) -> int:
        """Connections open now from one client address (as the per-address limit counts them)."""
        return self._per_ip[client_address((address,))]

    async def _open(self, conn: socket.socket, endpoint: Endpoint) -> Stream:
        """The connection's reader and writer (stream.py); on a TLS endpoint after the TLS handshake (within
        handshake_timeout_s)."""
        loop = asyncio.get_running_loop()
        stream = Stream()
        if endpoint.tls is None:
            await loop.connect_accepted_socket(lambda: stream, sock=conn)
        else:
            await loop.connect_accepted_socket(lambda: stream, sock=conn, ssl=endpoint.tls,
                                               ssl_handshake_timeout=self.handshake_timeout_s)
        return stream

    async def _serve(self, conn_id: int, conn: socket.socket, peer, endpoint: Endpoint, address: str) -> None:
        self.metrics.connections_open += 1
        self.metrics.connections_total += 1
        writer = None
        try:
            try:
                writer = await self._open(conn, endpoint)
            except (ssl.SSLError, TimeoutError, ConnectionError, OSError) as exc:
                self.metrics.closed_connections["tls_handshake_failed"] += 1
                self.ratelog.log("tls handshake", logging.INFO, "connection %d from %s to listener %s: TLS handshake "
                                 "failed: %s", conn_id, peer, endpoint.name, exc)
                return
            principal = ANONYMOUS
            if endpoint.protocol == SSL:               # SASL_SSL: SASL's principal
                principal = certificates.peer_principal(writer.get_extra_info("ssl_object")) or ANONYMOUS
            connection = self.make_connection(Peer(conn_id, peer, "/" + (peer[0] if peer else "unknown"),
                                                   self.broker_id, endpoint.name, endpoint.protocol, principal),
                                              writer, writer)
            self._conns[conn_id] = connection
            await connection.run()
        except asyncio.CancelledError:
            pass
        except (ConnectionError, OSError) as exc:
            log.debug("connection %d from %s: %s", conn_id, peer, exc)
        except Exception:
            log.exception("connection %d from %s: internal error; closing it", conn_id, peer)
        finally:
            self._per_ip[address] -= 1
            if self._per_ip[address] <= 0:
                del self._per_ip[address]
            self._conns.pop(conn_id, None)
            try:
                if writer is None:
                    conn.close()
                else:
                    writer.close()
                    try:
                        await asyncio.wait_for(writer.wait_closed(), 1.0)
                    except (Exception, asyncio.CancelledError):
                        writer.abort()  # a TLS close waiting for the client's close_notify: dropped
            finally:
                self._tasks.pop(conn_id, None)    # only now: a drain waits for the close (TLS's takes a while)
                self.metrics.connections_open -= 1    # with it: the gauge is the count --max-connections holds to
