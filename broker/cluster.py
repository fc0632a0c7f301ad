"""The cluster table: the brokers of the one process and, for every partition, its replicas, in-sync
replicas, leader and leader epoch. Metadata, DescribeCluster, FindCoordinator and the leader checks of
the data plane all answer from it; the server's controls (stop/start a broker, move a leader) change it.

Replicas are metadata only: there is one storage, so nothing is copied and nothing can diverge; a
replica is in sync whenever its broker is up. A partition is placed the first time it is looked at
(`state`), as Kafka's controller places it at creation: round robin from a start index with a shift
between rounds, rack-aware when the brokers have racks (each replica on a new rack while one is left).
The start index and shift come from the topic's name, so a placement is the same in every run.

Every leader change bumps the partition's leader epoch and starts a new entry of its epoch cache
(epoch -> first offset), which OffsetsForLeaderEpoch answers from, as Kafka's leader epoch cache."""
from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Protocol

from tenure.protocol.errors import ErrorCode

NO_LEADER = -1


class PartitionFacts(Protocol):
    """What the cluster table asks of a partition's log (the replica manager's partitions answer)."""

    def log_end_offset(self, topic: str, index: int) -> int: ...

    def last_epoch(self, topic: str, index: int) -> int: ...


class _NoLogs:
    """Facts before any partition exists (a table made alone, in tests): empty logs at epoch 0."""

    def log_end_offset(self, topic: str, index: int) -> int:
        return 0

    def last_epoch(self, topic: str, index: int) -> int:
        return 0


class BrokerNode:
    """One broker of the cluster table: its id, address, rack and state. (A plain class: its users read and set
    its fields, nothing compares or prints it, and a dataclass's build cost ~0.4 ms of every server's start-up.)"""

    __slots__ = ("id", "host", "port", "rack", "up", "slow_ms", "unreachable", "endpoints")

    def __init__(self, id: int, host: str, port: int, rack: str | None = None, up: bool = True, slow_ms: int = 0,
                 unreachable: bool = False, endpoints: dict[str, tuple[str, int]] | None = None) -> None:
        self.id = id
        self.host = host
        self.port = port
        self.rack = rack
        self.up = up
        self.slow_ms = slow_ms              # set_broker_slow: added before each answer of this broker
        self.unreachable = unreachable      # set_broker_unreachable: new connections are closed at once
        # each listener's advertised address, by listener name (none: `host`:`port` for every listener)
        self.endpoints: dict[str, tuple[str, int]] = {} if endpoints is None else endpoints

    def address(self, listener: str) -> tuple[str, int]:
        """(host, port) clients on `listener` are told for this broker: that listener's own address, as Kafka's
        metadata answers a request with the endpoints of the listener it came in on."""
        return self.endpoints.get(listener, (self.host, self.port))

    def to_dict(self) -> dict:
        return {"id": self.id, "host": self.host, "port": self.port, "rack": self.rack, "up": self.up,
                "slow_ms": self.slow_ms, "unreachable": self.unreachable,
                **({"listeners": {n: f"{h}:{p}" for n, (h, p) in self.endpoints.items()}} if self.endpoints else {})}


class PartitionState:
    """One partition in the cluster table: its replicas, ISR, leader, leader epoch and epoch cache, and an ongoing
    reassignment. (A plain class: its users read and set its fields, nothing compares or prints it, and a
    dataclass's build cost ~0.4 ms of every server's start-up.)"""

    __slots__ = ("replicas", "isr", "leader", "leader_epoch", "epochs", "target", "original")

    def __init__(self, replicas: list[int], isr: list[int], leader: int, leader_epoch: int = 0,
                 epochs: list[tuple[int, int]] | None = None, target: list[int] | None = None,
                 original: list[int] | None = None) -> None:
        self.replicas = replicas
        self.isr = isr
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.epochs: list[tuple[int, int]] = [(0, 0)] if epochs is None else epochs   # (epoch, its first offset)
        # an ongoing reassignment: the replicas it moves to (None: none ongoing) and those it started from
        self.target = target
        self.original = original

    @property
    def adding(self) -> list[int]:
        if self.target is None or self.original is None:
            return []
        return [b for b in self.target if b not in self.original]

    @property
    def removing(self) -> list[int]:
        if self.target is None or self.original is None:
            return []
        return [b for b in self.original if b not in self.target]

    def new_epoch(self, start_offset: int) -> None:
        """Bump the leader epoch; its cache entry starts at `start_offset`. As Kafka's LeaderEpochFileCache
        .assign, entries starting at or after it go first: an epoch in which nothing was written is dropped."""
        self.leader_epoch += 1
        while self.epochs and self.epochs[-1][1] >= start_offset:
            self.epochs.pop()
        self.epochs.append((self.leader_epoch, start_offset))

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for a requested leader epoch, as Kafka's LeaderEpochFileCache.endOffsetFor:
        the latest epoch: the log end; an older one: the first offset of the next epoch after the largest
        epoch <= it (older than any known: the requested epoch and the first known epoch's start); newer
        than any or undefined: (-1, -1)."""
        if epoch < 0 or epoch > self.leader_epoch:
            return -1, -1
        if epoch == self.leader_epoch:
            return epoch, log_end_offset
        floor = None
        for e, start in self.epochs:
            if e > epoch:
                return (floor if floor is not None else epoch), start
            floor = e
        return -1, -1


class LeaderChange:
    """A partition's leadership moved from broker `old` to `new` (NO_LEADER: none), now at leader epoch `epoch`:
    what the cluster table tells its `on_leader_change` listeners. (A plain class: they read its fields, nothing
    compares or prints it, and a dataclass's build cost ~0.5 ms of every server's start-up.)"""

    __slots__ = ("topic", "partition", "old", "new", "epoch")

    def __init__(self, topic: str, partition: int, old: int, new: int, epoch: int) -> None:
        self.topic, self.partition, self.old, self.new, self.epoch = topic, partition, old, new, epoch


def rack_alternated(brokers: list[BrokerNode]) -> list[int]:
    """Broker ids with the racks taking turns (Kafka's getRackAlternatedBrokerList): r1's first, r2's
    first, ..., r1's second, ...; racks and brokers in their sorted order (every broker has a rack)."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers, key=lambda b: b.id):
        if b.rack is None:
            raise ValueError(f"broker {b.id} has no rack")
        by_rack.setdefault(b.rack, []).append(b.id)
    racks = sorted(by_rack)
    out: list[int] = []
    for i in range(max(len(v) for v in by_rack.values())):
        out.extend(by_rack[r][i] for r in racks if i < len(by_rack[r]))
    return out


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def place(topic: str, partition: int, brokers: list[BrokerNode], factor: int) -> list[int]:
    """The replicas of one partition, leader first: Kafka's AdminUtils assignment with its start index and
    replica shift taken from the topic's name (Kafka draws them at random), rack-aware when every broker
    has a rack."""
    n = len(brokers)
    factor = min(factor, n)
    seed = zlib.crc32(topic.encode())
    start, shift0 = seed % n, (seed // n) % n
    racked = all(b.rack is not None for b in brokers)
    order = rack_alternated(brokers) if racked else sorted(b.id for b in brokers)
    rack_of = {b.id: b.rack for b in brokers}
    first = (partition + start) % n
    shift = shift0 + partition // n
    replicas = [order[first]]
    if n == 1:
        return replicas
    if not racked:
        return replicas + [order[_replica_index(first, shift, j, n)] for j in range(factor - 1)]
    racks = len(set(rack_of.values()))
    racks_used, k = {rack_of[order[first]]}, 0
    while len(replicas) < factor:
        b = order[_replica_index(first, shift * racks, k, n)]
        k += 1
        if b in replicas:
            continue
        if rack_of[b] in racks_used and len(racks_used) < racks:
            continue
        replicas.append(b)
        racks_used.add(rack_of[b])
    return replicas


class Cluster:
    """Brokers 0..N-1 (host, port once bound, rack, up) and the state of every partition looked at."""

    def __init__(self, brokers: int = 1, host: str = "127.0.0.1", racks: tuple[str, ...] | None = None,
                 replication_factor: int | None = None) -> None:
        self.brokers: dict[int, BrokerNode] = {
            i: BrokerNode(i, host, -1, racks[i] if racks else None) for i in range(brokers)}
        self.replication_factor = replication_factor if replication_factor is not None else min(3, brokers)
        self.parts: dict[tuple[str, int], PartitionState] = {}
        self.factors: dict[str, int] = {}      # a topic created with its own replication factor
        # the partitions' logs (the broker's replica manager): a log's end offset starts a new leader epoch;
        # a partition is placed with the epoch of its log's last batch (a restart on a data dir goes on from
        # the epoch its clients have seen)
        self.storage: PartitionFacts = _NoLogs()
        # what the data dir keeps of a topic: its replication factor (-1: none asked) and the replicas of a
        # partition placed by hand (None: none); set by the broker (broker/admin_apis.py)
        self.stored_factor: Callable[[str], int] = lambda topic: -1
        self.stored_replicas: Callable[[str, int], list[int] | None] = lambda topic, partition: None
        # called after each leader change (the server moves coordinators with it)
        self.on_leader_change: list[Callable[[LeaderChange, str], None]] = []
        # the controller quorum presented (DescribeQuorum): every broker a combined broker+controller voter, the
        # controller its leader; its epoch moves when the controller does, and its log gains one record per change
        # of this table (a broker up or down, a partition placed, a leader or its replicas changed), as a KRaft
        # cluster's metadata log does
        self.quorum_epoch = 1
        self.metadata_records = 0

    # ------------------------------------------------------------------ queries
    def up(self) -> list[BrokerNode]:
        return [b for b in self.brokers.values() if b.up]

    @property
    def controller_id(self) -> int:
        """The lowest live broker (-1 when none is up)."""
        return min((b.id for b in self.up()), default=NO_LEADER)

    def state(self, topic: str, partition: int) -> PartitionState:
        """A partition's state, placed now if it is looked at for the first time."""
        key = (topic, partition)
        st = self.parts.get(key)
        if st is None:
            kept = [b for b in self.stored_replicas(topic, partition) or [] if b in self.brokers]
            replicas = kept or place(topic, partition, list(self.brokers.values()), self.factor_of(topic))
            isr = [b for b in replicas if self.brokers[b].up]
            # epochs before the first one known here (a previous run's) end where this run found the log
            epoch = self.storage.last_epoch(topic, partition)
            st = self.parts[key] = PartitionState(replicas, isr, isr[0] if isr else NO_LEADER, epoch,
                                                  [(epoch, self.storage.log_end_offset(topic, partition))])
            self.metadata_records += 1
        return st

    def set_factor(self, topic: str, factor: int) -> None:
        """A topic created asking for `factor` replicas (-1: the cluster's default)."""
        if factor != -1:
            self.factors[topic] = factor

    def factor_of(self, topic: str) -> int:
        if topic in self.factors:
            return self.factors[topic]
        stored = self.stored_factor(topic)
        return min(stored, len(self.brokers)) if stored != -1 else self.replication_factor

    def leader_of(self, topic: str, partition: int) -> int:
        """The partition's leader (NO_LEADER: none). Asked at every coordinator request (is its coordinator here?):
        the partition's state read straight from the table once it is placed."""
        st = self.parts.get((topic, partition))
        return (st if st is not None else self.state(topic, partition)).leader

    def known_broker(self, broker_id: object) -> int:
        """`broker_id` if it names a broker of this cluster; ValueError (naming the brokers) otherwise."""
        if isinstance(broker_id, bool) or not isinstance(broker_id, int) or broker_id not in self.brokers:
            raise ValueError(f"no broker {broker_id!r}: the brokers are 0..{len(self.brokers) - 1}")
        return broker_id

    def node(self, broker_id: int) -> BrokerNode | None:
        return self.brokers.get(broker_id)

    @property
    def has_racks(self) -> bool:
        return any(b.rack is not None for b in self.brokers.values())

    def replica_racks(self, topic: str, partition: int) -> list[str]:
        """The racks of a partition's replicas (brokers without a rack left out; a stopped broker keeps its
        rack, as Kafka keeps a fenced broker's registration): what the partition's KIP-1101 hash covers."""
        return [b.rack for b in (self.brokers.get(r) for r in self.state(topic, partition).replicas)
                if b is not None and b.rack is not None]

    def forget(self, topic: str) -> None:
        """A deleted topic: its partitions are placed afresh if it is created again."""
        for key in [k for k in self.parts if k[0] == topic]:
            del self.parts[key]
        self.factors.pop(topic, None)

    def check(self, topic: str, partition: int, current_leader_epoch: int = -1, broker: int | None = None,
              require_leader: bool = True) -> int:
        """The error (0: none) a broker answers for a request on a partition it must lead, in Kafka's order
        (Partition.localLogWithEpochOrThrow): a broker holding no replica: NOT_LEADER_OR_FOLLOWER; then the
        client's current leader epoch (-1: not checked): newer than the partition's UNKNOWN_LEADER_EPOCH,
        older FENCED_LEADER_EPOCH; then a follower: NOT_LEADER_OR_FOLLOWER. `broker`: the broker the request came
        in on (its context's broker id); None (a handler called directly): no broker check."""
        st = self.state(topic, partition)
        if broker is not None and broker not in st.replicas:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if current_leader_epoch >= 0:
            if current_leader_epoch > st.leader_epoch:
                return ErrorCode.UNKNOWN_LEADER_EPOCH
            if current_leader_epoch < st.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
        if require_leader and broker is not None and st.leader != broker:
            return ErrorCode.LEADER_NOT_AVAILABLE if st.leader == NO_LEADER else ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    # ------------------------------------------------------------------ changes
    def _elect(self, topic: str, partition: int, st: PartitionState, new: int, cause: str) -> LeaderChange:
        old = st.leader
        st.leader = new
        st.new_epoch(self.storage.log_end_offset(topic, partition))
        self.metadata_records += 1
        change = LeaderChange(topic, partition, old, new, st.leader_epoch)
        for listener in self.on_leader_change:
            listener(change, cause)
        return change

    def _registration_changed(self, controller_before: int) -> None:
        """A broker went up or down: a record in the metadata log, and a new quorum epoch if the controller moved."""
        self.metadata_records += 1
        if self.controller_id != controller_before:
            self.quorum_epoch += 1

    def _known(self, broker_id: int) -> BrokerNode:
        b = self.brokers.get(broker_id)
        if b is None:
            raise ValueError(f"no broker {broker_id}: the brokers are 0..{len(self.brokers) - 1}")
        return b

    def stop(self, broker_id: int) -> list[LeaderChange]:
        """A broker goes down: it leaves every ISR, and each partition it led gets the first other in-sync
        replica as leader (none left: no leader, LEADER_NOT_AVAILABLE); each such change bumps the epoch."""
        b = self._known(broker_id)
        if not b.up:
            return []
        controller = self.controller_id
        b.up = False
        self._registration_changed(controller)
        changes = []
        for (topic, partition), st in list(self.parts.items()):
            if broker_id in st.isr and len(st.isr) > 1:
                st.isr.remove(broker_id)        # as Kafka: the last in-sync replica stays in the ISR
            if st.leader == broker_id:
                new = next((r for r in st.replicas if r in st.isr and self.brokers[r].up), NO_LEADER)
                changes.append(self._elect(topic, partition, st, new, "broker_stopped"))
        return changes

    def start(self, broker_id: int) -> list[LeaderChange]:
        """A broker comes back: it rejoins the ISR of its partitions (one storage: it is caught up at once)
        and leads those that had no leader. Leaderships it had are not moved back (see move_leader)."""
        b = self._known(broker_id)
        if b.up:
            return []
        controller = self.controller_id
        b.up = True
        self._registration_changed(controller)
        changes = []
        for (topic, partition), st in list(self.parts.items()):
            if broker_id not in st.replicas:
                continue
            if st.leader == NO_LEADER:
                st.isr = [broker_id]
                changes.append(self._elect(topic, partition, st, broker_id, "broker_started"))
            elif broker_id not in st.isr:
                st.isr.append(broker_id)
            changes.extend(self._complete(topic, partition, st))
        return changes

    # ------------------------------------------------------------------ admin: assignments, reassignments, elections
    def assign(self, topic: str, partition: int, replicas: list[int]) -> None:
        """A partition created with a manual replica assignment (checked by the caller): these replicas in
        this order, the live ones in sync, the first live one the leader (as Kafka's controller)."""
        isr = [b for b in replicas if self.brokers[b].up]
        epoch = self.storage.last_epoch(topic, partition)
        self.parts[(topic, partition)] = PartitionState(list(replicas), isr, isr[0] if isr else NO_LEADER, epoch,
                                                        [(epoch, self.storage.log_end_offset(topic, partition))])

    def reassign(self, topic: str, partition: int, target: list[int] | None) -> list[LeaderChange]:
        """AlterPartitionReassignments for one partition (`target` None: cancel the ongoing one; the caller
        checks that one is). As Kafka's controller: while ongoing, the replicas are the target followed by
        the ones being removed; the reassignment completes when every target replica is in sync - here at
        once for live brokers (one storage, nothing to copy), when it starts for a stopped one. On
        completion the replicas are the target, and a leader outside it hands over to the first in-sync
        target replica; a replica removed bumps the leader epoch even when the leader stays (it is fenced)."""
        st = self.state(topic, partition)
        if target is None:
            original = st.original
            st.target = st.original = None
            if original is None:            # none ongoing (the caller checks): nothing to cancel
                return []
            return self._set_replicas(topic, partition, st, original, "reassignment_cancelled")
        original = st.original if st.target is not None and st.original is not None else list(st.replicas)
        if target == original:
            st.target = st.original = None
            return self._set_replicas(topic, partition, st, list(target), "reassigned")
        st.target, st.original = list(target), original
        st.replicas = list(target) + [b for b in original if b not in target]
        for b in target:
            if self.brokers[b].up and b not in st.isr:
                st.isr.append(b)            # caught up at once: one storage
        return self._complete(topic, partition, st)

    def _complete(self, topic: str, partition: int, st: PartitionState) -> list[LeaderChange]:
        """Finish an ongoing reassignment whose target replicas are all in sync."""
        if st.target is None or not all(b in st.isr for b in st.target):
            return []
        target = st.target
        st.target = st.original = None
        return self._set_replicas(topic, partition, st, target, "reassigned")

    def _set_replicas(self, topic: str, partition: int, st: PartitionState, replicas: list[int],
                      cause: str) -> list[LeaderChange]:
        removed = [b for b in st.replicas if b not in replicas]
        st.replicas = list(replicas)
        self.metadata_records += 1
        st.isr = [b for b in st.isr if b in replicas] or [b for b in replicas if self.brokers[b].up]
        if st.leader in replicas and st.leader != NO_LEADER:
            if removed:                     # as Kafka's PartitionChangeBuilder: the removed replicas are fenced
                st.new_epoch(self.storage.log_end_offset(topic, partition))
            return []
        new = next((b for b in replicas if b in st.isr and self.brokers[b].up), NO_LEADER)
        return [self._elect(topic, partition, st, new, cause)]

    def reassignments(self) -> dict[tuple[str, int], PartitionState]:
        """The partitions with an ongoing reassignment."""
        return {k: st for k, st in self.parts.items() if st.target is not None}

    def elect(self, topic: str, partition: int, unclean: bool) -> int:
        """ElectLeaders for one partition, as Kafka's controller: preferred - the first replica leads again
        if it is live and in sync (leads already: ELECTION_NOT_NEEDED, cannot: PREFERRED_LEADER_NOT_AVAILABLE);
        unclean - only a partition without a leader gets one, an in-sync live replica first, else any live
        replica (none: ELIGIBLE_LEADERS_NOT_AVAILABLE)."""
        st = self.state(topic, partition)
        if unclean:
            if st.leader != NO_LEADER:
                return ErrorCode.ELECTION_NOT_NEEDED
            live = [b for b in st.replicas if self.brokers[b].up]
            new = next((b for b in live if b in st.isr), live[0] if live else NO_LEADER)
            if new == NO_LEADER:
                return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
            st.isr = [new] if new not in st.isr else st.isr
            self._elect(topic, partition, st, new, "elected")
            return ErrorCode.NONE
        preferred = st.replicas[0]
        if st.leader == preferred:
            return ErrorCode.ELECTION_NOT_NEEDED
        if preferred not in st.isr or not self.brokers[preferred].up:
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        self._elect(topic, partition, st, preferred, "elected")
        return ErrorCode.NONE

    def move_leader(self, topic: str, partition: int, to: int, cause: str = "moved") -> LeaderChange | None:
        """Make broker `to` the leader (it must be up and a replica; a replica that is not yet one is added
        to the replicas and the ISR, as a reassignment would). None if it leads already."""
        b = self._known(to)
        if not b.up:
            raise ValueError(f"broker {to} is stopped: it cannot lead {topic}-{partition}")
        st = self.state(topic, partition)
        if st.leader == to:
            return None
        if to not in st.replicas:
            st.replicas.append(to)
        if to not in st.isr:
            st.isr.append(to)
        return self._elect(topic, partition, st, to, cause)
