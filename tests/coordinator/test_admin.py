"""DescribeGroups / ListGroups / DeleteGroups (A1-A2)."""
import pytest
from kafka.protocol.admin.groups import DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse

from tenure.coordinator import EMPTY
from tenure.protocol.records import GroupMetadataRecord, OffsetCommitRecord, StaticMemberEventRecord

from .harness import HOST, Harness, shape

D = DescribeGroupsResponse.DescribedGroup
M = D.DescribedGroupMember


def described(version: int, group_id: str, state: str, protocol_type: str = "", protocol_data: str = "",
              members: list[tuple] = ()) -> D:
    """members: (member id, instance id, metadata, assignment), client "client" on HOST."""
    return D(version=version, error_code=0, error_message=None, group_id=group_id, group_state=state,
             protocol_type=protocol_type, protocol_data=protocol_data, authorized_operations=None, members=[
                 M(version=version, member_id=m, group_instance_id=i, client_id="client", client_host=HOST,
                   member_metadata=meta, member_assignment=a) for m, i, meta, a in members])


def describe_resp(version: int, *groups: D) -> dict:
    return shape(DescribeGroupsResponse, version, throttle_time_ms=0, groups=list(groups))


# ---------------------------------------------------------------------------------------- A1
@pytest.mark.parametrize("version", [0, 3, 4, 5])
def test_describe_unknown_group_is_dead(version):
    h = Harness()
    t = h.describe("nope", "", version=version)
    assert h.resp(t) == describe_resp(version, described(version, "nope", "Dead"), described(version, "", "Dead"))
    assert h.group == {}


@pytest.mark.parametrize("version", [0, 3, 4, 5])
def test_describe_stable_group(version):
    h = Harness()
    i1, d = h.form_group(["i1", None], protocols=(("range", b"meta"),))
    t = h.describe("g", version=version)
    assert h.resp(t) == describe_resp(version, described(version, "g", "Stable", "consumer", "range", [
        (i1, "i1", b"meta", b"assign-0"), (d, None, b"meta", b"assign-1")]))
    if version < 4:
        assert "group_instance_id" not in h.resp(t)["groups"][0]["members"][0]


def test_describe_other_states_hide_protocol_and_metadata():
    h = Harness()
    i1, i2 = h.form_group(["i1", "i2"])
    h.join("g", i1, "i1")
    t = h.describe("g")
    assert h.resp(t) == describe_resp(5, described(5, "g", "PreparingRebalance", "consumer", "", [
        (i1, "i1", b"", b""), (i2, "i2", b"", b"")]))
    h.join("g", i2, "i2")
    t = h.describe("g")
    assert h.resp(t) == describe_resp(5, described(5, "g", "CompletingRebalance", "consumer", "", [
        (i1, "i1", b"", b""), (i2, "i2", b"", b"")]))


def test_describe_empty_group():
    h = Harness()
    (i1,) = h.form_group(["i1"])
    h.leave("g", [(i1, "i1")])
    assert h.resp(h.describe("g")) == describe_resp(5, described(5, "g", "Empty", "consumer", ""))


def test_list_groups_with_state_filter():
    h = Harness()
    h.form_group(["i1"], group_id="a")
    h.commit("b", "", -1, None)
    L = ListGroupsResponse.ListedGroup
    t = h.list_groups(version=4)
    r = h.resp(t)
    assert r["error_code"] == 0
    assert sorted((g["group_id"], g["protocol_type"], g["group_state"]) for g in r["groups"]) == [
        ("a", "consumer", "Stable"), ("b", "", "Empty")]
    r = h.resp(h.list_groups(version=4, states=["Empty"]))
    assert r == shape(ListGroupsResponse, 4, throttle_time_ms=0, error_code=0, groups=[
        L(version=4, group_id="b", protocol_type="", group_state="Empty")])


# ---------------------------------------------------------------------------------------- A2
def _delete_resp(version: int, results: list[tuple[str, int]]) -> dict:
    R = DeleteGroupsResponse.DeletableGroupResult
    return shape(DeleteGroupsResponse, version, throttle_time_ms=0,
                 results=[R(version=version, group_id=g, error_code=c) for g, c in results])


@pytest.mark.parametrize("version", [0, 2])
def test_delete_groups_non_empty_unknown_and_empty(version):
    h = Harness()
    h.form_group(["i1"], group_id="busy")
    (i1,) = h.form_group(["j1"], group_id="done")
    h.commit("done", i1, 1, "j1", {"t": [(1, 10), (0, 5)], "u": [(0, 1)]})
    h.leave("done", [(i1, "j1")])
    h.take_records()
    t = h.delete("busy", "nope", "done", version=version)
    assert h.resp(t) == _delete_resp(version, [("busy", 68), ("nope", 69), ("done", 0)])
    # tombstones for every offset of the group, for every static-member event key, then for the group
    assert h.take_records() == [
        OffsetCommitRecord("done", "t", 0, tombstone=True),
        OffsetCommitRecord("done", "t", 1, tombstone=True),
        OffsetCommitRecord("done", "u", 0, tombstone=True),
        StaticMemberEventRecord("done", "j1", tombstone=True),
        GroupMetadataRecord("done", tombstone=True),
    ]
    assert "done" not in h.coordinator.static_event_keys
    assert h.coordinator.static_event_keys == {"busy": {"i1"}}
    assert "done" not in h.group and "done" not in h.coordinator.offsets
    assert h.resp(h.describe("done"))["groups"][0]["group_state"] == "Dead"
    assert h.group["busy"].state == "Stable"


def test_delete_simple_group_with_offsets_only():
    h = Harness()
    h.commit("s", "", -1, None, {"t": [(0, 3)]})
    h.take_records()
    assert h.resp(h.delete("s")) == _delete_resp(2, [("s", 0)])
    recs = h.take_records()
    assert [(type(r).__name__, r.tombstone) for r in recs] == [("OffsetCommitRecord", True),
                                                               ("GroupMetadataRecord", True)]
    assert h.group == {} and h.coordinator.offsets == {}
    # deleted means gone: a second delete finds nothing
    assert h.resp(h.delete("s")) == _delete_resp(2, [("s", 69)])


def test_group_can_be_recreated_after_delete():
    h = Harness()
    (i1,) = h.form_group(["i1"])
    h.leave("g", [(i1, "i1")])
    h.delete("g")
    t = h.join("g", "", "i1")
    h.advance(0)
    assert h.resp(t)["generation_id"] == 1 and h.g().state != EMPTY


def test_describe_answers_a_group_named_twice_once():
    """A repeated id is answered once, in first-asked order (issue 11, finding 4: repeating the id of a group
    with large members multiplied the answer; Kafka repeats it, no client sends one twice)."""
    h = Harness()
    i1, d = h.form_group(["i1", None], protocols=(("range", b"meta"),))
    t = h.describe("g", "nope", "g", "g", "nope")
    assert h.resp(t) == describe_resp(5, described(5, "g", "Stable", "consumer", "range", [
        (i1, "i1", b"meta", b"assign-0"), (d, None, b"meta", b"assign-1")]), described(5, "nope", "Dead"))
