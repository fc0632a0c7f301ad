"""The cluster table (broker/cluster.py): placement, ISR, leader epochs, moves and the leader checks."""
from __future__ import annotations

import pytest

from tenure.broker.cluster import NO_LEADER, BrokerNode, Cluster, place, rack_alternated
from tenure.protocol.errors import ErrorCode as E


class _Logs:
    """The partitions' facts the cluster table reads (the replica manager's, in the server)."""

    def __init__(self, end=lambda t, p: 0, epoch=lambda t, p: 0):
        self.log_end_offset, self.last_epoch = end, epoch


def test_placement_is_round_robin_with_distinct_replicas_and_leaders_spread():
    c = Cluster(3)
    states = [c.state("t", p) for p in range(6)]
    for st in states:
        assert len(st.replicas) == 3 == len(set(st.replicas)) and st.isr == st.replicas
        assert st.leader == st.replicas[0] and st.leader_epoch == 0
    assert sorted(st.leader for st in states) == [0, 0, 1, 1, 2, 2]       # round robin over the brokers
    assert [c.state("t", p).replicas for p in range(6)] == [s.replicas for s in states]   # stable
    assert Cluster(3).state("t", 4).replicas == states[4].replicas                    # the same in every run


def test_replication_factor_defaults_to_min_3_and_n_and_one_broker_leads_all_at_epoch_0():
    assert Cluster(5).replication_factor == 3 and Cluster(2).replication_factor == 2
    one = Cluster(1)
    assert [one.state("t", p).replicas for p in range(3)] == [[0]] * 3
    assert {one.leader_of("t", p) for p in range(3)} == {0} and one.state("t", 2).leader_epoch == 0


def test_rack_aware_placement_puts_each_replica_on_another_rack():
    racks = ("a", "a", "b", "b", "c", "c")
    c = Cluster(6, racks=racks)
    assert rack_alternated([BrokerNode(i, "h", 0, r) for i, r in enumerate(racks)]) == [0, 2, 4, 1, 3, 5]
    leaders = []
    for p in range(12):
        st = c.state("orders", p)
        assert len({racks[b] for b in st.replicas}) == 3, st.replicas
        leaders.append(st.leader)
    assert sorted(set(leaders)) == list(range(6))
    # fewer racks than replicas: racks repeat only once every rack has one
    two = [BrokerNode(i, "h", 0, r) for i, r in enumerate(("x", "y", "x", "y"))]
    for p in range(8):
        replicas = place("t", p, two, 3)
        assert len(set(replicas)) == 3 and {two[b].rack for b in replicas} == {"x", "y"}


def test_stopping_a_leader_moves_leadership_to_an_in_sync_replica_and_bumps_the_epoch():
    c = Cluster(3)
    ends = {}
    c.storage = _Logs(end=lambda t, p: ends.get((t, p), 0))
    st = c.state("t", 0)
    ends[("t", 0)] = 5
    old, replicas = st.leader, list(st.replicas)
    seen = []
    c.on_leader_change.append(lambda change, cause: seen.append((change, cause)))
    changes = c.stop(old)
    assert [(ch.old, ch.new, ch.epoch) for ch in changes] == [(old, replicas[1], 1)]
    assert seen[0][1] == "broker_stopped"
    assert st.leader == replicas[1] and st.leader_epoch == 1 and old not in st.isr
    assert st.epochs == [(0, 0), (1, 5)]
    assert c.controller_id == min(b for b in range(3) if b != old)
    assert c.start(old) == [] and old in st.isr and st.leader == replicas[1]     # back in sync, not leading
    ch = c.move_leader("t", 0, old)
    assert (ch.new, ch.epoch, st.leader) == (old, 2, old)
    assert c.move_leader("t", 0, old) is None                                   # leads already: no change


def test_a_partition_whose_only_replica_stops_has_no_leader_until_it_starts():
    c = Cluster(2, replication_factor=1)
    st = c.state("t", 0)
    only = st.leader
    c.stop(only)
    assert st.leader == NO_LEADER and st.isr == [only] and st.leader_epoch == 1
    assert c.check("t", 0, broker=only) == E.LEADER_NOT_AVAILABLE
    c.start(only)
    assert st.leader == only and st.leader_epoch == 2
    with pytest.raises(ValueError, match="stopped"):
        c.stop(1 - only) or c.move_leader("t", 0, 1 - only)
    with pytest.raises(ValueError, match="no broker 7"):
        c.stop(7)


def test_check_answers_in_kafkas_order_epoch_first_then_leadership():
    c = Cluster(4, replication_factor=2)
    st = c.state("t", 0)
    leader, follower = st.replicas
    stranger = next(b for b in range(4) if b not in st.replicas)
    assert c.check("t", 0, broker=leader) == 0 and c.check("t", 0, 0, broker=leader) == 0
    assert c.check("t", 0, broker=stranger) == E.NOT_LEADER_OR_FOLLOWER
    assert c.check("t", 0, 5, broker=stranger) == E.NOT_LEADER_OR_FOLLOWER    # no replica: epoch unknown there
    assert c.check("t", 0, broker=follower) == E.NOT_LEADER_OR_FOLLOWER
    c.move_leader("t", 0, follower)
    assert c.check("t", 0, 0, broker=follower) == E.FENCED_LEADER_EPOCH        # the client's metadata is old
    assert c.check("t", 0, 0, broker=leader) == E.FENCED_LEADER_EPOCH
    assert c.check("t", 0, 2, broker=follower) == E.UNKNOWN_LEADER_EPOCH       # newer than the broker knows
    assert c.check("t", 0, 1, broker=leader) == E.NOT_LEADER_OR_FOLLOWER
    assert c.check("t", 0, 1, broker=follower) == 0
    assert c.check("t", 0, 1) == 0                                             # no broker: no leader check


def test_the_epoch_cache_answers_offsets_for_leader_epoch_as_kafka():
    c = Cluster(3)
    end = [0]
    c.storage = _Logs(end=lambda t, p: end[0])
    st = c.state("t", 0)
    end[0] = 10
    c.move_leader("t", 0, st.replicas[1])         # epoch 1 starts at 10
    end[0] = 25
    c.move_leader("t", 0, st.replicas[2])         # epoch 2 starts at 25
    assert st.end_offset_for(0, 40) == (0, 10)
    assert st.end_offset_for(1, 40) == (1, 25)
    assert st.end_offset_for(2, 40) == (2, 40)    # the latest: the log end
    assert st.end_offset_for(3, 40) == (-1, -1) and st.end_offset_for(-1, 40) == (-1, -1)


def test_a_deleted_topic_is_placed_afresh():
    c = Cluster(3)
    c.move_leader("t", 0, (c.leader_of("t", 0) + 1) % 3)
    assert c.state("t", 0).leader_epoch == 1
    c.forget("t")
    assert c.state("t", 0).leader_epoch == 0


def test_a_partition_placed_on_a_log_from_a_previous_run_goes_on_from_its_last_epoch():
    c = Cluster(3)
    c.storage = _Logs(end=lambda t, p: 30, epoch=lambda t, p: 4)     # 4: the epoch of the log's last batch
    st = c.state("t", 0)
    assert (st.leader_epoch, st.epochs) == (4, [(4, 30)])
    # an epoch of the previous run ends no earlier than where this run found the log
    assert st.end_offset_for(2, 30) == (2, 30) and st.end_offset_for(4, 42) == (4, 42)
