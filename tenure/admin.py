"""The HTTP admin endpoint (`--admin-port`): inspection, fault injection and metrics, as JSON.

    GET    /health                                    {"status": "ok"}
    GET    /metrics                                   Prometheus text exposition (tenure/metrics.py)
    GET    /groups                                    [group, ...]      (tenure/views.py, as dicts)
    GET    /groups/{group}                            group, or 404
    POST   /groups/{group}/force-rebalance            {"group", "state", "generation"}, or 404/409
    POST   /groups/{group}/members/{member}/expire    expire a session now (member id or instance id)
    GET    /faults                                    the fault rules left [rule, ...]
    POST   /faults                                    {"action": "fail"|"close"|"delay", "api": "JoinGroup"|"*",
                                                       "error": "NOT_COORDINATOR"|16, "ms": 100, "count": 2}
    DELETE /faults[?api=JoinGroup]                    remove rules: {"removed": n}
    POST   /clock/advance                             {"ms": 30000} -> {"fired": [timer names]}
    POST   /restart                                   restart on the same data dir and ports (202)

Errors are JSON {"error": NAME, "code": kafka code, "message": ...} with 400/404/409.
`tenure groups ...` and `tenure fault ...` are the command-line clients.
"""
from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request

from tenure.coordinator.classic import AdminError
from tenure.protocol.errors import ErrorCode

from .metrics import render as render_metrics
from .views import group_view as _group_view

log = logging.getLogger("tenure.admin")


def group_view(server, group_id: str) -> dict | None:
    view = _group_view(server, group_id)
    return None if view is None else view.to_dict()


def groups_view(server) -> list[dict]:
    return [v.to_dict() for v in server.groups()]


def force_rebalance(server, group_id: str) -> dict:
    server.force_rebalance(group_id)
    g = server.coordinator.groups[group_id]
    return {"group": group_id, "state": g.state, "generation": g.generation}


async def serve_admin(server, host: str, port: int):
    """Start the HTTP admin endpoint on the server's loop; returns (runner, bound port)."""
    from aiohttp import web

    def error(status: int, code: int, message: str):
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = str(code)
        return web.json_response({"error": name, "code": int(code), "message": message}, status=status)

    async def body(request) -> dict:
        if not request.can_read_body:
            return {}
        try:
            data = await request.json()
        except ValueError as exc:
            raise web.HTTPBadRequest(text=json.dumps({"error": "INVALID_REQUEST", "code": 42,
                                                      "message": f"body is not JSON: {exc}"}),
                                     content_type="application/json")
        if not isinstance(data, dict):
            raise web.HTTPBadRequest(text=json.dumps({"error": "INVALID_REQUEST", "code": 42,
                                                      "message": "body must be a JSON object"}),
                                     content_type="application/json")
        return data

    async def health(request):
        return web.json_response({"status": "ok"})

    async def metrics(request):
        return web.Response(body=render_metrics(server), content_type="text/plain", charset="utf-8",
                            headers={"X-Prometheus-Format": "0.0.4"})

    async def groups(request):
        return web.json_response(groups_view(server))

    async def group(request):
        view = group_view(server, request.match_info["group"])
        if view is None:
            return error(404, ErrorCode.GROUP_ID_NOT_FOUND, f"group {request.match_info['group']!r} is unknown")
        return web.json_response(view)

    async def force(request):
        gid = request.match_info["group"]
        try:
            return web.json_response(force_rebalance(server, gid))
        except AdminError as exc:
            return error(404 if exc.code == ErrorCode.GROUP_ID_NOT_FOUND else 409, exc.code, str(exc))

    async def expire(request):
        gid, member = request.match_info["group"], request.match_info["member"]
        g = server.coordinator.groups.get(gid)
        if g is None:
            return error(404, ErrorCode.GROUP_ID_NOT_FOUND, f"group {gid!r} is unknown")
        if g.static_members.get(member, member) not in g.members:
            return error(404, ErrorCode.UNKNOWN_MEMBER_ID, f"group {gid!r} has no member or instance {member!r}")
        expired = server.expire_session(gid, member)
        return web.json_response({"group": gid, "member": member, "expired": expired,
                                  "generation": server.coordinator.groups[gid].generation
                                  if gid in server.coordinator.groups else None})

    async def faults_list(request):
        return web.json_response([r.to_dict() for r in server.faults.rules()])

    async def faults_add(request):
        spec = await body(request)
        try:
            rule = server.faults.add(spec)
        except (ValueError, KeyError, TypeError) as exc:
            return error(400, ErrorCode.INVALID_REQUEST, f"bad fault rule {spec}: {exc}")
        return web.json_response(rule.to_dict(), status=201)

    async def faults_clear(request):
        try:
            return web.json_response({"removed": server.faults.clear(request.query.get("api"))})
        except ValueError as exc:
            return error(400, ErrorCode.INVALID_REQUEST, str(exc))

    async def advance(request):
        data = await body(request)
        try:
            ms = int(data["ms"])
            fired = server.advance_clock(ms)
        except (KeyError, TypeError, ValueError) as exc:
            return error(400, ErrorCode.INVALID_REQUEST, f"want {{\"ms\": N >= 0}}: {exc}")
        return web.json_response({"advanced_ms": ms, "offset_ms": server.runtime.clock_offset_ms,
                                  "fired": fired})

    async def restart(request):
        server.restart_requested.set()      # the process's host (tenure serve, ServerThread) restarts it
        return web.json_response({"restarting": True, "port": server.port}, status=202)

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/groups", groups)
    app.router.add_get("/groups/{group}", group)
    app.router.add_post("/groups/{group}/force-rebalance", force)
    app.router.add_post("/groups/{group}/members/{member}/expire", expire)
    app.router.add_get("/faults", faults_list)
    app.router.add_post("/faults", faults_add)
    app.router.add_delete("/faults", faults_clear)
    app.router.add_post("/clock/advance", advance)
    app.router.add_post("/restart", restart)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]
    return runner, bound


# ---------------------------------------------------------------------- command-line clients
def request(admin: str, method: str, path: str, data: dict | None = None) -> tuple[int, object]:
    url = f"http://{admin}{path}"
    payload = json.dumps(data).encode() if data is not None else (b"" if method == "POST" else None)
    req = urllib.request.Request(url, method=method, data=payload,
                                 headers={"Content-Type": "application/json"} if data is not None else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _admin_arg(p) -> None:
    p.add_argument("--admin", default="127.0.0.1:9644", help="the server's --admin-port address "
                   "(default 127.0.0.1:9644)")


def add_parser(sub) -> None:
    p = sub.add_parser("groups", help="inspect groups or force a rebalance through a server's admin endpoint")
    _admin_arg(p)
    gsub = p.add_subparsers(dest="groups_command", required=True)
    gsub.add_parser("list", help="one line per group: id, state, generation, members")
    d = gsub.add_parser("describe", help="one group as JSON")
    d.add_argument("group")
    f = gsub.add_parser("force-rebalance", help="start one rebalance of a static group now "
                        "(KIP-345 draft forceStaticRebalance)")
    f.add_argument("group")

    p = sub.add_parser("fault", help="inject faults into a running server through its admin endpoint")
    _admin_arg(p)
    fsub = p.add_subparsers(dest="fault_command", required=True)
    x = fsub.add_parser("fail", help="answer the next COUNT requests of API with a Kafka error")
    x.add_argument("api", help="API name (JoinGroup, OffsetCommit, ...) or key, or '*' for every API")
    x.add_argument("error", help="Kafka error name (NOT_COORDINATOR) or code (16)")
    x.add_argument("--count", type=int, default=1)
    x = fsub.add_parser("close", help="close the connection instead of answering the next COUNT requests")
    x.add_argument("api")
    x.add_argument("--count", type=int, default=1)
    x = fsub.add_parser("delay", help="add MS of latency to requests of API (every one until cleared, or COUNT)")
    x.add_argument("api")
    x.add_argument("ms", type=int)
    x.add_argument("--count", type=int, default=None)
    fsub.add_parser("list", help="the rules left")
    x = fsub.add_parser("clear", help="remove every rule, or those of one API")
    x.add_argument("api", nargs="?")
    x = fsub.add_parser("expire", help="expire a member's session now")
    x.add_argument("group")
    x.add_argument("member", help="member id or group.instance.id")
    x = fsub.add_parser("advance-clock", help="move the coordinator's clock ahead; due timers fire now")
    x.add_argument("ms", type=int)
    fsub.add_parser("restart", help="restart the server on its data dir and ports")


def _call(args) -> tuple[int, object]:
    q = lambda text: urllib.request.quote(text, safe="")  # noqa: E731
    if args.command == "groups":
        path = "/groups/" + q(args.group) if args.groups_command != "list" else "/groups"
        if args.groups_command == "force-rebalance":
            return request(args.admin, "POST", path + "/force-rebalance")
        return request(args.admin, "GET", path)
    c = args.fault_command
    if c in ("fail", "close", "delay"):
        spec = {"action": c, "api": args.api, "count": args.count}
        if c == "fail":
            spec["error"] = args.error
        if c == "delay":
            spec["ms"] = args.ms
        return request(args.admin, "POST", "/faults", spec)
    if c == "list":
        return request(args.admin, "GET", "/faults")
    if c == "clear":
        return request(args.admin, "DELETE", "/faults" + (f"?api={q(args.api)}" if args.api else ""))
    if c == "expire":
        return request(args.admin, "POST", f"/groups/{q(args.group)}/members/{q(args.member)}/expire")
    if c == "advance-clock":
        return request(args.admin, "POST", "/clock/advance", {"ms": args.ms})
    return request(args.admin, "POST", "/restart")


def run(args) -> int:
    """`tenure groups ...` and `tenure fault ...`."""
    import sys
    try:
        status, body = _call(args)
    except (urllib.error.URLError, OSError) as exc:
        print(f"tenure: cannot reach the admin endpoint at {args.admin}: {exc}", file=sys.stderr)
        return 1
    if status >= 300:
        err = body if isinstance(body, dict) else {}
        print(f"tenure: {err.get('error')} ({err.get('code')}): {err.get('message')}", file=sys.stderr)
        return 1
    if args.command == "groups" and args.groups_command == "list":
        for g in body:
            static = sum(1 for m in g["members"] if m["group_instance_id"] is not None)
            print(f"{g['group_id']}\t{g['state']}\tgeneration {g['generation']}\t"
                  f"{len(g['members'])} member(s), {static} static\trebalances {g['rebalances']}")
        return 0
    print(json.dumps(body, indent=2))
    return 0
