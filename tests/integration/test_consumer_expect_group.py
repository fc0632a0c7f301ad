"""expect_group on KIP-848 consumer groups with real clients (`group.protocol=consumer`): Java kafka-clients 4.3
and confluent-kafka 2.16. With an expectation of N, the target assignment is computed once, when the N-th
member has joined, so four members subscribing together to 12 partitions each take their final three with no
revoke callback at all, and the group epoch is one bump per member. The server's initial rebalance delay is a
minute here, so a group that waited for it to end the hold could not settle within these tests' waits.

Also: too few members fall back when the initial rebalance delay ends (short here) and the log says so; a
member beyond the expectation joins with one more epoch bump. How long settling takes is measured by
bench/settle_time.py --expect, not asserted here."""
from __future__ import annotations

import logging

import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.support.consumer_groups import ConfluentGroup, Tracker, holds_shares, start
from tests.support.groups import wait_for

pytestmark = pytest.mark.timeout(150)

PARTITIONS = 12
MINUTE_MS = 60_000


def _settled(server, tracker: Tracker, n: int) -> bool:
    return not tracker.errors and holds_shares(server, "g", n, tracker.view()[0], PARTITIONS)


@pytest.mark.parametrize("client", [pytest.param("java", marks=pytest.mark.java), "confluent"])
def test_four_members_with_an_expectation_take_their_shares_with_no_revocation(client):
    with ServerThread(ServerConfig(port=0, initial_rebalance_delay_ms=MINUTE_MS)) as server:
        server.create_topics({"orders": PARTITIONS})
        server.expect_group("g", 4)
        tracker = Tracker(4)
        members = start(client, server.bootstrap, "g", "orders", 4, tracker)
        try:
            wait_for(lambda: _settled(server, tracker, 4) or tracker.errors, 60,
                     f"4 {client} members holding 3 partitions each, well before the one-minute delay")
            assert tracker.errors == []
            assert tracker.revocations() == []
            assert sorted(tracker.assigned_partitions()) == list(range(PARTITIONS))   # each partition once
            assert server.group("g").generation == 4                                  # one bump per member
        finally:
            members.stop()


def test_fewer_members_than_expected_get_their_shares_when_the_delay_ends_and_the_log_says_so(caplog):
    caplog.set_level(logging.INFO, logger="tenure.coordinator")
    with ServerThread(ServerConfig(port=0, initial_rebalance_delay_ms=1500)) as server:
        server.create_topics({"orders": PARTITIONS})
        server.expect_group("g", 4)
        tracker = Tracker(3)
        members = ConfluentGroup(server.bootstrap, "g", "orders", 3, tracker)
        try:
            wait_for(lambda: _settled(server, tracker, 3), 60, "3 members of an expected 4 holding their shares")
            assert tracker.errors == [] and tracker.revocations() == []
            assert any("expected 4 member(s), 3 joined within the initial rebalance delay (1500 ms)" in r.getMessage()
                       for r in caplog.records), [r.getMessage() for r in caplog.records]
        finally:
            members.stop()


def test_a_member_beyond_the_expectation_joins_with_one_more_epoch_bump():
    with ServerThread(ServerConfig(port=0, initial_rebalance_delay_ms=MINUTE_MS)) as server:
        server.create_topics({"orders": PARTITIONS})
        server.expect_group("g", 2)
        tracker = Tracker(3)
        first = ConfluentGroup(server.bootstrap, "g", "orders", 2, tracker)
        late = None
        try:
            wait_for(lambda: holds_shares(server, "g", 2, tracker.view()[0][:2], PARTITIONS), 60, "2 members settled")
            assert server.group("g").generation == 2 and tracker.revocations() == []
            late = ConfluentGroup(server.bootstrap, "g", "orders", 1, tracker, first=2)
            wait_for(lambda: _settled(server, tracker, 3), 60, "3 members holding 4 partitions each")
            assert server.group("g").generation == 3
            assert tracker.errors == []
        finally:
            for m in (late, first):
                if m is not None:
                    m.stop()


@pytest.mark.tenure(groups={"g": 3}, topics={"orders": PARTITIONS}, initial_rebalance_delay_ms=MINUTE_MS)
def test_the_marker_holds_a_consumer_group_for_its_members(tenure_server):
    tracker = Tracker(3)
    members = ConfluentGroup(tenure_server.bootstrap, "g", "orders", 3, tracker)
    try:
        wait_for(lambda: _settled(tenure_server, tracker, 3), 60, "3 members holding 4 partitions each")
        assert tracker.revocations() == [] and tenure_server.group("g").generation == 3
    finally:
        members.stop()


def test_the_admin_endpoint_holds_a_consumer_group_for_its_members():
    import json
    import urllib.request
    with ServerThread(ServerConfig(port=0, admin_port=0, initial_rebalance_delay_ms=MINUTE_MS)) as server:
        server.create_topics({"orders": PARTITIONS})
        req = urllib.request.Request(f"http://127.0.0.1:{server.admin_port}/groups/g/expect",
                                     data=json.dumps({"members": 2}).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert json.loads(r.read()) == {"group": "g", "members": 2}
        tracker = Tracker(2)
        members = ConfluentGroup(server.bootstrap, "g", "orders", 2, tracker)
        try:
            wait_for(lambda: _settled(server, tracker, 2), 60, "2 members holding 6 partitions each")
            assert tracker.revocations() == [] and server.group("g").generation == 2
        finally:
            members.stop()
