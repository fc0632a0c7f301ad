import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin.groups import ListGroupsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

from tenure.protocol.apis import SUPPORTED, api_version_ranges
from tenure.protocol.codec import (
    Request,
    UnsupportedApiVersions,
    api_versions_body,
    decode_request,
    encode_response,
    encode_unsupported_api_versions,
)
from tenure.protocol.errors import (
    ClientProtocolError,
    ErrorCode,
    MalformedRequest,
    RequestLimitExceeded,
    UnsupportedApi,
)
from tenure.protocol.limits import DecodeLimits
from tests.support.hostile import (
    array_cases,
    element_cases,
    element_null_frame,
    filled,
    frame_of,
    null_cases,
    null_frame,
    repeated_frame,
)
from tests.support.wire import request_bytes

ALL_VERSIONS = [(s.key, v) for s in SUPPORTED.values() for v in range(s.min_version, s.max_version + 1)]


@pytest.mark.parametrize("api_key,version", ALL_VERSIONS)
def test_every_served_api_version_decodes_a_default_request(api_key, version):
    spec = SUPPORTED[api_key]
    payload = request_bytes(spec.request(), version, correlation_id=77, client_id="cid")[4:]
    req = decode_request(payload)
    assert isinstance(req, Request)
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (api_key, version, 77, "cid")


def test_flexible_request_header_v2_and_nonflexible_v1():
    for version in (8, 9):  # Metadata v9 is the first flexible version
        payload = request_bytes(MetadataRequest(topics=None), version, correlation_id=5)[4:]
        req = decode_request(payload)
        assert req.body.topics is None and req.correlation_id == 5


def test_api_versions_response_header_is_v0_even_when_flexible():
    req = decode_request(request_bytes(ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                                       3, correlation_id=9)[4:])
    out = encode_response(req, api_versions_body(3))
    # header v0: size, correlation id, then the body's error code straight away (no tagged-field byte)
    size, cid, err = struct.unpack_from(">iih", out, 0)
    assert (size, cid, err) == (len(out) - 4, 9, 0)
    resp = ApiVersionsResponse.decode(out, version=3, header=True, framed=True)
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == api_version_ranges()


def test_api_versions_at_unknown_version_gets_v0_error_35_with_ranges():
    payload = bytearray(request_bytes(ApiVersionsRequest(), 4, correlation_id=11)[4:])
    struct.pack_into(">h", payload, 2, 99)  # a version from the future
    req = decode_request(bytes(payload))
    assert req == UnsupportedApiVersions(11, 99)
    out = encode_unsupported_api_versions(req)
    resp = ApiVersionsResponse.decode(out, version=0, header=True, framed=True)
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert resp.header.correlation_id == 11
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == api_version_ranges()


def test_unserved_api_key_is_rejected():
    payload = bytearray(request_bytes(MetadataRequest(topics=None), 1)[4:])
    struct.pack_into(">h", payload, 0, 57)  # UpdateFeatures: not served
    with pytest.raises(UnsupportedApi):
        decode_request(bytes(payload))


def test_version_outside_the_table_is_rejected():
    from tenure.protocol.apis import served_apis
    with pytest.raises(UnsupportedApi):     # as Kafka 4.0 (KIP-896) Fetch starts at v4; tenure's own table serves v0+
        decode_request(request_bytes(FetchRequest(), 3)[4:], served=served_apis("4.0"))
    assert decode_request(request_bytes(FetchRequest(), 3)[4:]).api_version == 3


def _header_as_kafka_python_reads_it(payload: bytes, flexible: bool):
    """kafka-python's own RequestHeader.decode over a stream: (api key, version, correlation id, client id, tags,
    bytes read), or None if it raises."""
    import io

    from kafka.protocol.api_header import RequestHeader
    stream = io.BytesIO(payload)
    try:
        h = RequestHeader.decode(stream, flexible=flexible)
    except Exception:
        return None
    return (h.request_api_key, h.request_api_version, h.correlation_id, h.client_id,
            getattr(h, "unknown_tags", None), stream.tell())


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from([(3, 8), (3, 12)]),                    # Metadata: header v1, then v2 (flexible)
       st.one_of(st.just(-1), st.integers(min_value=-3, max_value=40), st.just(32767)),
       st.binary(max_size=40), st.binary(max_size=12), st.booleans())
def test_the_request_header_is_read_as_kafka_python_reads_it(key_version, length, client_id, tail, cut):
    """decode_request reads the header with kafka-python's compiled decoder: the same header, or a refusal where
    RequestHeader.decode fails (a client id running past the end, a bad tagged section)."""
    api_key, version = key_version
    flexible = version >= 9
    header = struct.pack(">hhih", api_key, version, 7, length) + client_id + tail
    if cut:
        header = header[:len(header) // 2]
    expected = _header_as_kafka_python_reads_it(header, flexible)
    try:
        req = decode_request(header)
    except ClientProtocolError as exc:
        # the header was refused, or it was read and then the body (whatever follows) was
        assert expected is None or "header" not in str(exc), (expected, exc)
        return
    assert expected is not None and isinstance(req, Request)
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == expected[:4]


def test_a_client_id_longer_than_the_request_is_malformed():
    payload = struct.pack(">hhih", 3, 8, 1, 50) + b"short"
    with pytest.raises(MalformedRequest, match="past the end"):
        decode_request(payload)


def test_short_and_truncated_requests_are_malformed():
    with pytest.raises(MalformedRequest):
        decode_request(b"\x00\x03\x00")
    full = request_bytes(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="abc")]), 12)[4:]
    for cut in range(8, len(full) - 1):
        with pytest.raises(ClientProtocolError):
            decode_request(full[:cut])


@settings(max_examples=1500, deadline=None)
@given(st.binary(max_size=200), st.sampled_from(ALL_VERSIONS))
def test_fuzz_parse_or_protocol_error_nothing_else(tail, key_version):
    api_key, version = key_version
    payload = struct.pack(">hhi", api_key, version, 1) + tail
    try:
        decode_request(payload)
    except ClientProtocolError:
        pass


@settings(max_examples=500, deadline=None)
@given(st.binary(min_size=0, max_size=120))
def test_fuzz_any_bytes(payload):
    try:
        decode_request(payload)
    except ClientProtocolError:
        pass


# Schema-shaped hostile requests (tests/support/hostile.py), for every served API and version: a null in a
# field (nullable or not), an array repeated past the element limit, a count or length overwritten with a
# large or negative number, flipped bytes. Parsed or refused with a protocol error, and exactly as the
# schema and limit say for the null and the repeat.
_LIMITS = DecodeLimits(max_request_elements=20)


@pytest.mark.parametrize("api_key,version", ALL_VERSIONS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_hostile_shapes_of_every_api_version(api_key, version, data):
    nulls = [(c, null_frame) for c in null_cases(api_key, version)]
    nulls += [(c, element_null_frame) for c in element_cases(api_key, version)]
    arrays = array_cases(api_key, version)
    shape = data.draw(st.sampled_from(["null", "repeat", "number", "flip"]))
    expect = None
    if shape == "null" and nulls:
        case, build = data.draw(st.sampled_from(nulls))
        frame = build(case)
        expect = Request if case.nullable else MalformedRequest
    elif shape == "repeat" and arrays:
        case = data.draw(st.sampled_from(arrays))
        count = data.draw(st.integers(min_value=0, max_value=3 * _LIMITS.max_request_elements))
        frame = repeated_frame(case, count)
        per_copy = sum(1 for c in arrays if c.path[:len(case.path)] == case.path)
        total = len(arrays) - per_copy + count * per_copy
        expect = Request if total <= _LIMITS.max_request_elements else RequestLimitExceeded
    else:
        frame = bytearray(frame_of(filled(api_key, version), version))
        at = data.draw(st.integers(min_value=12, max_value=max(12, len(frame) - 1)))
        if shape == "number":
            value = data.draw(st.sampled_from([-2, -1, 0x7FFF, 0x7FFFFFFF, -0x80000000, 1 << 20]))
            frame[at:at + 4] = struct.pack(">i", value)[:len(frame[at:at + 4])]
        else:
            frame[at] ^= data.draw(st.integers(min_value=1, max_value=255))
        frame = bytes(frame)
    try:
        got = decode_request(frame[4:], _LIMITS)
    except ClientProtocolError as exc:
        got = exc
    if expect is not None:
        assert type(got) is expect, (shape, got)


def test_heavy_requests_and_answers_are_told_apart_by_size_not_by_content():
    """What the server decodes or encodes off the loop (tenure/server/offload.py): a body of many bytes that is
    not a Produce; an answer with more array elements, at any depth, than the limit - a hot-path API's never."""
    from kafka.protocol.admin import DescribeTransactionsResponse

    from tenure.protocol.codec import HEAVY_REQUEST_BYTES, heavy_answer, heavy_request
    head = struct.pack(">hhi", 65, 0, 1)
    assert not heavy_request(head + b"\0" * 100)
    assert heavy_request(head + b"\0" * HEAVY_REQUEST_BYTES)
    assert not heavy_request(struct.pack(">hhi", 0, 9, 1) + b"\0" * HEAVY_REQUEST_BYTES)   # Produce: record bytes
    S = DescribeTransactionsResponse.TransactionState
    T = S.TopicData

    def answer(states: int, partitions: int):
        return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=[
            S(error_code=0, transactional_id="t", transaction_state="Ongoing", transaction_timeout_ms=1,
              transaction_start_time_ms=1, producer_id=1, producer_epoch=0,
              topics=[T(topic="x", partitions=list(range(partitions)))]) for _ in range(states)])
    assert not heavy_answer(65, answer(3, 5), limit=21)          # 3 states + 3 topics + 3 x 5 partitions = 21
    assert heavy_answer(65, answer(3, 5), limit=20)
    assert heavy_answer(65, answer(30, 0), limit=20)             # the top list alone
    assert not heavy_answer(1, answer(30, 0), limit=20)          # Fetch: never walked
    from uuid import uuid4

    from kafka.protocol.metadata import MetadataResponse
    T = MetadataResponse.MetadataResponseTopic
    topics = [T(error_code=0, name=f"t{i}", topic_id=uuid4(), is_internal=False, partitions=[]) for i in range(9)]
    assert not heavy_answer(3, MetadataResponse(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=0,
                                                topics=topics), limit=9)     # a UUID (its `fields`) is no struct


def test_the_first_error_of_an_answer_looks_into_arrays_of_structs_only():
    """dispatch.response_error (the error a request is counted and captured with): nested error codes found,
    arrays of strings and of UUIDs (whose `fields` is a tuple of ints) passed over."""
    from uuid import uuid4

    from kafka.protocol.metadata import MetadataResponse

    from tenure.server.dispatch import response_error
    T = MetadataResponse.MetadataResponseTopic
    P = T.MetadataResponsePartition

    def topic(code):
        return T(error_code=code, name="t", topic_id=uuid4(), is_internal=False, partitions=[
            P(error_code=0, partition_index=0, leader_id=0, leader_epoch=0, replica_nodes=[0], isr_nodes=[0],
              offline_replicas=[])])
    body = MetadataResponse(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=0,
                            topics=[topic(0), topic(3)])
    assert response_error(body) == 3
    body.topics = [topic(0)]
    assert response_error(body) == 0

    class WithIds:
        fields = {"error_code": None, "ids": None}
        error_code = 0
        ids = [uuid4(), uuid4()]
    assert response_error(WithIds()) == 0


def heartbeat_payload(correlation_id: int, generation: int = 3, client_id: str = "hb", version: int = 4) -> bytes:
    from kafka.protocol.consumer.group import HeartbeatRequest
    return request_bytes(HeartbeatRequest(group_id="g", generation_id=generation, member_id="m-1",
                                          group_instance_id="i-1" if version >= 3 else None),
                         version, correlation_id=correlation_id, client_id=client_id)[4:]


def test_a_repeating_heartbeat_decodes_as_a_fresh_one_with_its_own_correlation_id_and_body():
    """A Heartbeat whose bytes after the correlation id were seen before reuses what its header and the limits walk
    made of them (codec.REPEATING_APIS): the request equals the one a first decode gives, with its own correlation
    id, client id and a body object of its own."""
    from tenure.protocol import codec
    codec._repeats.clear()
    first = decode_request(heartbeat_payload(1))
    again = decode_request(heartbeat_payload(2))
    assert len(codec._repeats) == 1
    codec._repeats.clear()
    fresh = decode_request(heartbeat_payload(2))
    assert again == fresh and again.correlation_id == 2 and first.correlation_id == 1
    assert (again.client_id, again.body_at, again.payload) == (fresh.client_id, fresh.body_at, fresh.payload)
    assert again.body is not first.body and again.body.to_dict() == first.body.to_dict()
    assert again.body.generation_id == 3 and again.body.member_id == "m-1"


def test_what_a_repeating_request_reuses_is_keyed_by_its_bytes_version_and_element_limit():
    """Another generation, client id or version is another key; a decode under another element limit walks the
    limits again; a table at its bound starts again; a large request is not kept."""
    from kafka.protocol.consumer.group import HeartbeatRequest

    from tenure.protocol import codec
    codec._repeats.clear()
    decode_request(heartbeat_payload(1))
    assert decode_request(heartbeat_payload(2, generation=4)).body.generation_id == 4
    assert decode_request(heartbeat_payload(3, client_id="other")).client_id == "other"
    old = decode_request(heartbeat_payload(4, version=2))
    assert old.api_version == 2 and old.body.group_instance_id is None
    assert len(codec._repeats) == 4
    decode_request(heartbeat_payload(5), DecodeLimits(max_request_elements=7))
    assert codec._repeats[heartbeat_payload(5)[8:]][2] == 7
    for i in range(codec.REPEATS_KEPT):
        codec._repeats[b"x%d" % i] = (0, 0, 0, None, 0)
    decode_request(heartbeat_payload(6))
    assert len(codec._repeats) == 1
    big = request_bytes(HeartbeatRequest(group_id="g" * codec.REPEAT_BYTES, generation_id=1, member_id="m",
                                         group_instance_id=None), 4, correlation_id=7)[4:]
    assert decode_request(big).body.group_id == "g" * codec.REPEAT_BYTES and len(codec._repeats) == 1


def test_bad_bytes_after_a_repeating_heartbeat_are_still_refused():
    """A Heartbeat cut short or with a null where none may be is refused as before, whatever was seen before it."""
    from tenure.protocol import codec
    codec._repeats.clear()
    good = heartbeat_payload(1)
    decode_request(good)
    with pytest.raises(MalformedRequest):
        decode_request(good[:-3])
    nulled = bytearray(good)
    at = good.index(b"\x02g")                    # the group id: a compact string of one character
    nulled[at] = 0                               # compact length 0: null
    with pytest.raises(MalformedRequest):
        decode_request(bytes(nulled))


@pytest.mark.parametrize("version", range(0, 5))
def test_a_numbers_only_answer_is_kafka_pythons_encoding_whether_kept_or_not(version):
    """An answer of plain integer fields (Heartbeat's) is the bytes kafka-python encodes (codec.ANSWERS_KEPT), for
    every error code and throttle time, first encoded or kept; an answer carrying tagged fields is encoded anew."""
    from kafka.protocol.consumer.group import HeartbeatResponse

    from tenure.protocol import codec
    req = decode_request(heartbeat_payload(9, version=version))
    for _ in range(2):
        for code in (0, 16, 22, 25, 27, 82):
            for throttle in (0, 100):
                body = HeartbeatResponse(throttle_time_ms=throttle, error_code=code)
                ours = encode_response(req, body)
                theirs = HeartbeatResponse(throttle_time_ms=throttle, error_code=code)
                theirs.API_VERSION = version
                theirs.with_header(correlation_id=9)
                assert ours == bytes(theirs.encode(header=True, framed=True))
    assert codec._numbers_of(HeartbeatResponse) is not None and codec._numbers_of(MetadataRequest) is None
    codec._answers.clear()
    tagged = HeartbeatResponse(throttle_time_ms=0, error_code=0)
    tagged.unknown_tags = {"_99": b"\x01"}
    ours = encode_response(req, tagged)
    tagged.with_header(correlation_id=9)
    assert ours == bytes(tagged.encode(header=True, framed=True)) and not codec._answers
    codec._answers.clear()
    kept = encode_response(req, HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.REBALANCE_IN_PROGRESS))
    assert kept == encode_response(req, HeartbeatResponse(throttle_time_ms=0, error_code=27)) and \
        len(codec._answers) == 1                       # an error code (an IntEnum) shares its int's encoding
    unset = HeartbeatResponse(throttle_time_ms=None, error_code=0)      # what kafka-python makes of it: not kept
    unset.API_VERSION = version
    unset.with_header(correlation_id=9)
    try:
        theirs = bytes(unset.encode(header=True, framed=True))
    except struct.error:                               # a version that has the field refuses the None
        with pytest.raises(struct.error):
            encode_response(req, HeartbeatResponse(throttle_time_ms=None, error_code=0))
    else:
        assert encode_response(req, HeartbeatResponse(throttle_time_ms=None, error_code=0)) == theirs
    assert len(codec._answers) == 1


def test_the_table_of_kept_answers_starts_again_at_its_bound():
    from kafka.protocol.consumer.group import HeartbeatResponse

    from tenure.protocol import codec
    req = decode_request(heartbeat_payload(9))
    codec._answers.clear()
    for t in range(codec.ANSWERS_KEPT + 5):
        encode_response(req, HeartbeatResponse(throttle_time_ms=t, error_code=0))
    assert 0 < len(codec._answers) <= codec.ANSWERS_KEPT


@pytest.mark.parametrize("api_key,version", ALL_VERSIONS)
def test_every_request_body_is_what_kafka_pythons_decode_makes_of_it(api_key, version):
    """decode_request calls kafka-python's compiled decoder of each API and version straight (worked out once per
    API and version, codec._DECODING): the body it gives is what `ApiMessage.decode` gives for the same bytes - a
    request with every field on the wire (one element in every array), first decoded and again."""
    from tests.support.hostile import filled, frame_of
    spec = SUPPORTED[api_key]
    frame = frame_of(filled(api_key, version), version)
    for _ in range(2):
        req = decode_request(frame[4:])
        theirs = spec.request.decode(frame[4 + req.body_at:], version=version)
        assert type(req.body) is type(theirs) and req.body == theirs and repr(req.body) == repr(theirs)


def test_a_repeating_heartbeat_is_decoded_anew_for_another_served_table():
    """What a repeating Heartbeat reuses is kept per served table: a server whose table does not serve the API, or
    not that version, still refuses the same bytes after another server decoded them; the first is served as before."""
    from tenure.protocol import codec
    from tenure.protocol.apis import DEFAULT_SERVED, ApiSpec, ServedApis
    codec._repeats.clear()
    payload = heartbeat_payload(1, version=4)
    assert decode_request(payload).api_version == 4
    without = ServedApis(DEFAULT_SERVED.release, {k: s for k, s in SUPPORTED.items() if k != 12})
    below = ServedApis(DEFAULT_SERVED.release, {**SUPPORTED, 12: ApiSpec(
        12, SUPPORTED[12].name, SUPPORTED[12].classes, SUPPORTED[12].min_version, 3, SUPPORTED[12].owner,
        SUPPORTED[12].announced_from)})
    for served in (without, below):
        with pytest.raises(UnsupportedApi):
            decode_request(payload, served=served)
    again = decode_request(heartbeat_payload(2, version=4))
    assert (again.correlation_id, again.client_id, again.served) == (2, "hb", DEFAULT_SERVED)
    assert decode_request(heartbeat_payload(3, version=4), served=below.__class__(
        DEFAULT_SERVED.release, SUPPORTED)).body.generation_id == 3


def test_an_answer_is_encoded_into_a_buffer_per_thread_that_a_large_answer_does_not_keep():
    """encode_response writes an answer with kafka-python's compiled encoder into one buffer per thread, the
    header's place kept before it: a large answer (past codec._BUFFER_KEPT) is encoded whole and the buffer it grew
    is let go; answers encoded on two threads at once are each their own bytes."""
    import threading

    from kafka.protocol.admin.groups import ListGroupsResponse

    from tenure.protocol import codec

    req = decode_request(request_bytes(MetadataRequest(topics=None), 12, correlation_id=5)[4:])

    def listing(n: int):
        G = ListGroupsResponse.ListedGroup
        return ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=[
            G(group_id=f"group-{i:07d}", protocol_type="consumer", group_state="Stable", group_type="classic")
            for i in range(n)])

    def theirs(body, version: int, cid: int) -> bytes:
        body.API_VERSION = version
        body.with_header(correlation_id=cid)
        return bytes(body.encode(header=True, framed=True))

    lg = decode_request(request_bytes(ListGroupsRequest(states_filter=[], types_filter=[]), 5, correlation_id=9)[4:])
    big = encode_response(lg, listing(40_000))
    assert len(big) > codec._BUFFER_KEPT and big == theirs(listing(40_000), 5, 9)
    assert getattr(codec._BUFFERS, "out", None) is None          # the grown buffer is not kept
    assert encode_response(lg, listing(2)) == theirs(listing(2), 5, 9)
    assert len(codec._BUFFERS.out.buf) <= codec._BUFFER_KEPT
    got: dict[int, list[bytes]] = {}

    def encode_many(n: int) -> None:
        got[n] = [encode_response(lg, listing(n)) for _ in range(200)]
    threads = [threading.Thread(target=encode_many, args=(n,)) for n in (3, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(set(frames) == {theirs(listing(n), 5, 9)} for n, frames in got.items())
    assert req.api_key == 3


def test_a_body_whose_class_has_an_encode_of_its_own_is_encoded_by_it():
    """A class with its own `encode` (kafka-python's MetadataRequest turns a null topics array into an empty one at
    v0) is encoded by that encode, not by the compiled encoder alone."""
    req = decode_request(request_bytes(MetadataRequest(topics=None), 0, correlation_id=4)[4:])
    frame = encode_response(req, MetadataRequest(topics=None))
    assert frame[8:] == bytes(MetadataRequest(topics=[]).encode(version=0)) and frame[4:8] == b"\x00\x00\x00\x04"


@pytest.mark.parametrize("api_key,version", [(68, 0), (68, 1), (76, 1)])
def test_a_repeating_kip848_or_share_heartbeat_decodes_as_a_fresh_one(api_key, version):
    """A KIP-848 or share group member's steady heartbeat (its subscription left null: unchanged) repeats byte for
    byte but for its correlation id: the second and later decode its body only (codec.REPEATING_APIS), and give
    what a fresh decode gives; a changed heartbeat is decoded whole, and bad bytes after a repeat are refused."""
    from tenure.protocol import codec
    cls = SUPPORTED[api_key].request
    steady = {"group_id": "g-1", "member_id": "Yx3k2mQpRf6Ht5uVbNw0aA", "member_epoch": 5, "rack_id": None,
              "subscribed_topic_names": None}
    if api_key == 68:
        steady.update(instance_id=None, rebalance_timeout_ms=-1, subscribed_topic_regex=None, server_assignor=None,
                      topic_partitions=None)

    def payload(cid: int, **change) -> bytes:
        return request_bytes(cls(**{**steady, **change}), version, correlation_id=cid, client_id="c-1")[4:]
    codec._repeats.clear()
    first = decode_request(payload(1))
    assert payload(1)[8:] in codec._repeats
    for cid in (2, 3):
        again = decode_request(payload(cid))
        assert (again.correlation_id, again.client_id, again.api_version, again.body_at) == \
            (cid, "c-1", version, first.body_at)
        assert again.body == first.body and again.body is not first.body
    assert decode_request(payload(4, member_epoch=6)).body.member_epoch == 6
    joined = decode_request(payload(5, subscribed_topic_names=["a", "b"]))
    assert joined.body.subscribed_topic_names == ["a", "b"]
    with pytest.raises(MalformedRequest):
        decode_request(payload(6)[:-3])
    with pytest.raises(RequestLimitExceeded):
        decode_request(payload(7, subscribed_topic_names=["t"] * 30), DecodeLimits(max_request_elements=20))
