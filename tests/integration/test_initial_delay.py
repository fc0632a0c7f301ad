"""The server's default initial rebalance delay, with a real client: consumers a test starts together in a
loop form their group in ONE generation (no member sees a revocation), and a member that joins the formed
group later causes exactly one more rebalance (the delay applies to a group's first rebalance only).

The default is chosen by bench/initial_delay.py (docs/benchmarks.md); this test runs with it, not with an
explicit value, so that a change of the default that breaks the promise fails here.
"""
from __future__ import annotations

import time

import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tests.support.groups import GroupMember, wait_for

pytestmark = pytest.mark.timeout(120)

MEMBERS = 6


def _stable_with(server, group: str, n: int):
    g = server.group(group)
    return g if g is not None and g.state == "Stable" and len(g.members) == n else None


def test_confluent_consumers_started_in_a_loop_form_in_one_generation_and_a_late_joiner_rebalances_once():
    with ServerThread(ServerConfig(port=0)) as server:
        server.call(lambda: server.server.topics.create("orders", MEMBERS + 1))
        members = [GroupMember("confluent", server.bootstrap, "g", "orders", name=f"c{i}",
                               heartbeat_interval_ms=1000).start() for i in range(MEMBERS)]
        late = None
        try:
            g = wait_for(lambda: _stable_with(server, "g", MEMBERS), 60, f"{MEMBERS} members Stable")
            assert (g.generation, g.rebalances) == (1, 1), g
            for m in members:
                m.wait_assigned(30)
            assert sorted(p for m in members for p in m.assignment) == list(range(MEMBERS + 1))
            for m in members:                             # one assignment each, nothing revoked
                assert [kind for kind, _ in m.events_copy()] == ["assign"], (m.name, m.events_copy())

            late = GroupMember("confluent", server.bootstrap, "g", "orders", name="late",
                               heartbeat_interval_ms=1000).start()
            g = wait_for(lambda: _stable_with(server, "g", MEMBERS + 1), 60, "the late joiner in a Stable group")
            late.wait_assigned(30)
            time.sleep(1.5)                               # no further rebalance follows
            g = server.group("g")
            assert (g.state, g.generation, g.rebalances) == ("Stable", 2, 2), g
            assert all(m.crash is None for m in members + [late])
        finally:
            for m in members + ([late] if late else []):
                m.stop()
