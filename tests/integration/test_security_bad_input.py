"""Bad input on secured listeners: garbage before and during a TLS handshake, plaintext Kafka frames to a TLS port,
a client that never finishes its handshake, SASL frames out of order, oversized SASL frames, a SCRAM exchange with a
wrong nonce or proof, bad and expired tokens. Each gets Kafka's error or a closed connection, with bounded memory
and no traceback, while an authenticated client on the same server goes on."""
from __future__ import annotations

import logging
import os
import socket
import ssl
import struct
import time

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from scramp import ScramClient

from tenure.security.oauth import unsecured_token
from tests.support.wire import WireClient

LISTENERS = pytest.mark.tenure(listeners=["PLAINTEXT", "SASL_SSL", "SASL_PLAINTEXT", "SSL"],
                               users={"alice": "alice-secret"}, failed_authentication_delay_ms=0)


def address(server, listener):
    host, port = server.listeners[listener].split(",")[0].rsplit(":", 1)
    return host, int(port)


def tls_wire(server, listener) -> WireClient:
    """A WireClient over TLS (trusting the server's CA)."""
    ctx = ssl.create_default_context(cafile=server.ca_file)
    c = WireClient(*address(server, listener))
    c.sock = ctx.wrap_socket(c.sock, server_hostname="127.0.0.1")
    return c


def closed(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, ssl.SSLError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def eventually(check, timeout: float = 5.0) -> None:
    """The server counts a closed connection right after closing it: wait for the count."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the bound"
        time.sleep(0.02)


def healthy(server) -> None:
    """An authenticated client still works: the server goes on."""
    from confluent_kafka import Producer
    p = Producer(server.client_settings("SASL_SSL", "alice").confluent())
    p.produce("alive", b"x")
    assert p.flush(15) == 0


@pytest.fixture
def no_tracebacks(caplog):
    yield caplog
    bad = [r for r in caplog.records if r.name.startswith("tenure") and (r.exc_info or r.levelno >= logging.ERROR)]
    assert bad == [], [r.getMessage() for r in bad]


# ---- TLS
@LISTENERS
@pytest.mark.parametrize("garbage", [b"GET / HTTP/1.0\r\n\r\n", os.urandom(4096), b"\x16\x03\x01\xff\xff" + b"A" * 64])
def test_garbage_before_the_tls_handshake_closes_the_connection(tenure_server, garbage, no_tracebacks):
    for listener in ("SSL", "SASL_SSL"):
        s = socket.create_connection(address(tenure_server, listener))
        s.sendall(garbage)
        assert closed(s)
        s.close()
    eventually(lambda: tenure_server.metrics.closed_connections["tls_handshake_failed"] >= 2)
    healthy(tenure_server)


@LISTENERS
def test_garbage_during_the_tls_handshake_closes_the_connection(tenure_server, no_tracebacks):
    """A real ClientHello, then garbage where the client's next handshake records belong."""
    ctx = ssl.create_default_context(cafile=tenure_server.ca_file)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    s = socket.create_connection(address(tenure_server, "SASL_SSL"))
    s.sendall(outgoing.read())                      # the ClientHello
    s.settimeout(5)
    assert s.recv(65536)                            # the ServerHello and the rest of the server's flight
    s.sendall(b"\x16\x03\x03\x00\x10" + os.urandom(16) + os.urandom(256))
    assert closed(s)
    s.close()
    healthy(tenure_server)


@LISTENERS
def test_plaintext_kafka_frames_to_a_tls_port_close_the_connection(tenure_server, no_tracebacks):
    with WireClient(*address(tenure_server, "SSL")) as c:
        c._cid = 0
        from tests.support.wire import request_bytes
        c.send_raw(request_bytes(ApiVersionsRequest(), 0))
        assert closed(c.sock)
    healthy(tenure_server)


@LISTENERS
def test_a_handshake_never_finished_is_closed_after_the_bound(tenure_server, no_tracebacks):
    tenure_server.call(lambda: [setattr(lst, "handshake_timeout_s", 0.5)
                                for lst in tenure_server.server.listeners.values()])
    s = socket.create_connection(address(tenure_server, "SSL"))
    t0 = time.monotonic()
    assert closed(s, timeout=10)
    assert time.monotonic() - t0 < 5
    s.close()
    healthy(tenure_server)


@pytest.mark.tenure(listeners=["SSL"], ssl_client_auth="required")
def test_ssl_client_auth_required_refuses_a_client_without_a_certificate(tenure_server, no_tracebacks):
    from confluent_kafka import KafkaError, Producer
    errors: list = []
    p = Producer({**tenure_server.client_settings("SSL").confluent(), "error_cb": errors.append})
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        p.poll(0.1)
    assert errors and errors[0].code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), errors
    with_cert = Producer(tenure_server.client_settings("SSL", cert="alice").confluent())
    with_cert.produce("t", b"x")
    assert with_cert.flush(15) == 0


# ---- SASL out of order
@LISTENERS
@pytest.mark.parametrize("first", ["metadata", "authenticate"])
def test_a_request_before_the_sasl_handshake_closes_without_an_answer(tenure_server, first, no_tracebacks):
    from tests.support.wire import request_bytes
    req = (MetadataRequest(topics=[], allow_auto_topic_creation=False), 9) if first == "metadata" else \
        (SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2)
    with WireClient(*address(tenure_server, "SASL_PLAINTEXT")) as c:
        c.send_raw(request_bytes(*req))
        assert closed(c.sock)
    healthy(tenure_server)


@LISTENERS
def test_another_request_in_the_middle_of_the_exchange_gets_illegal_sasl_state(tenure_server, no_tracebacks):
    with WireClient(*address(tenure_server, "SASL_PLAINTEXT")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1).error_code == 0
        from tests.support.wire import request_bytes
        c.send_raw(request_bytes(ApiVersionsRequest(), 0, 7))
        payload = c.read_frame()
        cid, code = struct.unpack(">ih", payload[:6])
        assert (cid, code) == (7, 34)                 # ILLEGAL_SASL_STATE
        assert closed(c.sock)
    healthy(tenure_server)


@LISTENERS
def test_an_unsupported_mechanism_gets_33_and_the_enabled_ones(tenure_server, no_tracebacks):
    with WireClient(*address(tenure_server, "SASL_PLAINTEXT")) as c:
        r = c.call(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert r.error_code == 33 and set(r.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}
        assert closed(c.sock)


@LISTENERS
def test_sasl_apis_after_authentication_or_without_sasl_get_illegal_sasl_state(tenure_server, no_tracebacks):
    with WireClient(*address(tenure_server, "PLAINTEXT")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 34
        r = c.call(SaslAuthenticateRequest(auth_bytes=b"x"), 1)
        assert r.error_code == 34
        assert c.call(MetadataRequest(topics=[], allow_auto_topic_creation=False), 9).brokers   # served on


@LISTENERS
def test_oversized_frames_before_authentication_close_at_once(tenure_server, no_tracebacks):
    """sasl.server.max.receive.size: a frame announced larger closes the connection on its size header, before its
    bytes are read (the memory an unauthenticated client can make the server hold is bounded)."""
    for size in (524288 + 1, 100 * 1024 * 1024):
        with WireClient(*address(tenure_server, "SASL_PLAINTEXT")) as c:
            c.send_raw(struct.pack(">i", size) + b"\0" * 64)
            assert closed(c.sock)
    with WireClient(*address(tenure_server, "SASL_PLAINTEXT")) as c:        # in the middle of an exchange too
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        c.send_raw(struct.pack(">i", 10 * 1024 * 1024) + b"\0" * 64)
        assert closed(c.sock)
    assert tenure_server.call(lambda: tenure_server.server.buffered_request_bytes) == 0
    healthy(tenure_server)


# ---- SCRAM and tokens over the wire
def _scram(c: WireClient, password: str, tamper=None):
    client = ScramClient(["SCRAM-SHA-512"], "alice", password)
    assert c.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1).error_code == 0
    first = c.call(SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()), 2)
    client.set_server_first(first.auth_bytes.decode())
    final = client.get_client_final().encode()
    return c.call(SaslAuthenticateRequest(auth_bytes=tamper(final) if tamper else final), 2)


@LISTENERS
@pytest.mark.parametrize("tamper", ["nonce", "proof"])
def test_scram_with_a_wrong_nonce_or_proof_gets_58_and_closes(tenure_server, tamper, no_tracebacks):
    def change(final: bytes) -> bytes:
        attrs = final.split(b",")
        key = b"r=" if tamper == "nonce" else b"p="
        return b",".join(a[:2] + (b"Z" if a[2:3] != b"Z" else b"Y") + a[3:] if a.startswith(key) else a
                         for a in attrs)
    c = tls_wire(tenure_server, "SASL_SSL")
    r = _scram(c, "alice-secret", change)
    assert r.error_code == 58 and r.error_message == ("Authentication failed during authentication due to invalid "
                                                      "credentials with SASL mechanism SCRAM-SHA-512")
    assert closed(c.sock)
    c.close()
    c = tls_wire(tenure_server, "SASL_SSL")                    # the same exchange untampered: authenticated
    r = _scram(c, "alice-secret")
    assert r.error_code == 0
    assert c.call(MetadataRequest(topics=[], allow_auto_topic_creation=False), 9).brokers
    c.close()


@LISTENERS
@pytest.mark.parametrize("token", [unsecured_token("carol", -10), "e30.e30.", "a.b.c",
                                   "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJjYXJvbCIsImV4cCI6OTk5OTk5OTk5OX0.c2ln"])
def test_bad_or_expired_tokens_get_the_error_challenge_then_58(tenure_server, token, no_tracebacks):
    c = tls_wire(tenure_server, "SASL_SSL")
    assert c.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
    r = c.call(SaslAuthenticateRequest(auth_bytes=f"n,,\x01auth=Bearer {token}\x01\x01".encode()), 2)
    assert r.error_code == 0 and r.auth_bytes == b'{"status":"invalid_token"}'
    r = c.call(SaslAuthenticateRequest(auth_bytes=b"\x01"), 2)
    assert (r.error_code, r.error_message) == (58, '{"status":"invalid_token"}')
    assert closed(c.sock)
    c.close()
    healthy(tenure_server)


@LISTENERS
def test_a_tls_client_on_a_plaintext_listener_is_closed(tenure_server, no_tracebacks):
    """Its ClientHello reads as a frame of hundreds of MB: refused on the size prefix, nothing buffered."""
    ctx = ssl.create_default_context(cafile=tenure_server.ca_file)
    raw = socket.create_connection(address(tenure_server, "PLAINTEXT"))
    raw.settimeout(5)
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    raw.close()
    eventually(lambda: tenure_server.metrics.closed_connections["frame_too_large"] >= 1)
    healthy(tenure_server)


@LISTENERS
def test_a_client_without_sasl_on_a_sasl_listener_gets_api_versions_then_is_closed(tenure_server, no_tracebacks):
    with WireClient(*address(tenure_server, "SASL_PLAINTEXT")) as c:
        assert c.call(ApiVersionsRequest(), 0).error_code == 0
        from tests.support.wire import request_bytes
        c.send_raw(request_bytes(MetadataRequest(topics=[], allow_auto_topic_creation=False), 9, 2))
        assert closed(c.sock)
    healthy(tenure_server)


@LISTENERS
def test_after_a_failed_authentication_the_server_lets_the_client_close_first_within_a_bound(tenure_server,
                                                                                            no_tracebacks):
    """The failure's answer, then the server waits (up to a second) for the client's close before closing: a client
    that reads the answer and the end of the connection in one read keeps the answer (kafka-python 3.0 drops the
    bytes of such a read). What the client sends meanwhile is read and dropped, never answered; a client that never
    closes is closed after the bound."""
    from tenure.server.connection import CLOSE_WAIT_S
    wrong = SaslAuthenticateRequest(auth_bytes=b"\0alice\0nope")
    with WireClient(*address(tenure_server, "SASL_PLAINTEXT")) as c:          # the client closes: at once
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        assert c.call(wrong, 2).error_code == 58
        assert not closed(c.sock, timeout=CLOSE_WAIT_S / 4)                # the answer alone, not the end after it
    eventually(lambda: tenure_server.metrics.closed_connections["authentication_failed"] == 1)
    with WireClient(*address(tenure_server, "SASL_PLAINTEXT")) as c:          # the client never closes
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        t0 = time.monotonic()
        assert c.call(wrong, 2).error_code == 58
        from tests.support.wire import request_bytes
        c.send_raw(request_bytes(MetadataRequest(topics=[], allow_auto_topic_creation=False), 9, 3))
        assert closed(c.sock, timeout=CLOSE_WAIT_S + 5)                     # no answer to it: the end
        assert CLOSE_WAIT_S * 0.9 <= time.monotonic() - t0 < CLOSE_WAIT_S + 5
    assert tenure_server.metrics.closed_connections["authentication_failed"] == 2
    healthy(tenure_server)
