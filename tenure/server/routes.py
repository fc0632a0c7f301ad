"""The owners in the routing table (the owner column of protocol/apis.py): what a request goes through on its
way to the broker, the group coordinator or the transaction coordinator. The dispatcher looks an API's owner up
once and awaits `route(request, context)`; each route here is that owner's way in."""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from tenure.broker.offsets_gate import (
    merge_commit,
    merge_commit_in_turns,
    merge_fetch,
    request_order,
    resolve_ids,
    split_commit,
    split_fetch,
)
from tenure.broker.topics import TopicRegistry
from tenure.coordinator.group_runtime import GroupRuntime
from tenure.deferred import deferred
from tenure.protocol.acl import READ, TOPIC
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.error_responses import error_response
from tenure.protocol.errors import ErrorCode
from tenure.protocol.internal_topics import OFFSETS_TOPIC, partition_for

if TYPE_CHECKING:
    from tenure.coordinator.txn_runtime import TransactionRuntime

# the transaction coordinator's rules, imported at the first request routed to it (deferred.py)
transactions = deferred("tenure.coordinator.transactions")

Route = Callable[[Request, RequestContext], Awaitable[Any]]
OFFSET_COMMIT_KEY = 8
OFFSET_FETCH_KEY = 9
TOPIC_IDS_VERSION = 10          # OffsetCommit and OffsetFetch name topics by id from v10
TXN_OFFSET_COMMIT_KEY = 28
INIT_PRODUCER_ID_KEY = 22


class BrokerRoute:
    """The broker's handlers by API key (`handlers`: the server's table, which a test may wrap)."""

    def __init__(self, handlers: dict[int, Route]) -> None:
        self.handlers = handlers

    async def __call__(self, req: Request, ctx: RequestContext) -> Any:
        return await self.handlers[req.api_key](req, ctx)


class GroupRoute:
    """The group coordinator's runtime. An OffsetCommit or TxnOffsetCommit first passes the broker's topic check
    (broker/offsets_gate.py): partitions of unknown topics are answered 3 here and never reach it. A
    TxnOffsetCommit with partitions left then passes the transaction coordinator's check: its producer's open
    transaction holds the group's offsets partition (AddOffsetsToTxn first; v5+ adds it), as Kafka verifies it.
    OffsetCommit v10 and OffsetFetch v10 name topics by id: the broker resolves them to names first (an unknown
    id answers UNKNOWN_TOPIC_ID) and names the answer's topics by id again (offsets_gate.py)."""

    def __init__(self, runtime: GroupRuntime, topics: TopicRegistry,
                 txn_runtime: Callable[[], TransactionRuntime]) -> None:
        self.runtime, self.topics, self.txn_runtime = runtime, topics, txn_runtime

    async def _txn_check(self, req: Request, ctx: RequestContext) -> int:
        """A TxnOffsetCommit's check by the transaction coordinator: v5+ (transactions v2) adds the group's
        offsets partition to the producer's transaction, as Kafka's broker asks it to; older versions verify
        that AddOffsetsToTxn added it. The code as the request's version reports it."""
        body = req.body
        txn_runtime = self.txn_runtime()
        offsets_partition = (OFFSETS_TOPIC, partition_for(body.group_id, self.runtime.partitions))
        if req.api_version >= 5:
            codes = await txn_runtime.add_partitions(body.transactional_id, body.producer_id, body.producer_epoch,
                                                     [offsets_partition], ctx)
            code = codes[offsets_partition]
        else:
            txn = txn_runtime.shards.get(0)          # none while a move loads it: retry
            code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if txn is None else txn.verify(
                body.transactional_id, body.producer_id, body.producer_epoch, *offsets_partition)
        return transactions.txn_offset_commit_error(code, req.api_version)

    async def _fetch_by_ids(self, req: Request, ctx: RequestContext) -> Any:
        asked: dict[str, object] = {}
        for q in req.body.groups:
            resolve_ids(q.topics, self.topics)
            asked.update((t.name, t.topic_id) for t in q.topics or () if t.name)
        unknown = split_fetch(req.body)
        return merge_fetch(await self.runtime.handle(req, ctx), unknown, asked, self.topics)

    def __call__(self, req: Request, ctx: RequestContext) -> Awaitable[Any]:
        """The runtime's answer (an awaitable); an OffsetCommit, a TxnOffsetCommit or an OffsetFetch by topic ids
        after the broker's part (`_offsets`)."""
        if req.api_key not in (OFFSET_COMMIT_KEY, TXN_OFFSET_COMMIT_KEY, OFFSET_FETCH_KEY) or \
                (req.api_key == OFFSET_FETCH_KEY and req.api_version < TOPIC_IDS_VERSION):
            return self.runtime.handle(req, ctx)
        return self._offsets(req, ctx)

    async def _offsets(self, req: Request, ctx: RequestContext) -> Any:
        by_id = req.api_version >= TOPIC_IDS_VERSION and req.api_key in (OFFSET_COMMIT_KEY, OFFSET_FETCH_KEY)
        if by_id and req.api_key == OFFSET_FETCH_KEY:
            return await self._fetch_by_ids(req, ctx)
        if by_id:
            resolve_ids(req.body.topics, self.topics)
        order = request_order(req.body)
        kept, refused = split_commit(req.body, self.topics, lambda name: ctx.allows(READ, TOPIC, name), by_id)
        if req.api_key == TXN_OFFSET_COMMIT_KEY and kept is not None:
            # as Kafka's broker: only a commit with partitions left reaches the transaction coordinator (a v5
            # one, all of whose partitions are refused, adds nothing to the transaction)
            code = await self._txn_check(req, ctx)
            if code:
                return error_response(req, code) if not refused else \
                    merge_commit(order, error_response(req, code), refused, req.spec.response)
        if not refused and not by_id:
            return await self.runtime.handle(req, ctx)
        answer = await self.runtime.handle(req, ctx) if kept is not None else None
        return await merge_commit_in_turns(order, answer, refused, req.spec.response)


class TransactionRoute:
    """The transaction coordinator's runtime, started on the first request that needs it (`start`), as Kafka
    creates __transaction_state on the first lookup of a transaction coordinator. An InitProducerId without a
    transactional id needs none: the broker hands out the idempotent producer's id; one with an empty
    transactional id is refused with INVALID_REQUEST, as Kafka's transaction coordinator refuses it first."""

    def __init__(self, start: Callable[[], TransactionRuntime], broker: BrokerRoute) -> None:
        self.start, self.broker = start, broker

    async def __call__(self, req: Request, ctx: RequestContext) -> Any:
        if not transactions.is_transaction_request(req.api_key, req.body):
            return await self.broker(req, ctx)
        if req.api_key == INIT_PRODUCER_ID_KEY and req.body.transactional_id == "":
            return error_response(req, ErrorCode.INVALID_REQUEST)
        return await self.start().handle(req, ctx)
