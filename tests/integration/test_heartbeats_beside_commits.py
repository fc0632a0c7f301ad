"""Heartbeats beside commits on a server whose writes wait for durability (a data dir, `--fsync batch`).

A heartbeat writes no record: it is answered at once unless a write of its group's `__consumer_offsets` partition
still waits for durability, and then after that write (Kafka's coordinator runtime defers such a read behind its
partition's pending writes), never behind other answers waiting so (docs/benchmarks.md, hp6coord). Here
confluent-kafka (librdkafka) static members of two groups, whose groups live in different offsets partitions, commit
synchronously after every record while heartbeating every 100 ms: every heartbeat is answered NONE, every commit is
acknowledged, and the offsets the coordinator holds are each member's last acknowledged commits.
"""
from __future__ import annotations

import time

from tenure.coordinator import partition_for
from tenure.server import ServerThread
from tests.support.failover import Feeder
from tests.support.groups import GroupMember, committed_offsets, wait_for

HEARTBEAT, OFFSET_COMMIT = 12, 8
TOPIC = "hb-commits"


def test_confluent_static_members_heartbeat_while_committing_every_record(tmp_path):
    with ServerThread(port=0, data_dir=str(tmp_path / "data"), fsync="batch", offsets_partitions=4) as server:
        server.create_topics({TOPIC: 2})
        parts = server.server.runtime.partitions
        first = "hbc-a"
        second = next(g for g in (f"hbc-{i}" for i in range(100)) if partition_for(g, parts) != partition_for(first, parts))
        groups = [first, second]
        for g in groups:
            server.expect_group(g, 1)
        members = [GroupMember("confluent", server.bootstrap, g, TOPIC, f"{g}-member", heartbeat_interval_ms=100,
                               session_timeout_ms=6000, rebalance_timeout_ms=6000, commit_each_poll=True).start()
                   for g in groups]
        try:
            with Feeder(server.bootstrap, TOPIC, 2, rate=150) as feed:
                wait_for(lambda: all(m.assignment == frozenset({0, 1}) for m in members), 30,
                         "each member to own both partitions")
                time.sleep(2.5)                      # ~25 heartbeats each among their commits
                ends = feed.stop()

            def caught_up() -> bool:
                return all(_last_acked(m) == ends for m in members)
            wait_for(caught_up, 30, "every member to commit past the last record")
        finally:
            for m in members:
                m.stop()
        for m in members:
            assert not m.errors and not m.commit_errors, (m.errors, m.commit_errors)
            assert len(m.commits) >= 50
            assert committed_offsets(server, m.group) == {(TOPIC, p): o for p, o in _last_acked(m).items()}
        for g in groups:
            beats = server.requests(api=HEARTBEAT, group=g)
            commits = server.requests(api=OFFSET_COMMIT, group=g)
            assert len(beats) >= 15 and len(commits) >= 50
            assert {(e.outcome, e.error_name) for e in beats} == {("answered", "NONE")}
            assert {(e.outcome, e.error_name) for e in commits} == {("answered", "NONE")}


def _last_acked(member: GroupMember) -> dict[int, int]:
    last: dict[int, int] = {}
    for _, offsets in list(member.commits):
        for p, o in offsets.items():
            last[p] = max(last.get(p, 0), o)
    return last
