"""The request check before decoding (protocol/limits.py): nulls where the schema has none, lengths past
the end of the request, and the array-element limit - for every served API and version, from the schemas."""
import struct
import tracemalloc

import pytest
from kafka.protocol.consumer import OffsetCommitRequest
from kafka.protocol.metadata import MetadataRequest

from tenure.protocol.codec import Request, decode_request
from tenure.protocol.errors import MalformedRequest, RequestLimitExceeded
from tenure.protocol.limits import DEFAULT_MAX_REQUEST_ELEMENTS, DecodeLimits
from tests.support.hostile import (
    ALL_VERSIONS,
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


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def _metadata(version: int, body: bytes) -> bytes:
    """A Metadata request payload (no size prefix) with a hand-made body."""
    if version >= 9:      # request header v2: client id, then an empty tagged-field section
        return struct.pack(">hhih", 3, version, 1, 1) + b"c\x00" + body
    return struct.pack(">hhih", 3, version, 1, 1) + b"c" + body


@pytest.mark.parametrize("api_key,version", ALL_VERSIONS)
def test_a_request_with_every_field_on_the_wire_decodes(api_key, version):
    req = decode_request(frame_of(filled(api_key, version), version)[4:])
    assert isinstance(req, Request) and (req.api_key, req.api_version) == (api_key, version)


WITH_FIELDS = [(k, v) for k, v in ALL_VERSIONS if null_cases(k, v)]
WITH_ARRAYS = [(k, v) for k, v in ALL_VERSIONS if array_cases(k, v)]


def test_the_tables_cover_every_served_api():
    # only ListGroups v0-3, ApiVersions v0-2, DescribeCluster (ints, booleans) and ListConfigResources v0 (empty)
    # have no string, bytes or array
    assert set(ALL_VERSIONS) - set(WITH_FIELDS) == {(16, 0), (16, 1), (16, 2), (16, 3), (18, 0), (18, 1), (18, 2),
                                                 (60, 0), (60, 1), (60, 2), (74, 0)}
    assert sum(len(null_cases(k, v)) for k, v in WITH_FIELDS) > 450


@pytest.mark.parametrize("api_key,version", WITH_FIELDS)
def test_null_in_a_non_nullable_field_is_malformed_as_kafka_says(api_key, version):
    for case in null_cases(api_key, version):
        payload = null_frame(case)[4:]
        if case.nullable:
            assert isinstance(decode_request(payload), Request), case.name
            continue
        with pytest.raises(MalformedRequest) as err:
            decode_request(payload)
        what = f"{case.name.split(' ')[0]} v{version}"
        assert str(err.value) == f"{what}: non-nullable field {case.kafka_name} was serialized as null", case.name


WITH_ELEMENTS = [(k, v) for k, v in ALL_VERSIONS if element_cases(k, v)]


@pytest.mark.parametrize("api_key,version", WITH_ELEMENTS)
def test_a_null_element_of_an_array_of_strings_is_malformed(api_key, version):
    for case in element_cases(api_key, version):
        with pytest.raises(MalformedRequest) as err:
            decode_request(element_null_frame(case)[4:])
        what = f"{case.name.split(' ')[0]} v{version}"
        assert str(err.value) == f"{what}: non-nullable field {case.kafka_name} was serialized as null", case.name


@pytest.mark.parametrize("api_key,version", WITH_ARRAYS)
def test_every_array_counts_against_the_element_limit(api_key, version):
    limits = DecodeLimits(max_request_elements=40)
    cases = array_cases(api_key, version)
    for case in cases:
        # the filled request holds one element in every array: len(cases) in all; each copy of this case's
        # element brings `per_copy` of them (itself and one in each array inside it)
        per_copy = sum(1 for c in cases if c.path[:len(case.path)] == case.path)
        most = (40 - (len(cases) - per_copy)) // per_copy
        assert isinstance(decode_request(repeated_frame(case, most)[4:], limits), Request), case.name
        with pytest.raises(RequestLimitExceeded, match=r"more than 40 array elements in one request \(field \w+; "
                                                       r"the limit is --max-request-elements\)"):
            decode_request(repeated_frame(case, most + 1)[4:], limits)


def test_elements_are_counted_over_all_arrays_at_every_depth():
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition

    def commit(topics: int, partitions: int) -> bytes:
        req = OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                  topics=[T(name=f"t{i}", partitions=[P(partition_index=p, committed_offset=1)
                                                                      for p in range(partitions)])
                                          for i in range(topics)])
        return request_bytes(req, 8)[4:]

    limits = DecodeLimits(max_request_elements=30)
    assert isinstance(decode_request(commit(5, 5), limits), Request)           # 5 + 25 = 30
    with pytest.raises(RequestLimitExceeded):
        decode_request(commit(1, 30), limits)                                  # 1 + 30 = 31
    with pytest.raises(RequestLimitExceeded):
        decode_request(commit(3, 10), limits)                                  # 3 + 30 = 33


def test_the_16_mib_metadata_of_empty_names_is_refused_without_building_it():
    """Finding 4 of issue 11: 8M empty topic names took 65 s and 3.3 GiB. Refused before any object is made."""
    n = 8 * 1024 * 1024
    payload = _metadata(1, struct.pack(">i", n) + b"\x00\x00" * n)
    tracemalloc.start()
    try:
        with pytest.raises(RequestLimitExceeded, match=f"more than {DEFAULT_MAX_REQUEST_ELEMENTS} array elements"):
            decode_request(payload)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"refusing a {len(payload)}-byte request allocated {peak} bytes"


@pytest.mark.parametrize("version,body,message", [
    (1, struct.pack(">i", 0x7FFFFFFF), "field topics: tried to allocate a collection of size 2147483647, "
                                       "but there are only 0 bytes remaining"),
    (1, struct.pack(">i", -2), "field topics has invalid length -2"),
    (1, struct.pack(">ih", 1, 5) + b"ab", "field name needs 5 byte(s) at byte 6, only 2 remain"),
    (4, struct.pack(">i", 0), "field of fixed width needs 1 byte(s) at byte 4, only 0 remain"),
    (9, b"\x80\x80\x80\x80\x80\x01", "field topics: varint is too long"),
    (9, _uvarint(2) + _uvarint(0x8000 + 1), "string field name had invalid length 32768"),
    (9, _uvarint(1) + b"\x01\x00\x00" + b"\x01\x07\x05", "field tag 7 needs 5 byte(s) at byte 7, only 0 remain"),
])
def test_lengths_past_the_end_of_the_request_are_malformed(version, body, message):
    with pytest.raises(MalformedRequest) as err:
        decode_request(_metadata(version, body))
    assert str(err.value) == f"Metadata v{version}: {message}"


def test_unknown_tagged_fields_of_many_elements_decode_without_copying_the_rest_of_the_request():
    """kafka-python's compiled decoder copied the rest of the request for each struct carrying tagged fields
    (quadratic: 4,000 such topics in a 4 MiB request took seconds). Each tagged section now copies its own
    bytes only: decoding holds no copy of the 4 MiB that follow the tagged element."""
    pad = b"x" * 1000
    tagged_elem = b"\x01" + b"\x01" + b"\x05" + _uvarint(len(pad)) + pad        # name "", one unknown tag
    plain = _uvarint(len(pad) + 1) + pad + b"\x00"                              # name of 1000 x, no tags
    n = 4096
    payload = _metadata(9, _uvarint(n + 1) + tagged_elem + plain * (n - 1) + b"\x01\x00\x00\x00")
    tracemalloc.start()
    try:
        req = decode_request(payload)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert req.body.topics[0].unknown_tags == {"_5": pad}
    assert len(req.body.topics) == n
    # the decoded request itself is ~n * 1.1 KB of strings and objects; a copy of the rest would add ~4 MiB
    assert peak < len(payload) * 1.6, (peak, len(payload))


def test_a_request_of_exactly_the_default_limit_decodes():
    names = [MetadataRequest.MetadataRequestTopic(name="t")] * DEFAULT_MAX_REQUEST_ELEMENTS
    assert isinstance(decode_request(request_bytes(MetadataRequest(topics=names), 12)[4:]), Request)
