"""A SASL connection (tenure/server/connection.py with security/sasl.py) driven without a socket: only what the
authenticator takes reaches it until the connection authenticates, the principal is then carried in the Peer the
dispatcher sees, its frames are bounded by sasl.server.max.receive.size until then, an expired session closes the
connection at its next request, and a failure is answered after the failed-authentication delay."""
from __future__ import annotations

import asyncio
import logging
import struct
import time

from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from tenure.counters import Metrics
from tenure.protocol.limits import DecodeLimits
from tenure.security.sasl import SaslAuthenticator, SaslSettings
from tenure.security.users import UserStore
from tenure.server.connection import Connection, Peer, RequestBudget
from tenure.server.ratelog import RateLimitedLog
from tests.server.test_connection import ChunkReader, ListWriter, api_versions
from tests.support.wire import request_bytes


class Clock:
    ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


class Recording:
    """The dispatcher: answers with the correlation id and keeps the Peer each request came with."""

    def __init__(self) -> None:
        self.peers: list[Peer] = []

    async def __call__(self, req, peer, send) -> bool:
        self.peers.append(peer)
        await send(struct.pack(">ii", 4, req.correlation_id))
        return True


def sasl_connection(*chunks: bytes, clock=None, metrics=None, max_reauth_ms=0, delay_ms=0, max_receive=524288):
    users = UserStore()
    users.add("alice", "alice-secret")
    sasl = SaslAuthenticator(SaslSettings(users, max_reauth_ms=max_reauth_ms, max_receive_bytes=max_receive),
                             now_ms=clock or Clock())
    writer, dispatch, metrics = ListWriter(), Recording(), metrics or Metrics()
    conn = Connection(Peer(1, ("127.0.0.1", 5001), "/127.0.0.1", listener="SASL_PLAINTEXT", protocol="SASL_PLAINTEXT"),
                      ChunkReader(*chunks), writer, dispatch, max_frame_bytes=1 << 20, limits=DecodeLimits(),
                      budget=RequestBudget(1 << 22), idle_ms=0, metrics=metrics,
                      ratelog=RateLimitedLog(logging.getLogger("test"), 10, 5), sasl=sasl, failed_auth_delay_ms=delay_ms)
    return conn, writer, dispatch, metrics


def handshake(cid: int) -> bytes:
    return request_bytes(SaslHandshakeRequest(mechanism="PLAIN"), 1, cid)


def plain(cid: int, password: str = "alice-secret") -> bytes:
    return request_bytes(SaslAuthenticateRequest(auth_bytes=f"\0alice\0{password}".encode()), 2, cid)


def metadata(cid: int) -> bytes:
    return request_bytes(MetadataRequest(topics=[], allow_auto_topic_creation=False), 9, cid)


def cids(writer: ListWriter) -> list[int]:
    return [struct.unpack(">i", f[4:8])[0] for f in writer.frames]


def test_the_dispatcher_sees_only_authenticated_requests_with_the_principal():
    conn, writer, dispatch, metrics = sasl_connection(api_versions(1), handshake(2), plain(3), metadata(4))
    asyncio.run(conn.run())
    assert cids(writer) == [1, 2, 3, 4]
    assert [p.principal for p in dispatch.peers] == ["User:ANONYMOUS", "User:alice"]   # ApiVersions, Metadata
    assert metrics.authentications[("SASL_PLAINTEXT", "PLAIN", "authenticated")] == 1


def test_a_request_before_authentication_never_reaches_the_dispatcher():
    conn, writer, dispatch, metrics = sasl_connection(metadata(1), metadata(2))
    asyncio.run(conn.run())
    assert writer.frames == [] and dispatch.peers == []
    assert metrics.closed_connections["sasl_state"] == 1


def test_a_failure_is_answered_after_the_delay_then_closed():
    conn, writer, dispatch, metrics = sasl_connection(handshake(1), plain(2, "wrong"), metadata(3), delay_ms=200)
    t0 = time.monotonic()
    asyncio.run(conn.run())
    assert time.monotonic() - t0 >= 0.2
    assert cids(writer) == [1, 2] and dispatch.peers == []
    assert metrics.closed_connections["authentication_failed"] == 1
    assert metrics.authentications[("SASL_PLAINTEXT", "PLAIN", "failed")] == 1


def test_frames_are_bounded_until_authentication_then_the_usual_bound():
    big = request_bytes(MetadataRequest(topics=[f"t{i:04d}" for i in range(200)], allow_auto_topic_creation=False),
                        9, 9)
    assert 1000 < len(big) < 1 << 20
    conn, writer, dispatch, metrics = sasl_connection(handshake(1), big, max_receive=1000)
    asyncio.run(conn.run())
    assert cids(writer) == [1] and metrics.closed_connections["frame_too_large"] == 1
    conn, writer, dispatch, metrics = sasl_connection(handshake(1), plain(2), big, max_receive=1000)
    asyncio.run(conn.run())
    assert cids(writer) == [1, 2, 9]                   # authenticated: the frame bound is --max-frame-bytes


def test_an_expired_session_closes_the_connection_at_its_next_request():
    clock = Clock()

    class Reader(ChunkReader):
        async def read(self, n: int) -> bytes:
            chunk = await super().read(n)
            if chunk == metadata(5):
                clock.ms += 1001                      # the session (1000 ms) ended before this request
            return chunk
    conn, writer, dispatch, metrics = sasl_connection(clock=clock, max_reauth_ms=1000)
    conn.reader = Reader(handshake(1), plain(2), metadata(3), metadata(5), metadata(6))
    asyncio.run(conn.run())
    assert cids(writer) == [1, 2, 3]
    assert metrics.closed_connections["sasl_session_expired"] == 1


def test_reauthentication_before_expiry_keeps_the_connection():
    clock = Clock()

    class Reader(ChunkReader):
        async def read(self, n: int) -> bytes:
            clock.ms += 400
            return await super().read(n)
    conn, writer, dispatch, metrics = sasl_connection(clock=clock, max_reauth_ms=1000)
    conn.reader = Reader(handshake(1), plain(2), metadata(3), handshake(4), plain(5), metadata(6), metadata(7))
    asyncio.run(conn.run())
    assert cids(writer) == [1, 2, 3, 4, 5, 6, 7]
    assert metrics.authentications[("SASL_PLAINTEXT", "PLAIN", "reauthenticated")] == 1
