"""The Kafka releases tenure presents (protocol/releases.py) and the served table cut to each (protocol/apis.py):
ranges within both the release's and tenure's, the consumer protocol only from 4.0, the features of each release
in ApiVersions v3/v4, a request above the release refused as that release refuses it."""
from __future__ import annotations

import struct

import pytest
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from tenure.config import ServerConfig
from tenure.protocol.apis import DEFAULT_SERVED, SUPPORTED, served_apis
from tenure.protocol.codec import (
    Request,
    UnsupportedApiVersions,
    api_versions_body,
    decode_request,
    encode_unsupported_api_versions,
)
from tenure.protocol.errors import UnsupportedApi
from tenure.protocol.releases import RELEASES, TRANSACTION_VERSION_SERVED, release
from tests.support.wire import request_bytes


@pytest.mark.parametrize("name", list(RELEASES))
def test_each_release_serves_within_its_own_ranges_and_tenures(name):
    served = served_apis(name)
    recorded = served.release.api_versions
    assert served.name == name and served.explicit
    # kafka-python's recording of that release's brokers, but for the consumer protocol before 4.0
    assert {k: v for k, v in BROKER_API_VERSIONS[served.release.version].items() if k in recorded} == recorded
    for key, lo, hi in served.ranges():
        assert recorded[key][0] <= lo <= hi <= recorded[key][1], (name, key)
        assert SUPPORTED[key].min_version <= lo and hi <= SUPPORTED[key].max_version, (name, key)
    # every API tenure serves that the release has, at a version both have, is served
    for key, spec in SUPPORTED.items():
        if key in recorded and max(spec.min_version, recorded[key][0]) <= min(spec.max_version, recorded[key][1]):
            assert key in served.specs, (name, spec.name)


def test_the_consumer_protocol_only_from_4_0():
    for name, r in RELEASES.items():
        has = 68 in served_apis(name).specs and 69 in served_apis(name).specs
        assert has == (r.version >= (4, 0)) == r.consumer_group_protocol, name
    # kafka-python recorded 3.7-3.9 brokers with KIP-848 enabled (preview); a default 3.x broker has it off
    assert 68 in BROKER_API_VERSIONS[(3, 9)] and 68 not in RELEASES["3.9"].api_versions


def test_unknown_release_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown Kafka version '5\.0'; known: 2\.8, 3\.0, .*, 4\.3$"):
        release("5.0")
    with pytest.raises(ValueError, match="unknown Kafka version '2.7'"):
        ServerConfig(kafka_version="2.7")
    assert ServerConfig(kafka_version="3.9").release.version == (3, 9)
    assert ServerConfig().served_apis() is DEFAULT_SERVED and ServerConfig().release.name == "4.3"


def test_transaction_version_is_the_releases_cut_to_what_tenure_serves():
    assert ServerConfig(kafka_version="3.9").finalized_transaction_version == 0
    assert ServerConfig(kafka_version="4.3").finalized_transaction_version == min(2, TRANSACTION_VERSION_SERVED)
    assert ServerConfig().finalized_transaction_version == min(2, TRANSACTION_VERSION_SERVED)
    assert ServerConfig(transaction_version=1).finalized_transaction_version == 1


def _features(body):
    return ({f.name: (f.min_version, f.max_version) for f in body.supported_features or []},
            {f.name: (f.min_version_level, f.max_version_level) for f in body.finalized_features or []},
            body.finalized_features_epoch)


def test_api_versions_announces_each_releases_features():
    # 2.8 (ZooKeeper): no feature; 3.9: metadata.version 3.9-IV0 (21)
    assert _features(api_versions_body(4, served=served_apis("2.8"))) == ({}, {}, -1)
    # 3.9: metadata.version 3.9-IV0 (21); kraft.version 0-1 supported (KIP-853), finalized 0 (a static quorum)
    assert _features(api_versions_body(4, served=served_apis("3.9"))) == (
        {"kraft.version": (0, 1), "metadata.version": (1, 21)}, {"metadata.version": (21, 21)}, 1)
    tv = TRANSACTION_VERSION_SERVED
    sup, fin, epoch = _features(api_versions_body(4, served=served_apis("4.3")))
    # streams.version (KIP-1071) is left out: tenure does not serve streams groups
    assert sup == {"eligible.leader.replicas.version": (0, 1), "group.version": (0, 1), "kraft.version": (0, 1),
                   "metadata.version": (7, 30), "share.version": (0, 1), "transaction.version": (0, tv)}
    assert fin == {"eligible.leader.replicas.version": (1, 1), "group.version": (1, 1),
                   "metadata.version": (30, 30), "share.version": (1, 1), "transaction.version": (tv, tv)}
    # v3 leaves out the supported features whose least level is 0 (older clients cannot parse them)
    sup3, fin3, _ = _features(api_versions_body(3, served=served_apis("4.3")))
    assert sup3 == {"metadata.version": (7, 30)} and fin3 == fin
    # the whole body goes on the wire and comes back (v3 and v4 tagged fields)
    for v in (3, 4):
        body = api_versions_body(v, served=served_apis("4.0"))
        wire = bytes(body.encode(version=v))
        assert _features(ApiVersionsResponse.decode(wire, version=v)) == _features(body)


def _payload(req, version: int) -> bytes:
    return request_bytes(req, version)[4:]


def test_a_request_above_the_release_is_refused_as_that_release_refuses_it():
    fetch17 = _payload(FetchRequest(), 17)
    assert isinstance(decode_request(fetch17), Request)                    # tenure's table: Fetch v17
    assert isinstance(decode_request(fetch17, served=served_apis("3.9")), Request)
    with pytest.raises(UnsupportedApi, match="Fetch is served at versions 0-16"):
        decode_request(fetch17, served=served_apis("3.7"))                 # 3.7 serves Fetch up to v16
    # an API the release lacks: ConsumerGroupHeartbeat before 4.0
    cgh = bytearray(_payload(ApiVersionsRequest(), 0))
    struct.pack_into(">h", cgh, 0, 68)
    with pytest.raises(UnsupportedApi, match="API not served by Kafka 3.9"):
        decode_request(bytes(cgh), served=served_apis("3.9"))
    # ApiVersions above the release's: answered in v0 with error 35 and that release's ranges
    av = bytearray(_payload(ApiVersionsRequest(), 3))
    struct.pack_into(">h", av, 2, 4)                                       # v4: 2.8 serves ApiVersions 0-3
    got = decode_request(bytes(av), served=served_apis("2.8"))
    assert isinstance(got, UnsupportedApiVersions) and got.api_version == 4
    out = encode_unsupported_api_versions(got)
    resp = ApiVersionsResponse.decode(out, version=0, header=True, framed=True)
    assert resp.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == served_apis("2.8").ranges()


def test_every_api_short_of_the_newest_release_says_why():
    from tenure.protocol.apis import SHORT_OF_NEWEST
    from tenure.protocol.releases import NEWEST
    short = {k for k, s in SUPPORTED.items() if s.max_version < NEWEST.api_versions[k][1]}
    assert short == set(SHORT_OF_NEWEST), "protocol/apis.py SHORT_OF_NEWEST must name exactly the APIs short of 4.3"
    assert all(len(why) > 20 for why in SHORT_OF_NEWEST.values())


def test_share_groups_are_refused_as_4_1_and_produce_v0_2_announced_only_from_4_0():
    from tenure.protocol.releases import SHARE_GROUP_APIS
    for name in RELEASES:
        served = served_apis(name)
        for key in SHARE_GROUP_APIS:
            expected = 35 if name == "4.1" else 0
            assert served.refusal(key) == expected, (name, key)
        produce = dict((k, (lo, hi)) for k, lo, hi in served.ranges())[0]
        spec = served.specs[0]
        assert produce[0] == 0                                   # every release announces Produce from v0
        assert spec.min_version == (3 if served.release.version >= (4, 0) else 0), name
    assert DEFAULT_SERVED.refusal(76) == 0 and DEFAULT_SERVED.specs[0].min_version == 0


# what a broker of each release lists, by Kafka's Feature enums at that release (protocol/releases.py's docstring):
# (supported, finalized); a feature whose latest production level is 0 is not listed, nor a finalized level 0
_KAFKA_FEATURES = {
    "3.3": ({"metadata.version": (1, 7)}, {"metadata.version": 7}),
    "3.7": ({"metadata.version": (1, 19)}, {"metadata.version": 19}),
    "3.8": ({"metadata.version": (1, 20)}, {"metadata.version": 20}),
    "3.9": ({"metadata.version": (1, 21), "kraft.version": (0, 1)}, {"metadata.version": 21}),
    "4.0": ({"metadata.version": (7, 25), "kraft.version": (0, 1), "group.version": (0, 1),
             "transaction.version": (0, 2), "eligible.leader.replicas.version": (0, 1)},
            {"metadata.version": 25, "group.version": 1, "transaction.version": 2}),
    "4.1": ({"metadata.version": (7, 27), "kraft.version": (0, 1), "group.version": (0, 1),
             "transaction.version": (0, 2), "eligible.leader.replicas.version": (0, 1)},
            {"metadata.version": 27, "group.version": 1, "transaction.version": 2,
             "eligible.leader.replicas.version": 1}),
    "4.2": ({"metadata.version": (7, 29), "kraft.version": (0, 1), "group.version": (0, 1),
             "transaction.version": (0, 2), "eligible.leader.replicas.version": (0, 1), "share.version": (0, 1),
             "streams.version": (0, 1)},
            {"metadata.version": 29, "group.version": 1, "transaction.version": 2,
             "eligible.leader.replicas.version": 1, "share.version": 1, "streams.version": 1}),
}


@pytest.mark.parametrize("name", list(_KAFKA_FEATURES))
def test_each_release_lists_the_features_its_brokers_list(name):
    supported, finalized = _KAFKA_FEATURES[name]
    r = release(name)
    assert {n: (f.min_level, f.max_level) for n, f in r.features.items()} == supported
    assert {n: f.finalized for n, f in r.features.items() if f.finalized > 0} == finalized
    # announced: the same, but for streams.version (streams groups are not served: not announced)
    sup, fin = r.announced_features()
    assert sup == {n: v for n, v in supported.items() if n != "streams.version"}
    assert fin == {n: (lv, lv) for n, lv in finalized.items() if n != "streams.version"}
    # the behaviour follows the features: KIP-848 with group.version 1, share groups with share.version 1
    assert r.consumer_group_protocol == (r.finalized_level("group.version") >= 1)
    assert r.share_groups == (r.finalized_level("share.version") >= 1)


def test_releases_before_kraft_list_no_feature_and_4_3_lists_4_2s():
    for name in ("2.8", "3.0", "3.1", "3.2"):
        assert release(name).features == {} and release(name).announced_features() == ({}, {})
    a, b = release("4.2").features, release("4.3").features
    assert {n: f for n, f in a.items() if n != "metadata.version"} == {
        n: f for n, f in b.items() if n != "metadata.version"}


def test_transaction_version_flag_cuts_only_the_finalized_level():
    sup, fin = release("4.3").announced_features(transaction_version=1)
    assert sup["transaction.version"] == (0, TRANSACTION_VERSION_SERVED) and fin["transaction.version"] == (1, 1)
    sup, fin = release("4.3").announced_features(transaction_version=0)
    assert "transaction.version" in sup and "transaction.version" not in fin


# the broker configs each release reports that not every release has, and their defaults (protocol/releases.py's
# docstring: Kafka's generated broker config documentation of each release)
def test_broker_configs_appear_with_the_release_that_made_them_public():
    since = {"group.consumer.session.timeout.ms": "3.7", "group.consumer.heartbeat.interval.ms": "3.7",
             "group.coordinator.rebalance.protocols": "3.7", "group.share.session.timeout.ms": "3.9",
             "group.share.heartbeat.interval.ms": "3.9", "share.coordinator.state.topic.num.partitions": "4.0"}
    for name, r in RELEASES.items():
        for config, first in since.items():
            assert r.reports_broker_config(config) == (r.version >= release(first).version), (name, config)
        assert r.reports_broker_config("group.max.size") and r.reports_broker_config("log.retention.hours")


def test_rebalance_protocols_default_follows_the_release():
    want = {"3.7": "classic", "3.8": "classic", "3.9": "classic", "4.0": "classic,consumer",
            "4.1": "classic,consumer,streams", "4.2": "classic,consumer,streams", "4.3": "classic,consumer,streams"}
    for name, default in want.items():
        assert RELEASES[name].broker_config_default("group.coordinator.rebalance.protocols", "x") == default, name
    # a config whose default never changed keeps the one given
    assert RELEASES["3.7"].broker_config_default("group.max.size", "2147483647") == "2147483647"
