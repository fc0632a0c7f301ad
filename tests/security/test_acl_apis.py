"""CreateAcls, DescribeAcls and DeleteAcls on the wire, hostile calls included: a code Kafka does not know
closes that connection only (Kafka fails to parse such a request), a binding Kafka refuses is answered
INVALID_REQUEST with Kafka's message beside the others created, big requests are answered within the decoding
limits, the table has a bound, and acls.json survives a restart (and a damaged one stops the start-up)."""
from __future__ import annotations

import logging
import time

import pytest
from kafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from kafka.protocol.metadata import ApiVersionsRequest

from tenure.config import ServerConfig
from tenure.protocol.errors import ErrorCode as E
from tenure.security import authorizer as authorizer_module
from tenure.security.acls import ACLS_FILE, AclBinding, AclFilter, parse_acl
from tenure.security.authorizer import Authorizer
from tenure.server import ServerThread
from tests.support.wire import WireClient

C = CreateAclsRequest.AclCreation
F = DeleteAclsRequest.DeleteAclsFilter
TOPIC, GROUP, CLUSTER, ANY, LITERAL, PREFIXED, MATCH = 2, 3, 4, 1, 3, 4, 2
READ, ALLOW, DENY = 3, 3, 2


def creation(rtype=TOPIC, name="t", pattern=LITERAL, principal="User:a", host="*", op=READ, perm=ALLOW):
    return C(resource_type=rtype, resource_name=name, resource_pattern_type=pattern, principal=principal, host=host,
             operation=op, permission_type=perm)


def describe(rtype=ANY, name=None, pattern=ANY, principal=None, host=None, op=ANY, perm=ANY):
    return DescribeAclsRequest(resource_type_filter=rtype, resource_name_filter=name, pattern_type_filter=pattern,
                               principal_filter=principal, host_filter=host, operation=op, permission_type=perm)


def delete_filter(rtype=ANY, name=None, pattern=ANY, principal=None, host=None, op=ANY, perm=ANY):
    return F(resource_type_filter=rtype, resource_name_filter=name, pattern_type_filter=pattern,
             principal_filter=principal, host_filter=host, operation=op, permission_type=perm)


@pytest.fixture
def server(tmp_path):
    with ServerThread(ServerConfig(port=0, data_dir=str(tmp_path), super_users=("ANONYMOUS",))) as st:
        yield st


def test_kafkas_refusals_per_binding_beside_the_created_ones(server):
    with WireClient.to(server.bootstrap) as c:
        r = c.call(CreateAclsRequest(creations=[
            creation(), creation(rtype=ANY), creation(pattern=MATCH), creation(pattern=ANY), creation(name=""),
            creation(rtype=CLUSTER, name="c"), creation(principal="alice"), creation(op=ANY), creation(perm=ANY),
            creation(name="x" * 5000), creation(rtype=CLUSTER, name="kafka-cluster", op=7)]), 3)
        assert [(x.error_code, x.error_message) for x in r.results] == [
            (0, None), (E.INVALID_REQUEST, "Invalid resourceType ANY"),
            (E.INVALID_REQUEST, "Invalid patternType MATCH"), (E.INVALID_REQUEST, "Invalid patternType ANY"),
            (E.INVALID_REQUEST, "Invalid empty resource name"),
            (E.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
            (E.INVALID_REQUEST, "Could not parse principal from `alice` (no colon is present separating the "
                                "principal type from the principal name)"),
            (E.INVALID_REQUEST, "Invalid operation ANY"), (E.INVALID_REQUEST, "Invalid permissionType ANY"),
            (E.INVALID_REQUEST, "A resource name, principal or host longer than 1024 characters"), (0, None)]
        got = c.call(describe(), 3)
        assert [(x.resource_type, x.resource_name, x.pattern_type, [(a.principal, a.operation) for a in x.acls])
                for x in got.resources] == [(TOPIC, "t", LITERAL, [("User:a", READ)]),
                                            (CLUSTER, "kafka-cluster", LITERAL, [("User:a", 7)])]


@pytest.mark.parametrize("request_", [
    CreateAclsRequest(creations=[creation(rtype=99)]), CreateAclsRequest(creations=[creation(op=0)]),
    CreateAclsRequest(creations=[creation(perm=-3)]), CreateAclsRequest(creations=[creation(pattern=0)]),
    describe(rtype=0), describe(op=42), describe(pattern=9),
    DeleteAclsRequest(filters=[delete_filter(), delete_filter(perm=77)])], ids=lambda r: type(r).__name__)
def test_an_unknown_code_closes_that_connection_only(server, request_, caplog):
    caplog.set_level(logging.INFO, logger="tenure")
    with WireClient.to(server.bootstrap) as bystander, WireClient.to(server.bootstrap) as bad:
        bystander.call(ApiVersionsRequest(), 0)
        bad.send_raw(_frame(request_, 2))
        assert bad.is_closed_by_peer(timeout=10)
        assert bystander.call(describe(), 2).error_code == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert any("unknown code" in r.getMessage() for r in caplog.records)


def _frame(req, version: int) -> bytes:
    from tests.support.wire import request_bytes
    return request_bytes(req, version)


def test_many_filters_and_matching_deletes(server):
    with WireClient.to(server.bootstrap) as c:
        r = c.call(CreateAclsRequest(creations=[creation(name=f"t{i}") for i in range(2000)]), 3)
        assert {x.error_code for x in r.results} == {0}
        t0 = time.monotonic()
        r = c.call(DeleteAclsRequest(filters=[delete_filter(name=f"t{i}", pattern=LITERAL) for i in range(0, 2000, 2)]
                                     + [delete_filter()] * 1000), 3)
        assert time.monotonic() - t0 < 10
        assert [len(x.matching_acls) for x in r.filter_results[:3]] == [1, 1, 1]
        # every filter sees the table as it was (as Kafka's): a match-all filter lists all 2000, until the
        # request has listed 200,000; the filters past that bound are refused, the others done
        assert len(r.filter_results) == 2000 and len(r.filter_results[1000].matching_acls) == 2000
        assert (r.filter_results[-1].error_code, r.filter_results[-1].matching_acls) == (E.POLICY_VIOLATION, [])
        assert c.call(describe(), 3).resources == []


def test_describe_with_match_finds_what_applies_to_one_resource(server):
    with WireClient.to(server.bootstrap) as c:
        c.call(CreateAclsRequest(creations=[creation(name="orders"), creation(name="*"), creation(name="ord",
                                                                                                   pattern=PREFIXED),
                                            creation(name="or", pattern=LITERAL), creation(name="x", pattern=PREFIXED),
                                            creation(rtype=GROUP, name="orders")]), 3)
        got = c.call(describe(rtype=TOPIC, name="orders", pattern=MATCH), 3)
        assert sorted((x.resource_name, x.pattern_type) for x in got.resources) == [
            ("*", LITERAL), ("ord", PREFIXED), ("orders", LITERAL)]
        got = c.call(describe(rtype=TOPIC, name="orders", pattern=ANY), 3)      # ANY: this exact name only
        assert [(x.resource_name, x.pattern_type) for x in got.resources] == [("orders", LITERAL)]


def test_the_acls_survive_a_restart_and_a_damaged_file_stops_the_start(server, tmp_path):
    with WireClient.to(server.bootstrap) as c:
        c.call(CreateAclsRequest(creations=[creation(name="kept", perm=DENY)]), 3)
    server.restart()
    with WireClient.to(server.bootstrap) as c:
        assert [x.resource_name for x in c.call(describe(), 3).resources] == ["kept"]
    server.stop()
    (tmp_path / ACLS_FILE).write_text("{not json")
    with pytest.raises(Exception, match="acls.json"):
        ServerThread(ServerConfig(port=0, data_dir=str(tmp_path), authorizer=True)).start()


def test_the_table_has_a_bound(monkeypatch):
    monkeypatch.setattr(authorizer_module, "MAX_ACLS", 3)
    a = Authorizer()
    got = a.create([parse_acl(f"allow User:a read topic:t{i}") for i in range(5)])
    assert got == [None, None, None, "tenure keeps at most 3 ACLs", "tenure keeps at most 3 ACLs"]
    assert len(a) == 3 and a.delete([AclFilter(ANY, None, ANY, None, None, ANY, ANY)])[0]


def test_one_big_creation_is_linear():
    """50,000 bindings (each twice) in one CreateAcls: seconds, not the minutes of a quadratic duplicate check."""
    import time as _time
    many = [AclBinding(TOPIC, f"t{i}", LITERAL, "User:a", "*", READ, ALLOW) for i in range(50_000)] * 2
    t0 = _time.monotonic()
    a = Authorizer()
    assert a.create(many) == [None] * 100_000
    assert len(a) == 50_000 and _time.monotonic() - t0 < 20
