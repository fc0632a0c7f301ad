"""ACLs with the Python clients, as User:ANONYMOUS over PLAINTEXT: kafka-python's admin creates, describes and
deletes ACLs (and sees SecurityDisabledError without an authorizer), kafka-python and aiokafka consumers of a
group without READ get GroupAuthorizationFailedError, an aiokafka producer without WRITE gets
TopicAuthorizationFailedError."""
from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import errors as aioerrors
from kafka import KafkaConsumer
from kafka import errors as kerrors
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

from tests.integration.test_acls import APP, produce

LOCKED = [*APP, "allow User:ANONYMOUS describe group:locked", "deny User:ANONYMOUS read group:locked",
          "allow User:ANONYMOUS read topic:readonly"]


@pytest.mark.tenure(acls=["allow User:ANONYMOUS alter cluster:kafka-cluster"])
def test_kafka_python_admin_creates_describes_and_deletes_acls(tenure_server):
    admin = KafkaAdminClient(bootstrap_servers=tenure_server.bootstrap)
    try:
        good = ACL("User:dora", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                   ResourcePattern(ResourceType.TOPIC, "ev-", ACLResourcePatternType.PREFIXED))
        bad = ACL("User:dora", "*", ACLOperation.ALTER, ACLPermissionType.ALLOW,
                  ResourcePattern(ResourceType.CLUSTER, "elsewhere"))
        result = admin.create_acls([good, bad])
        assert result["succeeded"] == [good]
        assert result["failed"] == [kerrors.InvalidRequestError]     # kafka-python lists the error class
        topics = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                           ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY))
        found, err = admin.describe_acls(topics)
        assert found == [good] and err is kerrors.NoError
        [(flt, gone, err)] = admin.delete_acls([topics])
        assert flt == topics and gone == [good] and err is kerrors.NoError
        assert admin.describe_acls(topics)[0] == []
    finally:
        admin.close()


def test_kafka_python_admin_without_an_authorizer(tenure_server):
    admin = KafkaAdminClient(bootstrap_servers=tenure_server.bootstrap)
    try:
        every = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                          ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
        with pytest.raises(kerrors.SecurityDisabledError):
            admin.describe_acls(every)
    finally:
        admin.close()


@pytest.mark.tenure(acls=LOCKED, topics={"app-in": 1, "readonly": 1})
def test_kafka_python_consumer_of_a_group_without_read(tenure_server):
    assert produce(tenure_server.bootstrap, "app-in") is None
    c = KafkaConsumer("app-in", bootstrap_servers=tenure_server.bootstrap, group_id="locked",
                      auto_offset_reset="earliest", consumer_timeout_ms=15000)
    try:
        with pytest.raises(kerrors.GroupAuthorizationFailedError):
            c.poll(timeout_ms=15000)
    finally:
        c.close(autocommit=False)


@pytest.mark.tenure(acls=LOCKED, topics={"app-in": 1, "readonly": 1})
def test_aiokafka_producer_without_write_and_consumer_without_read(tenure_server):
    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=tenure_server.bootstrap, request_timeout_ms=10000)
        await producer.start()
        try:
            assert (await producer.send_and_wait("app-in", b"v")).offset == 0
            with pytest.raises(aioerrors.TopicAuthorizationFailedError):
                await producer.send_and_wait("readonly", b"v")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("app-in", bootstrap_servers=tenure_server.bootstrap, group_id="locked",
                                    auto_offset_reset="earliest")
        try:
            with pytest.raises(aioerrors.GroupAuthorizationFailedError):     # start() waits for its assignment
                await asyncio.wait_for(consumer.start(), 20)
        finally:
            await consumer.stop()
    asyncio.run(run())
