"""One decoded request to its answer: the request's context built, then what every request passes - the fault
rules (tenure/control/faults.py), then a test's request hooks (tenure/control/hooks.py; both give a `Decision`
applied here: delay, close, an answer of their own, the answer rewritten), then the access hook (who may do
what: with --authorizer the whole-request ACL checks of security/access.py; the context carries the principal
and the authorizer to the handlers, which check the parts of a request) -, then one lookup in the routing table
(the owner column of protocol/apis.py: routes.py) to its owner; the answer encoded and sent, counted in the
metrics and kept in the request capture (tenure/control/capture.py)."""
from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import Any

from tenure.broker.cluster import Cluster
from tenure.broker.dataplane import CLOSE_CONNECTION
from tenure.control.capture import Capture
from tenure.control.faults import NO_FAULT, Decision, Faults, error_name
from tenure.control.hooks import Hooks
from tenure.counters import Metrics
from tenure.protocol.acl import Authorization
from tenure.protocol.apis import API_VERSIONS_KEY, SUPPORTED
from tenure.protocol.codec import Request, encode_api_versions_error, encode_response
from tenure.protocol.context import RequestContext
from tenure.protocol.error_responses import can_fail, error_response, is_shared_answer
from tenure.server.connection import SENT, Peer
from tenure.server.offload import heavy_answer, off_loop
from tenure.server.routes import Route

log = logging.getLogger("tenure.server")

# the access hook: the error code a request is refused with (0: allowed); an API with no error answer of its own
# (Metadata) is refused by closing the connection
Access = Callable[[Request, RequestContext], int]


def allow_all(req: Request, ctx: RequestContext) -> int:
    """The access hook while tenure has no authentication or authorizer: every request is allowed."""
    return 0


def response_error(body, depth: int = 3) -> int:
    """The first non-zero error code in a response body (top level first, then its arrays), or 0."""
    code = getattr(body, "error_code", 0) or 0
    if code or depth == 0:
        return code
    arrays = _struct_arrays.get(body.__class__)
    if arrays is None:
        arrays = _arrays_of(body)
    for name in arrays:
        value = getattr(body, name, None)
        if isinstance(value, list) and value and isinstance(getattr(value[0], "fields", None), dict):
            for item in value:           # arrays of structs only (an array is of one type; a UUID's fields: ints)
                code = response_error(item, depth - 1)
                if code:
                    return code
    return 0


# a response class -> the names of its fields that may hold an array of structs (a Heartbeat's answer: none, so
# its error is its code alone); worked out once per class from kafka-python's field specs
_struct_arrays: dict[type, tuple[str, ...]] = {}


def _arrays_of(body) -> tuple[str, ...]:
    fields = getattr(body, "fields", None)
    if not isinstance(fields, dict):
        return ()                        # not a message struct: nothing to walk (not kept)
    names = tuple(name for name, f in fields.items()
                  if getattr(f, "_type_str", None) not in _SCALARS or getattr(f, "_fields", None) is not None)
    _struct_arrays[body.__class__] = names
    return names


# kafka-python's type names of fields that never hold an array
_SCALARS = frozenset({"int8", "int16", "int32", "int64", "uint16", "float64", "bool", "string", "bytes", "uuid",
                      "records"})


class Dispatcher:
    """`Connection`'s dispatch for a server: `await dispatcher(req, peer, send)`. `routes`: each owner of the
    routing table (protocol/apis.py) and its route; `clock_ms`: the server's clock, read into each context."""

    def __init__(self, *, faults: Faults, metrics: Metrics, routes: dict[str, Route], clock_ms: Callable[[], int],
                 cluster: Cluster | None = None, access: Access = allow_all, hooks: Hooks | None = None,
                 capture: Capture | None = None, authorizer: Authorization | None = None) -> None:
        self.faults, self.metrics = faults, metrics
        self.hooks = hooks if hooks is not None else Hooks()           # request hooks (control/hooks.py)
        self.capture = capture if capture is not None else Capture(0)  # request capture (control/capture.py)
        self.routes, self.clock_ms, self.access = routes, clock_ms, access
        self.cluster = cluster
        self.authorizer = authorizer            # the ACLs (--authorizer), handed to every request's context

    def context(self, req: Request, peer: Peer) -> RequestContext:
        """The request's context, built once and handed to its owner."""
        return peer.context.for_request(req.api_key, req.api_version, req.client_id or "", self.clock_ms(),
                                        self.authorizer)

    async def __call__(self, req: Request, peer: Peer, send: Callable[[bytes], Awaitable[None]]) -> bool:
        t0 = perf_counter()
        ctx = peer.context.for_request(req.api_key, req.api_version, req.client_id or "", self.clock_ms(),
                                       self.authorizer)
        cluster = self.cluster
        if cluster is not None:
            node = cluster.node(peer.broker_id)
            if node is not None and node.slow_ms:
                await asyncio.sleep(node.slow_ms / 1000)      # set_broker_slow
        if self.faults.active or self.hooks.active:
            return await self._controlled(req, peer, send, ctx, t0)
        # the usual request: no fault rule and no hook to consult (both only while a test has some)
        refused = req.served.refusal(req.api_key) or self.access(req, ctx)
        if refused:
            if not can_fail(req.api_key):
                return self._refused(req, ctx, peer, refused, t0)
            return await self._answer(req, ctx, send, t0, error_response(req, refused), refused, True, NO_FAULT)
        body = await self.routes[SUPPORTED[req.api_key].owner](req, ctx)
        if body is CLOSE_CONNECTION:
            self.metrics.closed_connections["produce_error_acks_0"] += 1
            return self._closed(req, ctx, t0)
        if body is None or heavy_answer(req.api_key, body):
            return await self._answer(req, ctx, send, t0, body, 0, False, NO_FAULT)
        # the usual answer, encoded here: what `_answer` does with it, in line
        code = response_error(body)
        frame = encode_response(req, body)
        capture = self.capture
        kept = capture.keep(req, ctx, code, t0, frame) if capture.active else None
        waiting = send(frame)
        if waiting is not SENT:              # (the connection's send: SENT when the answer needs no drain)
            await waiting
        took = perf_counter() - t0
        self.metrics.request(req.spec.name, error_name(code) if code else "NONE", took)
        if kept is not None:
            capture.written(kept, took * 1000.0)
        return True

    async def _controlled(self, req: Request, peer: Peer, send: Callable[[bytes], Awaitable[None]],
                          ctx: RequestContext, t0: float) -> bool:
        """A request while fault rules or request hooks are set: the rules first, then the hooks (an injected
        error wins), then the release's refusal and the access check, then its owner."""
        fault = self.faults.decide(req.api_key)
        if fault.rules and not await self._inject(fault, req, peer):
            return self._closed(req, ctx, t0)      # an injected close
        hooked = NO_FAULT                          # the request hooks, after the rules (an injected error wins)
        if self.hooks.active and fault.error is None:
            hooked = await self.hooks.intercept(req, ctx)
            if hooked is not NO_FAULT and not await self._inject(hooked, req, peer):
                return self._closed(req, ctx, t0)  # a hook's drop
        if hooked.response is not None:            # a test's own answer: no access check, no owner
            refused, answered_error = 0, False
        else:
            # a release's own refusal (share groups as 4.1), before the access checks, as Kafka's handlers
            refused = fault.error if fault.error is not None else (req.served.refusal(req.api_key)
                                                                   or self.access(req, ctx))
            answered_error = fault.error is not None or refused != 0     # an injected error may be 0 (NONE)
        if refused and fault.error is None and not can_fail(req.api_key):
            return self._refused(req, ctx, peer, refused, t0)
        if answered_error:
            body = error_response(req, refused)
        elif hooked.response is not None:
            body = hooked.response                 # a hook's own answer: the request is not handled
        else:
            body = await self.routes[SUPPORTED[req.api_key].owner](req, ctx)
            if body is CLOSE_CONNECTION:
                self.metrics.closed_connections["produce_error_acks_0"] += 1
                return self._closed(req, ctx, t0)
        if hooked.rewrites and body is not None:
            # a hook may change the answer in place: it gets a copy of one shared between requests (a
            # Heartbeat's, protocol/error_responses.py `shared_answer`)
            body = self.hooks.rewrite(hooked, req, copy.deepcopy(body) if is_shared_answer(body) else body)
        return await self._answer(req, ctx, send, t0, body, refused, answered_error, hooked)

    def _refused(self, req: Request, ctx: RequestContext, peer: Peer, refused: int, t0: float) -> bool:
        """A refused request of an API with no error answer of its own (Metadata): the connection is closed."""
        self.metrics.closed_connections["access_refused"] += 1
        log.info("connection %d from %s: closing instead of answering %s v%d (refused: %s)", peer.conn_id,
                 ctx.peer, req.name, req.api_version, error_name(refused))
        return self._closed(req, ctx, t0)

    async def _answer(self, req: Request, ctx: RequestContext, send: Callable[[bytes], Awaitable[None]], t0: float,
                      body: Any, refused: int, answered_error: bool, hooked: Decision) -> bool:
        """The answer (None: a request that has none) encoded, kept in the capture, sent and counted."""
        heavy = body is not None and heavy_answer(req.api_key, body)      # walked and encoded off the loop
        code = (await off_loop(response_error, body) if heavy else response_error(body)) if body is not None else 0
        # captured before the answer leaves (a client that has its answer finds it in the capture), its duration
        # set once the answer is written: the usual answer, encoded here, kept at once with its frame
        # (`Capture.keep`); one with no answer or a heavy one recorded first
        capture = self.capture
        seen = capture.record(req, ctx, body, code, t0, "answered" if body is not None else "no_answer",
                              heavy) if capture.active and (body is None or heavy) else None
        kept = None
        if body is not None:
            version = None
            if req.api_key == API_VERSIONS_KEY and (answered_error or (hooked.response is not None and code)):
                frame, version = encode_api_versions_error(req.correlation_id, refused or code, req.served), 0  # v0, as Kafka
            elif heavy:                                    # encoded off the loop (offload.py)
                frame = await off_loop(encode_response, req, body)
            else:
                frame = encode_response(req, body)
            if seen is not None:
                seen.answered(frame, version)              # the bytes sent, kept before they leave
            elif capture.active:
                kept = capture.keep(req, ctx, code, t0, frame, version)
            waiting = send(frame)
            if waiting is not SENT:
                await waiting
        took = perf_counter() - t0
        self.metrics.request(req.spec.name, error_name(code) if code else "NONE", took)
        if kept is not None:
            capture.written(kept, took * 1000.0)
        elif seen is not None:
            seen.duration_ms = took * 1000.0
            capture.finish(seen)
        return True

    def _closed(self, req: Request, ctx: RequestContext, t0: float) -> bool:
        """The connection is closed instead of answering `req` (captured as such); False for the connection."""
        if self.capture.active:
            self.capture.record(req, ctx, None, 0, t0, "closed")
        return False

    async def _inject(self, fault: Decision, req: Request, peer: Peer) -> bool:
        """Apply an injected fault's or a hook's delay; False if the connection is to be closed instead of
        answered."""
        what = "hook" if fault.hooked else "injected fault"
        prefix = "hook_" if fault.hooked else ""
        if fault.delay_ms:
            self.metrics.faults[(req.name, prefix + "delay")] += 1
            await asyncio.sleep(fault.delay_ms / 1000)
        if fault.close:
            self.metrics.faults[(req.name, prefix + "close")] += 1
            self.metrics.closed_connections["hook" if fault.hooked else "injected_fault"] += 1
            log.info("connection %d from %s: closing instead of answering %s v%d (%s)",
                     peer.conn_id, peer.address, req.name, req.api_version, what)
            return False
        if fault.response is not None:
            self.metrics.faults[(req.name, "hook_answer")] += 1
        if fault.error is not None:
            self.metrics.faults[(req.name, "fail")] += 1
            log.info("connection %d: answering %s v%d with %s (injected fault)", peer.conn_id, req.name,
                     req.api_version, error_name(fault.error))
        return True
