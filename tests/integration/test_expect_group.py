"""expect_group with real clients: a test that says how many members it starts gets its classic group formed
as soon as they have joined - one generation, one rebalance, no initial delay. The server's initial delay is
set to a minute here, so a group that waited for it could not be Stable within the 30 s these tests wait;
how long formation takes is measured by bench/initial_delay.py --expect, not asserted here.

Also: a member beyond the expectation joins with one more rebalance, and an expectation that is not met falls
back to the initial delay and says so in the server's log."""
from __future__ import annotations

import logging
import subprocess

import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.support.groups import GroupMember, wait_for
from tests.support.java import _tool, compile_java

pytestmark = pytest.mark.timeout(120)

MEMBERS = 4
MINUTE_MS = 60_000


def _stable_with(server, group: str, n: int):
    g = server.group(group)
    return g if g is not None and g.state == "Stable" and len(g.members) == n else None


class _Java:
    """MEMBERS classic Java consumers in one JVM (tests/java/GroupStart.java), started in a loop."""

    def __init__(self, bootstrap: str, group: str, topic: str, n: int) -> None:
        self.proc = subprocess.Popen(
            [_tool("java"), "-cp", compile_java(), "GroupStart", bootstrap, group, topic, str(n),
             "session.timeout.ms=10000", "heartbeat.interval.ms=1000", "max.poll.interval.ms=30000"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def _start(client: str, bootstrap: str, group: str, topic: str, n: int, prefix: str = "m"):
    if client == "java":
        return [_Java(bootstrap, group, topic, n)]
    return [GroupMember(client, bootstrap, group, topic, name=f"{prefix}{i}", heartbeat_interval_ms=1000,
                        session_timeout_ms=10000, rebalance_timeout_ms=30000).start() for i in range(n)]


@pytest.mark.parametrize("client", ["java", "confluent", "kafka-python", "aiokafka"])
def test_a_group_with_an_expectation_forms_in_one_generation_without_the_initial_delay(client):
    with ServerThread(ServerConfig(port=0, initial_rebalance_delay_ms=MINUTE_MS)) as server:
        server.create_topics({"orders": MEMBERS})
        server.expect_group("g", MEMBERS)
        members = _start(client, server.bootstrap, "g", "orders", MEMBERS)
        try:
            g = wait_for(lambda: _stable_with(server, "g", MEMBERS), 30,
                         f"{MEMBERS} {client} members Stable well before the one-minute initial delay")
            assert (g.generation, g.rebalances) == (1, 1), g
            assert sorted(p for m in g.members for p in m.assignment.get("orders", [])) == list(range(MEMBERS))
        finally:
            for m in members:
                m.stop()


def test_a_member_beyond_the_expectation_joins_with_one_more_rebalance():
    with ServerThread(ServerConfig(port=0, initial_rebalance_delay_ms=MINUTE_MS)) as server:
        server.create_topics({"orders": 3})
        server.expect_group("g", 2)
        members = _start("confluent", server.bootstrap, "g", "orders", 2)
        late = []
        try:
            g = wait_for(lambda: _stable_with(server, "g", 2), 30, "2 members Stable")
            assert (g.generation, g.rebalances) == (1, 1), g
            late = _start("confluent", server.bootstrap, "g", "orders", 1, prefix="late")
            g = wait_for(lambda: _stable_with(server, "g", 3), 30, "the third member in a Stable group")
            assert (g.generation, g.rebalances) == (2, 2), g
            assert sorted(p for m in g.members for p in m.assignment.get("orders", [])) == [0, 1, 2]
        finally:
            for m in members + late:
                m.stop()


def test_an_expectation_not_met_falls_back_to_the_initial_delay_and_says_so(caplog):
    caplog.set_level(logging.INFO, logger="tenure.coordinator")
    with ServerThread(ServerConfig(port=0, initial_rebalance_delay_ms=1500)) as server:
        server.create_topics({"orders": 2})
        server.expect_group("g", 3)
        members = _start("confluent", server.bootstrap, "g", "orders", 2)
        try:
            g = wait_for(lambda: _stable_with(server, "g", 2), 30, "the 2 members that came Stable")
            assert g.generation == 1, g
            assert any("group g: expected 3 member(s), 2 joined within the initial rebalance delay" in r.getMessage()
                       for r in caplog.records), [r.getMessage() for r in caplog.records]
        finally:
            for m in members:
                m.stop()


def test_expect_group_through_the_admin_endpoint_and_its_refusals():
    import json
    import urllib.error
    import urllib.request
    with ServerThread(ServerConfig(port=0, admin_port=0)) as server:
        def post(body: bytes) -> tuple[int, dict]:
            req = urllib.request.Request(f"http://127.0.0.1:{server.admin_port}/groups/g/expect", data=body,
                                         method="POST", headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())

        assert post(b'{"members": 4}') == (200, {"group": "g", "members": 4})
        assert server.call(lambda: dict(server.server.runtime.expectations)) == {"g": 4}
        for bad in (b'{"members": 0}', b'{"members": -3}', b'{"members": "4"}', b'{"members": true}'):
            status, body = post(bad)
            assert status == 400 and body["message"].startswith("members: "), (bad, status, body)
        assert post(b'{"members": null}') == (200, {"group": "g", "members": None})
        assert server.call(lambda: dict(server.server.runtime.expectations)) == {}
