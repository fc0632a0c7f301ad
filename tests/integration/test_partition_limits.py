"""Partition caps and all-or-nothing topic creation (docs/limits.md).

- `max_partitions_per_topic`: a CreateTopics/CreatePartitions asking one topic to have more answers
  INVALID_PARTITIONS (37) for that topic; `max_partitions` (all topics together): POLICY_VIOLATION (44).
- Kafka's own rule: a CreateTopics asking for more than 10,000 partitions in all answers every topic of it
  POLICY_VIOLATION "Excessively large number of partitions per request." (ReplicationControlManager).
- A creation that fails half-way (e.g. out of descriptors) answers KAFKA_STORAGE_ERROR (56) for that topic
  and leaves nothing of it: no directory, no open file, no catalog entry; the other topics of the request
  are created."""
from __future__ import annotations

import errno
import json
import os
import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.support.wire import WireClient

pytestmark = pytest.mark.timeout(120)

NONE, INVALID_PARTITIONS, POLICY_VIOLATION, KAFKA_STORAGE_ERROR = 0, 37, 44, 56
HUGE = 2 ** 31 - 1


def error_of(future) -> tuple[int, str]:
    try:
        future.result(15)
    except KafkaException as exc:
        return exc.args[0].code(), exc.args[0].str()
    return NONE, ""


def create_topics(*topics: tuple[str, int], validate_only: bool = False):
    C = CreateTopicsRequest
    return C(topics=[C.CreatableTopic(name=n, num_partitions=p, replication_factor=-1, assignments=[], configs=[])
                     for n, p in topics], timeout_ms=10000, validate_only=validate_only)


def create_partitions(name: str, count: int):
    C = CreatePartitionsRequest
    return C(timeout_ms=10000, validate_only=False,
             topics=[C.CreatePartitionsTopic(name=name, count=count, assignments=None)])


def partitions_of(server: ServerThread) -> dict[str, int]:
    return server.call(lambda: {t.name: len(t.partitions) for t in server.server.topics.all()})


def test_caps_with_confluent_admin():
    with ServerThread(ServerConfig(port=0, max_partitions_per_topic=8, max_partitions=20)) as s:
        a = AdminClient({"bootstrap.servers": s.bootstrap})
        code, msg = error_of(a.create_topics([NewTopic("big", 9, 1)])["big"])
        assert (code, msg) == (INVALID_PARTITIONS, "topic 'big' would have 9 partitions, above this server's "
                                                   "limit of 8 per topic (--max-partitions-per-topic)")
        assert error_of(a.create_topics([NewTopic("big", 10000, 1)])["big"])[0] == INVALID_PARTITIONS
        # above 10,000 in one request Kafka's own rule answers first (librdkafka itself refuses > 100,000)
        t0 = time.monotonic()
        assert error_of(a.create_topics([NewTopic("huge", 100000, 1)])["huge"]) == (
            POLICY_VIOLATION, "Excessively large number of partitions per request.")
        assert time.monotonic() - t0 < 10                 # refused before any partition exists
        assert error_of(a.create_topics([NewTopic("a", 8, 1)])["a"]) == (NONE, "")
        assert error_of(a.create_topics([NewTopic("b", 8, 1)])["b"]) == (NONE, "")
        # __consumer_offsets (1) + a (8) + b (8) = 17: 4 more would pass 20
        code, msg = error_of(a.create_topics([NewTopic("c", 4, 1)])["c"])
        assert (code, msg) == (POLICY_VIOLATION, "topic 'c' would bring this server to 21 partitions, above its "
                                                 "limit of 20 (--max-partitions)")
        assert error_of(a.create_topics([NewTopic("c", 4, 1)], validate_only=True)["c"])[0] == POLICY_VIOLATION
        assert error_of(a.create_topics([NewTopic("c", 3, 1)])["c"]) == (NONE, "")
        # CreatePartitions: the same two caps
        assert error_of(a.create_partitions([NewPartitions("a", 9)])["a"])[0] == INVALID_PARTITIONS
        assert error_of(a.create_partitions([NewPartitions("a", 100000)])["a"])[0] == INVALID_PARTITIONS
        code, msg = error_of(a.create_partitions([NewPartitions("c", 4)])["c"])
        assert (code, msg) == (POLICY_VIOLATION, "adding 1 partition(s) to topic 'c' would bring this server to "
                                                 "21 partitions, above its limit of 20 (--max-partitions)")
        assert partitions_of(s) == {"__consumer_offsets": 1, "a": 8, "b": 8, "c": 3}


def test_caps_with_kafka_python_admin():
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewPartitions as KNewPartitions
    from kafka.admin import NewTopic as KNewTopic

    with ServerThread(ServerConfig(port=0, max_partitions_per_topic=8, max_partitions=12)) as s:
        a = KafkaAdminClient(bootstrap_servers=s.bootstrap)
        try:
            a.create_topics([KNewTopic("kp", 2, 1)])
            with pytest.raises(Exception) as e:
                a.create_topics([KNewTopic("kp-big", 9, 1)])
            assert "InvalidPartitions" in type(e.value).__name__, repr(e.value)
            with pytest.raises(Exception) as e:                     # 2^31-1 in one request: Kafka's rule
                a.create_topics([KNewTopic("kp-huge", HUGE, 1)])
            assert "PolicyViolation" in type(e.value).__name__, repr(e.value)
            with pytest.raises(Exception) as e:
                a.create_partitions({"kp": KNewPartitions(HUGE)})
            assert "InvalidPartitions" in type(e.value).__name__, repr(e.value)
            assert "limit of 8 per topic" in str(e.value)
            r = a.create_partitions({"kp": KNewPartitions(8)})      # 1 + 8 = 9 fits 12
            assert [(x.name, x.error_code) for x in r.results] == [("kp", NONE)]
            with pytest.raises(Exception) as e:
                a.create_topics([KNewTopic("kp-more", 4, 1)])       # 9 + 4 = 13 > 12
            assert "PolicyViolation" in type(e.value).__name__, repr(e.value)
        finally:
            a.close()
        assert partitions_of(s) == {"__consumer_offsets": 1, "kp": 8}


def test_more_than_10000_partitions_in_one_request_is_refused_as_kafka_does(tenure_server, wire):
    r = wire.call(create_topics(("r-a", 6000), ("r-b", 6000)), 7)
    assert [(t.name, t.error_code, t.error_message) for t in r.topics] == [
        (n, POLICY_VIOLATION, "Excessively large number of partitions per request.") for n in ("r-a", "r-b")]
    assert "r-a" not in partitions_of(tenure_server) and "r-b" not in partitions_of(tenure_server)
    r = wire.call(create_topics(("r-a", 5000), ("r-b", 5000)), 7)             # exactly 10,000: allowed
    assert [(t.name, t.error_code) for t in r.topics] == [("r-a", NONE), ("r-b", NONE)]


def _open_fds_under(path) -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(path)):
            out.append(target)
    return out


def _fail_after(server: ServerThread, n: int):
    """From the n-th partition log opened on, opening one fails as at the descriptor limit."""
    real, calls = server.server.data.open_log, [0]

    def open_log(topic, partition):
        calls[0] += 1
        if calls[0] >= n:
            raise OSError(errno.EMFILE, "Too many open files (injected)")
        return real(topic, partition)
    server.server.topics._log_factory = open_log
    return lambda: setattr(server.server.topics, "_log_factory", real)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_a_creation_failing_half_way_leaves_nothing_behind(tmp_path):
    data = tmp_path / "data"
    with ServerThread(ServerConfig(port=0, data_dir=str(data))) as s, WireClient.to(s.bootstrap) as w:
        undo = s.call(_fail_after, s, 5)                   # ok-0..2 open; bad-0 opens, bad-1 fails
        r = w.call(create_topics(("ok", 3), ("bad", 10)), 7)
        assert [(t.name, t.error_code) for t in r.topics] == [("ok", NONE), ("bad", KAFKA_STORAGE_ERROR)]
        assert r.topics[1].error_message == ("could not create partition 1 of topic 'bad': [Errno 24] Too many "
                                             "open files (injected); none of its 10 partition(s) were kept")
        assert sorted(p.name for p in data.iterdir() if p.is_dir()) == ["__consumer_offsets-0", "ok-0", "ok-1", "ok-2"]
        assert not [f for f in _open_fds_under(data) if "/bad-" in f]
        assert [t["name"] for t in json.loads((data / "topics.json").read_text())["topics"]] == \
            ["__consumer_offsets", "ok"]
        # CreatePartitions: the same, for the partitions it adds
        s.call(undo)
        undo = s.call(_fail_after, s, 3)                   # ok-3, ok-4 open; ok-5 fails
        r = w.call(create_partitions("ok", 8), 3)
        assert [(t.name, t.error_code) for t in r.results] == [("ok", KAFKA_STORAGE_ERROR)]
        assert r.results[0].error_message == ("could not create partition 5 of topic 'ok': [Errno 24] Too many "
                                              "open files (injected); none of its 5 new partition(s) were kept")
        assert sorted(p.name for p in data.iterdir() if p.is_dir()) == ["__consumer_offsets-0", "ok-0", "ok-1", "ok-2"]
        assert sorted(f.rsplit("/", 2)[1] for f in _open_fds_under(data) if "/ok-" in f) == ["ok-0", "ok-1", "ok-2"]
        assert partitions_of(s) == {"__consumer_offsets": 1, "ok": 3}
        s.call(undo)
        r = w.call(create_partitions("ok", 8), 3)          # descriptors back: it works, and once only
        assert [(t.name, t.error_code) for t in r.results] == [("ok", NONE)]
    with ServerThread(ServerConfig(port=0, data_dir=str(data))) as again:
        assert partitions_of(again) == {"__consumer_offsets": 1, "ok": 8}


@pytest.mark.java
def test_caps_with_the_java_admin_client():
    """Java's Admin maps the two answers to the exceptions Kafka's own brokers give."""
    from tests.support.java import run_java
    with ServerThread(ServerConfig(port=0, max_partitions_per_topic=8, max_partitions=20)) as s:
        cases = [("j-big", 9, "InvalidPartitionsException",
                  "topic 'j-big' would have 9 partitions, above this server's limit of 8 per topic "
                  "(--max-partitions-per-topic)"),
                 ("j-huge", 20000, "PolicyViolationException", "Excessively large number of partitions per request.")]
        for topic, n, exception, message in cases:
            lines = run_java("AdminOps", s.bootstrap, "create-topic", topic, str(n), timeout=90, check=False)
            (err,) = [x for x in lines if x["type"] == "error"]
            assert (err["root_exception"], err["root_message"]) == (f"org.apache.kafka.common.errors.{exception}",
                                                                    message)
        assert partitions_of(s) == {"__consumer_offsets": 1}


def test_auto_creation_past_a_cap_answers_that_topic_and_keeps_the_connection():
    from tests.support.wire import metadata_request
    with ServerThread(ServerConfig(port=0, max_partitions=2)) as s, WireClient.to(s.bootstrap) as w:
        r = w.call(metadata_request("auto-a"), 12)                 # __consumer_offsets (1) + 1 = 2: fits
        assert [(t.name, t.error_code) for t in r.topics] == [("auto-a", NONE)]
        r = w.call(metadata_request("auto-b", "auto-a"), 12)
        assert [(t.name, t.error_code) for t in r.topics] == [("auto-b", POLICY_VIOLATION), ("auto-a", NONE)]
        assert partitions_of(s) == {"__consumer_offsets": 1, "auto-a": 1}
