"""Inspection and admin operations as plain data, and the HTTP admin endpoint that serves them.

`groups_view(server)` / `group_view(server, id)` read the coordinator's state (on the server's loop) into
plain dicts: what a test or an operator asks ("which member holds which partitions, what generation").
`serve_admin(server, host, port)` exposes them over HTTP/JSON (aiohttp, imported only when the
endpoint is on):

    GET  /health                          {"status": "ok"}
    GET  /groups                          [group, ...]
    GET  /groups/{group}                  group, or 404
    POST /groups/{group}/force-rebalance  {"group": ..., "generation": ...} or 404/409 with the Kafka error

`tenure groups list|describe|force-rebalance --admin HOST:PORT` is the command-line client.
"""
from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request

from tenure.coordinator.classic import AdminError
from tenure.protocol.errors import ErrorCode

log = logging.getLogger("tenure.admin")


def _assignment(raw: bytes) -> dict[str, list[int]] | None:
    """The consumer protocol's assignment as {topic: partitions}; None if not that protocol."""
    if not raw:
        return {}
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
    try:
        a = ConsumerProtocolAssignment.decode(bytes(raw))
        return {t.topic: sorted(t.partitions) for t in a.assigned_partitions}
    except Exception:
        return None


def group_view(server, group_id: str) -> dict | None:
    g = server.coordinator.groups.get(group_id)
    if g is None:
        return None
    offsets = server.coordinator.offsets.get(group_id, {})
    members = []
    for m in g.members.values():
        members.append({
            "member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
            "client_host": m.client_host, "session_timeout_ms": m.session_timeout_ms,
            "rebalance_timeout_ms": m.rebalance_timeout_ms,
            "assignment": _assignment(m.assignment), "assignment_bytes": len(m.assignment or b""),
        })
    return {
        "group_id": g.group_id, "kind": g.kind, "state": g.state, "generation": g.generation,
        "protocol_type": g.protocol_type, "protocol": g.protocol_name, "leader": g.leader_id,
        "members": members, "static_members": dict(g.static_members),
        "offsets": [{"topic": t, "partition": p, "offset": r.offset, "metadata": r.metadata,
                     "commit_timestamp": r.commit_timestamp} for (t, p), r in sorted(offsets.items())],
    }


def groups_view(server) -> list[dict]:
    return [group_view(server, gid) for gid in sorted(server.coordinator.groups)]


def force_rebalance(server, group_id: str) -> dict:
    server.force_rebalance(group_id)
    g = server.coordinator.groups[group_id]
    return {"group": group_id, "state": g.state, "generation": g.generation}


async def serve_admin(server, host: str, port: int):
    """Start the HTTP admin endpoint on the server's loop; returns (runner, bound port)."""
    from aiohttp import web

    async def health(request):
        return web.json_response({"status": "ok"})

    async def groups(request):
        return web.json_response(groups_view(server))

    async def group(request):
        view = group_view(server, request.match_info["group"])
        if view is None:
            return web.json_response({"error": "GROUP_ID_NOT_FOUND", "code": int(ErrorCode.GROUP_ID_NOT_FOUND),
                                      "message": f"group {request.match_info['group']!r} is unknown"}, status=404)
        return web.json_response(view)

    async def force(request):
        gid = request.match_info["group"]
        try:
            return web.json_response(force_rebalance(server, gid))
        except AdminError as exc:
            status = 404 if exc.code == ErrorCode.GROUP_ID_NOT_FOUND else 409
            return web.json_response({"error": ErrorCode(exc.code).name, "code": int(exc.code),
                                      "message": str(exc)}, status=status)

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/groups", groups)
    app.router.add_get("/groups/{group}", group)
    app.router.add_post("/groups/{group}/force-rebalance", force)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]
    return runner, bound


# ---------------------------------------------------------------------- command-line client
def request(admin: str, method: str, path: str) -> tuple[int, object]:
    url = f"http://{admin}{path}"
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def add_parser(sub) -> None:
    p = sub.add_parser("groups", help="inspect groups or force a rebalance through a server's admin endpoint")
    p.add_argument("--admin", default="127.0.0.1:9644", help="the server's --admin-port address "
                   "(default 127.0.0.1:9644)")
    gsub = p.add_subparsers(dest="groups_command", required=True)
    gsub.add_parser("list", help="one line per group: id, state, generation, members")
    d = gsub.add_parser("describe", help="one group as JSON")
    d.add_argument("group")
    f = gsub.add_parser("force-rebalance", help="start one rebalance of a static group now "
                        "(KIP-345 draft forceStaticRebalance)")
    f.add_argument("group")


def run(args) -> int:
    import sys
    try:
        if args.groups_command == "list":
            status, body = request(args.admin, "GET", "/groups")
            for g in body:
                static = sum(1 for m in g["members"] if m["group_instance_id"] is not None)
                print(f"{g['group_id']}\t{g['state']}\tgeneration {g['generation']}\t"
                      f"{len(g['members'])} member(s), {static} static")
            return 0
        path = "/groups/" + urllib.request.quote(args.group, safe="")
        if args.groups_command == "describe":
            status, body = request(args.admin, "GET", path)
        else:
            status, body = request(args.admin, "POST", path + "/force-rebalance")
    except (urllib.error.URLError, OSError) as exc:
        print(f"tenure: cannot reach the admin endpoint at {args.admin}: {exc}", file=sys.stderr)
        return 1
    if status != 200:
        print(f"tenure: {body.get('error')} ({body.get('code')}): {body.get('message')}", file=sys.stderr)
        return 1
    print(json.dumps(body, indent=2))
    return 0
