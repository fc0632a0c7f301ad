"""One client connection: read bytes, cut them into frames, decode one request at a time, hand it to the
dispatcher, write the answers back in request order, close on bad input. On a SASL listener the connection
authenticates first (security/sasl.py: only ApiVersions, SaslHandshake and the mechanism's tokens until then, its
frames bounded by sasl.server.max.receive.size) and carries the principal it authenticated as in its `Peer`.

A `Connection` knows nothing of sockets or Kafka semantics: it reads from anything with
`read(n) -> bytes` (the listener's `Stream`, stream.py, or an asyncio.StreamReader) and writes to anything with
`write(bytes)` and `async drain()` (and, optionally, `must_drain()`: whether a drain is needed at all) - so tests
drive it with a fed StreamReader and a list-backed writer - and it asks its `dispatch` callable to answer each
decoded request.
"""
from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import socket
import struct
import types
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tenure.control.network import Drained, Network, NetworkReset
from tenure.counters import Metrics
from tenure.protocol.apis import DEFAULT_SERVED, ServedApis
from tenure.protocol.codec import Request, UnsupportedApiVersions, decode_request, encode_unsupported_api_versions
from tenure.protocol.context import ANONYMOUS, PLAINTEXT, RequestContext
from tenure.protocol.errors import ClientProtocolError, FrameTooLarge, RequestLimitExceeded, UnsupportedApi
from tenure.protocol.framing import FrameDecoder
from tenure.protocol.limits import DecodeLimits
from tenure.security.sasl_names import AUTHENTICATE
from tenure.server.offload import heavy_request, off_loop
from tenure.server.ratelog import RateLimitedLog

if TYPE_CHECKING:       # (the SASL servers: imported with a server's first SASL listener, tenure/server/security.py)
    from tenure.security.sasl import SaslAuthenticator, Step

log = logging.getLogger("tenure.server")
READ_CHUNK = 256 * 1024
# Answers to requests pipelined in one read are written together: an answer is held while the request after it in
# that read is one of these APIs, which are answered without waiting for anything (Metadata, OffsetFetch,
# FindCoordinator, Heartbeat, DescribeGroups, ListGroups, ApiVersions), and goes out with the next answer not held -
# one write (one send) for a run of them instead of one each. Held answers go out at once when they pass
# HOLD_BYTES (then the connection waits for the client to read, as for any answer), and at most HOLD_S after the
# first was held (a request that waits after all: an injected delay, a test's hook, a slow broker; or a busy loop,
# where a run of requests takes several turns: the bound keeps what holding adds to an answer's latency small).
QUICK_APIS = frozenset({3, 9, 10, 12, 15, 16, 18})
HOLD_BYTES = 64 * 1024
HOLD_S = 0.002
# how long a connection closing after its answer (a failed authentication) waits for the client to close first
CLOSE_WAIT_S = 1.0


class Reader(Protocol):
    async def read(self, n: int) -> bytes: ...


class Writer(Protocol):
    def write(self, data: bytes) -> None: ...
    async def drain(self) -> None: ...


@dataclass
class RequestBudget:
    """Bytes of not yet served requests all connections together may hold (--max-buffered-request-bytes)."""
    limit: int
    used: int = 0


@dataclass(frozen=True)
class Peer:
    """Who is at the other end: the server's id for the connection, the socket's peer address, and the
    client host the coordinator records for members ("/127.0.0.1"), the broker (node id) whose
    listener accepted it, that listener's name and security protocol, and the principal the connection is
    authenticated as (Kafka's "User:NAME"; User:ANONYMOUS until SASL authenticates it, or without a client
    certificate on SSL)."""
    conn_id: int
    address: object
    client_host: str
    broker_id: int = 0
    listener: str = PLAINTEXT
    protocol: str = PLAINTEXT
    principal: str = ANONYMOUS

    @functools.cached_property
    def where(self) -> str:
        """The socket's peer address as a request context names it ("host:port")."""
        address = self.address
        return f"{address[0]}:{address[1]}" if isinstance(address, tuple) and len(address) >= 2 else str(address)

    @functools.cached_property
    def context(self) -> RequestContext:
        """What every request context of this connection holds (the dispatcher adds each request's own part:
        RequestContext.for_request)."""
        return RequestContext(0, 0, "", self.client_host, 0, connection_id=self.conn_id, peer=self.where,
                              broker_id=self.broker_id, listener=self.listener, principal=self.principal)


# dispatch(request, peer, send) answers one request: it calls `await send(frame)` with the response frame
# (or not at all: a request that has no response) and returns False if the connection is to be closed
# instead (an injected close). What `send` returns may be `SENT`, an awaitable that is done already: a
# dispatcher may skip awaiting it.
Dispatch = Callable[[Request, Peer, Callable[[bytes], Awaitable[None]]], Awaitable[bool]]


class _Sent:
    """The awaitable of an answer sent with nothing left to wait for: awaiting it returns at once."""
    __slots__ = ()

    def __await__(self):
        return _DONE


_DONE = iter(())          # an iterator that is over: `await SENT` returns None without suspending
SENT: Awaitable[None] = _Sent()


@types.coroutine
def _turn():
    """A loop turn (what `asyncio.sleep(0)` does, without its coroutine around this one)."""
    yield


def close_reason(exc: ClientProtocolError) -> str:
    """The `reason` label of tenure_connections_closed_by_server for a client's bad input."""
    return ("frame_too_large" if isinstance(exc, FrameTooLarge) else
            "unsupported_api" if isinstance(exc, UnsupportedApi) else
            "request_limit" if isinstance(exc, RequestLimitExceeded) else "malformed_request")


class Connection:
    """Serve one connection until its end, its bad input, its idleness or an injected close.

    `run()` returns when the connection is to be closed (closing the transport is the caller's);
    requests are served one at a time, each on its own loop turn, so answers go out in request order.
    `serving` tells whether a request of this connection is being served now (a drain waits for it);
    once `draining` is set the connection ends after that request's answer."""

    def __init__(self, peer: Peer, reader: Reader, writer: Writer, dispatch: Dispatch, *,
                 max_frame_bytes: int, limits: DecodeLimits, budget: RequestBudget,
                 idle_ms: int, metrics: Metrics, ratelog: RateLimitedLog, network: Network | None = None,
                 sasl: SaslAuthenticator | None = None, failed_auth_delay_ms: int = 0,
                 served: ServedApis = DEFAULT_SERVED) -> None:
        self.peer = peer
        self.reader, self.writer, self.dispatch = reader, writer, dispatch
        self.max_frame_bytes = max_frame_bytes
        self.sasl, self.failed_auth_delay_ms = sasl, failed_auth_delay_ms
        self._completions = 0                  # the SASL exchanges this connection completed
        self.decoder = FrameDecoder(max_frame_bytes if sasl is None else
                                    min(max_frame_bytes, sasl.settings.max_receive_bytes))
        self.limits, self.budget, self.idle_ms = limits, budget, idle_ms
        self.metrics, self.ratelog = metrics, ratelog
        self.served = served                   # the APIs and versions the server presents (--kafka-version)
        self.held = 0                          # this connection's share of budget.used
        self.serving = False
        self.draining = False                  # the server is stopping: no request after the current one
        self.network = network                 # network fault rules (tenure/control/network.py)
        self.client_id: str | None = None      # of its latest request (what network rules match on)
        self._read_since: float | None = None  # loop time the read now waiting started (None: none waits)
        self._idle_timer: asyncio.TimerHandle | None = None     # the one idle timer (connections.max.idle.ms)
        self._reader_task: asyncio.Task | None = None
        self._idled = False                    # the idle timer ended the connection's read
        self._yield_first = False              # the next request needs its own loop turn first (see _serve)
        self._hold = False                     # the answer being sent now is held (see QUICK_APIS)
        self._held: list[bytes] = []           # answers held, in order
        self._held_bytes = 0
        self._hold_timer: asyncio.TimerHandle | None = None
        self._must_drain: Callable[[], bool] | None = getattr(writer, "must_drain", None)

    async def run(self) -> None:
        try:
            while True:
                data = await self._read()
                if not data:
                    return
                if self.budget.used + len(data) > self.budget.limit:
                    self.metrics.closed_connections["request_buffer_budget"] += 1
                    self.ratelog.log("request buffer budget", logging.WARNING, "connection %d from %s: closing: "
                                     "%d more byte(s) would pass the budget of %d bytes for requests buffered by all "
                                     "connections (--max-buffered-request-bytes); %d are buffered (%d by this one)",
                                     self.peer.conn_id, self.peer.address, len(data), self.budget.limit,
                                     self.budget.used, self.held)
                    return
                self.budget.used += len(data)
                self.held += len(data)
                try:
                    if not await self._serve(self.decoder.feed(data)) or self.draining:
                        return
                finally:
                    self.budget.used -= self.held - self.decoder.buffered
                    self.held = self.decoder.buffered
        except NetworkReset as exc:
            await self._reset(exc.partial)
        except Drained:
            pass
        except ClientProtocolError as exc:
            self.ratelog.log("bad input", logging.WARNING, "connection %d from %s: closing: %s",
                             self.peer.conn_id, self.peer.address, exc)
            self.metrics.closed_connections[close_reason(exc)] += 1
        finally:
            self._write_held()
            self.budget.used -= self.held
            self.held = 0
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None

    async def _read(self) -> bytes:
        """The next bytes; b"" at the connection's end, or once it has sent nothing for idle_ms while
        no request of it was being served (then it is closed).

        The idle time is kept by one timer per connection (`_idle_check`), not armed and cancelled around each
        read: a read notes when it started, and the timer, when it fires, either ends a read that has waited
        idle_ms (cancelling it) or re-arms itself for the read's own deadline."""
        if self.idle_ms <= 0:
            return await self.reader.read(READ_CHUNK)
        loop = asyncio.get_running_loop()
        self._read_since = loop.time()
        if self._idle_timer is None:
            self._reader_task = asyncio.current_task()
            self._idle_timer = loop.call_at(self._read_since + self.idle_ms / 1000, self._idle_check)
        try:
            return await self.reader.read(READ_CHUNK)
        except asyncio.CancelledError:
            if not self._idled:
                raise
            task = self._reader_task
            if task is not None:
                task.uncancel()                  # the idle timer's own cancellation, not the server's
            self.metrics.closed_connections["idle"] += 1
            self.ratelog.log("idle connections", logging.INFO, "connection %d from %s: closing: idle for %d ms "
                             "(connections.max.idle.ms)", self.peer.conn_id, self.peer.address, self.idle_ms)
            return b""
        finally:
            self._read_since = None

    def _idle_check(self) -> None:
        """The idle timer: a read waiting since idle_ms or longer is ended (the connection closes); otherwise
        the timer is armed again for the deadline of the read now waiting (or idle_ms from now)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        since = self._read_since
        deadline = (since if since is not None else now) + self.idle_ms / 1000
        if since is not None and now >= deadline and self._reader_task is not None:
            self._idled = True
            self._idle_timer = None
            self._reader_task.cancel()
            return
        self._idle_timer = loop.call_at(deadline, self._idle_check)

    async def _authenticate(self, step: Step) -> bool:
        """Carry out the authenticator's step; False if the connection is to be closed."""
        sasl = self.sasl
        assert sasl is not None
        if step.failed and self.failed_auth_delay_ms > 0:
            await asyncio.sleep(self.failed_auth_delay_ms / 1000)       # connection.failed.authentication.delay.ms
        if step.frame is not None:
            await self._send(step.frame)
        if step.failed:
            self.metrics.authentications[(self.peer.listener, sasl.mechanism or "", "failed")] += 1
        if step.close:
            self.metrics.closed_connections["authentication_failed" if step.failed else "sasl_state"] += 1
            self.ratelog.log("authentication failed", logging.INFO, "connection %d from %s on listener %s: closing: %s",
                             self.peer.conn_id, self.peer.address, self.peer.listener, step.reason)
            if step.frame is not None:
                await self._let_the_client_close()
            return False
        if sasl.authenticated and step.frame is not None and sasl.completions != self._completions:
            self._completions = sasl.completions           # this step completed an exchange
            outcome = "reauthenticated" if sasl.reauthentications else "authenticated"
            self.metrics.authentications[(self.peer.listener, sasl.mechanism or "", outcome)] += 1
            if sasl.principal is not None and sasl.principal != self.peer.principal:
                self.peer = dataclasses.replace(self.peer, principal=sasl.principal)
            self.decoder.max_frame_bytes = self.max_frame_bytes
        return True

    async def _let_the_client_close(self) -> None:
        """After an answer the connection closes on (a failed authentication's): wait up to CLOSE_WAIT_S for the
        client to close first, reading and dropping what it sends meanwhile. Kafka closes once the answer is sent;
        a client that reads the answer and the connection's end in one go may then lose the answer (kafka-python
        3.0 drops the bytes of a read that also saw the end, and reports a lost connection instead of Kafka's
        SASL_AUTHENTICATION_FAILED - seen with a loaded machine). A client that reads the answer closes at once
        (kafka-python, aiokafka, librdkafka, Java), so this costs them nothing; one that does not is closed after
        the bound."""
        try:
            async with asyncio.timeout(CLOSE_WAIT_S):
                while await self.reader.read(READ_CHUNK):
                    pass
        except (TimeoutError, ConnectionError, OSError):
            pass

    async def _send(self, frame: bytes) -> None:
        """Send one answer: through the network rules when some are set, then as `_deliver` does."""
        if self.network is not None and self.network.active:
            passed = await self.network.outbound(self, frame)
            if passed is None:
                return                           # lost on its way to the client
            frame = passed
        waiting = self._deliver(frame)
        if waiting is not SENT:
            await waiting

    def _send_now(self, frame: bytes) -> Awaitable[None]:
        """The dispatcher's `send`: the answer written (or held, see QUICK_APIS) now, and what to await for it -
        `SENT` when nothing is left to wait for (no network rule, and the writer says no drain is needed:
        `must_drain()`; a writer without it is always drained), which the dispatcher does not even await;
        otherwise the drain, or the way through the network rules (`_send`)."""
        if self.network is not None and self.network.active:
            return self._send(frame)
        return self._deliver(frame)

    def _deliver(self, frame: bytes) -> Awaitable[None]:
        if self._hold:
            self._held.append(frame)
            self._held_bytes += len(frame)
            if self._held_bytes < HOLD_BYTES:
                if self._hold_timer is None:
                    self._hold_timer = asyncio.get_running_loop().call_later(HOLD_S, self._write_held)
                return SENT
            self._write_held()
        elif self._held:
            self._held.append(frame)
            self._write_held()
        else:
            self.writer.write(frame)
        must = self._must_drain
        return self.writer.drain() if must is None or must() else SENT

    def _write_held(self) -> None:
        """Write the answers held, in one write."""
        if self._hold_timer is not None:
            self._hold_timer.cancel()
            self._hold_timer = None
        if not self._held:
            return
        held, self._held, self._held_bytes = self._held, [], 0
        try:
            self.writer.write(b"".join(held))
        except (ConnectionError, OSError, RuntimeError) as exc:      # the transport closed meanwhile
            log.debug("connection %d: held answers not written: %s", self.peer.conn_id, exc)

    async def _reset(self, partial: bytes) -> None:
        """A network fault's reset: what got through is written, then the connection is reset (RST)."""
        self.metrics.closed_connections["network_reset"] += 1
        log.info("connection %d from %s: reset by a network fault", self.peer.conn_id, self.peer.address)
        self._write_held()
        try:
            if partial:
                self.writer.write(partial)
                await self.writer.drain()
        except (ConnectionError, OSError):
            pass
        transport = getattr(self.writer, "transport", None)
        if transport is None:
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        transport.abort()

    async def _serve(self, frames: list[bytes]) -> bool:
        """Serve each whole request of `frames` in order; False if the connection is to be closed."""
        # one request per loop turn: other connections get theirs. The read before the first frame was a loop
        # turn if it waited; it returns at once only with bytes that arrived while this connection yielded,
        # which it did (before the last request of the previous frames, if there were several) - then the
        # first request yields too. A connection sending one request at a time does not yield twice per request.
        last = len(frames) - 1
        sasl, network, limits, served = self.sasl, self.network, self.limits, self.served
        dispatch, send = self.dispatch, self._send_now
        for i, payload in enumerate(frames):
            if i or self._yield_first:
                await _turn()
            if self.draining:
                return False
            # this request's answer is held if the next one of this read is answered without waiting (QUICK_APIS)
            self._hold = i < last and len(frames[i + 1]) >= 2 and \
                (frames[i + 1][0] << 8 | frames[i + 1][1]) in QUICK_APIS
            if sasl is not None and sasl.raw and sasl.state == AUTHENTICATE:      # a raw token (handshake v0)
                if not await self._authenticate(sasl.raw_token(payload)):
                    return False
                continue
            if heavy_request(payload):
                self.serving = True              # decoded off the loop (offload.py); a drain waits for its answer
                try:
                    req = await off_loop(decode_request, payload, limits, served)
                finally:
                    self.serving = False
            else:
                req = decode_request(payload, limits, served)
            if isinstance(req, UnsupportedApiVersions):
                self.ratelog.log("unsupported ApiVersions", logging.INFO, "connection %d: ApiVersions v%d is not "
                                 "served; answering v0 with error 35", self.peer.conn_id, req.api_version)
                await self._send(encode_unsupported_api_versions(req))
                continue
            self.client_id = req.client_id
            if network is not None and network.active and not await network.inbound(self, len(payload) + 4):
                continue                         # lost on its way to the server
            if sasl is not None:
                if sasl.wants(req):
                    step = sasl.handle(req)
                    if not step.dispatch:
                        if not await self._authenticate(step):
                            return False
                        continue
                elif sasl.expired():
                    self.metrics.closed_connections["sasl_session_expired"] += 1
                    self.ratelog.log("sasl session expired", logging.INFO, "connection %d from %s: closing: its SASL "
                                     "session expired (connections.max.reauth.ms) and it sent %s instead of "
                                     "re-authenticating", self.peer.conn_id, self.peer.address, req.name)
                    return False
            self.serving = True
            try:
                if not await dispatch(req, self.peer, send):
                    return False
            finally:
                self.serving = False
        self._hold = False
        self._write_held()
        self._yield_first = len(frames) > 1
        return True
