"""KIP-1101's motivating case: what the group metadata hash saves (figures, never assertions).

One consumer group of --members members (default 500) subscribed to --topics topics (default 100) of
--partitions-per-topic partitions each (default 20: 2,000 partitions), every partition with
--replicas replicas (default 3) on brokers spread over --racks racks (default 6), as a rack-aware
placement would put them (a partition's replicas on distinct racks).

Memory (tracemalloc, bytes allocated by building each structure): the group's state as a KIP-848
coordinator keeps it - per member its ids, client, subscription, current and target assignment; per
partition its epoch - next to (a) the pre-KIP-1101 subscription metadata (the ConsumerGroupPartitionMetadata
shape: per subscribed topic its id, name, partition count and, per partition, the set of its replicas' racks)
and (b) what replaces it, one int64 hash. The racks are the brokers' own rack strings, shared, as a
coordinator reading them from its metadata would hold them.

CPU: the hash step of a heartbeat (the coordinator computing the group's metadata hash to compare with the
stored one), once per member for one round of --members heartbeats, --rounds rounds (the best round
counts): with every topic hash cached (tenure's TopicHashCache, as every heartbeat after the first sees it),
recomputed from the topic table each time (no cache), and the first round after CreatePartitions on one
topic (one topic evicted and recomputed, the rest cached); and for reference the pre-KIP-1101 comparison
(building the per-partition rack metadata from the topic table and comparing it with the stored copy).
The figures are ratios in the same run.

    .venv/bin/python bench/metadata_hash.py [--members 500] [--topics 100] [--partitions-per-topic 20]
        [--racks 6] [--brokers 12] [--replicas 3] [--rounds 5]
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import tracemalloc
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchcommon import tree_version  # noqa: E402

from tenure.broker.topics import TopicRegistry  # noqa: E402
from tenure.coordinator.consumer.hash import TopicHashCache, group_hash, topic_hash  # noqa: E402


@dataclass(slots=True)
class Member:
    """What a KIP-848 coordinator keeps per member (Kafka's ConsumerGroupMember, its main fields)."""
    member_id: str
    instance_id: str
    rack_id: str
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    server_assignor: str
    member_epoch: int
    previous_member_epoch: int
    rebalance_timeout_ms: int
    assigned: dict[uuid.UUID, set[int]] = field(default_factory=dict)
    revoking: dict[uuid.UUID, set[int]] = field(default_factory=dict)


@dataclass(slots=True)
class TopicMetadata:
    """The pre-KIP-1101 per-topic subscription metadata (ConsumerGroupPartitionMetadataValue's shape)."""
    topic_id: uuid.UUID
    name: str
    num_partitions: int
    partition_racks: dict[int, set[str]]


class Cluster:
    """Brokers on racks and a rack-aware replica placement (each partition's replicas on distinct racks)."""

    def __init__(self, topics: TopicRegistry, racks: int, brokers: int, replicas: int) -> None:
        self.topics = topics
        self.rack_of = [f"rack-{b % racks}" for b in range(brokers)]
        self.replicas: dict[str, list[list[int]]] = {}
        self.brokers, self.replication = brokers, replicas

    def place(self, name: str, count: int, start: int = 0) -> None:
        placed = self.replicas.setdefault(name, [])
        for p in range(start, count):
            first = (hash(name) + p) % self.brokers
            placed.append([(first + i) % self.brokers for i in range(self.replication)])

    def racks(self, topic) -> list[list[str]]:
        return [[self.rack_of[b] for b in replicas] for replicas in self.replicas[topic.name]]


def allocated(build):
    """(bytes allocated by build() and still held, its result)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    value = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return after - before, value


def group_state(names: list[str], topics: TopicRegistry, members: int) -> tuple[list[Member], dict]:
    """The members with a round-robin assignment of every partition, and the partition epochs."""
    ms = [Member(member_id=str(uuid.uuid4()), instance_id=f"instance-{i}", rack_id=f"rack-{i % 6}",
                 client_id=f"consumer-app-{i}", client_host=f"/10.0.{i // 250}.{i % 250}",
                 subscribed_topic_names=list(names), server_assignor="uniform", member_epoch=7,
                 previous_member_epoch=6, rebalance_timeout_ms=300000) for i in range(members)]
    epochs: dict[uuid.UUID, dict[int, int]] = {}
    k = 0
    for name in names:
        topic = topics.get(name)
        for p in range(len(topic.partitions)):
            ms[k % members].assigned.setdefault(topic.topic_id, set()).add(p)
            epochs.setdefault(topic.topic_id, {})[p] = 7
            k += 1
    return ms, epochs


def subscription_metadata(names: list[str], topics: TopicRegistry, cluster: Cluster) -> dict[str, TopicMetadata]:
    out = {}
    for name in names:
        topic = topics.get(name)
        racks = cluster.racks(topic)
        out[name] = TopicMetadata(topic.topic_id, name, len(racks), {p: set(r) for p, r in enumerate(racks)})
    return out


def best_round(step, members: int, rounds: int, before_round=None) -> float:
    """The best of `rounds` rounds of `members` calls of step(), in seconds per round."""
    best = float("inf")
    for _ in range(rounds):
        if before_round is not None:
            before_round()
        t0 = time.perf_counter()
        for _ in range(members):
            step()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--members", type=int, default=500)
    p.add_argument("--topics", type=int, default=100)
    p.add_argument("--partitions-per-topic", type=int, default=20)
    p.add_argument("--racks", type=int, default=6)
    p.add_argument("--brokers", type=int, default=12)
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()

    topics = TopicRegistry(default_partitions=a.partitions_per_topic)
    cluster = Cluster(topics, a.racks, a.brokers, a.replicas)
    names = [f"topic-{i:03d}" for i in range(a.topics)]
    for name in names:
        topics.create(name)
        cluster.place(name, a.partitions_per_topic)
    total = a.topics * a.partitions_per_topic
    print(f"tree {tree_version()}; python {sys.version.split()[0]}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"one group: {a.members} members, {a.topics} topics x {a.partitions_per_topic} partitions = {total} "
          f"partitions, {a.replicas} replicas each on {a.brokers} brokers over {a.racks} racks")

    state_bytes, state = allocated(lambda: group_state(names, topics, a.members))
    meta_bytes, stored = allocated(lambda: subscription_metadata(names, topics, cluster))
    cache = TopicHashCache(topics, racks=cluster.racks)
    hash_bytes, stored_hash = allocated(lambda: cache.group_hash(names))
    cache_bytes = hash_bytes          # the cache's entries are built by that first call
    one_hash = sys.getsizeof(stored_hash)
    print("\nmemory (bytes allocated and held, tracemalloc)")
    print(f"  group state without topic metadata ({a.members} members, assignments, partition epochs): "
          f"{state_bytes:,}")
    print(f"  pre-KIP-1101 per-partition rack metadata: {meta_bytes:,} = "
          f"{meta_bytes / (state_bytes + meta_bytes):.0%} of the group's state with it")
    print(f"  KIP-1101 metadata hash in the group: {one_hash} bytes (one int); the shard's topic-hash cache "
          f"shared by all its groups: {cache_bytes:,} ({a.topics} entries)")
    print(f"  group state with rack metadata / with the hash: "
          f"{(state_bytes + meta_bytes) / (state_bytes + one_hash):.2f}x; "
          f"rack metadata / (hash + the whole cache): {meta_bytes / (one_hash + cache_bytes):.0f}x")
    del state

    def cached() -> None:
        assert cache.group_hash(names) == stored_hash

    def recomputed() -> None:
        hashes = {}
        for name in names:
            topic = topics.get(name)
            hashes[name] = topic_hash(topic.topic_id, name, cluster.racks(topic))
        assert group_hash(hashes) == stored_hash

    def pre_kip_1101() -> None:
        assert subscription_metadata(names, topics, cluster) == stored

    t_cached = best_round(cached, a.members, a.rounds)
    t_recomputed = best_round(recomputed, a.members, max(1, a.rounds // 2))
    t_old = best_round(pre_kip_1101, a.members, max(1, a.rounds // 2))

    grown = names[0]
    grow_to = [a.partitions_per_topic]

    def create_partitions() -> None:
        grow_to[0] += 1
        topics.add_partitions(grown, grow_to[0])
        cluster.place(grown, grow_to[0], start=grow_to[0] - 1)

    first_after = [True]

    def after_change() -> None:
        # the first heartbeat of the round recomputes the grown topic, the others find it cached
        value = cache.group_hash(names)
        if first_after[0]:
            first_after[0] = False
            assert value != stored_hash

    def reset() -> None:
        create_partitions()
        first_after[0] = True
    computed = cache.computed
    t_after = best_round(after_change, a.members, a.rounds, before_round=reset)
    recomputes = cache.computed - computed

    per = 1e6 / a.members
    print(f"\nheartbeat hash step, one round of {a.members} heartbeats (best of {a.rounds}; "
          f"{max(1, a.rounds // 2)} for the slow ones)")
    print(f"  topic hashes cached:                  {t_cached * 1e3:8.1f} ms/round  {t_cached * per:8.1f} us/heartbeat")
    print(f"  first round after CreatePartitions:   {t_after * 1e3:8.1f} ms/round  {t_after * per:8.1f} us/heartbeat"
          f"  ({recomputes // a.rounds} topic hash recomputed per round)")
    print(f"  topic hashes recomputed every time:   {t_recomputed * 1e3:8.1f} ms/round  "
          f"{t_recomputed * per:8.1f} us/heartbeat")
    print(f"  pre-KIP-1101 rack metadata compared:  {t_old * 1e3:8.1f} ms/round  {t_old * per:8.1f} us/heartbeat")
    print(f"  recomputed / cached: {t_recomputed / t_cached:.0f}x; pre-KIP-1101 / cached: {t_old / t_cached:.0f}x; "
          f"after CreatePartitions / cached: {t_after / t_cached:.2f}x")


if __name__ == "__main__":
    main()
