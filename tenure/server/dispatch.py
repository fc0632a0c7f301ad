"""One decoded request to its answer: the request's context built, then the two hooks every request passes -
the fault rules (tenure/control/faults.py), then the access hook (who may do what; every request is allowed
until authentication and ACLs plug in here) -, then one lookup in the routing table (the owner column of
protocol/apis.py: routes.py) to its owner; the answer encoded and sent, and counted in the metrics."""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from tenure.broker.cluster import Cluster
from tenure.broker.dataplane import CLOSE_CONNECTION
from tenure.control.faults import Faults, error_name
from tenure.counters import Metrics
from tenure.protocol.apis import API_VERSIONS_KEY, SUPPORTED
from tenure.protocol.codec import Request, encode_api_versions_error, encode_response
from tenure.protocol.context import RequestContext
from tenure.protocol.error_responses import can_fail, error_response
from tenure.server.connection import Peer
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
    for name in getattr(body, "fields", {}):
        value = getattr(body, name, None)
        if isinstance(value, list):
            for item in value:
                if hasattr(item, "fields"):
                    code = response_error(item, depth - 1)
                    if code:
                        return code
    return 0


class Dispatcher:
    """`Connection`'s dispatch for a server: `await dispatcher(req, peer, send)`. `routes`: each owner of the
    routing table (protocol/apis.py) and its route; `clock_ms`: the server's clock, read into each context."""

    def __init__(self, *, faults: Faults, metrics: Metrics, routes: dict[str, Route], clock_ms: Callable[[], int],
                 cluster: Cluster | None = None, access: Access = allow_all) -> None:
        self.faults, self.metrics = faults, metrics
        self.routes, self.clock_ms, self.access = routes, clock_ms, access
        self.cluster = cluster

    def context(self, req: Request, peer: Peer) -> RequestContext:
        """The request's context, built once and handed to its owner."""
        address = peer.address
        where = f"{address[0]}:{address[1]}" if isinstance(address, tuple) and len(address) >= 2 else str(address)
        return RequestContext(0, req.api_version, req.client_id or "", peer.client_host, self.clock_ms(),
                              api_key=req.api_key, connection_id=peer.conn_id, peer=where,
                              broker_id=peer.broker_id)

    async def __call__(self, req: Request, peer: Peer, send: Callable[[bytes], Awaitable[None]]) -> bool:
        t0 = time.perf_counter()
        ctx = self.context(req, peer)
        node = self.cluster.node(peer.broker_id) if self.cluster is not None else None
        if node is not None and node.slow_ms:
            await asyncio.sleep(node.slow_ms / 1000)      # set_broker_slow
        fault = self.faults.decide(req.api_key)
        if fault.rules and not await self._inject(fault, req, peer):
            return False                       # an injected close
        refused = fault.error if fault.error is not None else self.access(req, ctx)
        answered_error = fault.error is not None or refused != 0     # an injected error may be 0 (NONE)
        if refused and fault.error is None and not can_fail(req.api_key):
            self.metrics.closed_connections["access_refused"] += 1     # no error answer of its own: closed
            log.info("connection %d from %s: closing instead of answering %s v%d (refused: %s)", peer.conn_id,
                     ctx.peer, req.name, req.api_version, error_name(refused))
            return False
        if answered_error:
            body = error_response(req, refused)
        else:
            body = await self.routes[SUPPORTED[req.api_key].owner](req, ctx)
            if body is CLOSE_CONNECTION:
                self.metrics.closed_connections["produce_error_acks_0"] += 1
                return False
        if body is not None:
            if answered_error and req.api_key == API_VERSIONS_KEY:
                await send(encode_api_versions_error(req.correlation_id, refused, req.served))
            else:
                await send(encode_response(req, body))
        code = response_error(body) if body is not None else 0
        self.metrics.request(req.name, error_name(code) if code else "NONE", time.perf_counter() - t0)
        return True

    async def _inject(self, fault, req: Request, peer: Peer) -> bool:
        """Apply an injected fault's delay; False if the connection is to be closed instead of answered."""
        if fault.delay_ms:
            self.metrics.faults[(req.name, "delay")] += 1
            await asyncio.sleep(fault.delay_ms / 1000)
        if fault.close:
            self.metrics.faults[(req.name, "close")] += 1
            self.metrics.closed_connections["injected_fault"] += 1
            log.info("connection %d from %s: closing instead of answering %s v%d (injected fault)",
                     peer.conn_id, peer.address, req.name, req.api_version)
            return False
        if fault.error is not None:
            self.metrics.faults[(req.name, "fail")] += 1
            log.info("connection %d: answering %s v%d with %s (injected fault)", peer.conn_id, req.name,
                     req.api_version, error_name(fault.error))
        return True
