"""tenure presenting an older (or newer) Kafka release (`--kafka-version`, `@pytest.mark.tenure(kafka_version=...)`),
with real clients: kafka-python's own version inference names the release; a request above the release's version
is refused as that release refuses it (ApiVersions: v0 with error 35 and the release's ranges; any other API: the
connection closed) while the server keeps serving; confluent-kafka and Java 4.3 negotiate down and work (a static
classic group, a rolling restart, admin); the consumer protocol (KIP-848) is absent before 4.0, as on a real 3.9
broker: Java's `group.protocol=consumer` consumer fails with UnsupportedVersionException, librdkafka's never joins
(it marks the coordinator dead: "ConsumerGroupHeartbeatRequest not supported by broker"), and both work with
classic."""
from __future__ import annotations

import logging
import struct
import subprocess
import sys
import time

import pytest
from kafka import KafkaAdminClient
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from tenure.config import ServerConfig
from tenure.protocol.apis import served_apis
from tenure.server import ServerThread
from tests.support.clients import confluent_round_trip
from tests.support.wire import WireClient, request_bytes

MATRIX = ["2.8", "3.7", "3.9", "4.0"]         # and 4.3, tenure's default


def kafka_python_infers(bootstrap: str) -> tuple[int, ...]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        return admin._client.check_version()
    finally:
        admin.close()


def test_kafka_python_infers_the_release_presented():
    for name in [*MATRIX, "4.3"]:
        with ServerThread(ServerConfig(port=0, kafka_version=name)) as s:
            assert kafka_python_infers(s.bootstrap) == tuple(map(int, name.split("."))), name
    with ServerThread(ServerConfig(port=0)) as s:              # no release asked for: tenure's table, as 4.3
        assert kafka_python_infers(s.bootstrap) == (4, 3)


@pytest.mark.tenure(kafka_version="3.7")
def test_the_pytest_marker_presents_a_release(tenure_server):
    assert tenure_server.server.config.release.name == "3.7"
    assert kafka_python_infers(tenure_server.bootstrap) == (3, 7)


def test_unknown_release_is_refused_at_start_with_the_known_ones():
    proc = subprocess.run([sys.executable, "-m", "tenure", "serve", "--port", "0", "--kafka-version", "2.7"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert ("argument --kafka-version: invalid choice: '2.7' (choose from '2.8', '3.0', '3.1', '3.2', '3.3', "
            "'3.4', '3.5', '3.6', '3.7', '3.8', '3.9', '4.0', '4.1', '4.2', '4.3')") in proc.stderr


@pytest.mark.tenure(kafka_version="3.7")
def test_a_version_above_the_release_is_refused_as_that_release_refuses_it(tenure_server, caplog):
    caplog.set_level(logging.INFO, logger="tenure.server")
    with WireClient.to(tenure_server.bootstrap) as c:
        # ApiVersions v4 is 3.7's newest: answered, with 3.7's ranges and metadata.version 3.7-IV4 (19)
        ok = c.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        assert [(k.api_key, k.min_version, k.max_version) for k in ok.api_keys] == served_apis("3.7").ranges()
        assert [(f.name, f.max_version_level) for f in ok.finalized_features] == [("metadata.version", 19)]
        # ApiVersions v5 (beyond any release): v0 answer with error 35 and the ranges, the connection stays
        b = bytearray(request_bytes(ApiVersionsRequest(), 3, correlation_id=9))
        struct.pack_into(">h", b, 6, 5)
        c.send_raw(bytes(b))
        payload = c.read_frame()
        resp = ApiVersionsResponse.decode(struct.pack(">i", len(payload)) + payload, version=0, header=True,
                                          framed=True)
        assert (resp.header.correlation_id, resp.error_code) == (9, 35)
        assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == served_apis("3.7").ranges()
        assert c.call(ApiVersionsRequest(), 0).error_code == 0
    with WireClient.to(tenure_server.bootstrap) as bad:          # Fetch v17 is 3.9's: 3.7 closes the connection
        bad.send_raw(request_bytes(FetchRequest(), 17))
        assert bad.is_closed_by_peer(timeout=5)
    assert any("api_key=1 api_version=17: Fetch is served at versions 0-16" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    produced, consumed = confluent_round_trip(tenure_server.bootstrap, "after-fetch17", n=6)   # still serving
    assert len(consumed) == 6


@pytest.mark.parametrize("name", [*MATRIX, "4.3"])
def test_confluent_kafka_negotiates_down_and_works(name):
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, ConfigResource

    with ServerThread(ServerConfig(port=0, kafka_version=name, initial_rebalance_delay_ms=0)) as s:
        produced, consumed = confluent_round_trip(s.bootstrap, "rt", n=12)
        assert sorted((p, o) for p, o, _ in produced) == sorted((p, o) for p, o, *_ in consumed)
        s.create_topics({"static": 4})
        members = {}
        for i in ("a", "b"):
            members[i] = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "g", "group.instance.id": i,
                                   "session.timeout.ms": 10000, "enable.auto.commit": False,
                                   "partition.assignment.strategy": "range"})
            members[i].subscribe(["static"])
        before = _settle(members)
        generation = s.group("g").generation
        for i in ("a", "b"):                                     # a rolling restart: no rebalance
            members[i].close()
            members[i] = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "g", "group.instance.id": i,
                                   "session.timeout.ms": 10000, "enable.auto.commit": False,
                                   "partition.assignment.strategy": "range"})
            members[i].subscribe(["static"])
            assert _settle(members) == before
        assert s.group("g").generation == generation, name
        for c in members.values():
            c.close()
        admin = AdminClient({"bootstrap.servers": s.bootstrap})
        res = admin.describe_configs([ConfigResource("topic", "static")])
        entries = list(res.values())[0].result(15)
        assert "cleanup.policy" in entries, name
        assert {g.group_id for g in admin.list_consumer_groups().result(15).valid} == {"g"}


def _settle(members, timeout: float = 30) -> dict[str, list[int]]:
    owned: dict[str, list[int]] = {}
    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in members.values():
            c.poll(0.1)
        owned = {i: sorted(tp.partition for tp in c.assignment()) for i, c in members.items()}
        if sorted(p for ps in owned.values() for p in ps) == [0, 1, 2, 3] and all(owned.values()):
            return owned
    raise AssertionError(f"group did not settle: {owned}")


@pytest.mark.tenure(kafka_version="3.9", topics={"t": 2})
def test_confluent_consumer_protocol_against_3_9_never_joins_and_classic_does(tenure_server):
    from confluent_kafka import Consumer
    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    rk = logging.getLogger("tenure-test-rdkafka")
    rk.addHandler(Capture())
    rk.setLevel(logging.DEBUG)
    c = Consumer({"bootstrap.servers": tenure_server.bootstrap, "group.id": "g848", "group.protocol": "consumer",
                  "debug": "cgrp", "logger": rk})
    c.subscribe(["t"])
    said = lambda: any("ConsumerGroupHeartbeatRequest not supported by broker" in m for m in lines)  # noqa: E731
    start = time.time()
    while time.time() < start + 6 or not said():   # 6 s at least, and until librdkafka has logged why
        assert time.time() < start + 60, lines[-20:]
        assert c.poll(0.2) is None                   # no record, no error: it keeps looking for a coordinator
    assert c.assignment() == []
    assert tenure_server.group("g848") is None
    c.close()
    classic = Consumer({"bootstrap.servers": tenure_server.bootstrap, "group.id": "gclassic",
                        "group.protocol": "classic"})
    classic.subscribe(["t"])
    deadline = time.time() + 30
    while not classic.assignment() and time.time() < deadline:
        classic.poll(0.2)
    assert sorted(tp.partition for tp in classic.assignment()) == [0, 1]
    classic.close()


@pytest.mark.java
@pytest.mark.timeout(180)
@pytest.mark.tenure(kafka_version="3.9", topics={"t": 2}, initial_rebalance_delay_ms=0)
def test_java_consumer_protocol_against_3_9_fails_as_against_3_9_and_classic_works(tenure_server):
    from tests.integration.test_static_java import JavaMember
    m = JavaMember("j848", tenure_server.bootstrap, "g848", "t", None, group_protocol="consumer")
    try:
        e = m.wait_type("error", 60)
        assert e["root_exception"] == "org.apache.kafka.common.errors.UnsupportedVersionException", e
        assert "does not support the new CONSUMER group protocol" in e["message"], e
        assert tenure_server.group("g848") is None
    finally:
        m.terminate()
    m = JavaMember("jclassic", tenure_server.bootstrap, "gclassic", "t", "i0")
    try:
        ev = m.wait_type("assigned", 60)
        assert sorted(ev["partitions"]) == [0, 1]
    finally:
        m.terminate()


def test_the_images_entrypoint_takes_the_release_from_the_environment(tmp_path):
    """docker/Dockerfile's ENTRYPOINT, run as it is (the data dir and ports swapped, as
    tests/docker/test_docker_files.py runs it): TENURE_KAFKA_VERSION=3.7 presents 3.7; unset, tenure's own."""
    import os
    import shlex
    import signal

    from tests.docker.test_docker_files import dockerfile_stages, exec_form, free_port, last
    _, stages = dockerfile_stages()
    ep = exec_form(last(stages, "server", "ENTRYPOINT"))
    for release, inferred in (("3.7", (3, 7)), ("", (4, 3))):
        data = tmp_path / f"data{release}"
        data.mkdir()
        cmd = [*ep[:2], ep[2].replace("--data-dir /data", f"--data-dir {shlex.quote(str(data))}"), *ep[3:]]
        port = free_port()
        env = dict(os.environ, TENURE_HOST="127.0.0.1", TENURE_PORT=str(port), TENURE_ADVERTISED_HOST="127.0.0.1",
                   TENURE_ADMIN_HOST="127.0.0.1", TENURE_ADMIN_PORT="-1", TENURE_KAFKA_VERSION=release,
                   PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                start_new_session=True)
        try:
            assert proc.stdout.readline().strip() == f"tenure listening on 127.0.0.1:{port}"
            assert kafka_python_infers(f"127.0.0.1:{port}") == inferred, release
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


@pytest.mark.java
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", [*MATRIX, "4.3"])
def test_java_negotiates_down_and_works(name):
    """Java 4.3 against tenure as each release: Admin creates a topic, produces and describes the group; a static
    classic member restarted with its instance id gets its partitions back with no rebalance (same generation)."""
    from tests.integration.test_static_java import JavaMember
    from tests.support.java import run_java
    with ServerThread(ServerConfig(port=0, kafka_version=name, initial_rebalance_delay_ms=0)) as s:
        out = run_java("AdminOps", s.bootstrap, "create-topic", "jt", "2", "--", "produce", "jt", "2", "3",
                       timeout=120)
        assert out[0] == {"type": "topic_created", "topic": "jt", "partitions": 2}, out
        assert sorted((o["partition"], o["count"]) for o in out[1:]) == [(0, 3), (1, 3)], out
        m = JavaMember(f"j-{name}", s.bootstrap, "gj", "jt", "i0")
        try:
            first = m.wait_type("assigned", 60)
            generation = s.group("gj").generation
            assert sorted(first["partitions"]) == [0, 1]
            assert m.close() == 0
        finally:
            m.terminate()
        m = JavaMember(f"j-{name}-again", s.bootstrap, "gj", "jt", "i0")
        try:
            again = m.wait_type("assigned", 60)
            assert sorted(again["partitions"]) == [0, 1] and s.group("gj").generation == generation, name
            described = run_java("AdminOps", s.bootstrap, "describe", "gj", "--", "list-groups", timeout=120)
            assert described[0]["state"] == "Stable" and [x["instance_id"] for x in described[0]["members"]] == ["i0"]
            assert [g["group"] for g in described[1]["groups"]] == ["gj"]
        finally:
            m.terminate()


def test_the_admin_endpoint_and_the_command_say_which_release(capsys):
    """`GET /kafka-version`, `ServerThread.kafka_version()` and `tenure broker kafka-version` alike."""
    import json

    from tenure.tools.cli import main
    from tests.integration.test_admin_guard import call
    with ServerThread(ServerConfig(port=0, admin_port=0, kafka_version="3.9")) as s:
        status, over_http = call(s.admin_port, "GET", "/kafka-version")
        assert status == 200 and over_http == s.kafka_version()
        assert over_http["kafka_version"] == "3.9" and over_http["explicit"] is True
        assert over_http["transaction_version"] == 0
        assert over_http["features"] == {"supported": {"kraft.version": [0, 1], "metadata.version": [1, 21]},
                                         "finalized": {"metadata.version": 21}}
        assert over_http["apis"]["Fetch"] == [0, 17] and "ConsumerGroupHeartbeat" not in over_http["apis"]
        assert main(["broker", "kafka-version", "--admin", s.server.admin_address]) == 0
        assert json.loads(capsys.readouterr().out) == over_http


def _features_epoch(host: str, port: int) -> tuple[int, tuple]:
    with WireClient.to(f"{host}:{port}") as c:
        r = c.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    return r.finalized_features_epoch, tuple((f.name, f.max_version_level) for f in r.finalized_features)


def _quorum_high_watermark(st) -> int:
    from kafka.protocol.admin import DescribeQuorumRequest
    T = DescribeQuorumRequest.TopicData
    with WireClient.to(f"127.0.0.1:{st.port}") as c:
        r = c.call(DescribeQuorumRequest(topics=[T(topic_name="__cluster_metadata",
                                                   partitions=[T.PartitionData(partition_index=0)])]), 2)
    return r.topics[0].partitions[0].high_watermark


def test_finalized_features_epoch_is_the_metadata_offset_on_every_broker():
    """As a KRaft broker's (the offset of the metadata image it has applied): the same on every broker, the
    metadata log's position DescribeQuorum reports, moving with every change of the cluster's metadata (e.g. a
    broker stopped); -1 from a ZooKeeper release (2.8) that finalizes no feature."""
    with ServerThread(ServerConfig(port=0, brokers=2, kafka_version="4.0")) as s:
        brokers = [(b["host"], b["port"]) for b in s.brokers()]
        epochs = {_features_epoch(h, p) for h, p in brokers}
        [(epoch, finalized)] = epochs
        assert dict(finalized) == {"metadata.version": 25, "group.version": 1, "transaction.version": 2}
        assert epoch == _quorum_high_watermark(s) > 0
        s.create_topics({"fe": 3})
        [(after, _)] = {_features_epoch(h, p) for h, p in brokers}
        assert after == _quorum_high_watermark(s) >= epoch
        s.stop_broker(1)
        later, _ = _features_epoch(*brokers[0])
        assert later == _quorum_high_watermark(s) > after               # a broker stopped: a metadata change
    with ServerThread(ServerConfig(port=0, kafka_version="2.8")) as s:
        assert _features_epoch("127.0.0.1", s.port) == (-1, ())


def _share_heartbeat(st, group: str) -> int:
    from tenure.protocol.share_group import ShareGroupHeartbeatRequest
    with WireClient.to(f"127.0.0.1:{st.port}") as c:
        r = c.call(ShareGroupHeartbeatRequest(group_id=group, member_id="m" * 22, member_epoch=0, rack_id=None,
                                              subscribed_topic_names=["sh"]), 1)
    return r.error_code


def test_share_groups_from_4_2_only_4_1_announces_and_refuses_them():
    """KIP-932: a 4.1 broker announces the share group APIs but, share.version not finalized by default (share
    groups were a preview), answers them UNSUPPORTED_VERSION (35); from 4.2 they are served. 4.0 announces none
    (its early-access v0 is not served). A confluent-kafka ShareConsumer's poll against tenure as 4.1 raises the
    fatal "ShareGroupHeartbeat fatal error: Broker: API version not supported"; against 4.2 it gets its records."""
    from confluent_kafka import KafkaError, KafkaException, ShareConsumer

    from tests.integration.test_share_groups import produce, setup
    for name, announced, code in (("4.0", False, None), ("4.1", True, 35), ("4.2", True, 0)):
        with ServerThread(ServerConfig(port=0, kafka_version=name, initial_rebalance_delay_ms=0)) as s:
            assert (76 in {k for k, _, _ in served_apis(name).ranges()}) == announced, name
            if code is None:
                continue
            setup(s, "sh", "sc-" + name)
            assert _share_heartbeat(s, "g-" + name) == code, name
            produce(s, "sh", [1, 2, 3])
            c = ShareConsumer({"bootstrap.servers": s.bootstrap, "group.id": "sc-" + name})
            c.subscribe(["sh"])
            got, failure, deadline = [], None, time.time() + 30
            try:
                while time.time() < deadline and len(got) < 3:
                    got += [m.value() for m in c.poll(0.3) if not m.error()]
            except KafkaException as exc:
                failure = exc.args[0]
            c.close()
            if code:      # librdkafka's poll raises the heartbeat's fatal error, as against such a 4.1 broker
                assert failure is not None and failure.fatal(), failure
                assert failure.code() == KafkaError.UNSUPPORTED_VERSION == 35, failure
                assert got == []
            else:
                assert failure is None and sorted(got) == [b"1", b"2", b"3"], (failure, got)


# what Java's Admin.describeFeatures and kafka-python's describe_features see against a broker of each release
# (protocol/releases.py: Kafka's Feature enums at that release; streams.version left out by tenure, which does not
# serve streams groups): supported (min, max), finalized level
_SEEN_FEATURES = {
    "3.9": ({"kraft.version": (0, 1), "metadata.version": (1, 21)}, {"metadata.version": 21}),
    "4.0": ({"eligible.leader.replicas.version": (0, 1), "group.version": (0, 1), "kraft.version": (0, 1),
             "metadata.version": (7, 25), "transaction.version": (0, 2)},
            {"group.version": 1, "metadata.version": 25, "transaction.version": 2}),
    "4.3": ({"eligible.leader.replicas.version": (0, 1), "group.version": (0, 1), "kraft.version": (0, 1),
             "metadata.version": (7, 30), "share.version": (0, 1), "transaction.version": (0, 2)},
            {"eligible.leader.replicas.version": 1, "group.version": 1, "metadata.version": 30,
             "share.version": 1, "transaction.version": 2}),
}


def test_kafka_python_describe_features_sees_each_releases_features():
    for name, (supported, finalized) in _SEEN_FEATURES.items():
        with ServerThread(ServerConfig(port=0, kafka_version=name)) as s:
            admin = KafkaAdminClient(bootstrap_servers=s.bootstrap, request_timeout_ms=10000)
            try:
                got = admin.describe_features()
            finally:
                admin.close()
            assert {n: f["supported"] for n, f in got.items() if "supported" in f} == supported, name
            assert {n: f["finalized"][1] for n, f in got.items() if "finalized" in f} == finalized, name


@pytest.mark.java
@pytest.mark.timeout(300)
def test_java_describe_features_sees_each_releases_features():
    """Java 4.3's Admin.describeFeatures (ApiVersions v4) against tenure as 3.9, 4.0 and 4.3 sees what it sees
    against a broker of that release formatted with its defaults and a static controller quorum."""
    from tests.support.java import run_java
    for name, (supported, finalized) in _SEEN_FEATURES.items():
        with ServerThread(ServerConfig(port=0, kafka_version=name)) as s:
            [out] = run_java("AdminOps", s.bootstrap, "describe-features", timeout=120)
            assert out["type"] == "features", out
            assert {n: tuple(v) for n, v in out["supported"].items()} == supported, (name, out)
            assert out["finalized"] == finalized, (name, out)
            assert out["epoch"] > 0, out
