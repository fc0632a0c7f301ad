"""Expire a member's session through each of the three control surfaces of one registry entry
(tenure/control/registry.py): the `ServerThread` method, the admin endpoint's
`POST /groups/{group}/members/{member}/expire`, and `tenure fault expire GROUP MEMBER` (the command line's
`main`, which calls that route). The server needs its admin endpoint (`admin_port=0`)."""
from __future__ import annotations

import contextlib
import io
import json
import urllib.parse

SURFACES = ("method", "http", "cli")


def expire(server, surface: str, group: str, member: str) -> bool:
    """Whether the member's session was expired, as the surface answers it."""
    if surface == "method":
        return server.expire_session(group, member)
    if surface == "http":
        from tests.integration.test_admin_guard import call
        q = lambda text: urllib.parse.quote(text, safe="")  # noqa: E731
        status, body = call(server.admin_port, "POST", f"/groups/{q(group)}/members/{q(member)}/expire",
                            headers={"Content-Type": "application/json"})
        assert status == 200, (status, body)
        return body["expired"]
    assert surface == "cli", surface
    from tenure.tools.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["fault", "expire", group, member, "--admin", server.server.admin_address])
    assert rc == 0, err.getvalue()
    return json.loads(out.getvalue())["expired"]
