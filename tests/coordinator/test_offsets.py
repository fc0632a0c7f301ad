"""OffsetCommit / OffsetFetch for classic groups (G2, O1-O6)."""
import pytest
from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetFetchRequest, OffsetFetchResponse

from tenure.coordinator import EMPTY

from .harness import COMMIT, FETCH, SESSION, Harness, commit_resp, event_record, offset_record, shape


def fetch_resp(version: int, topics: dict[str, list[tuple[int, int, int, str]]], group_id: str = "g") -> dict:
    """Expected OffsetFetch response; partitions are (index, offset, leader epoch, metadata), errors 0."""
    R = OffsetFetchResponse
    if version >= 8:
        G = R.OffsetFetchResponseGroup
        T, P = G.OffsetFetchResponseTopics, G.OffsetFetchResponseTopics.OffsetFetchResponsePartitions
        return shape(R, version, throttle_time_ms=0, groups=[G(
            version=version, group_id=group_id, error_code=0, topics=[
                T(version=version, name=n, partitions=[
                    P(version=version, partition_index=i, committed_offset=o, committed_leader_epoch=e,
                      metadata=m, error_code=0) for i, o, e, m in parts])
                for n, parts in topics.items()])])
    T, P = R.OffsetFetchResponseTopic, R.OffsetFetchResponseTopic.OffsetFetchResponsePartition
    return shape(R, version, throttle_time_ms=0, error_code=0, topics=[
        T(version=version, name=n, partitions=[
            P(version=version, partition_index=i, committed_offset=o, committed_leader_epoch=e, metadata=m,
              error_code=0) for i, o, e, m in parts])
        for n, parts in topics.items()])


# ---------------------------------------------------------------------------------------- O1
@pytest.mark.parametrize("version", [0, 1, 2, 5, 6, 8, 9])
def test_commit_to_unknown_group_without_generation_creates_simple_group(version):
    h = Harness()
    t = h.commit("g", "", -1, None, {"t": [(0, 10, "m0"), (1, 11)]}, version=version)
    assert h.resp(t) == commit_resp(version, {"t": [(0, 0), (1, 0)]})
    epoch = 5 if version >= 6 else -1
    assert h.take_records() == [offset_record("g", "t", 0, 10, h.now_ms, leader_epoch=epoch, metadata="m0"),
                                offset_record("g", "t", 1, 11, h.now_ms, leader_epoch=epoch)]
    g = h.g()
    assert g.state == EMPTY and g.protocol_type is None and g.members == {} and g.generation == 0


@pytest.mark.parametrize("version,code", [(1, 22), (2, 22), (8, 22), (9, 69)])
def test_commit_to_unknown_group_with_generation(version, code):
    h = Harness()
    t = h.commit("g", "m", 1, None, {"t": [(0, 10)], "u": [(3, 1)]}, version=version)
    assert h.resp(t) == commit_resp(version, {"t": [(0, code)], "u": [(3, code)]})
    assert h.group == {} and h.records == []


def test_commit_with_empty_group_id_is_accepted():
    h = Harness()
    t = h.commit("", "", -1, None, {"t": [(0, 1)]})
    assert h.resp(t) == commit_resp(8, {"t": [(0, 0)]})
    assert h.take_records() == [offset_record("", "t", 0, 1, h.now_ms, leader_epoch=5)]
    t = h.fetch("", {"t": [0]}, version=7)
    assert h.resp(t) == fetch_resp(7, {"t": [(0, 1, 5, "")]})


# ---------------------------------------------------------------------------------------- O2
def test_commit_to_empty_group_without_generation_skips_member_check():
    h = Harness()
    (i1,) = h.form_group(["i1"])
    h.leave("g", [(i1, "i1")])
    assert h.g().state == EMPTY
    h.take_records()
    t = h.commit("g", "whoever", -1, "nobody", {"t": [(0, 7)]})
    assert h.resp(t) == commit_resp(8, {"t": [(0, 0)]})
    assert h.take_records() == [offset_record("g", "t", 0, 7, h.now_ms, leader_epoch=5)]


def test_commit_to_empty_group_with_generation_checks_member():
    h = Harness()
    (i1,) = h.form_group(["i1"])
    h.leave("g", [(i1, "i1")])
    h.take_records()
    assert h.resp(h.commit("g", i1, 2, "i1")) == commit_resp(8, {"t": [(0, 25)]})
    assert h.resp(h.commit("g", "", 2, None)) == commit_resp(8, {"t": [(0, 25)]})
    assert h.take_records() == []


# ---------------------------------------------------------------------------------------- O3
def test_commit_member_checks_on_a_stable_group():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    cases = [
        ((i1, 1, "i1"), 0),
        ((i2, 1, None), 0),
        (("bogus", 7, None), 25),        # identity before generation
        (("bogus", 1, "i1"), 82),
        ((i1, 1, "nobody"), 25),
        ((i1, 2, "i1"), 22),
        ((i1, -1, "i1"), 22),             # a member id with generation -1: identity ok, generation wrong
        (("", -1, None), 25),             # no identity at all on a non-empty group
        (("", -1, "i1"), 82),             # instance id set: identity check
    ]
    for (mid, gen, iid), code in cases:
        t = h.commit("g", mid, gen, iid, {"t": [(0, 1)], "u": [(0, 2), (1, 3)]})
        assert h.resp(t) == commit_resp(8, {"t": [(0, code)], "u": [(0, code), (1, code)]}), (mid, gen, iid)
    recs = h.take_records()
    assert len(recs) == 8                   # the two accepted commits, 3 partitions each; two fenced events
    accepted = [offset_record("g", "t", 0, 1, h.now_ms, leader_epoch=5),
                offset_record("g", "u", 0, 2, h.now_ms, leader_epoch=5),
                offset_record("g", "u", 1, 3, h.now_ms, leader_epoch=5)]
    assert recs == accepted + accepted + [event_record("fenced", "i1", "bogus", i1, 1, h.now_ms),
                                          event_record("fenced", "i1", "", i1, 1, h.now_ms)]


def test_commit_before_v7_has_no_instance_id():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    assert h.resp(h.commit("g", i2, 1, None, version=6)) == commit_resp(6, {"t": [(0, 0)]})
    assert h.resp(h.commit("g", "x", 1, None, version=6)) == commit_resp(6, {"t": [(0, 25)]})


# ---------------------------------------------------------------------------------------- O4
def test_commit_during_rebalance():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.join("g", i1, "i1")                               # PreparingRebalance, still generation 1
    h.advance(2000)
    h.take_records()
    t = h.commit("g", i2, 1, "i2", {"t": [(0, 42)]})
    assert h.resp(t) == commit_resp(8, {"t": [(0, 0)]})
    assert h.take_records() == [offset_record("g", "t", 0, 42, h.now_ms, leader_epoch=5)]
    assert h.timer("heartbeat", "g", i2) == h.now_ms + SESSION
    t2 = h.join("g", i2, "i2")                          # completes: generation 2, CompletingRebalance
    assert h.resp(t2)["generation_id"] == 2
    assert h.resp(h.commit("g", i2, 2, "i2")) == commit_resp(8, {"t": [(0, 27)]})
    assert h.resp(h.commit("g", i2, 1, "i2")) == commit_resp(8, {"t": [(0, 22)]})
    assert h.take_records() == []


# ---------------------------------------------------------------------------------------- O5
def test_metadata_too_large_fails_only_that_partition():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    ok, big = "x" * 4096, "x" * 4097
    t = h.commit("g", i1, 1, "i1", {"t": [(0, 1, ok), (1, 2, big)], "u": [(0, 3)]})
    assert h.resp(t) == commit_resp(8, {"t": [(0, 0), (1, 12)], "u": [(0, 0)]})
    assert h.take_records() == [offset_record("g", "t", 0, 1, h.now_ms, leader_epoch=5, metadata=ok),
                                offset_record("g", "u", 0, 3, h.now_ms, leader_epoch=5)]


def test_metadata_limit_follows_config():
    from tenure.coordinator import CoordinatorConfig
    h = Harness(CoordinatorConfig(offset_metadata_max_bytes=3))
    t = h.commit("g", "", -1, None, {"t": [(0, 1, "abc"), (1, 1, "abcd")]})
    assert h.resp(t) == commit_resp(8, {"t": [(0, 0), (1, 12)]})


def test_group_error_is_copied_to_every_partition_even_oversized_ones():
    h = Harness()
    h.form_group(["i1"])
    t = h.commit("g", "bogus", 1, None, {"t": [(0, 1, "x" * 5000), (1, 2)], "u": [(7, 3)]})
    assert h.resp(t) == commit_resp(8, {"t": [(0, 25), (1, 25)], "u": [(7, 25)]})


# ---------------------------------------------------------------------------------------- O6
@pytest.mark.parametrize("version", [0, 1, 5, 7, 8, 9])
def test_fetch_from_missing_group(version):
    h = Harness()
    t = h.fetch("nope", {"t": [0, 1], "u": [2]}, version=version)
    assert h.resp(t) == fetch_resp(version, {"t": [(0, -1, -1, ""), (1, -1, -1, "")], "u": [(2, -1, -1, "")]},
                                   group_id="nope")
    assert h.group == {}


@pytest.mark.parametrize("version", [2, 7, 8])
def test_fetch_all_from_missing_group_is_empty(version):
    h = Harness()
    assert h.resp(h.fetch("nope", None, version=version)) == fetch_resp(version, {}, group_id="nope")


@pytest.mark.parametrize("version", [5, 7, 8])
def test_fetch_needs_no_member_and_returns_committed_offsets(version):
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.commit("g", i1, 1, "i1", {"t": [(0, 10, "a"), (1, 11)], "u": [(0, 5)]})
    h.commit("g", i2, 1, "i2", {"t": [(1, 12, "b")]})
    t = h.fetch("g", {"t": [0, 1, 2]}, version=version)
    assert h.resp(t) == fetch_resp(version, {"t": [(0, 10, 5, "a"), (1, 12, 5, "b"), (2, -1, -1, "")]})
    t = h.fetch("g", None, version=version)
    assert h.resp(t) == fetch_resp(version, {"t": [(0, 10, 5, "a"), (1, 12, 5, "b")], "u": [(0, 5, 5, "")]})


# ---------------------------------------------------------------------------------------- v0 and v1
# OffsetCommit v0 carries no generation, member or instance id; v1 adds them and a per-partition
# commit timestamp; OffsetFetch v0 answers without leader epoch, top-level error or throttle time.
# Kafka kept v0 commits in ZooKeeper; here every version reads and writes the one offset store.
# Each request below goes through the wire: kafka-python encodes it at the version (the bytes are
# checked against the Kafka protocol's layout), the decoded body is what the coordinator handles, and
# the harness decodes the response at the same version.
CT = OffsetCommitRequest.OffsetCommitRequestTopic
CP = CT.OffsetCommitRequestPartition


def _over_the_wire(cls, version: int, body, expected_hex: str):
    data = body.encode(header=False)
    assert data.hex() == expected_hex
    return cls.decode(data, version=version, header=False)


def _commit_v0(h: Harness, group: str, parts) -> int:
    """OffsetCommit v0 for topic "t"; parts: [(partition, offset, metadata or None)]."""
    body = OffsetCommitRequest(version=0, group_id=group, topics=[CT(version=0, name="t", partitions=[
        CP(version=0, partition_index=i, committed_offset=o, committed_metadata=m) for i, o, m in parts])])
    # group, then topics [name, partitions [index, offset, metadata]]: no generation, member or retention
    expected = f"{len(group):04x}" + group.encode().hex() + "00000001" + "0001" + b"t".hex() + f"{len(parts):08x}"
    for i, o, m in parts:
        expected += f"{i:08x}{o:016x}" + ("ffff" if m is None else f"{len(m):04x}" + m.encode().hex())
    return h.send(COMMIT, 0, _over_the_wire(OffsetCommitRequest, 0, body, expected))


def test_commit_v0_creates_a_simple_group_and_stores_like_any_version():
    h = Harness()
    t = _commit_v0(h, "g", [(0, 10, "m0"), (1, 11, None)])
    assert h.resp(t) == commit_resp(0, {"t": [(0, 0), (1, 0)]})
    # v0 response: no throttle time; topics [name, partitions [index, error]]
    assert h.raw[t].encode(header=False).hex() == ("00000001" "000174" "00000002"
                                                   "00000000" "0000" "00000001" "0000")
    # null metadata is stored as "" (Kafka's NO_METADATA); no leader epoch before v6
    assert h.take_records() == [offset_record("g", "t", 0, 10, h.now_ms, metadata="m0"),
                                offset_record("g", "t", 1, 11, h.now_ms)]
    g = h.g()
    assert g.state == EMPTY and g.protocol_type is None and g.members == {} and g.generation == 0
    # the same store answers every fetch version
    assert h.resp(h.fetch("g", {"t": [0, 1]}, version=8)) == fetch_resp(8, {"t": [(0, 10, -1, "m0"),
                                                                                (1, 11, -1, "")]})


def test_commit_v0_is_a_generation_minus_1_commit_without_member():
    """O2-O3 as for any commit with generation -1 and member "": accepted on an Empty group,
    25 on a group with members (Kafka's ZooKeeper store took v0 commits outside the group; one store
    here means a v0 client cannot overwrite a live group's offsets)."""
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    t = _commit_v0(h, "g", [(0, 5, "")])
    assert h.resp(t) == commit_resp(0, {"t": [(0, 25)]})
    assert h.take_records() == []
    h.leave("g", [(i1, "i1"), (i2, "i2")])
    assert h.g().state == EMPTY
    h.take_records()
    t = _commit_v0(h, "g", [(0, 5, ""), (3, 7, "x")])
    assert h.resp(t) == commit_resp(0, {"t": [(0, 0), (3, 0)]})
    assert h.take_records() == [offset_record("g", "t", 0, 5, h.now_ms),
                                offset_record("g", "t", 3, 7, h.now_ms, metadata="x")]


def _commit_v1(h: Harness, member: str, generation: int, parts) -> int:
    """OffsetCommit v1 for group "g", topic "t"; parts: [(partition, offset, commit timestamp, metadata)]."""
    body = OffsetCommitRequest(version=1, group_id="g", generation_id_or_member_epoch=generation, member_id=member,
                               topics=[CT(version=1, name="t", partitions=[
                                   CP(version=1, partition_index=i, committed_offset=o, commit_timestamp=ts,
                                      committed_metadata=m) for i, o, ts, m in parts])])
    # group, generation, member, then topics [name, partitions [index, offset, commit timestamp, metadata]]
    expected = ("0001" + b"g".hex() + "%08x" % (generation & 0xffffffff) + f"{len(member):04x}"
                + member.encode().hex() + "00000001" + "0001" + b"t".hex() + f"{len(parts):08x}")
    for i, o, ts, m in parts:
        expected += f"{i:08x}{o:016x}{ts & 0xffffffffffffffff:016x}" + f"{len(m):04x}" + m.encode().hex()
    return h.send(COMMIT, 1, _over_the_wire(OffsetCommitRequest, 1, body, expected))


def test_commit_v1_checks_the_member_and_keeps_an_explicit_commit_timestamp():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.take_records()
    h.advance(500)
    t = _commit_v1(h, i2, 1, [(0, 40, 1234567, "a"), (1, 41, -1, "")])
    assert h.resp(t) == commit_resp(1, {"t": [(0, 0), (1, 0)]})
    # commit timestamp -1 means now; any other value is stored as given (Kafka's OffsetAndMetadata.fromRequest)
    assert h.take_records() == [offset_record("g", "t", 0, 40, 1234567, metadata="a"),
                                offset_record("g", "t", 1, 41, h.now_ms)]
    assert h.timer("heartbeat", "g", i2) == h.now_ms + SESSION          # 39: a commit keeps the session
    # no instance id before v7: identity by member id, then generation (O3)
    assert h.resp(_commit_v1(h, "bogus", 1, [(0, 1, -1, "")])) == commit_resp(1, {"t": [(0, 25)]})
    assert h.resp(_commit_v1(h, i1, 2, [(0, 1, -1, "")])) == commit_resp(1, {"t": [(0, 22)]})
    assert h.resp(_commit_v1(h, "", -1, [(0, 1, -1, "")])) == commit_resp(1, {"t": [(0, 25)]})
    assert h.take_records() == []
    # the v1 commits are what every fetch version reads
    assert h.resp(h.fetch("g", {"t": [0, 1]}, version=1)) == fetch_resp(1, {"t": [(0, 40, -1, "a"),
                                                                                (1, 41, -1, "")]})


def test_fetch_v0_reads_the_shared_store():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.commit("g", i1, 1, "i1", {"t": [(0, 10, "a"), (1, 11)]}, version=8)     # leader epoch 5 (v6+)
    _commit_v0(h, "other", [(0, 3, None)])
    body = OffsetFetchRequest(version=0, group_id="g", topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(version=0, name="t", partition_indexes=[0, 1, 2])])
    req = _over_the_wire(OffsetFetchRequest, 0, body,
                         "0001" + b"g".hex() + "00000001" + "0001" + b"t".hex() + "00000003"
                         + "00000000" "00000001" "00000002")
    t = h.send(FETCH, 0, req)
    # v0: no leader epoch, no top-level error, no throttle time; a partition without a commit is -1, ""
    assert h.resp(t) == fetch_resp(0, {"t": [(0, 10, -1, "a"), (1, 11, -1, ""), (2, -1, -1, "")]})
    assert h.raw[t].encode(header=False).hex() == (
        "00000001" "000174" "00000003"
        "00000000" "000000000000000a" "000161" "0000"
        "00000001" "000000000000000b" "0000" "0000"
        "00000002" "ffffffffffffffff" "0000" "0000")
    t = h.send(FETCH, 0, OffsetFetchRequest(version=0, group_id="other", topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(version=0, name="t", partition_indexes=[0])]))
    assert h.resp(t) == fetch_resp(0, {"t": [(0, 3, -1, "")]}, group_id="other")
    assert h.take_records()[-1] == offset_record("other", "t", 0, 3, h.now_ms)


def test_fetch_v8_answers_a_group_asked_for_all_its_offsets_twice_once():
    """v8+: a group repeated with topics=null (all its offsets) is answered once; repeated with named
    partitions it is answered per entry, as Kafka does (that answer is as large as the question)."""
    h = Harness()
    h.commit("g", "", -1, None, {"t": [(0, 10), (1, 11)]}, version=8)
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    T = G.OffsetFetchRequestTopics
    body = OffsetFetchRequest(version=8, groups=[
        G(version=8, group_id="g", topics=None), G(version=8, group_id="h", topics=None),
        G(version=8, group_id="g", topics=[T(version=8, name="t", partition_indexes=[1])]),
        G(version=8, group_id="g", topics=None),
        G(version=8, group_id="g", topics=[T(version=8, name="t", partition_indexes=[1])])])
    r = h.resp(h.send(FETCH, 8, body))
    every = fetch_resp(8, {"t": [(0, 10, 5, ""), (1, 11, 5, "")]})["groups"][0]
    one = fetch_resp(8, {"t": [(1, 11, 5, "")]})["groups"][0]
    none = fetch_resp(8, {}, group_id="h")["groups"][0]
    assert r["groups"] == [every, none, one, one]
