"""One decoded request to its answer: injected faults first, then the coordinator (group APIs) or the
broker's handlers; the answer encoded and sent, and counted in the metrics."""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from tenure.broker.cluster import CURRENT_BROKER, Cluster
from tenure.broker.dataplane import CLOSE_CONNECTION
from tenure.broker.offsets_gate import merge_commit, request_order, split_commit
from tenure.control.faults import Faults, error_name
from tenure.coordinator import GROUP_APIS
from tenure.coordinator.transactions import is_transaction_request
from tenure.counters import Metrics
from tenure.protocol.apis import API_VERSIONS_KEY
from tenure.protocol.codec import Request, encode_api_versions_error, encode_response
from tenure.protocol.error_responses import error_response
from tenure.protocol.errors import ErrorCode
from tenure.protocol.internal_topics import OFFSETS_TOPIC, partition_for
from tenure.server.connection import Peer

log = logging.getLogger("tenure.server")
OFFSET_COMMIT_KEY = 8
TXN_OFFSET_COMMIT_KEY = 28


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
    """`Connection`'s dispatch for a server: `await dispatcher(req, peer, send)`."""

    def __init__(self, *, faults: Faults, metrics: Metrics, handlers: dict, runtime, topics,
                 transactions: Callable[[], object] | None = None, cluster: Cluster | None = None) -> None:
        self.faults, self.metrics = faults, metrics
        self.handlers, self.runtime, self.topics = handlers, runtime, topics
        self.transactions = transactions       # the transaction coordinator's runtime (started on first use)
        self.cluster = cluster

    async def __call__(self, req: Request, peer: Peer, send: Callable[[bytes], Awaitable[None]]) -> bool:
        t0 = time.perf_counter()
        # the broker this request came in on: the data plane's leader checks and the coordinators' hosting
        # checks read it (this connection's task only)
        CURRENT_BROKER.set(peer.broker_id)
        node = self.cluster.node(peer.broker_id) if self.cluster is not None else None
        if node is not None and node.slow_ms:
            await asyncio.sleep(node.slow_ms / 1000)      # set_broker_slow
        fault = self.faults.decide(req.api_key)
        if fault.rules and not await self._inject(fault, req, peer):
            return False                       # an injected close
        if fault.error is not None:
            body = error_response(req, fault.error)
        elif req.api_key in GROUP_APIS:
            body = await self._group_request(req, peer)
        elif self.transactions is not None and is_transaction_request(req.api_key, req.body):
            body = await self.transactions().handle(req, peer.client_host, peer.broker_id)
        else:
            body = await self.handlers[req.api_key](req)
            if body is CLOSE_CONNECTION:
                self.metrics.closed_connections["produce_error_acks_0"] += 1
                return False
        if body is not None:
            if fault.error is not None and req.api_key == API_VERSIONS_KEY:
                await send(encode_api_versions_error(req.correlation_id, fault.error))
            else:
                await send(encode_response(req, body))
        code = response_error(body) if body is not None else 0
        self.metrics.request(req.name, error_name(code) if code else "NONE", time.perf_counter() - t0)
        return True

    async def _group_request(self, req: Request, peer: Peer):
        """A group API request to the coordinator; an OffsetCommit or TxnOffsetCommit first passes the
        broker's topic check (broker/offsets_gate.py): partitions of unknown topics are answered 3 here and
        never reach it. A TxnOffsetCommit first passes the transaction coordinator's check: its producer's
        open transaction holds the group's offsets partition (AddOffsetsToTxn first), as Kafka verifies it."""
        if req.api_key == TXN_OFFSET_COMMIT_KEY and self.transactions is not None:
            body = req.body
            txn = self.transactions().shards.get(0)          # none while a move loads it: retry
            code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if txn is None else txn.verify(
                body.transactional_id, body.producer_id, body.producer_epoch, OFFSETS_TOPIC,
                partition_for(body.group_id, self.runtime.partitions))
            if code:
                return error_response(req, code)
        client_host, broker = peer.client_host, peer.broker_id
        if req.api_key not in (OFFSET_COMMIT_KEY, TXN_OFFSET_COMMIT_KEY):
            return await self.runtime.handle(req, client_host, broker)
        order = request_order(req.body)
        kept, refused = split_commit(req.body, self.topics)
        if not refused:
            return await self.runtime.handle(req, client_host, broker)
        answer = await self.runtime.handle(req, client_host, broker) if kept is not None else None
        return merge_commit(order, answer, refused, req.spec.response)

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
