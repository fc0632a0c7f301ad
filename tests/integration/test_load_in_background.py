"""`--load-in-background`: a server with a data dir listens as soon as its logs are open and loads
__consumer_offsets on a worker thread while it serves, as Kafka does. Until a partition is loaded, every group
request for it is answered COORDINATOR_LOAD_IN_PROGRESS (14) - JoinGroup, OffsetFetch, DescribeGroups, and
ListGroups as a whole (Kafka's ListGroups reads every partition the broker coordinates) - while FindCoordinator
and the data plane answer at once; kafka-python's and confluent-kafka's consumers and Java's Admin client (listGroups,
describeConsumerGroups) retry 14 and get their answers once the load is done. Without the flag the server loads
first, then listens (the default)."""
from __future__ import annotations

import threading
import time

import pytest
from kafka.protocol.admin.groups import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.metadata import FindCoordinatorRequest

import tenure.coordinator.runtime as runtime_module
from tenure.server import ServerThread
from tests.support.groupwire import commit, fetch_request, join
from tests.support.wire import WireClient

pytestmark = [pytest.mark.timeout(120)]
TOPIC = "bg"
GROUPS = {"bg-kp": 41, "bg-ck": 42}


def committed_data_dir(path) -> str:
    """A data dir whose __consumer_offsets holds one committed offset per group (written by a server that
    loaded first, then listened)."""
    st = ServerThread(port=0, data_dir=str(path)).start()
    try:
        st.create_topics({TOPIC: 1})
        with WireClient.to(st.bootstrap) as c:
            for g, offset in GROUPS.items():
                assert commit(c, g, "", -1, None, TOPIC, {0: offset}) == {0: 0}
    finally:
        st.stop()
    return str(path)


def held_loads(monkeypatch) -> tuple[threading.Event, threading.Event]:
    """The coordinator's partition load (on a worker thread) waits for the test: (entered, release)."""
    entered, release = threading.Event(), threading.Event()
    load = runtime_module.replay_partition

    def held(*args):
        entered.set()
        release.wait(60)
        return load(*args)
    monkeypatch.setattr(runtime_module, "replay_partition", held)
    return entered, release


def kafka_python_committed(bootstrap: str, group: str, out: dict) -> None:
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      client_id="bg-kafka-python")
    try:
        out[group] = c.committed(TopicPartition(TOPIC, 0))
    finally:
        c.close()


def confluent_committed(bootstrap: str, group: str, out: dict) -> None:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "client.id": "bg-confluent"})
    try:
        out[group] = c.committed([TopicPartition(TOPIC, 0)], timeout=60)[0].offset
    finally:
        c.close()


def test_groups_answer_14_until_the_background_load_is_done_and_real_clients_retry_it(tmp_path, monkeypatch):
    data_dir = committed_data_dir(tmp_path / "data")
    entered, release = held_loads(monkeypatch)
    st = ServerThread(port=0, data_dir=data_dir, load_in_background=True).start()    # ready before the load
    try:
        assert entered.wait(30)
        with WireClient.to(st.bootstrap) as c:
            r = c.call(FindCoordinatorRequest(key="bg-kp", key_type=0), 3)
            assert (r.error_code, r.node_id) == (0, 0)
            assert join(c, "bg-kp", "", "i-1", TOPIC, session_ms=30000).error_code == 14
            r = c.call(*fetch_request({"bg-kp": None}))
            assert [g.error_code for g in r.groups] == [14]
            r = c.call(DescribeGroupsRequest(groups=["bg-kp"], include_authorized_operations=False), 5)
            assert [g.error_code for g in r.groups] == [14]
            r = c.call(ListGroupsRequest(states_filter=[]), 4)
            assert (r.error_code, r.groups) == (14, [])
        assert st.live.load_report.records == 0 and st.group("bg-kp") is None
        got: dict = {}
        clients = [threading.Thread(target=kafka_python_committed, args=(st.bootstrap, "bg-kp", got)),
                   threading.Thread(target=confluent_committed, args=(st.bootstrap, "bg-ck", got))]
        for t in clients:
            t.start()
        deadline = time.monotonic() + 30
        while not all(st.requests(api="OffsetFetch", client_id=f"bg-{client}", error=14)
                      for client in ("kafka-python", "confluent")):
            assert time.monotonic() < deadline, "both clients asked and were answered 14"
            time.sleep(0.05)
        assert got == {}                                  # still retrying
        release.set()
        for t in clients:
            t.join(60)
        assert got == GROUPS
        assert st.live.load_report.records >= len(GROUPS)
        with WireClient.to(st.bootstrap) as c:
            r = c.call(ListGroupsRequest(states_filter=[]), 4)
            assert r.error_code == 0 and {g.group_id for g in r.groups} >= set(GROUPS)
    finally:
        release.set()
        st.stop()


def test_without_the_flag_the_server_loads_before_it_listens(tmp_path, monkeypatch):
    data_dir = committed_data_dir(tmp_path / "data")
    st = ServerThread(port=0, data_dir=data_dir).start()
    try:
        assert st.live.load_report.records >= len(GROUPS)
        with WireClient.to(st.bootstrap) as c:
            r = c.call(*fetch_request({"bg-kp": None}))
            assert r.groups[0].error_code == 0
            assert [p.committed_offset for t in r.groups[0].topics for p in t.partitions] == [41]
    finally:
        st.stop()


def test_a_server_stopped_while_it_loads_in_the_background_stops(tmp_path, monkeypatch):
    data_dir = committed_data_dir(tmp_path / "data")
    entered, release = held_loads(monkeypatch)
    st = ServerThread(port=0, data_dir=data_dir, load_in_background=True).start()
    assert entered.wait(30)
    stopping = threading.Thread(target=st.stop)
    stopping.start()
    time.sleep(0.2)
    release.set()                                     # the load goes on into a closed runtime: it gives up
    stopping.join(30)
    assert not stopping.is_alive()
    again = ServerThread(port=0, data_dir=data_dir).start()    # the data dir is released, nothing lost
    try:
        assert again.live.load_report.records >= len(GROUPS)
    finally:
        again.stop()


def test_the_java_admin_client_retries_list_and_describe_until_the_load_is_done(tmp_path, monkeypatch):
    from tests.support.java import run_java
    data_dir = committed_data_dir(tmp_path / "data")
    entered, release = held_loads(monkeypatch)
    st = ServerThread(port=0, data_dir=data_dir, load_in_background=True).start()
    try:
        assert entered.wait(30)
        out: dict = {}
        calls = [threading.Thread(target=lambda: out.__setitem__("list", run_java(
                     "AdminOps", st.bootstrap, "list-groups", timeout=90))),
                 threading.Thread(target=lambda: out.__setitem__("describe", run_java(
                     "AdminOps", st.bootstrap, "describe", *GROUPS, timeout=90)))]
        for t in calls:
            t.start()
        deadline = time.monotonic() + 60
        while not (st.requests(api="ListGroups", error=14) and (st.requests(api="ConsumerGroupDescribe", error=14)
                                                                or st.requests(api="DescribeGroups", error=14))):
            assert time.monotonic() < deadline, "the admin client asked and was answered 14"
            time.sleep(0.05)
        assert out == {}                                  # still retrying
        release.set()
        for t in calls:
            t.join(90)
        assert {g["group"] for g in out["list"][0]["groups"]} >= set(GROUPS)
        assert {d["group"]: d["state"] for d in out["describe"]} == {g: "Empty" for g in GROUPS}
    finally:
        release.set()
        st.stop()


def test_a_restart_loads_in_the_background_again_and_keeps_every_offset(tmp_path):
    data_dir = committed_data_dir(tmp_path / "data")
    st = ServerThread(port=0, data_dir=data_dir, load_in_background=True).start()
    try:
        for _ in range(2):
            deadline = time.monotonic() + 30
            while st.live.load_report.records < len(GROUPS):
                assert time.monotonic() < deadline
                time.sleep(0.02)
            assert {g: [o.offset for o in st.group(g).offsets if o.topic == TOPIC] for g in GROUPS} == {
                g: [offset] for g, offset in GROUPS.items()}
            st.restart()
    finally:
        st.stop()
