"""What every part of the `Broker` (dataplane.py) shares: the node it answers as, the tables it answers from,
and the response class of an API. The handler mixins (topic_apis.py, produce.py, fetch.py, admin.py) declare
their state here, so each file is checked against one definition of it."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tenure.protocol.apis import SUPPORTED
from tenure.protocol.markers import TxnMarker
from tenure.storage import Log

from .cluster import Cluster
from .configs import ConfigStore
from .producers import ProducerIds
from .replica_manager import ReplicaManager
from .topics import TopicRegistry

NODE_ID = 0


@dataclass
class Node:
    host: str
    port: int
    node_id: int = NODE_ID


class TxnVerifier(Protocol):
    """The transaction coordinator, as Produce asks it whether a transactional batch's partition is in its
    producer's transaction (coordinator/transactions.py)."""

    def verify(self, transactional_id: str | None, producer_id: int, producer_epoch: int, topic: str,
               partition: int) -> int: ...


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
    # the transaction coordinator once a client asked for transactions (`start_transactions`, set by the
    # server, starts it)
    transactions: TxnVerifier | None
    start_transactions: Callable[[], object] | None
    # a marker for an internal topic's partition (offsets committed in a transaction): written by that topic's
    # coordinator runtime and replayed by the partition's shard; returns the log written (set by the server)
    internal_marker: Callable[[TxnMarker, int], Log] | None
    clock: Callable[[], float]
