"""Large OffsetCommits with real clients (docs/limits.md, "Large requests"). A commit naming more than 1,000
partitions has its records made and encoded on the worker thread, then is decided and written on the loop in one
step: one batch, all or nothing. Kafka's coordinator writes a commit as one atomic batch, and its log refuses a
batch over `__consumer_offsets`'s `max.message.bytes` (1 MiB + 12 by default): every partition is answered
UNKNOWN_SERVER_ERROR (-1) and nothing is committed. tenure refuses the same commit the same way.

- kafka-python's consumer and confluent-kafka's each commit 20,000 partitions with 30 bytes of metadata (a
  ~1.6 MiB batch): both see the unknown server error (kafka-python raises UnknownError, librdkafka "Unknown
  broker error", code -1), nothing is committed, and the server keeps serving: the same consumer then commits
  10,000 partitions (~0.5 MiB), all of them there;
- confluent-kafka's transactional producer sending 20,000 partitions' offsets (TxnOffsetCommit): -1 for each,
  an abortable error; after the abort, 10,000 partitions' offsets commit with the transaction;
- small confluent-kafka commits of one partition during a kafka-python commit of 10,000: the offsets whole, and
  the same after a SIGKILL and a reload from the log;
- a server SIGKILLed while a commit of 10,000 partitions is in it: after the restart, every commit acknowledged
  before (kafka-python's, one of them of 10,000 partitions) is there, and the one in flight is there whole or
  not at all.
"""
from __future__ import annotations

import socket
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CTP
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import UnknownError
from kafka.protocol.consumer.group import OffsetCommitRequest
from kafka.structs import OffsetAndMetadata

from tests.support.procs import TenureProcess

pytestmark = pytest.mark.timeout(180)

WIDE = [TopicPartition(t, i) for t in ("hc-a", "hc-b") for i in range(10000)]


def offsets_of(admin: KafkaAdminClient, group: str) -> dict:
    return admin.list_group_offsets(group)[group]


@pytest.mark.tenure(topics={"hc-a": 10000, "hc-b": 10000})
def test_kafka_python_and_confluent_commits_over_the_batch_limit_are_refused_whole(tenure_server):
    kp = KafkaConsumer(bootstrap_servers=tenure_server.bootstrap, group_id="big-kp", enable_auto_commit=False,
                       request_timeout_ms=120000)
    cf = Consumer({"bootstrap.servers": tenure_server.bootstrap, "group.id": "big-cf", "enable.auto.commit": False})
    admin = KafkaAdminClient(bootstrap_servers=tenure_server.bootstrap, request_timeout_ms=120000)
    try:
        with pytest.raises(UnknownError):
            kp.commit({tp: OffsetAndMetadata(5, "m" * 30, -1) for tp in WIDE})
        with pytest.raises(KafkaException) as refused:
            cf.commit(offsets=[CTP(tp.topic, tp.partition, 5, metadata="m" * 30) for tp in WIDE], asynchronous=False)
        assert refused.value.args[0].code() == -1, refused.value.args[0]        # UNKNOWN (Kafka's -1)
        [answer] = [e for e in tenure_server.requests(api="OffsetCommit") if e.request.group_id == "big-cf"]
        assert {p.error_code for t in answer.response.topics for p in t.partitions} == {-1}
        assert sum(len(t.partitions) for t in answer.response.topics) == 20000
        assert offsets_of(admin, "big-kp") == {} and offsets_of(admin, "big-cf") == {}
        kp.commit({tp: OffsetAndMetadata(7, "", -1) for tp in WIDE[:10000]})    # fits: written whole
        got = offsets_of(admin, "big-kp")
        assert len(got) == 10000 and {m.offset for m in got.values()} == {7}
    finally:
        kp.close()
        cf.close()
        admin.close()


@pytest.mark.tenure(topics={"hc-a": 10000, "hc-b": 10000})
def test_confluent_transactional_offsets_over_the_batch_limit_abort_and_a_smaller_commit_goes_through(tenure_server):
    """confluent-kafka's transactional producer sends 20,000 partitions' offsets (TxnOffsetCommit, ~1.6 MiB):
    every partition is answered -1, librdkafka makes it an abortable error; after the abort, 10,000 partitions'
    offsets (one transactional batch of the producer) commit with the transaction."""
    p = Producer({"bootstrap.servers": tenure_server.bootstrap, "transactional.id": "tx-big"})
    cf = Consumer({"bootstrap.servers": tenure_server.bootstrap, "group.id": "big-tx", "enable.auto.commit": False})
    admin = KafkaAdminClient(bootstrap_servers=tenure_server.bootstrap, request_timeout_ms=120000)
    try:
        p.init_transactions(30)
        meta = cf.consumer_group_metadata()
        p.begin_transaction()
        with pytest.raises(KafkaException) as refused:
            p.send_offsets_to_transaction([CTP(tp.topic, tp.partition, 5, metadata="m" * 30) for tp in WIDE], meta, 60)
        err = refused.value.args[0]
        assert err.code() == -1 and err.txn_requires_abort() and not err.fatal(), err
        p.abort_transaction(30)
        assert offsets_of(admin, "big-tx") == {}
        p.begin_transaction()
        p.send_offsets_to_transaction([CTP(tp.topic, tp.partition, 7) for tp in WIDE[:10000]], meta, 60)
        p.commit_transaction(60)
        got = offsets_of(admin, "big-tx")
        assert len(got) == 10000 and {m.offset for m in got.values()} == {7}
    finally:
        cf.close()
        admin.close()


def test_small_commits_during_a_heavy_one_land_in_the_same_order_in_state_and_log(tmp_path):
    """kafka-python commits 10,000 partitions (offset 5) while confluent-kafka commits partition 0 of the same
    topic for the same group over and over (offsets 100, 101, ...). Whatever the interleaving, the group's
    offsets are whole - 9,999 partitions at 5, partition 0 at 5 or at one of the small commits - and a server
    SIGKILLed after every commit was acknowledged reloads exactly those offsets from its log (the state and the
    log saw the commits in one order)."""
    import threading
    with TenureProcess(tmp_path / "data", fsync="batch") as srv:
        srv.start()
        admin = KafkaAdminClient(bootstrap_servers=srv.bootstrap, request_timeout_ms=60000)
        admin.create_topics([NewTopic("hc-a", 10000, 1)])
        part_a = [tp for tp in WIDE if tp.topic == "hc-a"]
        kp = KafkaConsumer(bootstrap_servers=srv.bootstrap, group_id="g", enable_auto_commit=False,
                           request_timeout_ms=60000)
        cf = Consumer({"bootstrap.servers": srv.bootstrap, "group.id": "g", "enable.auto.commit": False})
        done = threading.Event()
        small: list[int] = []

        def commit_small() -> None:
            offset = 100
            while not done.is_set() or not small:
                cf.commit(offsets=[CTP("hc-a", 0, offset)], asynchronous=False)
                small.append(offset)
                offset += 1
        t = threading.Thread(target=commit_small)
        t.start()
        try:
            kp.commit({tp: OffsetAndMetadata(5, "", -1) for tp in part_a})
        finally:
            done.set()
            t.join(60)
            kp.close()
            cf.close()
        got = {tp: m.offset for tp, m in offsets_of(admin, "g").items()}
        admin.close()
        assert len(got) == 10000 and small, small
        assert {o for tp, o in got.items() if tp != part_a[0]} == {5} and got[part_a[0]] in [5, *small]
        srv.kill()
        srv.start()
        admin = KafkaAdminClient(bootstrap_servers=srv.bootstrap, request_timeout_ms=60000)
        try:
            assert {tp: m.offset for tp, m in offsets_of(admin, "g").items()} == got
        finally:
            admin.close()


def _commit_frame(group: str, tps: list[TopicPartition], offset: int) -> bytes:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    by_topic: dict[str, list] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(P(version=8, partition_index=tp.partition, committed_offset=offset,
                                                   committed_leader_epoch=-1, committed_metadata=""))
    req = OffsetCommitRequest(version=8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                              group_instance_id=None,
                              topics=[T(version=8, name=t, partitions=ps) for t, ps in by_topic.items()])
    req.API_VERSION = 8
    req.with_header(correlation_id=1, client_id="in-flight")
    return bytes(req.encode(header=True, framed=True))


@pytest.mark.parametrize("wait_s", [0.0, 0.15])
def test_a_server_killed_during_a_heavy_commit_keeps_what_it_acknowledged_and_the_rest_whole_or_not_at_all(
        tmp_path, wait_s):
    with TenureProcess(tmp_path / "data", fsync="batch") as srv:
        srv.start()
        admin = KafkaAdminClient(bootstrap_servers=srv.bootstrap, request_timeout_ms=60000)
        admin.create_topics([NewTopic("hc-a", 10000, 1)])
        kp = KafkaConsumer(bootstrap_servers=srv.bootstrap, group_id="g", enable_auto_commit=False,
                           request_timeout_ms=60000)
        part_a = [tp for tp in WIDE if tp.topic == "hc-a"]
        kp.commit({tp: OffsetAndMetadata(3, "", -1) for tp in part_a})           # acknowledged: 10,000 at 3
        kp.commit({part_a[0]: OffsetAndMetadata(4, "", -1)})                     # acknowledged: one at 4
        kp.close()
        admin.close()
        sock = socket.create_connection((srv.host, srv.port), timeout=60)
        sock.sendall(_commit_frame("g", part_a, 9))                               # in flight: 10,000 at 9
        time.sleep(wait_s)
        srv.kill()
        sock.close()
        srv.start()
        admin = KafkaAdminClient(bootstrap_servers=srv.bootstrap, request_timeout_ms=60000)
        try:
            got = {tp: m.offset for tp, m in offsets_of(admin, "g").items()}
        finally:
            admin.close()
        assert len(got) == 10000
        whole = {tp: 9 for tp in part_a}
        before = {tp: 3 for tp in part_a} | {part_a[0]: 4}
        assert got in (whole, before), {o: sum(1 for v in got.values() if v == o) for o in set(got.values())}
