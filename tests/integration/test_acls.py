"""ACLs with real clients, as the ANONYMOUS principal of a PLAINTEXT connection (what Kafka gives one too):
a group without READ refuses the join (Java GroupAuthorizationException, confluent-kafka
GROUP_AUTHORIZATION_FAILED), a topic without WRITE refuses the produce, a prefixed ACL grants a family of
topics, deny beats allow, the Java Admin and the confluent AdminClient create, describe and delete ACLs, kept
across a restart; with no authorizer the ACL APIs answer SECURITY_DISABLED, as Kafka's."""
from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka.protocol.admin import DescribeAclsRequest

from tests.support.java import run_java

# the ANONYMOUS principal may do what an application needs on app-* topics and its groups
EVERY = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                         AclPermissionType.ANY)
APP = ["allow User:ANONYMOUS all topic:prefixed:app-", "allow User:ANONYMOUS all group:*",
       "allow User:ANONYMOUS idempotent_write cluster:kafka-cluster"]


def produce(bootstrap: str, topic: str) -> KafkaError | None:
    """One record; the delivery error (None: delivered)."""
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000})
    errors: list = []
    p.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    assert len(errors) == 1
    return errors[0]


def consume_error(bootstrap: str, group: str, topic: str, timeout: float = 20, **conf) -> KafkaError | None:
    """A consumer of the group subscribed to the topic: the first error it sees (None: it got a record)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  **({"session.timeout.ms": 6000} if not conf else {}), **conf})
    try:
        c.subscribe([topic])
        import time
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                return msg.error()
            return None
        raise AssertionError("neither a record nor an error")
    finally:
        c.close()


@pytest.mark.tenure(acls=[*APP, "deny User:ANONYMOUS read group:locked"], topics={"app-in": 1})
def test_confluent_group_without_read_is_refused_on_join(tenure_server):
    assert produce(tenure_server.bootstrap, "app-in") is None
    assert consume_error(tenure_server.bootstrap, "locked", "app-in").code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert consume_error(tenure_server.bootstrap, "open", "app-in") is None     # the same topic, another group
    assert tenure_server.group("locked") is None                                # never joined


@pytest.mark.tenure(acls=[*APP, "allow User:ANONYMOUS describe group:locked", "deny User:ANONYMOUS read group:locked"],
                    topics={"app-in": 1, "hidden": 1})
def test_confluent_consumer_protocol_group_checks(tenure_server):
    """KIP-848 (group.protocol=consumer): ConsumerGroupHeartbeat needs READ on the group and DESCRIBE on every
    topic subscribed to."""
    b = tenure_server.bootstrap
    assert produce(b, "app-in") is None
    kip848 = {"group.protocol": "consumer"}
    err = consume_error(b, "locked", "app-in", **kip848)      # librdkafka makes it a fatal error of the consumer
    assert err.code() == KafkaError._FATAL and "Group authorization failed" in err.str()
    assert consume_error(b, "open-848", "app-in", **kip848) is None
    err = consume_error(b, "open-848-b", "hidden", **kip848)     # a topic it may not describe
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


@pytest.mark.tenure(acls=[*APP, "allow User:ANONYMOUS read topic:readonly"], topics={"readonly": 1})
def test_confluent_topic_without_write_cannot_produce(tenure_server):
    err = produce(tenure_server.bootstrap, "readonly")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce(tenure_server.bootstrap, "app-ok") is None      # app-ok: auto-created (CREATE from ALL)


@pytest.mark.tenure(acls=["allow User:* write topic:prefixed:logs-", "allow User:* create topic:prefixed:logs-"])
def test_confluent_prefixed_acl_grants_a_family_of_topics(tenure_server):
    for topic in ("logs-a", "logs-b"):
        assert produce(tenure_server.bootstrap, topic) is None
    err = produce(tenure_server.bootstrap, "metrics-a")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert tenure_server.live.topics.get("metrics-a") is None      # not auto-created either (no CREATE)


@pytest.mark.tenure(acls=[*APP, "deny User:ANONYMOUS write topic:app-frozen"], topics={"app-frozen": 1})
def test_confluent_deny_beats_allow(tenure_server):
    err = produce(tenure_server.bootstrap, "app-frozen")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce(tenure_server.bootstrap, "app-thawed") is None


@pytest.mark.tenure(acls=["allow User:ANONYMOUS alter cluster:kafka-cluster"], data_dir=True)
def test_confluent_admin_creates_describes_and_deletes_acls_kept_across_a_restart(tenure_server):
    admin = AdminClient({"bootstrap.servers": tenure_server.bootstrap})
    bindings = [
        AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, "svc-", ResourcePatternType.PREFIXED, "User:alice", "10.0.0.1",
                   AclOperation.ALL, AclPermissionType.DENY),
    ]
    for f in admin.create_acls(bindings).values():
        f.result(10)
    topic_filter = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,
                                    AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(topic_filter).result(10) == [bindings[0]]
    tenure_server.restart()
    admin = AdminClient({"bootstrap.servers": tenure_server.bootstrap})
    assert set(admin.describe_acls(EVERY).result(10)) == {*bindings, AclBinding(
        ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
        AclOperation.ALTER, AclPermissionType.ALLOW)}
    # MATCH: what applies to group svc-1 (the prefixed deny)
    match = AclBindingFilter(ResourceType.GROUP, "svc-1", ResourcePatternType.MATCH, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    assert admin.describe_acls(match).result(10) == [bindings[1]]
    deleted = admin.delete_acls([topic_filter, match])
    assert [f.result(10) for f in deleted.values()] == [[bindings[0]], [bindings[1]]]
    assert admin.describe_acls(topic_filter).result(10) == []


@pytest.mark.tenure(acls=["allow User:bob alter cluster:kafka-cluster"])
def test_confluent_admin_without_cluster_alter_is_refused(tenure_server):
    admin = AdminClient({"bootstrap.servers": tenure_server.bootstrap})
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:x", "*", AclOperation.READ,
                         AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as exc:
        list(admin.create_acls([binding]).values())[0].result(10)
    assert exc.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


@pytest.mark.parametrize("version", [1, 2, 3])
def test_with_no_authorizer_the_acl_apis_answer_security_disabled(tenure_server, wire, version):
    r = wire.call(DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                      principal_filter=None, host_filter=None, operation=1, permission_type=1),
                  version)
    assert (r.error_code, r.error_message, r.resources) == (54, "No Authorizer is configured on the broker", [])
    admin = AdminClient({"bootstrap.servers": tenure_server.bootstrap})
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:x", "*", AclOperation.READ,
                         AclPermissionType.ALLOW)
    for call in (lambda: admin.create_acls([binding]), lambda: admin.delete_acls([EVERY])):
        with pytest.raises(KafkaException) as exc:
            list(call().values())[0].result(10)
        assert exc.value.args[0].code() == KafkaError.SECURITY_DISABLED
    # librdkafka reads no top-level error of DescribeAcls: its describe_acls answers [] (the Java Admin below
    # raises SecurityDisabledException)
    assert admin.describe_acls(EVERY).result(10) == []


# ---------------------------------------------------------------- Java kafka-clients 4.3
@pytest.mark.java
@pytest.mark.tenure(acls=[*APP, "allow User:ANONYMOUS describe group:locked",
                          "deny User:ANONYMOUS read group:locked", "allow User:ANONYMOUS read topic:readonly"],
                    topics={"app-in": 1, "readonly": 1})
def test_java_consumer_and_producer_see_the_authorization_exceptions(tenure_server):
    b = tenure_server.bootstrap
    tenure_server.create_topics({"hidden": 1})
    assert run_java("AclOps", b, "topics") == [{"type": "topics", "names": ["app-in", "readonly"]}]  # no hidden
    assert run_java("AclOps", b, "produce", "app-in") == [{"type": "produced", "offset": 0}]
    [locked] = run_java("AclOps", b, "consume", "locked", "app-in")
    assert (locked["type"], locked["exception"]) == ("error", "GroupAuthorizationException")
    assert run_java("AclOps", b, "consume", "open", "app-in") == [{"type": "consumed", "count": 1}]
    [refused] = run_java("AclOps", b, "produce", "readonly")
    assert (refused["type"], refused["exception"]) == ("error", "TopicAuthorizationException")


@pytest.mark.java
@pytest.mark.tenure(acls=["allow User:ANONYMOUS alter cluster:kafka-cluster"])
def test_java_admin_creates_describes_and_deletes_acls(tenure_server):
    b = tenure_server.bootstrap
    assert run_java("AclOps", b, "create", "TOPIC", "pay-", "PREFIXED", "User:carol", "*", "WRITE", "ALLOW") == \
        [{"type": "created"}]
    [bad] = run_java("AclOps", b, "create", "CLUSTER", "other", "LITERAL", "User:carol", "*", "ALTER", "ALLOW")
    assert (bad["exception"], bad["message"]) == ("InvalidRequestException",
                                                  "The only valid name for the CLUSTER resource is kafka-cluster")
    lines = run_java("AclOps", b, "describe", "TOPIC")
    assert lines == [{"type": "acl", "resource_type": "TOPIC", "name": "pay-", "pattern": "PREFIXED",
                      "principal": "User:carol", "host": "*", "operation": "WRITE", "permission": "ALLOW"},
                     {"type": "described", "count": 1}]
    gone = run_java("AclOps", b, "delete", "TOPIC", "pay-", "PREFIXED")
    assert [x["type"] for x in gone] == ["deleted", "deleted_count"] and gone[1]["count"] == 1
    assert run_java("AclOps", b, "describe", "TOPIC") == [{"type": "described", "count": 0}]


@pytest.mark.java
def test_java_admin_with_no_authorizer_gets_security_disabled(tenure_server):
    [err] = run_java("AclOps", tenure_server.bootstrap, "describe")
    assert (err["type"], err["exception"]) == ("error", "SecurityDisabledException")


@pytest.mark.java
@pytest.mark.tenure(acls=[*APP, "allow User:ANONYMOUS write transactional_id:prefixed:app-"], topics={"app-in": 1})
def test_java_transactional_producer_needs_write_on_its_transactional_id(tenure_server):
    b = tenure_server.bootstrap
    assert run_java("AclOps", b, "transact", "app-tx", "app-in") == [{"type": "committed"}]
    [refused] = run_java("AclOps", b, "transact", "other-tx", "app-in")
    assert (refused["type"], refused["exception"]) == ("error", "TransactionalIdAuthorizationException")


# ---------------------------------------------------------------- kcat
@pytest.mark.kcat
@pytest.mark.tenure(acls=[*APP, "allow User:ANONYMOUS read topic:readonly"],
                    topics={"app-in": 1, "readonly": 1, "hidden": 1})
def test_kcat_lists_only_describable_topics_and_cannot_produce_without_write(tenure_server):
    import json
    import shutil
    import subprocess
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed (apt-get install kcat)"
    b = tenure_server.bootstrap
    meta = subprocess.run([kcat, "-b", b, "-L", "-J"], capture_output=True, timeout=30)
    assert meta.returncode == 0, meta.stderr
    assert sorted(t["topic"] for t in json.loads(meta.stdout)["topics"]) == ["app-in", "readonly"]   # not hidden
    ok = subprocess.run([kcat, "-b", b, "-P", "-t", "app-in", "-v", "-v"], input=b"v", capture_output=True, timeout=30)
    assert ok.returncode == 0 and b"Message delivered" in ok.stderr, ok.stderr
    refused = subprocess.run([kcat, "-b", b, "-P", "-t", "readonly", "-X", "message.timeout.ms=5000"], input=b"v",
                             capture_output=True, timeout=30)
    assert b"Broker: Topic authorization failed" in refused.stderr, refused.stderr


@pytest.mark.tenure(acls=["allow User:ANONYMOUS read topic:ops-t", "allow User:ANONYMOUS alter cluster:kafka-cluster",
                          "allow User:ANONYMOUS all group:ops-g", "deny User:ANONYMOUS delete group:ops-g"],
                    topics={"ops-t": 1})
def test_confluent_authorized_operations_come_from_the_acls(tenure_server):
    admin = AdminClient({"bootstrap.servers": tenure_server.bootstrap})
    names = lambda ops: {op.name for op in ops}  # noqa: E731
    topic = admin.describe_topics(TopicCollection(["ops-t"]), include_authorized_operations=True)["ops-t"].result(10)
    assert names(topic.authorized_operations) == {"READ", "DESCRIBE"}
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert names(cluster.authorized_operations) == {"ALTER", "DESCRIBE"}
    consumer = Consumer({"bootstrap.servers": tenure_server.bootstrap, "group.id": "ops-g"})
    consumer.commit(offsets=[TopicPartition("ops-t", 0, 1)], asynchronous=False)
    consumer.close()
    group = admin.describe_consumer_groups(["ops-g"], include_authorized_operations=True)["ops-g"].result(10)
    assert names(group.authorized_operations) == {"READ", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
