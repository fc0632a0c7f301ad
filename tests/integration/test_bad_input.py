"""Bad input closes (or answers) only the offending connection; everyone else keeps being served."""
import logging
import re
import struct
import time

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

from tenure.config import ServerConfig
from tenure.protocol.apis import api_version_ranges
from tenure.server import ServerThread
from tests.support.clients import confluent_round_trip
from tests.support.wire import (
    WireClient, build_batch, fetch_request, metadata_request, produce_request, request_bytes,
)


def _frames(case):
    good = request_bytes(MetadataRequest(topics=None), 12)
    if case == "oversized-frame":
        return struct.pack(">i", 2_000_000)  # limit below is 1 MiB
    if case == "negative-frame-size":
        return struct.pack(">i", -1)
    if case == "unknown-api-key":
        b = bytearray(good); struct.pack_into(">h", b, 4, 9999); return bytes(b)
    if case == "unserved-api-key":
        b = bytearray(good); struct.pack_into(">h", b, 4, 33); return bytes(b)  # AlterConfigs
    if case == "unsupported-version":
        b = bytearray(good); struct.pack_into(">h", b, 6, 13); return bytes(b)  # Metadata v13 not served
    if case == "undecodable-body":
        return struct.pack(">i", 14) + struct.pack(">hhi", 3, 12, 1) + b"\x00\x05ab\xff\xff"
    if case == "header-too-short":
        return struct.pack(">i", 3) + b"\x00\x03\x00"
    raise AssertionError(case)


CASES = ["oversized-frame", "negative-frame-size", "unknown-api-key", "unserved-api-key",
         "unsupported-version", "undecodable-body", "header-too-short"]

# what the server logs (logger tenure.server, WARNING) for each, after "connection N from PEER: closing: "
LOGGED = {
    "oversized-frame": re.escape("frame of 2000000 bytes exceeds the maximum of 1048576 bytes"),
    "negative-frame-size": re.escape("negative frame size -1"),
    "unknown-api-key": re.escape("api_key=9999 api_version=12: API not served by tenure"),
    "unserved-api-key": re.escape("api_key=33 api_version=12: API not served by tenure"),
    "unsupported-version": re.escape("api_key=3 api_version=13: Metadata is served at versions 0-12"),
    "undecodable-body": re.escape("Metadata v12: undecodable body: ") + r".+",
    "header-too-short": re.escape("request of 3 bytes is shorter than a request header"),
}


@pytest.fixture
def small_frame_server():
    with ServerThread(ServerConfig(port=0, max_frame_bytes=1 << 20)) as s:
        yield s


@pytest.mark.parametrize("case", CASES)
def test_bad_frame_closes_only_that_connection(small_frame_server, case, caplog):
    caplog.set_level(logging.INFO, logger="tenure.server")
    bystander = WireClient.to(small_frame_server.bootstrap)
    bystander.call(ApiVersionsRequest(), 0)           # an open, healthy connection
    with WireClient.to(small_frame_server.bootstrap) as bad:
        bad_port = bad.sock.getsockname()[1]
        bad.send_raw(_frames(case))
        assert bad.is_closed_by_peer(timeout=5), f"{case}: the server kept the connection open"
    # the server logged why, once, naming the offending connection (it logs before it closes)
    warnings = [r for r in caplog.records if r.name == "tenure.server" and r.levelno >= logging.WARNING]
    assert [r.levelno for r in warnings] == [logging.WARNING], [r.getMessage() for r in warnings]
    pattern = rf"connection \d+ from \('127\.0\.0\.1', {bad_port}\): closing: {LOGGED[case]}"
    assert re.fullmatch(pattern, warnings[0].getMessage()), warnings[0].getMessage()
    # the bystander connection is unaffected, and a real client still does a full round trip
    assert bystander.call(ApiVersionsRequest(), 0).error_code == 0
    bystander.close()
    produced, consumed = confluent_round_trip(small_frame_server.bootstrap, f"after-{case}", n=6)
    assert len(consumed) == 6


def test_api_versions_from_the_future_is_answered_in_v0_with_error_35(tenure_server, caplog):
    caplog.set_level(logging.INFO, logger="tenure.server")
    with WireClient.to(tenure_server.bootstrap) as c:
        b = bytearray(request_bytes(ApiVersionsRequest(), 3, correlation_id=42))
        struct.pack_into(">h", b, 6, 7)
        c.send_raw(bytes(b))
        payload = c.read_frame()
        resp = ApiVersionsResponse.decode(struct.pack(">i", len(payload)) + payload, version=0, header=True,
                                          framed=True)
        assert resp.header.correlation_id == 42
        assert resp.error_code == 35
        assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == api_version_ranges()
        # the connection stays usable: the client retries at a version both know
        assert c.call(ApiVersionsRequest(), 3).error_code == 0
    logged = [r for r in caplog.records if r.name == "tenure.server" and "ApiVersions v7" in r.getMessage()]
    assert [r.levelno for r in logged] == [logging.INFO]
    assert re.fullmatch(r"connection \d+: ApiVersions v7 is not served; answering v0 with error 35",
                        logged[0].getMessage()), logged[0].getMessage()


def test_corrupt_batch_is_a_partition_error_not_a_closed_connection(tenure_server, wire):
    wire.call(metadata_request("t"), 12)
    good = build_batch([(b"k", b"v")])
    bad = bytearray(good); bad[-1] ^= 0x55
    r = wire.call(produce_request("t", 0, bytes(bad)), 9)
    p = r.responses[0].partition_responses[0]
    assert p.error_code == 2 and "CRC" in p.error_message
    r = wire.call(produce_request("t", 0, good), 9)
    assert r.responses[0].partition_responses[0].error_code == 0
    assert r.responses[0].partition_responses[0].base_offset == 0     # nothing was appended by the bad one
    f = wire.call(fetch_request("t", 0, 0), 12)
    assert f.responses[0].partitions[0].high_watermark == 1


def test_produce_and_fetch_errors(tenure_server, wire):
    wire.call(metadata_request("e"), 12)
    batch = build_batch([(b"k", b"v")])
    r = wire.call(produce_request("missing", 0, batch), 9)   # Produce never auto-creates
    assert r.responses[0].partition_responses[0].error_code == 3
    r = wire.call(produce_request("e", 5, batch), 9)
    assert r.responses[0].partition_responses[0].error_code == 3
    r = wire.call(produce_request("e", 0, batch, acks=2), 9)
    assert r.responses[0].partition_responses[0].error_code == 21
    old = bytearray(batch); old[16] = 1
    r = wire.call(produce_request("e", 0, bytes(old)), 9)
    assert r.responses[0].partition_responses[0].error_code == 43
    f = wire.call(fetch_request("e", 0, 5), 12)
    assert f.responses[0].partitions[0].error_code == 1          # OFFSET_OUT_OF_RANGE
    f = wire.call(fetch_request("nope", 0, 0), 12)
    assert f.responses[0].partitions[0].error_code == 3


def test_acks_zero_gets_no_response_but_is_appended(tenure_server, wire):
    wire.call(metadata_request("z"), 12)
    wire.send_raw(request_bytes(produce_request("z", 0, build_batch([(b"k", b"v")]), acks=0), 9, 500))
    # the next response on the connection is for the next request: no answer was sent for acks=0
    f = wire.call(fetch_request("z", 0, 0), 12)
    assert f.header.correlation_id != 500
    assert f.responses[0].partitions[0].high_watermark == 1


def test_bad_input_logging_is_rate_limited_with_a_count_of_what_was_suppressed(caplog):
    """At most log_burst bad-input lines per window; when the window ends one line counts the rest; the
    next window logs again. Every connection is still closed and counted."""
    caplog.set_level(logging.INFO, logger="tenure.server")
    with ServerThread(ServerConfig(port=0, log_window_ms=2000, log_burst=3)) as s:
        def bad(n):
            for _ in range(n):
                with WireClient.to(s.bootstrap) as c:
                    c.send_raw(_frames("negative-frame-size"))
                    assert c.is_closed_by_peer(timeout=5)

        def lines():
            return [r.getMessage() for r in caplog.records if r.name == "tenure.server"
                    and r.levelno == logging.WARNING]
        t0 = time.monotonic()
        bad(20)
        assert time.monotonic() - t0 < 2, "the test needs the 20 inside one window"
        deadline = time.monotonic() + 10
        while len(lines()) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        got = lines()
        assert len(got) == 4, got
        assert all(re.fullmatch(r"connection \d+ from .+: closing: negative frame size -1", m) for m in got[:3]), got
        assert got[3] == "bad input: 17 more line(s) like the above suppressed in 2.0s"
        bad(1)                                              # a new window: logged again
        assert len(lines()) == 5 and "closing: negative frame size -1" in lines()[4]
        assert s.metrics.closed_connections["malformed_request"] == 21
