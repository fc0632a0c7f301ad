"""Authorized operations: tenure has no authorizer, so a request that asks (Metadata, DescribeCluster,
DescribeGroups) gets every operation the resource type supports, as Kafka answers with no authorizer
configured; a request that does not ask gets Integer.MIN_VALUE. Raw wire per version, then the confluent-kafka
AdminClient and the Java Admin."""
from __future__ import annotations

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient
from kafka.protocol.admin.cluster import DescribeClusterRequest
from kafka.protocol.admin.groups import DescribeGroupsRequest
from kafka.protocol.metadata import MetadataRequest

from tests.support.clients import create_topic
from tests.support.groupwire import commit
from tests.support.java import run_java

TOPIC_OPS = {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
GROUP_OPS = {"READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
CLUSTER_OPS = {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER",
               "DESCRIBE"}
CODES = {"READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8, "CLUSTER_ACTION": 9,
         "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12}


def codes(names) -> set[int]:
    """As kafka-python decodes the field: the set of operation codes (None: Integer.MIN_VALUE, not asked)."""
    return {CODES[n] for n in names}


@pytest.fixture
def topic_and_group(tenure_server, wire):
    create_topic(tenure_server.bootstrap, "ops", 1)
    assert commit(wire, "ops-g", "", -1, None, "ops", {0: 1}) == {0: 0}
    return "ops", "ops-g"


@pytest.mark.parametrize("version", [8, 9, 10, 11, 12])
@pytest.mark.parametrize("ask", [True, False])
def test_metadata(tenure_server, wire, topic_and_group, version, ask):
    kw = dict(include_topic_authorized_operations=ask, allow_auto_topic_creation=False)
    if version <= 10:
        kw["include_cluster_authorized_operations"] = ask
    T = MetadataRequest.MetadataRequestTopic
    r = wire.call(MetadataRequest(topics=[T(name="ops", topic_id=None), T(name="missing", topic_id=None)], **kw),
                  version)
    ops = {t.name: t.authorized_operations for t in r.topics}
    want = codes(TOPIC_OPS) if ask else None
    assert ops == {"ops": want, "missing": want}
    if version <= 10:
        assert r.authorized_operations == (codes(CLUSTER_OPS) if ask else None)


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("ask", [True, False])
def test_describe_cluster(wire, version, ask):
    r = wire.call(DescribeClusterRequest(include_cluster_authorized_operations=ask, endpoint_type=1,
                                         include_fenced_brokers=False), version)
    assert r.authorized_operations == (codes(CLUSTER_OPS) if ask else None)


@pytest.mark.parametrize("version", [3, 4, 5])
@pytest.mark.parametrize("ask", [True, False])
def test_describe_groups_known_and_unknown(wire, topic_and_group, version, ask):
    r = wire.call(DescribeGroupsRequest(groups=["ops-g", "never"], include_authorized_operations=ask), version)
    assert {g.group_id: g.authorized_operations for g in r.groups} == \
        {"ops-g": codes(GROUP_OPS) if ask else None, "never": codes(GROUP_OPS) if ask else None}


def test_confluent_admin_client_sees_every_supported_operation(tenure_server, topic_and_group):
    admin = AdminClient({"bootstrap.servers": tenure_server.bootstrap})
    names = lambda ops: {op.name for op in ops}  # noqa: E731
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert names(cluster.authorized_operations) == CLUSTER_OPS
    topics = admin.describe_topics(TopicCollection(["ops"]), include_authorized_operations=True)
    assert names(topics["ops"].result(10).authorized_operations) == TOPIC_OPS
    groups = admin.describe_consumer_groups(["ops-g"], include_authorized_operations=True)
    assert names(groups["ops-g"].result(10).authorized_operations) == GROUP_OPS
    # not asked: nothing claimed
    assert admin.describe_cluster().result(10).authorized_operations is None
    assert AclOperation.READ.name == "READ"


@pytest.mark.java
@pytest.mark.timeout(120)
def test_java_admin_sees_every_supported_operation(tenure_server, topic_and_group):
    out = run_java("AdminOps", tenure_server.bootstrap, "authorized-ops", "ops", "ops-g", timeout=90)
    [ops] = [e for e in out if e["type"] == "authorized_ops"]
    assert (set(ops["cluster"]), set(ops["topic"]), set(ops["group"])) == (CLUSTER_OPS, TOPIC_OPS, GROUP_OPS)
