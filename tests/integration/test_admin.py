"""The HTTP admin endpoint and `tenure groups ...`: inspect a static group held by real consumers and force
one rebalance of it (the KIP-345 draft's forceStaticRebalance), with its refusals."""
from __future__ import annotations

import json
import urllib.request

import pytest

from tenure.config import ServerConfig
from tenure.server import ServerThread
from tenure.tools.cli import main
from tests.support.groups import GroupMember, group_view, member_id, wait_for

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def server():
    with ServerThread(ServerConfig(port=0, admin_port=0, min_session_timeout_ms=1000)) as s:
        s.admin = f"127.0.0.1:{s.server.admin_port}"
        yield s


def get(s, path):
    with urllib.request.urlopen(f"http://{s.admin}{path}", timeout=10) as r:
        return json.loads(r.read())


def test_inspect_and_force_rebalance_a_static_group(server, capsys):
    server.call(lambda: server.server.topics.create("adm-t", 4))
    members = [GroupMember("confluent", server.bootstrap, "adm-g", "adm-t", f"s{i}",
                           session_timeout_ms=6000).start() for i in range(2)]
    try:
        # the first member may hold all four partitions until the second joins: wait for the split
        wait_for(lambda: (group_view(server, "adm-g") or {}).get("state") == "Stable"
                 and len(group_view(server, "adm-g")["members"]) == 2
                 and all(m.assignment for m in members)
                 and sum(len(m.assignment) for m in members) == 4, 30, "a stable group of two")
        before = [m.assignment for m in members]
        assert get(server, "/health") == {"status": "ok"}
        g = get(server, "/groups/adm-g")
        gen = g["generation"]
        assert g["state"] == "Stable" and g["kind"] == "classic" and g["protocol"] == "range"
        assert {m["group_instance_id"]: m["member_id"] for m in g["members"]} == g["static_members"] == \
            {"s0": member_id(members[0]), "s1": member_id(members[1])}
        by_instance = {m["group_instance_id"]: m["assignment"] for m in g["members"]}
        assert by_instance == {f"s{i}": {"adm-t": sorted(before[i])} for i in range(2)}
        assert [x["group_id"] for x in get(server, "/groups")] == ["adm-g"]

        assert main(["groups", "--admin", server.admin, "list"]) == 0
        assert g["rebalances"] == server.rebalances("adm-g") >= 1
        header, row = capsys.readouterr().out.splitlines()
        assert header.split() == ["GROUP", "KIND", "STATE", "GENERATION", "#MEMBERS", "#STATIC", "REBALANCES"]
        assert row.split() == ["adm-g", "classic", "Stable", str(gen), "2", "2", str(g["rebalances"])]
        assert row.index("Stable") == header.index("STATE") and row.index(str(gen)) == header.index("GENERATION")
        for m in members:
            m.clear_events()
        assert main(["groups", "--admin", server.admin, "force-rebalance", "adm-g"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out == {"group": "adm-g", "state": "PreparingRebalance", "generation": gen}
        # exactly one rebalance: both members rejoin, generation + 1, same members, same partitions
        wait_for(lambda: group_view(server, "adm-g")["state"] == "Stable", 30, "the forced rebalance to end")
        after = group_view(server, "adm-g")
        assert after["generation"] == gen + 1
        assert after["static"] == {"s0": member_id(members[0]), "s1": member_id(members[1])}
        wait_for(lambda: all(m.assignment == before[i] for i, m in enumerate(members)), 30, "reassignment")

        # refusals: already rebalancing is covered by the coordinator tests; here unknown and dynamic
        assert main(["groups", "--admin", server.admin, "force-rebalance", "nope"]) == 1
        assert "GROUP_ID_NOT_FOUND (69)" in capsys.readouterr().err
        assert main(["groups", "--admin", server.admin, "describe", "nope"]) == 1
        assert "GROUP_ID_NOT_FOUND" in capsys.readouterr().err
        assert main(["groups", "--admin", server.admin, "describe", "adm-g"]) == 0
        assert json.loads(capsys.readouterr().out)["generation"] == gen + 1
    finally:
        for m in members:
            m.stop()


def test_force_rebalance_is_refused_for_a_group_with_dynamic_members(server, capsys):
    server.call(lambda: server.server.topics.create("dyn-t", 2))
    m = GroupMember("confluent", server.bootstrap, "dyn-g", "dyn-t", None).start()
    try:
        m.wait_assigned(30)
        gen = group_view(server, "dyn-g")["generation"]
        assert main(["groups", "--admin", server.admin, "force-rebalance", "dyn-g"]) == 1
        err = capsys.readouterr().err
        assert "INVALID_REQUEST (42)" in err and "dynamic members" in err
        assert group_view(server, "dyn-g")["generation"] == gen
    finally:
        m.stop()


def test_groups_command_without_a_server_says_so(capsys):
    assert main(["groups", "--admin", "127.0.0.1:9", "list"]) == 1
    assert "cannot reach the admin endpoint at 127.0.0.1:9" in capsys.readouterr().err


def test_clock_advance_names_the_timers_it_fired_as_the_docs_do(server):
    """POST /clock/advance answers {"fired": ["heartbeat/<group>/<member>", ...]}: slash-separated names,
    whatever the group id holds (here a "/")."""
    server.call(lambda: server.server.topics.create("adv-t", 1))
    m = GroupMember("confluent", server.bootstrap, "shop/eu", "adv-t", "w2", session_timeout_ms=6000).start()
    try:
        wait_for(lambda: m.assignment, 30, "a member")
        mid = server.group("shop/eu").static_members["w2"]
        m.stop()
        req = urllib.request.Request(f"http://{server.admin}/clock/advance", data=json.dumps({"ms": 7000}).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            fired = json.loads(r.read())["fired"]
        assert f"heartbeat/shop/eu/{mid}" in fired
        assert not any("\x00" in k for k in fired)
        assert server.group("shop/eu").static_members == {}
    finally:
        m.stop()
