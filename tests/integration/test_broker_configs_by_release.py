"""A broker's configs as the Kafka release tenure presents (`--kafka-version`) reports them, through real admin
clients: Java 4.3's Admin.describeConfigs / incrementalAlterConfigs (tests/java/AdminOps.java) and kafka-python's
describe_configs. Each release reports only the broker configs it has (group.consumer.* and
group.coordinator.rebalance.protocols from 3.7, group.share.* from 3.9, share.coordinator.state.topic.num.partitions
from 4.0) with its own defaults; a config the release does not know is set as a dynamic broker config and
described back as UNKNOWN, as that Kafka does; one it has but cannot change at runtime is refused (INVALID_REQUEST)."""
from __future__ import annotations

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from tenure.config import ServerConfig
from tenure.server import ServerThread

REBALANCE = "group.coordinator.rebalance.protocols"
# release -> (rebalance protocols default, the configs of interest it reports)
SEEN = {
    "3.6": (None, set()),
    "3.7": ("classic", {"group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms", REBALANCE}),
    "3.9": ("classic", {"group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms", REBALANCE,
                        "group.share.session.timeout.ms", "group.share.heartbeat.interval.ms"}),
    "4.0": ("classic,consumer", {"group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms",
                                 REBALANCE, "group.share.session.timeout.ms", "group.share.heartbeat.interval.ms",
                                 "share.coordinator.state.topic.num.partitions"}),
    "4.3": ("classic,consumer,streams", {"group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms",
                                         REBALANCE, "group.share.session.timeout.ms",
                                         "group.share.heartbeat.interval.ms",
                                         "share.coordinator.state.topic.num.partitions"}),
}
OF_INTEREST = sorted(set().union(*(names for _, names in SEEN.values())))


def test_kafka_python_describe_configs_sees_each_releases_broker_configs():
    for name, (protocols, names) in SEEN.items():
        with ServerThread(ServerConfig(port=0, kafka_version=name)) as s:
            admin = KafkaAdminClient(bootstrap_servers=s.bootstrap, request_timeout_ms=10000)
            try:
                got = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")],
                                             config_filter="all")["broker"]["0"]
            finally:
                admin.close()
            assert {n for n in OF_INTEREST if n in got} == names, name
            assert {"broker.id", "group.max.size", "log.retention.hours"} <= set(got), name
            if protocols is not None:
                assert (got[REBALANCE]["value"], got[REBALANCE]["config_source"]) == (protocols, "DEFAULT_CONFIG")
                assert got[REBALANCE]["read_only"] is True


@pytest.mark.java
@pytest.mark.timeout(300)
def test_java_describe_and_alter_broker_configs_as_each_release():
    """Java 4.3's Admin against tenure as 3.7, 3.9, 4.0 and 4.3: describeConfigs of broker 0 lists what that
    release's broker lists; incrementalAlterConfigs SET group.share.session.timeout.ms is taken by 3.7 (a name it
    has no config of, described back as an UNKNOWN dynamic broker config) and refused by 3.9+ (its read-only
    config: InvalidRequestException, Kafka's message)."""
    from tests.support.java import run_java
    share = "group.share.session.timeout.ms"
    session = str(ServerConfig().consumer_session_timeout_ms)
    for name in ("3.7", "3.9", "4.0", "4.3"):
        protocols, names = SEEN[name]
        with ServerThread(ServerConfig(port=0, kafka_version=name)) as s:
            before, altered, after = run_java(
                "AdminOps", s.bootstrap, "describe-configs", "broker", "0", *OF_INTEREST, "--",
                "alter-config", "broker", "0", "SET", share, "30000", "--",
                "describe-configs", "broker", "0", share, timeout=120)
        got = {e["name"]: e for e in before["entries"]}
        assert set(got) == names, (name, before)
        assert (got[REBALANCE]["value"], got[REBALANCE]["source"], got[REBALANCE]["read_only"],
                got[REBALANCE]["type"]) == (protocols, "DEFAULT_CONFIG", True, "LIST"), name
        assert (got["group.consumer.session.timeout.ms"]["value"],
                got["group.consumer.session.timeout.ms"]["source"]) == (session, "STATIC_BROKER_CONFIG"), name
        if share not in names:              # 3.7: a name like any other, kept as a dynamic broker config
            assert altered == {"type": "altered_config", "error": None}, (name, altered)
            [entry] = after["entries"]
            assert (entry["value"], entry["source"], entry["read_only"], entry["type"], entry["doc"]) == \
                ("30000", "DYNAMIC_BROKER_CONFIG", True, "UNKNOWN", None), (name, entry)
        else:
            assert altered["exception"].endswith("InvalidRequestException"), (name, altered)
            assert altered["message"] == f"Cannot update these configs dynamically: Set({share})", (name, altered)
            [entry] = after["entries"]
            assert (entry["source"], entry["type"]) == ("STATIC_BROKER_CONFIG", "INT"), (name, entry)


def test_alter_configs_over_the_wire_answers_as_each_release():
    """AlterConfigs (key 33, v2) and IncrementalAlterConfigs (key 44, v1) of broker 0 over the wire (kafka-python's
    admin refuses a name it did not see described, client-side): as 3.6, `group.consumer.session.timeout.ms` is a
    name like any other (set; APPEND to it: UNKNOWN_SERVER_ERROR, no message); as 4.3 it is a read-only config
    (INVALID_REQUEST, Kafka's message) and a bad value of a dynamic one is INVALID_REQUEST too; the server keeps
    serving."""
    from kafka.protocol.admin import AlterConfigsRequest, IncrementalAlterConfigsRequest

    from tests.support.wire import WireClient
    name = "group.consumer.session.timeout.ms"
    A, I = AlterConfigsRequest, IncrementalAlterConfigsRequest

    def legacy(key, value):
        R = A.AlterConfigsResource
        return A(validate_only=False, resources=[R(resource_type=4, resource_name="0", configs=[
            R.AlterableConfig(name=key, value=value)])])

    def incremental(key, op, value):
        R = I.AlterConfigsResource
        return I(validate_only=False, resources=[R(resource_type=4, resource_name="0", configs=[
            R.AlterableConfig(name=key, config_operation=op, value=value)])])

    with ServerThread(ServerConfig(port=0, kafka_version="3.6")) as s, WireClient.to(s.bootstrap) as w:
        [r] = w.call(legacy(name, "50000"), 2).responses
        assert (r.error_code, r.error_message) == (0, None)
        [r] = w.call(incremental(name, 2, "x"), 1).responses            # APPEND
        assert (r.error_code, r.error_message) == (-1, None)
        assert s.server.topics.dynamic_configs["broker"]["0"] == {name: "50000"}
    with ServerThread(ServerConfig(port=0, kafka_version="4.3")) as s, WireClient.to(s.bootstrap) as w:
        [r] = w.call(legacy(name, "50000"), 2).responses
        assert (r.error_code, r.error_message) == (42, f"Cannot update these configs dynamically: Set({name})")
        [r] = w.call(incremental("log.retention.ms", 0, "soon"), 1).responses     # SET
        assert (r.error_code, r.error_message) == \
            (42, "Invalid value soon for configuration log.retention.ms: Not a number of type LONG")
        [r] = w.call(incremental("log.retention.ms", 0, "60000"), 1).responses
        assert r.error_code == 0 and s.server.topics.dynamic_configs["broker"]["0"] == {"log.retention.ms": "60000"}
