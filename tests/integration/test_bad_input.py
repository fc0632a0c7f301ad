"""Bad input closes (or answers) only the offending connection; everyone else keeps being served."""
import logging
import re
import struct
import time

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

from tenure.config import ServerConfig
from tenure.protocol.apis import SUPPORTED, api_version_ranges
from tenure.server import ServerThread
from tests.support.clients import confluent_round_trip
from tests.support.hostile import array_cases, element_cases, element_null_frame, null_cases, null_frame, repeated_frame
from tests.support.wire import WireClient, build_batch, fetch_request, metadata_request, produce_request, request_bytes


def _frames(case):
    good = request_bytes(MetadataRequest(topics=None), 12)
    if case == "oversized-frame":
        return struct.pack(">i", 2_000_000)  # limit below is 1 MiB
    if case == "negative-frame-size":
        return struct.pack(">i", -1)
    if case == "unknown-api-key":
        b = bytearray(good); struct.pack_into(">h", b, 4, 9999); return bytes(b)
    if case == "unserved-api-key":
        b = bytearray(good); struct.pack_into(">h", b, 4, 57); return bytes(b)  # UpdateFeatures
    if case == "unsupported-version":
        b = bytearray(good); struct.pack_into(">h", b, 6, 14); return bytes(b)  # Metadata v14 not served
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
    "unserved-api-key": re.escape("api_key=57 api_version=12: API not served by tenure"),
    "unsupported-version": re.escape("api_key=3 api_version=14: Metadata is served at versions 0-13"),
    "undecodable-body": re.escape("Metadata v12: undecodable request header: ") + r".+",
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
    with ServerThread(ServerConfig(port=0, log_window_ms=4000, log_burst=3)) as s:
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
        assert time.monotonic() - t0 < 4, "the test needs the 20 inside one window"
        deadline = time.monotonic() + 10
        while len(lines()) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        got = lines()
        assert len(got) == 4, got
        assert all(re.fullmatch(r"connection \d+ from .+: closing: negative frame size -1", m) for m in got[:3]), got
        assert got[3] == "bad input: 17 more line(s) like the above suppressed in 4.0s"
        bad(1)                                              # a new window: logged again
        assert len(lines()) == 5 and "closing: negative frame size -1" in lines()[4]
        assert s.metrics.closed_connections["malformed_request"] == 21


# ---------------------------------------------------------------- nulls and decoding limits (issue 11: 4, 5)
@pytest.fixture(scope="module")
def limited_server():
    # every refusal of the module is logged (no rate limit: log_burst above the frames sent), so each test
    # can check the reason its own frames were refused for
    with ServerThread(ServerConfig(port=0, max_request_elements=50, log_burst=1 << 30)) as s:
        yield s


def _hostile_frames(api_key: int) -> list[tuple[str, bytes]]:
    """Every null in a non-nullable field (and in an element of an array of strings) of every served version
    of the API, and one array per version repeated past the server's limit of 50 elements."""
    spec = SUPPORTED[api_key]
    out = []
    for v in range(spec.min_version, spec.max_version + 1):
        out += [(c.name, null_frame(c)) for c in null_cases(api_key, v) if not c.nullable]
        out += [(c.name + "[null]", element_null_frame(c)) for c in element_cases(api_key, v)]
        out += [(c.name + " x51", repeated_frame(c, 51)) for c in array_cases(api_key, v)[:1]]
    return out


@pytest.mark.parametrize("api_key", [k for k in sorted(SUPPORTED) if _hostile_frames(k)])
def test_nulls_and_over_limit_arrays_close_cleanly_and_others_are_served(limited_server, api_key, caplog):
    """Finding 5: a null where the schema has none closed the connection through 'internal error' with a
    traceback (180 frames) or was answered as if valid (60). Each is now refused as Kafka refuses it: the
    connection is closed and the reason logged as bad input."""
    caplog.set_level(logging.DEBUG, logger="tenure")
    bystander = WireClient.to(limited_server.bootstrap)
    bystander.call(ApiVersionsRequest(), 0)
    frames = _hostile_frames(api_key)
    for name, data in frames:
        with WireClient.to(limited_server.bootstrap) as bad:
            bad.send_raw(data)
            assert bad.is_closed_by_peer(timeout=10), f"{name}: answered instead of closed"
        assert bystander.call(ApiVersionsRequest(), 0).error_code == 0, name
    bystander.close()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not errors, [r.getMessage() for r in errors]
    refusals = [r.getMessage() for r in caplog.records if r.name == "tenure.server" and "closing: " in r.getMessage()]
    assert refusals, "the server logs why it closed"
    refused = re.compile(r"closing: \w+ v\d+: (non-nullable field \w+( element)? was serialized as null|"
                         r"more than 50 array elements in one request)")
    assert all(refused.search(m) for m in refusals), refusals


def test_a_16_mib_metadata_of_empty_names_closes_its_connection_and_nobody_waits(caplog):
    """Finding 4: 8M empty topic names held the event loop for 65 s and took 3.3 GiB."""
    caplog.set_level(logging.INFO, logger="tenure.server")
    n = 8 * 1024 * 1024
    payload = struct.pack(">hhih", 3, 1, 7, 1) + b"c" + struct.pack(">i", n) + b"\x00\x00" * n
    with ServerThread(ServerConfig(port=0, max_frame_bytes=32 << 20)) as server:
        bystander = WireClient.to(server.bootstrap)
        bystander.call(ApiVersionsRequest(), 0)
        with WireClient.to(server.bootstrap) as bad:
            bad.send_raw(struct.pack(">i", len(payload)) + payload)
            assert bad.is_closed_by_peer(timeout=30)
        assert bystander.call(metadata_request("after-amplification"), 12).topics[0].error_code == 0
        bystander.close()
        assert server.metrics.closed_connections["request_limit"] == 1
    logged = [r.getMessage() for r in caplog.records if "array elements" in r.getMessage()]
    assert len(logged) == 1 and logged[0].endswith(
        "closing: Metadata v1: more than 100000 array elements in one request (field topics; "
        "the limit is --max-request-elements)"), logged


def test_max_request_elements_is_the_limit_a_request_may_reach(limited_server):
    names = [MetadataRequest.MetadataRequestTopic(name=f"lim-{i}") for i in range(50)]
    with WireClient.to(limited_server.bootstrap) as c:
        r = c.call(MetadataRequest(topics=names, allow_auto_topic_creation=False), 12)
        assert [t.error_code for t in r.topics] == [3] * 50          # answered: UNKNOWN_TOPIC_OR_PARTITION
        c.send_raw(request_bytes(MetadataRequest(topics=names + names[:1], allow_auto_topic_creation=False), 12))
        assert c.is_closed_by_peer(timeout=10)


def test_metadata_answers_a_topic_named_twice_once_as_kafka_does(tenure_server, wire):
    """Kafka reads the requested names into a set; repeating a name does not repeat its answer."""
    T = MetadataRequest.MetadataRequestTopic
    r = wire.call(MetadataRequest(topics=[T(name="twice"), T(name="other"), T(name="twice")]), 12)
    assert [t.name for t in r.topics] == ["twice", "other"]
