"""The HTTP admin endpoint: inspection, fault injection and metrics, as JSON. `tenure serve` runs it on
127.0.0.1:9644 by default (loopback whatever --host is); `GET /` lists the endpoints (ENDPOINTS below).

    GET    /                                          the endpoints and the rules for calling them
    GET    /health                                    {"status": "ok"}
    GET    /metrics                                   Prometheus text exposition (tenure/control/metrics.py)
    GET    /groups                                    [group, ...]      (tenure/control/views.py, as dicts)
    GET    /groups/{group}                            group, or 404
    POST   /groups/{group}/force-rebalance            {"group", "state", "generation"}, or 404/409
    POST   /groups/{group}/members/{member}/expire    expire a session now (member id or instance id)
    GET    /faults                                    the fault rules left [rule, ...]
    POST   /faults                                    {"action": "fail"|"close"|"delay", "api": "JoinGroup"|"*",
                                                       "error": "NOT_COORDINATOR"|16, "ms": 100, "count": 2|null}
    DELETE /faults[?api=JoinGroup]                    remove rules: {"removed": n}
    POST   /clock/advance                             {"ms": 30000} -> {"fired": [timer names]}
    POST   /restart                                   restart on the same data dir and ports (202)

A state-changing call (POST, DELETE) must send `Content-Type: application/json` (a browser form or a
text/plain fetch cannot), a Host header naming the endpoint itself (localhost, a loopback address, the
--admin-host; any address literal when bound to a wildcard) and no Origin/Referer of another site: a web
page in a local browser can neither post to it (CSRF) nor reach it under a name of its own (DNS
rebinding). With a token (--admin-token / TENURE_ADMIN_TOKEN) every endpoint but `/` and `/health` wants
`Authorization: Bearer TOKEN`. Every value is checked (JSON numbers must be whole and in range; NaN,
Infinity, unknown fields, deep nesting and bodies over MAX_BODY_BYTES are refused). Errors are one JSON
object {"error": NAME, "code": kafka code, "message": one line} with 400/401/403/404/405/409/413/415.
`tenure groups ...` and `tenure fault ...` are the command-line clients.
"""
from __future__ import annotations

import argparse
import asyncio
import errno
import hmac
import importlib
import ipaddress
import json
import logging
import os
import socket
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request

from tenure.coordinator import AdminError
from tenure.protocol.errors import ErrorCode

from tenure.control.faults import TooManyRules, error_name
from tenure.control.metrics import render as render_metrics
from tenure.control.views import group_view as _group_view

log = logging.getLogger("tenure.admin")

DEFAULT_PORT = 9644
DEFAULT_ADDRESS = f"127.0.0.1:{DEFAULT_PORT}"
ADDRESS_ENV = "TENURE_ADMIN"                 # `tenure groups/fault`: the endpoint's H:P
TOKEN_ENV = "TENURE_ADMIN_TOKEN"             # `tenure serve` and `tenure groups/fault`: the bearer token
MAX_BODY_BYTES = 64 * 1024
MAX_MESSAGE_CHARS = 300
JSON_TYPE = "application/json"
OPEN_PATHS = ("/", "/health")                # no token needed: they tell nothing about the server
WILDCARDS = ("", "0.0.0.0", "::")
UNAUTHORIZED = 31                            # Kafka's CLUSTER_AUTHORIZATION_FAILED, for 401 and 403


class Refused(Exception):
    """An admin call answered with an error: HTTP status, Kafka error code, one-line message."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, int(code), message


def bad(message: str) -> Refused:
    return Refused(400, ErrorCode.INVALID_REQUEST, message)


def group_view(server, group_id: str) -> dict | None:
    view = _group_view(server, group_id)
    return None if view is None else view.to_dict()


def groups_view(server) -> list[dict]:
    return [v.to_dict() for v in server.groups()]


def force_rebalance(server, group_id: str) -> dict:
    server.force_rebalance(group_id)
    g = server.coordinator.groups[group_id]
    return {"group": group_id, "state": g.state, "generation": g.generation}


def is_loopback(host: str) -> bool:
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_allowed(name: str | None, admin_host: str) -> bool:
    """May a state-changing call name the endpoint `name` (the Host header's host part)? Its own loopback
    names and addresses, the --admin-host itself, and - when it is bound to a wildcard - any address
    literal (an address cannot be rebound to another site, a name can)."""
    if not name:
        return False
    name = name.lower().rstrip(".")
    if is_loopback(name) or name == admin_host.lower().strip("[]"):
        return True
    if admin_host in WILDCARDS:
        try:
            ipaddress.ip_address(name)
            return True
        except ValueError:
            return False
    return False


def _one_line(message: str) -> str:
    message = " ".join(str(message).split())
    return message if len(message) <= MAX_MESSAGE_CHARS else message[:MAX_MESSAGE_CHARS - 3] + "..."


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text} is out of range")
    return value


def bind_admin(host: str, port: int, *, fallback: bool = False) -> tuple[socket.socket, bool]:
    """The admin endpoint's listening socket, and whether it fell back: with `fallback` a `port` in use
    is replaced by a free one (tenure serve's default port)."""
    def listen(p: int) -> socket.socket:
        family, *_, address = socket.getaddrinfo(host or None, p, type=socket.SOCK_STREAM,
                                                 flags=socket.AI_PASSIVE)[0]
        sock = socket.create_server(address, family=family, backlog=128)
        sock.setblocking(False)
        return sock
    try:
        return listen(port), False
    except OSError as exc:
        if not (fallback and port and exc.errno == errno.EADDRINUSE):
            raise
    return listen(0), True


def _import_web() -> asyncio.Future:
    """aiohttp.web, imported on a daemon thread: the loop keeps serving Kafka clients meanwhile, and a
    server stopped before it is done does not wait for it (an executor's thread would hold up the exit)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    if "aiohttp.web" in sys.modules:
        fut.set_result(sys.modules["aiohttp.web"])
        return fut

    def settle(module, error) -> None:
        if fut.done():                        # cancelled: the server closed first
            return
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(module)

    def run() -> None:
        try:
            module, error = importlib.import_module("aiohttp.web"), None
        except BaseException as exc:          # handed to the loop, which logs it
            module, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, module, error)
        except RuntimeError:                  # the loop closed meanwhile: nobody waits any more
            pass
    threading.Thread(target=run, name="tenure-admin-import", daemon=True).start()
    return fut


async def serve_admin(server, sock: socket.socket, *, token: str | None = None):
    """Serve the HTTP admin endpoint on the server's loop from a bound socket; returns the runner."""
    host = server.config.admin_host
    web = await _import_web()

    def answer(status: int, code: int, message: str):
        return web.json_response({"error": error_name(int(code)), "code": int(code), "message": _one_line(message)},
                                 status=status)

    def check_origin(request) -> None:
        hostport = request.headers.get("Host")
        name = urllib.parse.urlsplit("//" + hostport).hostname if hostport is not None else None
        if hostport is not None and not host_allowed(name, host):
            raise Refused(403, UNAUTHORIZED,
                          f"Host {hostport!r} is not this endpoint's; state-changing calls must name it as "
                          "localhost or a loopback address (or the --admin-host)")
        own = f"http://{hostport}".lower() if hostport is not None else None
        for header in ("Origin", "Referer"):
            value = request.headers.get(header)
            if value is None:
                continue
            parts = urllib.parse.urlsplit(value)
            if value == "null" or own is None or f"{parts.scheme}://{parts.netloc}".lower() != own:
                raise Refused(403, UNAUTHORIZED,
                              f"{header} {value!r} is another site; state-changing calls are taken from the "
                              "command line or a page of this endpoint only")
        site = request.headers.get("Sec-Fetch-Site")
        if site is not None and site not in ("same-origin", "none"):
            raise Refused(403, UNAUTHORIZED,
                          f"Sec-Fetch-Site {site!r}: state-changing calls from other sites are refused")

    def check_token(request) -> None:
        if token is None or (request.method in ("GET", "HEAD") and request.path in OPEN_PATHS):
            return
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            raise Refused(401, UNAUTHORIZED, "this endpoint wants its token: Authorization: Bearer TOKEN "
                          f"(tenure groups/fault: --admin-token or {TOKEN_ENV})")
        if not hmac.compare_digest(value.strip().encode(), token.encode()):
            raise Refused(401, UNAUTHORIZED, "wrong token")

    def check_content_type(request) -> None:
        if request.content_type != JSON_TYPE:
            shown = request.headers.get("Content-Type")
            raise Refused(415, ErrorCode.INVALID_REQUEST,
                          f"state-changing calls send Content-Type: {JSON_TYPE}, not "
                          f"{'none' if shown is None else repr(shown)}")

    @web.middleware
    async def guard(request, handler):
        """Every call passes here: the checks above, then the handler; every error becomes one JSON line."""
        try:
            if request.method not in ("GET", "HEAD"):
                check_origin(request)
            check_token(request)
            if request.method not in ("GET", "HEAD"):
                check_content_type(request)
            return await handler(request)
        except Refused as exc:
            return answer(exc.status, exc.code, exc.message)
        except web.HTTPException as exc:
            if exc.status == 404:
                message = f"no endpoint {request.method} {request.path}; GET / lists them"
            elif exc.status == 405:
                message = (f"{request.method} is not allowed on {request.path}; allowed: "
                           f"{', '.join(sorted(getattr(exc, 'allowed_methods', ())))}")
            elif exc.status == 413:
                message = f"body larger than {MAX_BODY_BYTES} bytes"
            else:
                message = exc.reason
            return answer(exc.status, ErrorCode.INVALID_REQUEST, message)
        except Exception as exc:          # a bug here: logged in full, answered in one line
            log.exception("admin %s %s failed", request.method, request.path)
            return answer(500, ErrorCode.UNKNOWN_SERVER_ERROR, f"internal error: {type(exc).__name__}: {exc}")

    def query(request, allowed: tuple[str, ...] = ()) -> dict:
        unknown = sorted(set(request.query) - set(allowed))
        if unknown:
            raise bad(f"unknown query parameter(s) {', '.join(map(repr, unknown))}; "
                      f"this call takes {', '.join(allowed) or 'none'}")
        return {k: request.query[k] for k in allowed if k in request.query}

    async def body(request, fields: tuple[str, ...] = (), params: tuple[str, ...] = ()) -> dict:
        """The JSON object sent (empty: {}), holding only `fields`; the query may hold only `params`."""
        query(request, params)
        raw = await request.read()            # bounded by client_max_size (413 past it)
        if not raw.strip():
            return {}
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise bad("body is not UTF-8") from None
        try:
            data = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
        except RecursionError:
            raise bad("body is JSON nested too deeply") from None
        except ValueError as exc:
            raise bad(f"body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise bad(f"body must be a JSON object, not {type(data).__name__}")
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise bad(f"unknown field(s) {', '.join(map(repr, unknown))}; this call takes "
                      f"{', '.join(fields) or 'no fields'}")
        return data

    async def index(request):
        query(request)
        return web.json_response({
            "endpoints": [{"method": m, "path": p, "description": d} for m, p, _, d in endpoints],
            "state_changing": {"methods": ["POST", "DELETE"], "content_type": JSON_TYPE,
                               "host": "localhost, a loopback address or the --admin-host",
                               "origin": "none, or this endpoint's own"},
            "token_required": token is not None})

    async def health(request):
        query(request)
        return web.json_response({"status": "ok"})

    async def metrics(request):
        query(request)
        return web.Response(body=render_metrics(server), content_type="text/plain", charset="utf-8",
                            headers={"X-Prometheus-Format": "0.0.4"})

    async def groups(request):
        query(request)
        return web.json_response(groups_view(server))

    async def group(request):
        query(request)
        view = group_view(server, request.match_info["group"])
        if view is None:
            raise Refused(404, ErrorCode.GROUP_ID_NOT_FOUND, f"group {request.match_info['group']!r} is unknown")
        return web.json_response(view)

    async def force(request):
        await body(request)
        gid = request.match_info["group"]
        try:
            return web.json_response(force_rebalance(server, gid))
        except AdminError as exc:
            raise Refused(404 if exc.code == ErrorCode.GROUP_ID_NOT_FOUND else 409, exc.code, str(exc)) from None

    async def expire(request):
        await body(request)
        gid, member = request.match_info["group"], request.match_info["member"]
        g = server.coordinator.groups.get(gid)
        if g is None:
            raise Refused(404, ErrorCode.GROUP_ID_NOT_FOUND, f"group {gid!r} is unknown")
        if g.static_members.get(member, member) not in g.members:
            raise Refused(404, ErrorCode.UNKNOWN_MEMBER_ID, f"group {gid!r} has no member or instance {member!r}")
        expired = server.expire_session(gid, member)
        return web.json_response({"group": gid, "member": member, "expired": expired,
                                  "generation": server.coordinator.groups[gid].generation
                                  if gid in server.coordinator.groups else None})

    async def faults_list(request):
        query(request)
        return web.json_response([r.to_dict() for r in server.faults.rules()])

    async def faults_add(request):
        spec = await body(request, ("action", "api", "error", "ms", "count"))
        try:
            rule = server.faults.add(spec)
        except TooManyRules as exc:
            raise Refused(409, ErrorCode.POLICY_VIOLATION, str(exc)) from None
        except ValueError as exc:
            raise bad(str(exc)) from None
        return web.json_response(rule.to_dict(), status=201)

    async def faults_clear(request):
        await body(request, params=("api",))
        api = request.query.get("api")
        try:
            return web.json_response({"removed": server.faults.clear(api)})
        except ValueError as exc:
            raise bad(str(exc)) from None

    async def advance(request):
        data = await body(request, ("ms",))
        if "ms" not in data:
            raise bad('ms: required, e.g. {"ms": 30000}')
        try:
            fired = server.advance_clock(data["ms"])
        except ValueError as exc:
            raise bad(f"ms: {exc}") from None
        return web.json_response({"advanced_ms": data["ms"], "offset_ms": server.runtime.clock_offset_ms,
                                  "fired": fired})

    async def restart(request):
        await body(request)
        server.restart_requested.set()      # the process's host (tenure serve, ServerThread) restarts it
        return web.json_response({"restarting": True, "port": server.port}, status=202)

    endpoints = [
        ("GET", "/", index, "this list"),
        ("GET", "/health", health, '{"status": "ok"} while the server serves'),
        ("GET", "/metrics", metrics, "Prometheus text exposition"),
        ("GET", "/groups", groups, "every group: state, generation, members, assignments, offsets, rebalances"),
        ("GET", "/groups/{group}", group, "one group (404 if unknown)"),
        ("POST", "/groups/{group}/force-rebalance", force,
         "one rebalance of a static group now (KIP-345 draft forceStaticRebalance)"),
        ("POST", "/groups/{group}/members/{member}/expire", expire,
         "expire a member's session now (member id or group.instance.id)"),
        ("GET", "/faults", faults_list, "the fault rules left"),
        ("POST", "/faults", faults_add,
         'add a rule: {"action": "fail"|"close"|"delay", "api": NAME|"*", "error": NAME|CODE (fail), '
         '"ms": N (delay), "count": N|null (null: until cleared)}'),
        ("DELETE", "/faults", faults_clear, "remove every rule, or those of one API (?api=NAME)"),
        ("POST", "/clock/advance", advance, '{"ms": N}: move the coordinator\'s clock ahead; due timers fire now'),
        ("POST", "/restart", restart, "restart on the same data dir and ports"),
    ]
    app = web.Application(middlewares=[guard], client_max_size=MAX_BODY_BYTES)
    for method, path, handler, _ in endpoints:
        app.router.add_route(method, path, handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    return runner


# ---------------------------------------------------------------------- command-line clients
def request(admin: str, method: str, path: str, data: dict | None = None,
            token: str | None = None) -> tuple[int, object]:
    """One call to the endpoint at `admin` (H:P): (HTTP status, the JSON answer)."""
    headers = {"Content-Type": JSON_TYPE} if method not in ("GET", "HEAD") else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    payload = json.dumps(data).encode() if data is not None else None
    req = urllib.request.Request(f"http://{admin}{path}", method=method, data=payload, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw or b"null")
    except ValueError:           # not tenure's endpoint answering
        return status, {"error": "NOT_JSON", "code": None,
                        "message": f"HTTP {status}, not JSON: {raw[:120].decode(errors='replace')!r}"}


def _address(text: str) -> str:
    """H:P from H:P or a URL (http://H:P/), as the server's log prints it."""
    text = text.strip()
    if "//" in text:
        text = urllib.parse.urlsplit(text).netloc
    return text.rstrip("/")


def _count(text: str) -> int:
    from tenure.control.faults import MAX_COUNT
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"want a whole number of requests from 1 to {MAX_COUNT}, not {text!r} "
                                         "(--until-cleared keeps a rule until it is cleared)")
    return n


def add_parser(sub) -> None:
    common = argparse.ArgumentParser(add_help=False)    # accepted before or after the subcommand
    common.add_argument("--admin", default=argparse.SUPPRESS, metavar="H:P",
                        help=f"the server's admin endpoint (default ${ADDRESS_ENV}, else {DEFAULT_ADDRESS})")
    common.add_argument("--admin-token", default=argparse.SUPPRESS, metavar="TOKEN",
                        help=f"the endpoint's bearer token (default ${TOKEN_ENV})")

    def leaf(parent, name, **kw):
        return parent.add_parser(name, parents=[common], **kw)

    def counted(x, until_cleared_default: bool) -> None:
        how = x.add_mutually_exclusive_group()
        how.add_argument("--count", type=_count, default=None,
                         help="apply to this many requests, then go (default "
                              f"{'every one until cleared' if until_cleared_default else '1'})")
        how.add_argument("--until-cleared", action="store_true",
                         help="stay until `tenure fault clear` (every matching request)")

    p = sub.add_parser("groups", parents=[common],
                       help="inspect groups or force a rebalance through a server's admin endpoint")
    gsub = p.add_subparsers(dest="groups_command", required=True)
    leaf(gsub, "list", help="one line per group: id, state, generation, members")
    d = leaf(gsub, "describe", help="one group as JSON")
    d.add_argument("group")
    f = leaf(gsub, "force-rebalance", help="start one rebalance of a static group now "
             "(KIP-345 draft forceStaticRebalance)")
    f.add_argument("group")

    p = sub.add_parser("fault", parents=[common],
                       help="inject faults into a running server through its admin endpoint")
    fsub = p.add_subparsers(dest="fault_command", required=True)
    x = leaf(fsub, "fail", help="answer the next COUNT requests of API with a Kafka error")
    x.add_argument("api", help="API name (JoinGroup, OffsetCommit, ...) or key, or '*' for every API")
    x.add_argument("error", help="Kafka error name (NOT_COORDINATOR) or code (16)")
    counted(x, False)
    x = leaf(fsub, "close", help="close the connection instead of answering the next COUNT requests")
    x.add_argument("api")
    counted(x, False)
    x = leaf(fsub, "delay", help="add MS of latency to requests of API (every one until cleared, or COUNT)")
    x.add_argument("api")
    x.add_argument("ms", type=int)
    counted(x, True)
    leaf(fsub, "list", help="the rules left")
    x = leaf(fsub, "clear", help="remove every rule, or those of one API")
    x.add_argument("api", nargs="?")
    x = leaf(fsub, "expire", help="expire a member's session now")
    x.add_argument("group")
    x.add_argument("member", help="member id or group.instance.id")
    x = leaf(fsub, "advance-clock", help="move the coordinator's clock ahead; due timers fire now")
    x.add_argument("ms", type=int)
    leaf(fsub, "restart", help="restart the server on its data dir and ports")


def _call(args, admin: str, token: str | None) -> tuple[int, object]:
    q = lambda text: urllib.parse.quote(text, safe="")  # noqa: E731
    if args.command == "groups":
        path = "/groups/" + q(args.group) if args.groups_command != "list" else "/groups"
        if args.groups_command == "force-rebalance":
            return request(admin, "POST", path + "/force-rebalance", token=token)
        return request(admin, "GET", path, token=token)
    c = args.fault_command
    if c in ("fail", "close", "delay"):
        spec = {"action": c, "api": args.api}
        if args.count is not None:
            spec["count"] = args.count
        elif args.until_cleared or c == "delay":
            spec["count"] = None
        if c == "fail":
            spec["error"] = args.error
        if c == "delay":
            spec["ms"] = args.ms
        return request(admin, "POST", "/faults", spec, token)
    if c == "list":
        return request(admin, "GET", "/faults", token=token)
    if c == "clear":
        return request(admin, "DELETE", "/faults" + (f"?api={q(args.api)}" if args.api else ""), token=token)
    if c == "expire":
        return request(admin, "POST", f"/groups/{q(args.group)}/members/{q(args.member)}/expire", token=token)
    if c == "advance-clock":
        return request(admin, "POST", "/clock/advance", {"ms": args.ms}, token)
    return request(admin, "POST", "/restart", token=token)


def run(args) -> int:
    """`tenure groups ...` and `tenure fault ...`."""
    if getattr(args, "admin", None):
        admin, source = args.admin, ""
    elif os.environ.get(ADDRESS_ENV):
        admin, source = os.environ[ADDRESS_ENV], f" (from {ADDRESS_ENV})"
    else:
        admin, source = DEFAULT_ADDRESS, f" (the default; give --admin H:P or set {ADDRESS_ENV})"
    admin = _address(admin)
    token = getattr(args, "admin_token", None) or os.environ.get(TOKEN_ENV) or None
    try:
        status, body = _call(args, admin, token)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print(f"tenure: cannot reach the admin endpoint at {admin}{source}: {exc}", file=sys.stderr)
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
