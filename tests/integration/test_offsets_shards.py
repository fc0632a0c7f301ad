"""Several `__consumer_offsets` partitions (`--offsets-partitions N`): one coordinator shard per partition,
groups spread over them by Kafka's hash, and the server behaving as one coordinator.

- requests naming groups of several shards (DescribeGroups, OffsetFetch v8, DeleteGroups) are answered
  in request order; ListGroups lists every shard's groups;
- a static rolling restart (confluent-kafka) of groups on different partitions causes no rebalance;
- a restart on the data dir restores every group from its own partition.
"""
from __future__ import annotations

import threading
import time

import pytest
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest

from tenure.config import ServerConfig
from tenure.coordinator import AdminError, partition_for
from tenure.protocol.internal_topics import OFFSETS_TOPIC
from tenure.server import ServerThread
from tests.support.groups import GroupMember, group_view, member_id, wait_for
from tests.support.groupwire import commit, describe, fetch_all, fetch_request, join
from tests.support.wire import WireClient, create_topic

pytestmark = pytest.mark.timeout(120)

N = 8


def spread(prefix: str, count: int) -> list[str]:
    """`count` group ids, each on an offsets partition of its own."""
    out, used = [], set()
    for i in range(1000):
        gid = f"{prefix}{i}"
        p = partition_for(gid, N)
        if p not in used:
            used.add(p)
            out.append(gid)
            if len(out) == count:
                return out
    raise AssertionError("not enough partitions")


def shard_of(st: ServerThread, gid: str) -> list[int]:
    """The shards holding `gid` (read on the server's loop)."""
    return st.call(lambda: [p for p, shard in st.server.runtime.shards.items() if gid in shard.groups])


def test_requests_naming_groups_of_several_shards_are_answered_in_request_order():
    groups = spread("sg-", 5)
    with ServerThread(ServerConfig(port=0, offsets_partitions=N)) as st, WireClient.to(st.bootstrap) as c:
        create_topic(c, "t", 2)
        for n, gid in enumerate(groups):
            assert commit(c, gid, "", -1, None, "t", {0: 10 + n, 1: 20 + n}) == {0: 0, 1: 0}
        for gid in groups:                                 # each group lives on its own partition's shard
            assert shard_of(st, gid) == [partition_for(gid, N)]
        ends = st.call(lambda: [p.log_end_offset for p in st.server.topics.get(OFFSETS_TOPIC).partitions])
        assert {p for p, end in enumerate(ends) if end} == {partition_for(g, N) for g in groups}

        asked = [groups[3], "nobody", groups[0], groups[3], groups[4], groups[1]]
        d = c.call(*_describe(asked))
        assert [g.group_id for g in d.groups] == [groups[3], "nobody", groups[0], groups[4], groups[1]]
        assert [g.group_state for g in d.groups] == ["Empty", "Dead", "Empty", "Empty", "Empty"]

        order = [groups[2], groups[0], "nobody", groups[4], groups[2]]
        r = c.call(*fetch_request(order))
        assert [g.group_id for g in r.groups] == [groups[2], groups[0], "nobody", groups[4]]
        assert fetch_all(c, order) == {**{groups[n]: {("t", 0): 10 + n, ("t", 1): 20 + n} for n in (2, 0, 4)},
                                       "nobody": {}}

        listed = c.call(ListGroupsRequest(version=4, states_filter=["Empty"]), 4)
        assert listed.error_code == 0 and sorted(g.group_id for g in listed.groups) == sorted(groups)
        assert c.call(ListGroupsRequest(version=4, states_filter=["Stable"]), 4).groups == []

        doomed = [groups[4], "nobody", groups[1], groups[4]]
        r = c.call(DeleteGroupsRequest(version=2, groups_names=doomed), 2)
        assert [(x.group_id, x.error_code) for x in r.results] == [(groups[4], 0), ("nobody", 69),
                                                                  (groups[1], 0), (groups[4], 69)]
        assert shard_of(st, groups[4]) == shard_of(st, groups[1]) == []
        assert sorted(describe(c, [groups[0], groups[2], groups[3]])) == sorted([groups[0], groups[2], groups[3]])


def _describe(groups):
    return DescribeGroupsRequest(version=5, groups=list(groups), include_authorized_operations=False), 5


def _settled(st: ServerThread, gid: str, members: list[GroupMember], partitions: int) -> dict:
    def ok():
        v = group_view(st, gid)
        if not v or v["state"] != "Stable" or len(v["members"]) != len(members):
            return None
        if sorted(p for m in members for p in m.assignment) != list(range(partitions)):
            return None
        return v
    return wait_for(ok, 60, f"group {gid} to settle")


def test_static_rolling_restart_over_eight_offsets_partitions_then_a_server_restart(tmp_path):
    """Three confluent-kafka static groups, each on its own offsets partition: restarting every member
    in turn causes no rebalance in any group; a server restart on the data dir brings every group back
    (Stable, same generation and instance map) from its own partition."""
    groups = spread("roll-", 3)
    cfg = ServerConfig(port=0, data_dir=str(tmp_path / "d"), offsets_partitions=N, min_session_timeout_ms=1000,
                       initial_rebalance_delay_ms=0)
    members: dict[str, list[GroupMember]] = {}
    with ServerThread(cfg) as st:
        try:
            st.call(lambda: st.server.topics.create("roll", 4))

            def member(gid, i):
                return GroupMember("confluent", st.bootstrap, gid, "roll", f"{gid}-m{i}",
                                   name=f"{gid}-m{i}").start()

            for gid in groups:
                members[gid] = [member(gid, i) for i in range(2)]
            before = {gid: _settled(st, gid, members[gid], 4) for gid in groups}
            for gid in groups:
                assert shard_of(st, gid) == [partition_for(gid, N)]
            assert len({partition_for(g, N) for g in groups}) == 3
            for gid in groups:
                for i in range(2):
                    owned = members[gid][i].assignment
                    members[gid][i].stop()
                    members[gid][i] = member(gid, i)
                    assert members[gid][i].wait_assigned(30) == owned
            time.sleep(1.0)                      # > 3 heartbeat intervals: a rebalance would have been seen
            after = {}
            for gid in groups:
                v = group_view(st, gid)
                assert (v["state"], v["generation"]) == ("Stable", before[gid]["generation"]), gid
                assert set(v["static"].values()) == {member_id(m) for m in members[gid]}
                after[gid] = v
            for ms in members.values():
                for m in ms:
                    m.stop()
            members.clear()
            st.restart()
            for gid in groups:
                v = group_view(st, gid)
                assert (v["state"], v["generation"], v["static"]) == ("Stable", after[gid]["generation"],
                                                                      after[gid]["static"]), gid
                assert shard_of(st, gid) == [partition_for(gid, N)]
        finally:
            for ms in members.values():
                for m in ms:
                    m.stop()


def test_unload_answers_parked_requests_16_then_reload_restores_the_partition_from_its_log():
    """unload(p): the JoinGroup parked on p's shard (waiting out the initial rebalance delay) is answered
    NOT_COORDINATOR (16), p's timers are cancelled, and requests for p's groups are answered 16 while
    other partitions keep serving; reload(p) brings p's groups back from its log."""
    kept, moved = spread("ul-", 2)
    part = partition_for(moved, N)
    cfg = ServerConfig(port=0, offsets_partitions=N, initial_rebalance_delay_ms=60_000)
    with ServerThread(cfg) as st, WireClient.to(st.bootstrap) as c, WireClient.to(st.bootstrap) as parked:
        create_topic(c, "t", 1)
        for gid in (kept, moved):
            assert commit(c, gid, "", -1, None, "t", {0: 7}) == {0: 0}
        answer = {}
        joining = threading.Thread(target=lambda: answer.update(
            r=join(parked, moved, "", "i1", "t", session_ms=10_000)))
        joining.start()
        armed = lambda: st.call(lambda: [k.name for k in st.server.runtime.timers  # noqa: E731
                                         if partition_for(k.group_id, N) == part])
        wait_for(lambda: f"join/{moved}" in armed(), 10, "the JoinGroup to park")
        st.call(st.server.runtime.unload, part)
        joining.join(10)
        assert answer["r"].error_code == 16
        assert armed() == []
        assert fetch_all(c, [kept]) == {kept: {("t", 0): 7}}
        r = c.call(*fetch_request([moved, kept]))
        assert [(g.group_id, g.error_code) for g in r.groups] == [(moved, 16), (kept, 0)]
        assert commit(c, moved, "", -1, None, "t", {0: 9}) == {0: 16}
        assert st.call(lambda: st.server.runtime.group(moved)) is None
        st.call(st.server.runtime.reload, part)
        assert fetch_all(c, [moved, kept]) == {moved: {("t", 0): 7}, kept: {("t", 0): 7}}
        assert commit(c, moved, "", -1, None, "t", {0: 9}) == {0: 0}
        st.call(st.server.runtime.unload, part)
        with pytest.raises(AdminError) as refused:
            st.force_rebalance(moved)
        assert refused.value.code == 16
