"""What every part of the `Broker` (dataplane.py) shares: the node it answers as, the tables it answers from,
and the response class of an API. The handler mixins (topic_apis.py, produce.py, fetch.py, admin.py) declare
their state here, so each file is checked against one definition of it."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from tenure.gcpause import gc_paused
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.context import RequestContext
from tenure.protocol.errors import ErrorCode
from tenure.storage import Log

from .cluster import Cluster
from .configs import ConfigStore
from .partition import Partition
from .producers import ProducerIds
from .replica_manager import ReplicaManager
from .topics import TopicRegistry

if TYPE_CHECKING:                  # (made by the transaction coordinator: protocol/txn_records.py)
    from tenure.protocol.txn_records import TxnMarker

NODE_ID = 0
PARTITIONS_PER_TURN = 1000     # partitions a read-only per-partition answer makes per loop turn


class Node:
    """The address a broker made without a cluster table answers with (its port bound late). (A plain class:
    nothing compares or prints it, and a dataclass's build cost ~0.3 ms of every server's start-up.)"""

    __slots__ = ("host", "port", "node_id")

    def __init__(self, host: str, port: int, node_id: int = NODE_ID) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id


class TransactionSide(Protocol):
    """What the broker asks of the coordinators about transactions (the server wires it in, built in one place:
    tenure/server/build.py): start the transaction coordinator (the first FindCoordinator for a transactional
    id creates __transaction_state, as Kafka's), whether a transactional batch's partition is in its producer's
    transaction (None until the coordinator runs: no transaction can be), and the writer of a marker for an
    internal topic's partition (offsets committed in a transaction: the group coordinator's runtime, whose
    shard replays it; the log written), and (transactions v2, Produce v12+) the coordinator's adding of a
    batch's partitions to its producer's transaction before it is appended."""

    def start(self) -> object: ...

    def verify(self, transactional_id: str | None, producer_id: int, producer_epoch: int, topic: str,
               partition: int) -> int | None: ...

    def internal_marker(self, marker: TxnMarker, now_ms: int) -> Log: ...

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[tuple[str, int]], ctx: RequestContext) -> dict[tuple[str, int], int]:
        """Transactions v2: the partitions join the producer's transaction (the coordinator's code for each)."""
        ...


def per_partition(topics: Any, answer: Callable[[str, Any], Any], make_topic: Callable[[str, list], Any],
                  name: str = "name", items: str = "partitions") -> list:
    """A response's topics for a request's topics: each topic's answer for each of its partitions
    (`answer(topic name, the request's partition item)`), in request order."""
    return [make_topic(getattr(t, name), [answer(getattr(t, name), x) for x in getattr(t, items)]) for t in topics]


async def per_partition_in_turns(topics: Any, answer: Callable[[str, Any], Any], make_topic: Callable[[str, list], Any],
                                 name: str = "name", items: str = "partitions", size: int | None = None) -> list:
    """`per_partition` for a read-only answer, `size` (default PARTITIONS_PER_TURN) partitions per loop turn:
    one request naming 100,000 partitions does not hold every other client for its whole handling. Each
    partition is answered as it is when its turn comes (Kafka reads each partition on its own too); the answer
    is the one `per_partition` gives. No automatic garbage collection walks the answer while it grows
    (gc_paused)."""
    size = size or PARTITIONS_PER_TURN
    if sum(len(getattr(t, items) or []) for t in topics) <= size:
        return per_partition(topics, answer, make_topic, name, items)
    out = []
    left = size
    with gc_paused():
        for t in topics:
            topic, parts = getattr(t, name), []
            for x in getattr(t, items):
                if left == 0:
                    await asyncio.sleep(0)                     # the other clients' turn
                    left = size
                parts.append(answer(topic, x))
                left -= 1
            out.append(make_topic(topic, parts))
    return out


def resp(api_key: int) -> Any:
    """The response class of an API (kafka-python's, at the version the request came with)."""
    return SUPPORTED[api_key].response


class BrokerBase:
    node: Node
    cluster: Cluster
    topics: TopicRegistry
    replicas: ReplicaManager              # the partitions: the one append path and the one read path
    producers: ProducerIds
    configs: ConfigStore
    cluster_id: str
    auto_create_topics: bool
    server_configs: Callable[[], dict[str, str | None]] | None
    txn_side: TransactionSide | None           # None: a broker without coordinators (tests, tools)
    clock: Callable[[], float]
    replica_selector: str | None               # replica.selector.class: RACK_AWARE_SELECTOR or None

    def served_partition(self, topic: str, index: int, ctx: RequestContext, current_leader_epoch: int = -1,
                         require_leader: bool = True) -> tuple[Partition | None, int]:
        """The partition a request names and the error this broker answers for it (0: serve it): one it does
        not have UNKNOWN_TOPIC_OR_PARTITION, then the cluster table's leader and epoch checks (Cluster.check)."""
        p = self.replicas.get(topic, index)
        if p is None:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return p, self.cluster.check(topic, index, current_leader_epoch, broker=ctx.broker_id,
                                     require_leader=require_leader)
