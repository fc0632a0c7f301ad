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

Every call must send a Host header naming the endpoint itself (localhost, a loopback address, the
--admin-host, the --advertised-host; any address literal when bound to a wildcard): a web page in a local
browser cannot reach it under a name of its own (DNS rebinding), to change or to read. A state-changing call
(POST, DELETE) must also send `Content-Type: application/json` (a browser form or a text/plain fetch cannot)
and no Origin/Referer of another site (CSRF), and without a token come from this machine (a loopback peer):
an endpoint bound to 0.0.0.0 with no token is read-only for other addresses. With a token (--admin-token /
TENURE_ADMIN_TOKEN) every endpoint but `/` and `/health` wants `Authorization: Bearer TOKEN`. Every value is checked (JSON numbers must be whole and in range; NaN,
Infinity, unknown fields, deep nesting and bodies over MAX_BODY_BYTES are refused). Errors are one JSON
object {"error": NAME, "code": kafka code, "message": one line} with 400/401/403/404/405/408/409/413/415.
`tenure groups|fault|broker|coordinator ...` are its command-line clients (tenure/control/commands.py,
calling it through tenure/control/http_client.py). Its routes come from the table of controls
(tenure/control/registry.py).
"""
from __future__ import annotations

import asyncio
import hmac
import inspect
import ipaddress
import json
import logging
import socket
import sys
import urllib.parse

from tenure.config import ADMIN_TOKEN_ENV
from tenure.control.admin_socket import import_in_thread, is_loopback
from tenure.control.faults import error_name
from tenure.control.metrics import render as render_metrics
from tenure.control.registry import CONTROLS, Control, status_of
from tenure.protocol.errors import AdminError, ErrorCode
from tenure.server.ratelog import RateLimitedLog

log = logging.getLogger("tenure.admin")

MAX_BODY_BYTES = 64 * 1024
# a request's body must arrive within this: a body whose chunked framing breaks once the request is being
# served leaves aiohttp (3.14) waiting for the rest of it, with no error and no end
BODY_TIMEOUT_S = 10.0
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


def host_allowed(name: str | None, admin_host: str, own_names: tuple[str, ...] = ()) -> bool:
    """May a call name the endpoint `name` (the Host header's host part)? Its own loopback names and
    addresses, the --admin-host itself, the server's own names (`own_names`: its --advertised-host, the name
    clients are told to use), and - when it is bound to a wildcard - any address literal (an address cannot be
    rebound to another site, a name can)."""
    if not name:
        return False
    name = name.lower().rstrip(".")
    if is_loopback(name) or name == admin_host.lower().strip("[]"):
        return True
    if name in (n.lower().rstrip(".").strip("[]") for n in own_names if n):
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


class MalformedHttpLog(logging.LoggerAdapter):
    """The logger aiohttp's request handler is given: a request it cannot parse (a line too long, a bad header,
    a bad chunk, a bad Content-Length, ...) is answered 400 by aiohttp and logged here as one rate-limited line
    naming the peer and the kind of error - never the parser's message, which quotes the bytes sent (a header
    value, a token) - and no traceback; anything else passes through to the admin logger as it is."""

    def __init__(self, logger: logging.Logger, ratelog: RateLimitedLog) -> None:
        super().__init__(logger, {})
        self.ratelog = ratelog

    def log(self, level, msg, *args, exc_info=None, **kwargs) -> None:
        exc = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1] if exc_info else None
        if _is_malformed_http(exc):
            peer = args[0] if args else "?"
            if level >= logging.INFO:          # aiohttp logs a bad method on a first request at DEBUG: TLS probes
                self.ratelog.log("admin endpoint: malformed HTTP", logging.WARNING,
                                 "admin endpoint: malformed HTTP request from %s answered 400 (%s)",
                                 peer, type(exc).__name__)
            return
        super().log(level, msg, *args, exc_info=exc_info, **kwargs)


def _answer_malformed_without_echo(runner) -> None:
    """aiohttp answers a request it cannot parse with 400 and the parser's message, which quotes the bytes sent
    (a header value, a token); the endpoint's server makes request handlers whose 400 names only the kind of
    error. (Where aiohttp's server is not built as this expects, it keeps its own handlers.)"""
    from aiohttp import web_protocol

    class Handler(web_protocol.RequestHandler):
        def handle_error(self, request, status=500, exc=None, message=None):
            if _is_malformed_http(exc):
                message = f"malformed HTTP request ({type(exc).__name__})"
            return super().handle_error(request, status, exc, message)

    base = type(runner.server)

    def make(server):
        try:
            return Handler(server, loop=server._loop, **server._kwargs)
        except (AttributeError, TypeError):
            return base.__call__(server)
    runner.server.__class__ = type("AdminServer", (base,), {"__call__": make})


def _is_malformed_http(exc: BaseException | None) -> bool:
    from aiohttp.http_exceptions import HttpProcessingError
    return isinstance(exc, HttpProcessingError)


async def serve_admin(server, sock: socket.socket, *, token: str | None = None):
    """Serve the HTTP admin endpoint on the server's loop from a bound socket; returns the runner."""
    host = server.config.admin_host
    own_names = (server.config.advertised_host or "",)
    web = await import_in_thread("aiohttp.web")
    ratelog = RateLimitedLog(log, server.config.log_window_ms / 1000, server.config.log_burst)

    def answer(status: int, code: int, message: str):
        return web.json_response({"error": error_name(int(code)), "code": int(code), "message": _one_line(message)},
                                 status=status)

    def check_host(request) -> None:
        """Every call (reads too: a DNS-rebinding page would read groups, members and client hosts) names the
        endpoint itself in its Host header."""
        hostport = request.headers.get("Host")
        try:
            name = urllib.parse.urlsplit("//" + hostport).hostname if hostport is not None else None
        except ValueError:                    # e.g. an unbalanced [
            name = ""
        if hostport is not None and not host_allowed(name, host, own_names):
            raise Refused(403, UNAUTHORIZED,
                          f"Host {_one_line(hostport)[:100]!r} is not this endpoint's; calls must name it as "
                          "localhost or a loopback address (or the --admin-host or --advertised-host)")

    def check_peer(request) -> None:
        """Without a token, only this machine may change the server: a call from another address (an endpoint
        bound to 0.0.0.0, e.g. in a container whose port is published) may read, not change."""
        if token is None and not is_loopback(request.remote or ""):
            raise Refused(403, UNAUTHORIZED,
                          f"{request.method} from another machine ({request.remote}) needs a token (--admin-token "
                          f"or {ADMIN_TOKEN_ENV} on the server); without one this endpoint only answers reads from "
                          "other addresses - call it from the server's own machine or container")

    def check_origin(request) -> None:
        hostport = request.headers.get("Host")
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
                          f"(tenure groups/fault: --admin-token or {ADMIN_TOKEN_ENV})")
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
            check_host(request)
            if request.method not in ("GET", "HEAD"):
                check_origin(request)
                check_peer(request)
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
        except ConnectionError:           # the client went away while its request was read or served
            ratelog.log("admin endpoint: connection lost", logging.INFO,
                        "admin endpoint: the connection from %s closed before its %s was answered", request.remote,
                        request.method)
            return answer(400, ErrorCode.INVALID_REQUEST, "connection lost")      # to nobody
        except Exception as exc:          # a bug here: logged in full, answered in one line
            if _is_malformed_http(exc):    # a body that breaks HTTP's framing (a bad chunk) met while reading it
                ratelog.log("admin endpoint: malformed HTTP", logging.WARNING,
                            "admin endpoint: malformed HTTP request from %s answered 400 (%s)",
                            request.remote, type(exc).__name__)
                return answer(400, ErrorCode.INVALID_REQUEST, f"malformed HTTP request ({type(exc).__name__})")
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
        try:                                  # bounded by client_max_size (413 past it) and BODY_TIMEOUT_S
            raw = await asyncio.wait_for(request.read(), BODY_TIMEOUT_S)
        except TimeoutError:
            raise Refused(408, ErrorCode.INVALID_REQUEST, f"the body did not arrive whole within {BODY_TIMEOUT_S:g} "
                                                          "s (or its chunked framing broke)") from None
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
    runner = web.AppRunner(app, access_log=None, logger=MalformedHttpLog(log, ratelog))
    await runner.setup()
    _answer_malformed_without_echo(runner)
    await web.SockSite(runner, sock).start()
    return runner

