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
import inspect
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

from tenure.config import ADMIN_TOKEN_ENV, DEFAULT_ADMIN_PORT
from tenure.control.faults import error_name
from tenure.control.metrics import render as render_metrics
from tenure.control.registry import CONTROLS, Arg, Cli, Control, status_of
from tenure.coordinator import AdminError
from tenure.protocol.errors import ErrorCode

log = logging.getLogger("tenure.admin")

DEFAULT_PORT = DEFAULT_ADMIN_PORT             # `tenure serve`'s (tenure/config.py)
TOKEN_ENV = ADMIN_TOKEN_ENV                  # `tenure serve` and `tenure groups/fault`: the bearer token
DEFAULT_ADDRESS = f"127.0.0.1:{DEFAULT_PORT}"
ADDRESS_ENV = "TENURE_ADMIN"                 # `tenure groups/fault`: the endpoint's H:P
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

    def route(control: Control):
        """The endpoint of one control (tenure/control/registry.py): its arguments from the path, the JSON
        body and the query, checked; its refusals as one JSON line."""
        fields, params = control.arg_names("body"), control.arg_names("query")

        async def handler(request):
            if request.method in ("GET", "HEAD"):
                query(request, params)
                data = {}
            else:
                data = await body(request, fields, params)
            kw = {a.name: request.match_info[a.name] for a in control.args if a.where == "path"}
            kw.update({k: request.query[k] for k in params if k in request.query})
            for a in control.args:
                if a.where != "body":
                    continue
                if a.name in data:
                    kw[a.name] = data[a.name]
                elif a.required:
                    raise bad(f"{a.name}: required" + (f", e.g. {a.example}" if a.example else ""))
            try:
                if control.check is not None:
                    control.check(server, **kw)
                result = control.run(server, **kw)
                if inspect.isawaitable(result):        # a control that completes later (a broker stop, a move)
                    result = await result
                answer = result if control.respond is None else control.respond(server, result, **kw)
            except (AdminError, ValueError) as exc:
                status, code = status_of(exc)
                raise Refused(status, code, (control.error_prefix if status == 400 else "") + str(exc)) from None
            return web.json_response(answer, status=control.status)
        return handler

    endpoints = [
        ("GET", "/", index, "this list"),
        ("GET", "/health", health, '{"status": "ok"} while the server serves'),
        ("GET", "/metrics", metrics, "Prometheus text exposition"),
        *((c.method, c.path, route(c), c.summary) for c in CONTROLS),
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


HELP = {"groups": "inspect groups or force a rebalance through a server's admin endpoint",
        "fault": "inject faults into a running server through its admin endpoint",
        "broker": "list, stop, start or slow the brokers of a cluster (--brokers N) through its admin endpoint",
        "coordinator": "move a group's coordinator to another broker through the admin endpoint"}


def _cli_commands() -> dict[str, list[tuple[Cli, Control]]]:
    """{"groups": [...], "fault": [...]}: every subcommand of the registry's controls, in table order."""
    out: dict[str, list[tuple[Cli, Control]]] = {group: [] for group in HELP}
    for control in CONTROLS:
        for cli in control.cli:
            out[cli.group].append((cli, control))
    return out


def _cli_args(cli: Cli, control: Control) -> tuple[Arg, ...]:
    return cli.args if cli.args is not None else tuple(a for a in control.args if a.name not in cli.fixed)


def add_parser(sub) -> None:
    """`tenure groups ...` and `tenure fault ...`, one subcommand per registry entry's Cli."""
    common = argparse.ArgumentParser(add_help=False)    # accepted before or after the subcommand
    common.add_argument("--admin", default=argparse.SUPPRESS, metavar="H:P",
                        help=f"the server's admin endpoint (default ${ADDRESS_ENV}, else {DEFAULT_ADDRESS})")
    common.add_argument("--admin-token", default=argparse.SUPPRESS, metavar="TOKEN",
                        help=f"the endpoint's bearer token (default ${TOKEN_ENV})")
    for group, commands in _cli_commands().items():
        p = sub.add_parser(group, parents=[common], help=HELP[group])
        leaves = p.add_subparsers(dest=f"{group}_command", required=True)
        for cli, control in commands:
            x = leaves.add_parser(cli.command, parents=[common], help=cli.help)
            x.set_defaults(control=(cli, control))
            for a in _cli_args(cli, control):
                x.add_argument(a.name, type=a.type, help=a.help or None, **({} if a.required else {"nargs": "?"}))
            if cli.extra is not None:
                cli.extra(x)


def _call(args, admin: str, token: str | None) -> tuple[int, object]:
    """The endpoint call of the subcommand parsed: its control's route, with the arguments given."""
    cli, control = args.control
    q = lambda text: urllib.parse.quote(text, safe="")  # noqa: E731
    given = {a.name: getattr(args, a.name) for a in _cli_args(cli, control)}
    path = control.path.format(**{a.name: q(given[a.name]) for a in control.args if a.where == "path"})
    query = {a.name: given[a.name] for a in control.args if a.where == "query" and given.get(a.name) is not None}
    if query:
        path += "?" + urllib.parse.urlencode(query)
    data = {**cli.fixed, **{a.name: given[a.name] for a in control.args
                            if a.where == "body" and given.get(a.name) is not None}}
    if cli.fill is not None:
        cli.fill(args, data)
    return request(admin, control.method, path, data or None, token)


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
    cli, _ = args.control
    text = cli.show(body) if cli.show is not None else json.dumps(body, indent=2)
    if text:
        print(text)
    return 0
