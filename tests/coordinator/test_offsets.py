"""OffsetCommit / OffsetFetch for classic groups (items 2, 46-51)."""
import pytest
from kafka.protocol.consumer.group import OffsetFetchResponse

from tenure.coordinator.state import EMPTY

from .harness import SESSION, Harness, commit_resp, event_record, offset_record, shape


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


# ---------------------------------------------------------------------------------------- item 46
@pytest.mark.parametrize("version", [2, 5, 6, 8, 9])
def test_commit_to_unknown_group_without_generation_creates_simple_group(version):
    h = Harness()
    t = h.commit("g", "", -1, None, {"t": [(0, 10, "m0"), (1, 11)]}, version=version)
    assert h.resp(t) == commit_resp(version, {"t": [(0, 0), (1, 0)]})
    epoch = 5 if version >= 6 else -1
    assert h.take_records() == [offset_record("g", "t", 0, 10, h.now_ms, leader_epoch=epoch, metadata="m0"),
                                offset_record("g", "t", 1, 11, h.now_ms, leader_epoch=epoch)]
    g = h.g()
    assert g.state == EMPTY and g.protocol_type is None and g.members == {} and g.generation == 0


@pytest.mark.parametrize("version,code", [(2, 22), (8, 22), (9, 69)])
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


# ---------------------------------------------------------------------------------------- item 47
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


# ---------------------------------------------------------------------------------------- item 48
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


# ---------------------------------------------------------------------------------------- item 49
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


# ---------------------------------------------------------------------------------------- item 50
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
    from tenure.coordinator.classic import CoordinatorConfig
    h = Harness(CoordinatorConfig(offset_metadata_max_bytes=3))
    t = h.commit("g", "", -1, None, {"t": [(0, 1, "abc"), (1, 1, "abcd")]})
    assert h.resp(t) == commit_resp(8, {"t": [(0, 0), (1, 12)]})


def test_group_error_is_copied_to_every_partition_even_oversized_ones():
    h = Harness()
    h.form_group(["i1"])
    t = h.commit("g", "bogus", 1, None, {"t": [(0, 1, "x" * 5000), (1, 2)], "u": [(7, 3)]})
    assert h.resp(t) == commit_resp(8, {"t": [(0, 25), (1, 25)], "u": [(7, 25)]})


# ---------------------------------------------------------------------------------------- item 51
@pytest.mark.parametrize("version", [1, 5, 7, 8, 9])
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
