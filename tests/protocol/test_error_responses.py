"""Whole-request error answers (protocol/error_responses.py, used by fault injection): for every served
API and version, the answer encodes with the response header of that version, decodes back, and carries
the error on every topic, partition or group the request named."""
from __future__ import annotations

import pytest

from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request, encode_response
from tenure.protocol.error_responses import can_fail, error_response


def _filled(cls, version: int, depth: int = 0) -> dict:
    """Two elements in every array field of `cls` at `version`, at every depth (struct arrays hold such structs)."""
    fields = {}
    for name, field in cls.fields.items():
        if not field.is_array() or not field.for_version_q(version):
            continue
        if field.is_struct_array():
            item = field.data_class
            fields[name] = [item(**_filled(item, version, depth + 1)) for _ in range(2)]
        elif depth:
            fields[name] = [0, 1]
        else:
            fields[name] = ["g1", "g2"] if "group" in name else ["t1", "t2"]
    return fields


def _request(key: int, version: int) -> Request:
    """A request of API `key` naming two topics of two partitions, or two groups, where it can (AlterReplicaLogDirs:
    two dirs of two topics of two partitions)."""
    spec = SUPPORTED[key]
    return Request(key, version, 7, "c", spec.request(**_filled(spec.request, version)), spec)


CASES = [(k, v) for k, s in sorted(SUPPORTED.items()) for v in range(s.min_version, s.max_version + 1)
         if can_fail(k)]


@pytest.mark.parametrize("key,version", CASES, ids=[f"{SUPPORTED[k].name}-v{v}" for k, v in CASES])
def test_every_error_answer_encodes_and_carries_the_code(key, version):
    req = _request(key, version)
    body = error_response(req, 15)
    spec = SUPPORTED[key]
    if key == 18:           # ApiVersions errors go out in v0 form, which is how clients parse them
        from tenure.protocol.codec import encode_api_versions_error
        raw, version = encode_api_versions_error(7, 15), 0
    else:
        raw = encode_response(req, body)
    decoded = spec.response.decode(raw, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == 7
    codes = []

    def walk(obj, depth=0):
        for code_field in ("error_code", "partition_error_code"):     # AddPartitionsToTxn v0-3: the latter
            if getattr(obj, code_field, None) is not None and code_field in getattr(obj, "fields", {}) \
                    and obj.fields[code_field].for_version_q(version):
                codes.append(getattr(obj, code_field))
        for name, f in getattr(obj, "fields", {}).items():
            if f.is_struct_array() and f.for_version_q(version):
                for item in getattr(obj, name) or []:
                    walk(item, depth + 1)
    walk(decoded)
    assert codes and set(codes) == {15}, (spec.name, version, codes)


def test_apis_without_a_whole_request_error_are_named():
    assert [SUPPORTED[k].name for k in SUPPORTED if not can_fail(k)] == ["Metadata"]
    req = _request(3, 12)
    with pytest.raises(ValueError, match="Metadata"):
        error_response(req, 15)


def test_the_answer_names_what_the_request_named():
    req = _request(8, 9)                                  # OffsetCommit: 2 topics x 2 partitions
    body = error_response(req, 16)
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in body.topics] == \
        [(t.name, [(p.partition_index, 16) for p in t.partitions]) for t in req.body.topics]
    assert sum(len(t.partitions) for t in body.topics) == 4


ALL = [(k, v) for k, s in sorted(SUPPORTED.items()) for v in range(s.min_version, s.max_version + 1)]


@pytest.mark.parametrize("key,version", ALL, ids=[f"{SUPPORTED[k].name}-v{v}" for k, v in ALL])
def test_encode_response_writes_the_header_kafka_python_writes(key, version):
    """encode_response writes the response header itself (no header object per answer): the same bytes as
    kafka-python's `with_header` + `encode(header=True, framed=True)`, for every served API and version (an
    answer with two of everything, or Metadata's empty answer)."""
    from tenure.protocol.codec import api_versions_body
    req = _request(key, version)
    spec = SUPPORTED[key]
    make = (lambda: api_versions_body(version)) if key == 18 else \
        (lambda: spec.response(**_filled(spec.response, version))) if not can_fail(key) else \
        (lambda: error_response(req, 15))
    ours = encode_response(req, make())
    body = make()
    body.API_VERSION = version
    body.with_header(correlation_id=req.correlation_id)
    assert ours == bytes(body.encode(header=True, framed=True))
    assert spec.response.decode(ours, version=version, header=True, framed=True).header.correlation_id == 7


def test_the_coordinators_heartbeat_answer_is_one_object_per_code_encoding_as_a_fresh_one():
    """The coordinator answers every Heartbeat of a code with one shared object (`shared_heartbeat_answer`): the
    same bytes as a fresh answer at every version, its code found by the dispatcher's walk, and told apart
    (`is_shared_answer`) so that whatever would change it (a test's on_response hook) gets a copy."""
    from tenure.protocol.error_responses import heartbeat_error, is_shared_answer, shared_heartbeat_answer
    from tenure.protocol.errors import ErrorCode
    from tenure.server.dispatch import response_error
    ok, unknown = shared_heartbeat_answer(ErrorCode.NONE), shared_heartbeat_answer(ErrorCode.UNKNOWN_MEMBER_ID)
    assert shared_heartbeat_answer(0) is ok and shared_heartbeat_answer(25) is unknown and ok is not unknown
    assert is_shared_answer(ok) and is_shared_answer(unknown)
    assert not is_shared_answer(heartbeat_error(0)) and not is_shared_answer(None)
    spec = SUPPORTED[12]
    for version in range(spec.min_version, spec.max_version + 1):
        req = Request(12, version, 7, "c", None, spec)
        for code, shared in ((0, ok), (25, unknown)):
            assert encode_response(req, shared) == encode_response(req, heartbeat_error(code))
    assert (response_error(ok), response_error(unknown)) == (0, 25)
    assert (ok.error_code, unknown.error_code) == (0, 25)        # encoding changed neither
