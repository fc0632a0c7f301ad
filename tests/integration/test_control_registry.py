"""One registry of controls (tenure/control/registry.py): every control is a ServerThread method, an admin
route listed by `GET /`, and a `tenure groups/fault` subcommand - all derived from its one entry - and the
three give the same answer for the same call."""
from __future__ import annotations

import json

import pytest

from tenure.config import ServerConfig
from tenure.control.registry import CONTROLS
from tenure.server import ServerThread
from tenure.tools.cli import _parser, main
from tests.support.groupwire import join
from tests.support.wire import WireClient

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def server():
    with ServerThread(ServerConfig(port=0, admin_port=0, initial_rebalance_delay_ms=0)) as s:
        yield s


def test_every_control_is_a_method_a_route_and_a_subcommand(server):
    from tests.integration.test_admin_guard import call
    _, index = call(server.admin_port, "GET", "/")
    routes = {(e["method"], e["path"]): e["description"] for e in index["endpoints"]}
    parser = _parser()
    for control in CONTROLS:
        assert routes[(control.method, control.path)] == control.summary
        if control.thread:
            assert callable(getattr(server, control.name)), control.name
        for cli in control.cli:
            argv = [cli.group, cli.command] + ["1" for a in (cli.args if cli.args is not None else control.args)
                                               if a.required and a.name not in cli.fixed]
            assert parser.parse_args(argv).control == (cli, control), argv
    assert set(routes) - {(c.method, c.path) for c in CONTROLS} == {("GET", "/"), ("GET", "/health"),
                                                                    ("GET", "/metrics")}


@pytest.mark.parametrize("kind", ("classic", "consumer"))
def test_a_control_answers_alike_as_method_route_and_subcommand(server, capsys, kind):
    gid = f"reg-{kind}"
    if kind == "classic":
        with WireClient.to(server.bootstrap) as c:
            assert join(c, gid, "", "i-1", "t", session_ms=30000).error_code == 0
    else:
        from tests.integration.test_consumer_protocol import raw_join
        raw_join(server.bootstrap, gid, "t", "i-1")
    server.wait_for_group(gid, state=None, members=1)
    method = server.group(gid).to_dict()
    assert method["kind"] == kind and list(method["static_members"]) == ["i-1"]
    assert main(["groups", "describe", gid, "--admin", server.server.admin_address]) == 0
    assert json.loads(capsys.readouterr().out) == method == server.group(gid).to_dict()
    assert main(["fault", "expire", gid, "nobody", "--admin", server.server.admin_address]) == 1
    assert "UNKNOWN_MEMBER_ID" in capsys.readouterr().err
    assert server.expire_session(gid, "nobody") is False


@pytest.mark.parametrize("kind", ("classic", "consumer"))
def test_force_rebalance_and_coordinator_of_on_either_kind(server, capsys, kind):
    """force_rebalance starts one rebalance of a classic group; a consumer group's assignment follows its
    members, so it is refused with INVALID_REQUEST (42) and a message saying so, on every surface, and the
    group is left as it was. coordinator_of answers alike for both kinds."""
    from tenure.protocol.errors import AdminError
    from tests.integration.test_admin_guard import call
    gid = f"fr-{kind}"
    if kind == "classic":
        from tests.support.groupwire import sync
        with WireClient.to(server.bootstrap) as c:
            j = join(c, gid, "", "i-1", "t", session_ms=30000)
            assert j.error_code == 0
            assert sync(c, gid, j.member_id, j.generation_id, "i-1", assignments={}).error_code == 0
    else:
        from tests.integration.test_consumer_protocol import raw_join
        raw_join(server.bootstrap, gid, "t", "i-1")
    server.wait_for_group(gid, state=None, members=1)
    before = server.group(gid)
    admin = server.server.admin_address
    status, body = call(server.admin_port, "GET", f"/coordinators/{gid}")
    assert status == 200 and body["group"] == gid and body["broker"] == 0
    if kind == "classic":
        assert main(["groups", "force-rebalance", gid, "--admin", admin]) == 0
        assert json.loads(capsys.readouterr().out)["state"] == "PreparingRebalance"
        return
    with pytest.raises(AdminError) as exc:
        server.force_rebalance(gid)
    assert exc.value.code == 42 and "consumer group" in str(exc.value)
    status, body = call(server.admin_port, "POST", f"/groups/{gid}/force-rebalance",
                        headers={"Content-Type": "application/json"})
    assert status == 409 and (body["error"], body["code"]) == ("INVALID_REQUEST", 42), body
    assert main(["groups", "force-rebalance", gid, "--admin", admin]) == 1
    assert "INVALID_REQUEST (42)" in capsys.readouterr().err
    after = server.group(gid)
    assert (after.generation, after.state, after.rebalances) == (before.generation, before.state, before.rebalances)
