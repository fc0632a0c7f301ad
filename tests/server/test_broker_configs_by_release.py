"""The broker configs the broker's ConfigStore (broker/configs.py) reports and accepts presenting a Kafka release:
only the configs that release's brokers report, with that release's defaults; a broker config name the release
does not know is set as a dynamic config (Kafka's ConfigAdminManager accepts it) and reported back with type
UNKNOWN; a read-only one of the release is refused with INVALID_REQUEST, as Kafka refuses it."""
from __future__ import annotations

import pytest

from tenure.broker.configs import (
    OP_APPEND,
    OP_SET,
    OP_SUBTRACT,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_BROKER,
    SOURCE_DYNAMIC_DEFAULT_BROKER,
    SOURCE_STATIC_BROKER,
    UNKNOWN,
    ConfigError,
    ConfigStore,
    UnknownServerError,
    incremental,
)
from tenure.broker.topics import TopicRegistry
from tenure.protocol.errors import ErrorCode
from tenure.protocol.releases import RELEASES

STATIC = {"group.share.session.timeout.ms": "30000", "group.consumer.session.timeout.ms": "20000",
          "share.coordinator.state.topic.num.partitions": "3"}


def store(name: str) -> ConfigStore:
    return ConfigStore(TopicRegistry(), lambda node: dict(STATIC), RELEASES[name])


def entries(s: ConfigStore, resource: str = "0") -> dict:
    return {e.name: e for e in s.broker_entries(resource, 0)}


def test_each_release_reports_only_its_own_broker_configs():
    seen = {name: entries(store(name)) for name in ("3.6", "3.7", "3.9", "4.0", "4.3")}
    assert not any(k.startswith(("group.consumer.", "group.share.", "share.", "group.coordinator."))
                   for k in seen["3.6"])
    assert "group.consumer.session.timeout.ms" in seen["3.7"] and "group.share.session.timeout.ms" not in seen["3.7"]
    assert "group.share.session.timeout.ms" in seen["3.9"]
    assert "share.coordinator.state.topic.num.partitions" not in seen["3.9"]
    assert seen["4.0"]["share.coordinator.state.topic.num.partitions"].value == "3"
    # a value the server sets is reported (STATIC_BROKER) only where the release has the config
    assert (seen["3.9"]["group.share.session.timeout.ms"].value,
            seen["3.9"]["group.share.session.timeout.ms"].source) == ("30000", SOURCE_STATIC_BROKER)
    # every release reports the configs every release has
    for got in seen.values():
        assert {"broker.id", "group.max.size", "log.retention.hours", "message.max.bytes"} <= set(got)


@pytest.mark.parametrize("name,default", [("3.7", "classic"), ("3.9", "classic"), ("4.0", "classic,consumer"),
                                          ("4.1", "classic,consumer,streams"), ("4.3", "classic,consumer,streams")])
def test_rebalance_protocols_is_the_releases_default(name, default):
    e = entries(store(name))["group.coordinator.rebalance.protocols"]
    assert (e.value, e.source, e.read_only) == (default, SOURCE_DEFAULT, True)
    assert e.synonyms == [("group.coordinator.rebalance.protocols", default, SOURCE_DEFAULT)]


def test_a_config_the_release_does_not_know_is_set_and_reported_as_unknown():
    s = store("3.6")
    name = "group.consumer.session.timeout.ms"          # a 3.7+ config: to 3.6 a name like any other
    new = incremental(s.broker_defs, {}, [(name, OP_SET, "50000")], broker=True)
    s.check(RESOURCE_BROKER, [name], new)                # accepted
    s.replace(RESOURCE_BROKER, "0", new)
    s.replace(RESOURCE_BROKER, "", {"no.such.config": "x"})
    e = entries(s)[name]
    assert (e.value, e.source, e.read_only, e.type, e.doc) == ("50000", SOURCE_DYNAMIC_BROKER, True, UNKNOWN, None)
    assert e.synonyms == [(name, "50000", SOURCE_DYNAMIC_BROKER)]
    assert entries(s)["no.such.config"].source == SOURCE_DYNAMIC_DEFAULT_BROKER
    # the cluster default lists only what was set cluster-wide
    assert list(entries(s, "")) == ["no.such.config"]
    # APPEND / SUBTRACT of such a name: Kafka's lookup of its type fails, UNKNOWN_SERVER_ERROR without a message
    for op in (OP_APPEND, OP_SUBTRACT):
        with pytest.raises(UnknownServerError) as info:
            incremental(s.broker_defs, {}, [(name, op, "a")], broker=True)
        assert (info.value.code, info.value.message) == (ErrorCode.UNKNOWN_SERVER_ERROR, None)


def test_a_read_only_config_of_the_release_is_refused_as_kafka_refuses_it():
    s = store("4.3")
    names = ["group.share.session.timeout.ms", "group.consumer.session.timeout.ms", "log.retention.ms"]
    with pytest.raises(ConfigError) as info:
        s.check(RESOURCE_BROKER, names, {n: "50000" for n in names})
    assert info.value.code == ErrorCode.INVALID_REQUEST
    assert info.value.message == ("Cannot update these configs dynamically: "
                                  "Set(group.consumer.session.timeout.ms, group.share.session.timeout.ms)")
    # the same name to 3.6, which has no such config: accepted
    store("3.6").check(RESOURCE_BROKER, ["group.consumer.session.timeout.ms"],
                       {"group.consumer.session.timeout.ms": "50000"})
    # a bad value of a dynamic broker config: DynamicBrokerConfig's ConfigException, INVALID_REQUEST too
    with pytest.raises(ConfigError) as bad:
        s.check(RESOURCE_BROKER, ["log.retention.ms"], {"log.retention.ms": "soon"})
    assert (bad.value.code, bad.value.message) == (
        ErrorCode.INVALID_REQUEST, "Invalid value soon for configuration log.retention.ms: Not a number of type LONG")
    # the same value for a topic: INVALID_CONFIG (the controller's LogConfig validation)
    with pytest.raises(ConfigError) as topic:
        s.check(RESOURCE_TOPIC, ["retention.ms"], {"retention.ms": "soon"})
    assert topic.value.code == ErrorCode.INVALID_CONFIG
