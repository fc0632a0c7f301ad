"""ACLs over authenticated principals: SASL users (SCRAM-SHA-512 on a SASL_PLAINTEXT listener) each get what
their ACLs grant and Kafka's errors for the rest, with confluent-kafka - the principal the connection
authenticated as is the one the authorizer checks, not ANONYMOUS."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

pytestmark = pytest.mark.timeout(120)

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
ACLS = ["allow User:alice all topic:prefixed:orders", "allow User:alice read group:orders-app",
        "allow User:bob read topic:orders", "allow User:bob describe topic:orders",
        "allow User:alice idempotent_write cluster:kafka-cluster",
        "allow User:bob idempotent_write cluster:kafka-cluster"]


def _produce(conf: dict, topic: str) -> KafkaError | None:
    p = Producer({**conf, "message.timeout.ms": 10000})
    errors: list = []
    p.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    assert len(errors) == 1
    return errors[0]


def _first(conf: dict, group: str, topic: str) -> KafkaError | bytes:
    """What a consumer of `group` on `topic` sees first: an error, or a record's value."""
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            return msg.error() if msg.error() else msg.value()
        raise AssertionError("neither a record nor an error")
    finally:
        c.close()


@pytest.mark.tenure(listeners=["PLAINTEXT", "SASL_PLAINTEXT"], users=USERS, acls=ACLS, topics={"orders": 1})
def test_each_sasl_user_gets_what_its_acls_grant(tenure_server, tenure_clients):
    alice = tenure_clients("SASL_PLAINTEXT", "alice", mechanism="SCRAM-SHA-512").confluent()
    bob = tenure_clients("SASL_PLAINTEXT", "bob", mechanism="SCRAM-SHA-512").confluent()
    assert _produce(alice, "orders") is None                                   # alice may write
    err = _produce(bob, "orders")                                              # bob may only read
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _first(alice, "orders-app", "orders") == b"v"                      # alice's group, read
    err = _first(bob, "orders-app", "orders")                                  # bob: no READ on the group
    assert isinstance(err, KafkaError) and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    principals = {c["principal"] for c in tenure_server.connections() if c["listener"] == "SASL_PLAINTEXT"}
    assert principals <= {"User:alice", "User:bob"}
    anonymous = tenure_clients("PLAINTEXT").confluent()                        # no ACL names ANONYMOUS
    err = _produce(anonymous, "orders")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
