"""Exactly-once consume-transform-produce with Java kafka-clients 4.3 where it can go wrong: a static member
fenced by a second copy of itself cannot commit its offsets in its transaction (KIP-447), and a server
SIGKILLed before or after a transaction's commit comes back with the transaction aborted or committed, as
Kafka's coordinator would leave it (tests/java/TxnFencedMember.java, TxnTransform.java)."""
from __future__ import annotations

import pytest

from tests.integration.test_transactions import consume_all
from tests.support.clients import create_topic
from tests.support.groupwire import fetch_all
from tests.support.wire import WireClient

pytestmark = [pytest.mark.java, pytest.mark.timeout(180)]

FENCED_INSTANCE_ID = "org.apache.kafka.common.errors.FencedInstanceIdException"


def seed(bs: str, topic: str, first: int, last: int, partitions: int = 2) -> None:
    """Values v<first>..v<last-1> (keys k<i>) into `topic`, record i into partition i % partitions."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bs})
    for i in range(first, last):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % partitions)
    assert p.flush(10) == 0


def committed(bs: str, group: str) -> dict[tuple[str, int], int]:
    with WireClient.to(bs) as w:
        return fetch_all(w, [group])[group]


def test_java_fenced_static_member_cannot_commit_offsets_in_its_transaction(tenure_server):
    """Two copies of a consume-transform-produce application with one group.instance.id: the second one's
    join fences the first (FENCED_INSTANCE_ID, 82, on the first one's TxnOffsetCommit, which Java raises
    from sendOffsetsToTransaction as FencedInstanceIdException, an abortable error). The first one's
    transaction is aborted: none of its output is seen and its offsets are not committed; the second one's
    output and offsets are."""
    from tests.support.java import run_java
    bs = tenure_server.bootstrap
    create_topic(bs, "fz-in", 2)
    create_topic(bs, "fz-out", 2)
    seed(bs, "fz-in", 0, 6)
    fenced, done = run_java("TxnFencedMember", bs, "fz-in", "fz-out", "fz-group", "fz-static", 6, timeout=150)
    assert fenced["type"] == "fenced", fenced
    assert (fenced["send_offsets"], fenced["abort"]) == (FENCED_INSTANCE_ID, "ok"), fenced
    # after an abortable error the transaction can only be aborted: Java refuses the commit itself
    assert fenced["commit"] == "org.apache.kafka.common.KafkaException", fenced
    assert fenced["a_member"] != fenced["b_member"], fenced
    assert done == {"type": "done", "b_offsets": {"fz-in-0": 3, "fz-in-1": 3}}
    assert committed(bs, "fz-group") == {("fz-in", 0): 3, ("fz-in", 1): 3}
    out = consume_all(bs, "fz-out", 2, "read_committed", 6)
    assert sorted(out) == sorted(f"B:v{i}".encode() for i in range(6))
    # A's records did reach the log, in its aborted transaction
    everything = consume_all(bs, "fz-out", 2, "read_uncommitted", 12)
    assert sorted(everything) == sorted([f"A:v{i}".encode() for i in range(6)] + out)
    assert tenure_server.group("fz-group").static_members == {"fz-static": fenced["b_member"]}
