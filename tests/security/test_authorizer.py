"""The authorizer's rules, case by case as Kafka's StandardAuthorizer unit tests and its default
authorizeByResourceType tests pose them: deny wins, wildcards (resource, principal, host), prefixes, implied
operations, super users, allow.everyone.if.no.acl.found."""
from __future__ import annotations

import pytest

from tenure.protocol.acl import (
    ALL,
    ALTER,
    ALTER_CONFIGS,
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    CREATE,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    GROUP,
    IDEMPOTENT_WRITE,
    READ,
    SUPPORTED,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
)
from tenure.security.acls import ALLOW, DENY, LITERAL, PREFIXED, AclBinding, parse_acl
from tenure.security.authorizer import Authorizer

ALICE, BOB = "User:alice", "User:bob"
HOST = "192.168.0.1"


def acl(rtype=TOPIC, name="foo", pattern=LITERAL, principal=ALICE, host="*", op=READ, perm=ALLOW) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authorizer(*bindings, **kw) -> Authorizer:
    a = Authorizer(**kw)
    assert a.create(list(bindings)) == [None] * len(bindings)
    return a


def test_simple_allow_and_the_default_deny():
    a = authorizer(acl(name="foo", op=READ))
    assert a.authorize(ALICE, HOST, READ, TOPIC, "foo")
    assert not a.authorize(ALICE, HOST, WRITE, TOPIC, "foo")       # an ACL on foo, none allowing WRITE
    assert not a.authorize(BOB, HOST, READ, TOPIC, "foo")          # another principal
    assert not a.authorize(ALICE, HOST, READ, TOPIC, "bar")        # no ACL at all: refused by default
    assert not a.authorize(ALICE, HOST, READ, GROUP, "foo")        # another resource type


def test_allow_everyone_if_no_acl_found_only_where_no_acl_names_the_resource():
    a = authorizer(acl(name="foo", principal=BOB, op=READ), allow_if_no_acl=True)
    assert a.authorize(ALICE, HOST, WRITE, TOPIC, "bar")            # nothing names bar
    assert not a.authorize(ALICE, HOST, READ, TOPIC, "foo")         # bob's ACL names foo: alice is refused
    assert authorizer(acl(name="f", pattern=PREFIXED, principal=BOB), allow_if_no_acl=True) \
        .authorize(ALICE, HOST, READ, TOPIC, "gar")
    assert not authorizer(acl(name="f", pattern=PREFIXED, principal=BOB), allow_if_no_acl=True) \
        .authorize(ALICE, HOST, READ, TOPIC, "foo")


def test_deny_wins_over_allow_whatever_pattern_says_it():
    a = authorizer(acl(name="foo", op=READ), acl(name="fo", pattern=PREFIXED, op=READ, perm=DENY))
    assert not a.authorize(ALICE, HOST, READ, TOPIC, "foo")
    a = authorizer(acl(name="*", op=ALL), acl(name="foo", op=WRITE, perm=DENY))
    assert a.authorize(ALICE, HOST, READ, TOPIC, "foo")
    assert not a.authorize(ALICE, HOST, WRITE, TOPIC, "foo")
    assert a.authorize(ALICE, HOST, WRITE, TOPIC, "bar")


def test_deny_precedence_with_operation_all():
    a = authorizer(acl(name="foo", op=READ), acl(name="foo", op=ALL, perm=DENY, principal="User:*"))
    for op in (READ, WRITE, DESCRIBE):
        assert not a.authorize(ALICE, HOST, op, TOPIC, "foo")
    assert not a.authorize(ALICE, HOST, READ, TOPIC, "foo2") and not a.authorize(BOB, HOST, READ, TOPIC, "foo")


def test_operation_all_allows_every_operation():
    a = authorizer(acl(name="foo", op=ALL))
    assert all(a.authorize(ALICE, HOST, op, TOPIC, "foo") for op in SUPPORTED[TOPIC])


def test_wildcard_principal_host_and_resource():
    a = authorizer(acl(name="*", principal="User:*", op=WRITE))
    assert a.authorize(ALICE, HOST, WRITE, TOPIC, "anything") and a.authorize(BOB, "10.0.0.1", WRITE, TOPIC, "x")
    assert not a.authorize(ALICE, HOST, READ, TOPIC, "anything")


def test_host_must_match_exactly_or_be_the_wildcard():
    a = authorizer(acl(host=HOST, op=READ))
    assert a.authorize(ALICE, HOST, READ, TOPIC, "foo")
    assert not a.authorize(ALICE, "192.168.0.2", READ, TOPIC, "foo")
    a = authorizer(acl(host="*", op=READ), acl(host=HOST, op=READ, perm=DENY))
    assert not a.authorize(ALICE, HOST, READ, TOPIC, "foo")             # denied from that host only
    assert a.authorize(ALICE, "10.0.0.1", READ, TOPIC, "foo")


def test_prefixed_acls_grant_a_family_and_a_literal_prefix_grants_nothing_else():
    a = authorizer(acl(name="logs-", pattern=PREFIXED, op=WRITE), acl(name="met", op=WRITE))
    assert a.authorize(ALICE, HOST, WRITE, TOPIC, "logs-a") and a.authorize(ALICE, HOST, WRITE, TOPIC, "logs-")
    assert not a.authorize(ALICE, HOST, WRITE, TOPIC, "logs")
    assert a.authorize(ALICE, HOST, WRITE, TOPIC, "met")
    assert not a.authorize(ALICE, HOST, WRITE, TOPIC, "metrics")      # LITERAL "met" is not a prefix


@pytest.mark.parametrize("granted", [READ, WRITE, DELETE, ALTER, DESCRIBE])
def test_describe_is_implied_by_read_write_delete_alter(granted):
    a = authorizer(acl(op=granted))
    assert a.authorize(ALICE, HOST, DESCRIBE, TOPIC, "foo")


@pytest.mark.parametrize("granted", [CREATE, DESCRIBE_CONFIGS, ALTER_CONFIGS])
def test_describe_is_not_implied_by_the_others(granted):
    assert not authorizer(acl(op=granted)).authorize(ALICE, HOST, DESCRIBE, TOPIC, "foo")


def test_describe_configs_is_implied_by_alter_configs_only():
    assert authorizer(acl(op=ALTER_CONFIGS)).authorize(ALICE, HOST, DESCRIBE_CONFIGS, TOPIC, "foo")
    assert not authorizer(acl(op=ALTER)).authorize(ALICE, HOST, DESCRIBE_CONFIGS, TOPIC, "foo")


def test_a_deny_implies_nothing():
    """DENY READ does not deny DESCRIBE (an ALLOW DESCRIBE still allows it)."""
    a = authorizer(acl(op=DESCRIBE), acl(op=READ, perm=DENY))
    assert a.authorize(ALICE, HOST, DESCRIBE, TOPIC, "foo")
    assert not a.authorize(ALICE, HOST, READ, TOPIC, "foo")


def test_super_users_may_do_anything_even_denied():
    a = authorizer(acl(op=ALL, perm=DENY, principal="User:*"), super_users=["User:admin", "root"])
    assert a.authorize("User:admin", HOST, WRITE, TOPIC, "foo")
    assert a.authorize("User:root", HOST, ALTER, CLUSTER, CLUSTER_NAME)     # a bare name is User:NAME
    assert not a.authorize(ALICE, HOST, READ, TOPIC, "foo")


def test_authorized_operations():
    a = authorizer(acl(rtype=GROUP, name="g", op=READ), acl(rtype=GROUP, name="g", op=DELETE, perm=DENY))
    assert a.operations(ALICE, HOST, GROUP, "g") == {READ, DESCRIBE}


def test_a_created_binding_twice_is_kept_once_and_deleting_by_filter():
    from tenure.security.acls import MATCH_ALL, AclFilter
    a = authorizer(acl(), acl())
    assert len(a) == 1
    a.create([acl(name="bar"), acl(rtype=GROUP, name="g")])
    removed = a.delete([AclFilter(TOPIC, None, 1, None, None, 1, 1)])     # every topic ACL
    assert {b.name for b in removed[0]} == {"foo", "bar"}
    assert [b.name for b in a.bindings(MATCH_ALL)] == ["g"]


# ---------------------------------------------------------------- authorizeByResourceType
def test_by_type_no_acl_found_override():
    assert not Authorizer().authorize_any(ALICE, HOST, WRITE, TOPIC)
    assert Authorizer(allow_if_no_acl=True).authorize_any(ALICE, HOST, WRITE, TOPIC)


def test_by_type_a_literal_or_prefixed_allow_is_enough():
    assert authorizer(acl(op=WRITE)).authorize_any(ALICE, HOST, WRITE, TOPIC)
    assert authorizer(acl(name="a", pattern=PREFIXED, op=WRITE)).authorize_any(ALICE, HOST, WRITE, TOPIC)
    assert not authorizer(acl(op=READ)).authorize_any(ALICE, HOST, WRITE, TOPIC)   # no implication here


def test_by_type_wildcard_deny_dominates():
    a = authorizer(acl(op=WRITE), acl(name="*", op=WRITE, perm=DENY))
    assert not a.authorize_any(ALICE, HOST, WRITE, TOPIC)


def test_by_type_prefixed_deny_dominates_what_it_covers_only():
    a = authorizer(acl(name="foo", op=WRITE), acl(name="fo", pattern=PREFIXED, op=WRITE, perm=DENY))
    assert not a.authorize_any(ALICE, HOST, WRITE, TOPIC)
    a.create([acl(name="bar", op=WRITE)])             # an unrelated deny does not dominate this allow
    assert a.authorize_any(ALICE, HOST, WRITE, TOPIC)


def test_by_type_literal_deny_of_the_same_name_dominates():
    a = authorizer(acl(name="foo", op=WRITE), acl(name="foo", op=WRITE, perm=DENY))
    assert not a.authorize_any(ALICE, HOST, WRITE, TOPIC)


def test_by_type_wildcard_allow_principal_host_operation():
    assert authorizer(acl(name="*", op=WRITE)).authorize_any(ALICE, HOST, WRITE, TOPIC)
    assert authorizer(acl(principal="User:*", op=WRITE)).authorize_any(ALICE, HOST, WRITE, TOPIC)
    assert authorizer(acl(host=HOST, op=WRITE)).authorize_any(ALICE, HOST, WRITE, TOPIC)
    assert not authorizer(acl(host="10.1.1.1", op=WRITE)).authorize_any(ALICE, HOST, WRITE, TOPIC)
    assert authorizer(acl(op=ALL)).authorize_any(ALICE, HOST, WRITE, TOPIC)


def test_by_type_super_user():
    assert authorizer(acl(name="*", op=ALL, perm=DENY), super_users=[ALICE]).authorize_any(ALICE, HOST, WRITE, TOPIC)


@pytest.mark.parametrize("rtype,name,op", [(CLUSTER, CLUSTER_NAME, IDEMPOTENT_WRITE), (CLUSTER, CLUSTER_NAME,
                                                                                       CLUSTER_ACTION),
                                           (TRANSACTIONAL_ID, "tx-1", WRITE)])
def test_other_resource_types(rtype, name, op):
    a = authorizer(acl(rtype=rtype, name=name, op=op))
    assert a.authorize(ALICE, HOST, op, rtype, name) and not a.authorize(BOB, HOST, op, rtype, name)


def test_the_text_form_round_trips():
    for spec in ("allow User:alice read topic:orders", "deny User:* write topic:prefixed:logs-",
                 "allow User:bob describe group:g1 from 127.0.0.1", "allow User:x idempotent_write cluster:kafka-cluster",
                 "allow User:x write transactional_id:tx"):
        assert parse_acl(spec).text() == spec
    assert parse_acl("allow alice all topic:*").principal == ALICE


def test_a_long_name_costs_only_the_prefixes_the_table_has():
    import time
    a = authorizer(acl(name="lo", pattern=PREFIXED, op=READ), acl(name="long-", pattern=PREFIXED, op=READ, perm=DENY))
    name = "long-" + "x" * 32000
    t0 = time.perf_counter()
    for _ in range(200):
        assert not a.authorize(ALICE, HOST, READ, TOPIC, name)          # the longer prefix denies
    assert a.authorize(ALICE, HOST, READ, TOPIC, "lo" + "y" * 32000)
    assert time.perf_counter() - t0 < 2
