"""A realistic synthetic __consumer_offsets log (`tenure log synth`, bench/recovery.py, bench/audit.py).

Written with the project's own write path: the data dir and topic catalog as a server opens them
(storage DataDir + broker TopicRegistry), records encoded by tenure.protocol.records, batches built and
appended by the coordinator's one writer to __consumer_offsets (coordinator/writer.py CoordinatorWriter:
one batch per state change, partitions chosen by Kafka's group hash), segments rolled at `segment_bytes`. A server opens the
result as it opens its own.

The simulated workload: `groups` consumer groups of `members` static members each (group.instance.id
set) on a `partitions`-partition topic. A simulated clock advances so that every member commits about
every 5 s (auto.commit.interval.ms); each step picks a group at random and one of:

- commit (most steps): one member commits its partitions (one batch of partitions/members records);
- rolling restart of the whole group (`restart_rate`): each member, 2 s apart, rejoins with member id
  "" and gets a new id: a `replaced` event and the group's GroupMetadata (same generation and
  assignment) in one batch, as the coordinator writes a KIP-345 replacement of a stable group;
  with chance `fence_rate` the replaced pod lingers and is fenced a few seconds later (`fenced`:
  old = the id it presents, new = the mapped id), a batch of its own;
- rebalance (`rebalance_rate`): generation + 1, member ids kept, assignment rotated (GroupMetadata);
- expiration (`expire_rate`): a member's session times out: `expired` (old id, new None), then after
  the rebalance the GroupMetadata of generation + 1 without it; the pod comes back 30-120 s later
  with a new id: `joined` (old None), then GroupMetadata of generation + 2 with it;
- leave (`leave_rate`, `left`: a LeaveGroup naming its own member id) and admin removal
  (`remove_rate`, `removed`: removeMembersFromConsumerGroup) - the same shape as an expiration;
- forced rebalance (`force_rate`): one `forced_rebalance` event per member (old == new == its id) in one
  batch, then GroupMetadata of generation + 1 with the same members;
- deletion (`delete_rate`): every member expires (one batch each; the last one's batch also holds the
  Empty GroupMetadata), DeleteGroups writes tombstones for the offsets, the group and every static
  event key, then the group forms again (`joined` for each member, GroupMetadata generation 1).

Events carry the group's generation before the rebalance they start, the simulated time, and the
member's client id and host. While a group has a multi-step change under way (an absent member, a
pending rebalance) only its present members commit. Steps due after the last requested record are
still written (the log ends with every group stable and complete), so a log holds `records` records
or a few more. The same config and seed give the same log byte for byte.

Every record written is also replayed into the real coordinator shard of its partition, and at the end
the shards' groups (generation, instance map) and offsets must be what the simulation says it wrote
(`check_against_shards`, AssertionError otherwise).

Consistency (tests/storage/test_synth.py): folding a group's events in log order (joined/replaced set
instance -> new id, expired/left/removed drop it, fenced/forced_rebalance leave it) gives the instance
map of each GroupMetadata record of that group at the point it is written.
"""
from __future__ import annotations

import functools
import heapq
import itertools
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

START_MS = 1_767_225_600_000                     # 2026-01-01T00:00:00Z


@dataclass(frozen=True)
class SynthConfig:
    records: int = 1_000_000
    groups: int = 2000
    members: int = 8
    partitions: int = 16                         # of each group's topic
    topics: int = 50                             # distinct topics the groups consume
    segment_bytes: int = 100 * 1024 * 1024       # Kafka's offsets.topic.segment.bytes
    offsets_partitions: int = 1
    restart_rate: float = 0.002                  # per step: rolling restart of a whole group
    rebalance_rate: float = 0.0005               # per step: rebalance (generation + 1, ids kept)
    expire_rate: float = 0.0003                  # per step: a member's session expires (it comes back)
    leave_rate: float = 0.0001                   # per step: a member leaves with its own id (comes back)
    remove_rate: float = 0.0001                  # per step: an admin removes a member (it comes back)
    force_rate: float = 0.0001                   # per step: a forced rebalance of the group
    fence_rate: float = 0.05                     # per replaced member: its old pod is fenced once
    delete_rate: float = 0.00005                 # per step: the group is deleted and forms again
    seed: int = 1

    def params(self) -> dict:
        return {**asdict(self), "version": 3}


def generate(data_dir: str | Path, cfg: SynthConfig = SynthConfig(),
             progress: Callable[[dict, float], None] | None = None) -> dict:
    """Write the log into `data_dir` (created; must hold no logs yet). Returns {"params", "stats",
    "expected": {group: {topic, generation, members}}, "committed": {group: {partition: offset}}}."""
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

    from tenure.broker.topics import OFFSETS_TOPIC, TopicRegistry
    from tenure.coordinator import GroupShard, partition_for
    from tenure.coordinator.writer import CoordinatorWriter
    from tenure.protocol import records as rec
    from tenure.protocol.records import GroupMetadataRecord, MemberRecord, OffsetCommitRecord, StaticMemberEventRecord
    from tenure.storage.datadir import DataDir
    from tenure.storage.segments import LogConfig

    if cfg.groups < 1 or cfg.members < 1 or cfg.partitions < 1 or cfg.topics < 1 or cfg.offsets_partitions < 1:
        raise ValueError("groups, members, partitions, topics and offsets_partitions must be >= 1")
    data_dir = Path(data_dir)
    if data_dir.exists() and any(data_dir.glob("*/*.log")):
        raise FileExistsError(f"{data_dir} already holds logs")
    rng = random.Random(cfg.seed)
    data = DataDir.open(data_dir, LogConfig(segment_bytes=cfg.segment_bytes))
    try:
        registry = TopicRegistry(1, data.open_log, data.catalog)
        topic = registry.create(OFFSETS_TOPIC, cfg.offsets_partitions, internal=True,
                                configs={"cleanup.policy": "compact"})
        data.cluster_id()
        clock = [START_MS]
        writer = CoordinatorWriter(topic, clock_ms=lambda: clock[0])
        # each partition's records also go to a real coordinator shard, whose state is checked against
        # what the simulation expects at the end (see check_against_shards)
        shards = [GroupShard(partition=p) for p in range(cfg.offsets_partitions)]
        stats: dict[str, Any] = {"batches": 0, "records": 0, "group_records": 0, "offset_records": 0, "event_records": 0,
                 "tombstones": 0, "commits": 0, "restarts": 0, "rebalances": 0, "expirations": 0,
                 "leaves": 0, "removals": 0, "forced_rebalances": 0, "fenced": 0, "deletions": 0}
        causes = {c: 0 for c in rec.STATIC_EVENT_CAUSES}
        topics = [f"svc{t:02d}.events.v1" for t in range(cfg.topics)]
        P, M = cfg.partitions, cfg.members
        Sub, Asg = ConsumerProtocolSubscription, ConsumerProtocolAssignment
        asg_cache: dict[tuple, bytes] = {}
        sub_cache: dict[str, bytes] = {}

        def new_member_id(iid: str) -> str:
            return f"{iid}-{uuid.UUID(int=rng.getrandbits(128), version=4)}"

        committed: dict[str, dict[int, int]] = {}  # what a reader must find: the last offset per partition
        keys: set = set()                          # distinct record keys (what compaction would keep)

        def write(records: list) -> None:
            writer.write(records)                  # the coordinator's own write path: one batch per state change
            for r in records:
                shards[partition_for(r.group_id, cfg.offsets_partitions)].replay(r)
            stats["batches"] += 1
            stats["records"] += len(records)
            for r in records:
                stats["tombstones"] += r.tombstone
                if isinstance(r, OffsetCommitRecord):
                    stats["offset_records"] += 1
                    keys.add((r.group_id, r.topic, r.partition))
                    if r.tombstone:
                        committed.get(r.group_id, {}).pop(r.partition, None)
                    else:
                        committed.setdefault(r.group_id, {})[r.partition] = r.offset
                elif isinstance(r, GroupMetadataRecord):
                    stats["group_records"] += 1
                    keys.add(r.group_id)
                else:
                    stats["event_records"] += 1
                    keys.add((r.group_id, r.group_instance_id))
                    if not r.tombstone:
                        causes[r.cause] += 1

        class G:
            def __init__(self, i: int) -> None:
                self.gid = f"svc{i % cfg.topics:02d}-consumer-{i:05d}"
                self.topic = topics[i % cfg.topics]
                self.iids = [f"{self.gid}-pod-{k}" for k in range(M)]
                self.client = f"{self.gid}-client"
                self.host = [f"/10.{(i >> 8) & 255}.{i & 255}.{k + 1}" for k in range(M)]
                self.offsets = {p: rng.randrange(0, 1_000_000) for p in range(P)}
                self.ids: list[str | None] = [None] * M
                self.previous: list[str | None] = [None] * M   # the last id each instance was replaced from
                self.generation = 0
                self.busy = 0                      # steps of a multi-step change still scheduled
                sub = sub_cache.get(self.topic)
                if sub is None:
                    sub = sub_cache[self.topic] = bytes(
                        Sub(topics=[self.topic], user_data=None, owned_partitions=[]).encode(version=1))
                self.sub: bytes = sub
                self.assign()

            def present(self) -> list[int]:
                return [k for k in range(M) if self.ids[k] is not None]

            def assign(self) -> None:
                """Assignment over the present members, rotated by the generation."""
                present = self.present()
                self.owner: list[list[int]] = [[] for _ in range(M)]
                if present:
                    for p in range(P):
                        self.owner[present[(p + self.generation) % len(present)]].append(p)
                self.asg: dict[int, bytes] = {}        # each present member's assignment
                for k in present:
                    ck = (self.topic, tuple(self.owner[k]))
                    b = asg_cache.get(ck)
                    if b is None:
                        b = asg_cache[ck] = bytes(Asg(assigned_partitions=[Asg.TopicPartition(
                            topic=self.topic, partitions=self.owner[k])], user_data=None).encode(version=1))
                    self.asg[k] = b

            def rebalanced(self) -> GroupMetadataRecord:
                """The rebalance completes: generation + 1, assignment over the present members."""
                self.generation += 1
                self.assign()
                return self.record()

            def record(self) -> GroupMetadataRecord:
                present = self.present()
                if not present:                    # Empty: Kafka's record of an empty group
                    return GroupMetadataRecord(group_id=self.gid, protocol_type="consumer",
                                               generation=self.generation, protocol=None, leader=None,
                                               current_state_timestamp=clock[0], members=())
                return GroupMetadataRecord(
                    group_id=self.gid, protocol_type="consumer", generation=self.generation, protocol="range",
                    leader=self.ids[present[0]], current_state_timestamp=clock[0],
                    members=tuple(MemberRecord(member_id, self.iids[k], self.client, self.host[k],
                                               300_000, 45_000, self.sub, self.asg[k])
                                  for k, member_id in enumerate(self.ids) if member_id is not None))

            def event(self, k: int, cause: str, old: str | None, new: str | None) -> StaticMemberEventRecord:
                return StaticMemberEventRecord(self.gid, self.iids[k], cause, old, new, self.generation, clock[0],
                                               self.client, self.host[k])

        # follow-up steps of multi-step changes: (due_ms, seq, group, fn)
        pending: list = []
        seq = itertools.count()

        def later(delay_ms: int, g: G, fn: Callable[[], None]) -> None:
            g.busy += 1
            heapq.heappush(pending, (clock[0] + delay_ms, next(seq), g, fn))

        def run_due(until: int | None) -> None:
            while pending and (until is None or pending[0][0] <= until):
                due, _, g, fn = heapq.heappop(pending)
                clock[0] = max(clock[0], due)
                g.busy -= 1
                fn()

        def form(g: G) -> None:
            """A new group: each member joins (its own batch: `joined`), then generation 1."""
            for k in range(M):
                g.ids[k] = new_member_id(g.iids[k])
                write([g.event(k, rec.JOINED, None, g.ids[k])])
                clock[0] += rng.randrange(5, 200)
            write([g.rebalanced()])

        def depart(g: G, k: int, cause: str) -> None:
            """A member removed (expired / left / removed): the rebalance, then it comes back."""
            old = g.ids[k]
            g.ids[k] = None
            write([g.event(k, cause, old, None)])

            def complete() -> None:
                write([g.rebalanced()])

            def rejoin() -> None:
                g.ids[k] = new_member_id(g.iids[k])
                write([g.event(k, rec.JOINED, None, g.ids[k])])
                later(rng.randrange(3000, 6000), g, complete)

            later(rng.randrange(3000, 10_000), g, complete)
            later(rng.randrange(30_000, 120_000), g, rejoin)

        def fence(g: G, k: int, stale: str) -> None:
            if g.ids[k] is not None and g.ids[k] != stale:
                stats["fenced"] += 1
                write([g.event(k, rec.FENCED, stale, g.ids[k])])

        def restart(g: G) -> None:
            """A rolling restart: one member every 2 s, each replaced with a new id (KIP-345)."""
            def replace(k: int) -> None:
                old = g.ids[k]
                if old is None:
                    return
                g.ids[k] = new_member_id(g.iids[k])
                g.previous[k] = old
                write([g.event(k, rec.REPLACED, old, g.ids[k]), g.record()])
                if rng.random() < cfg.fence_rate:
                    later(rng.randrange(500, 10_000), g, lambda: fence(g, k, old))

            for k in range(M):
                later(2000 * k, g, functools.partial(replace, k))

        def delete(g: G) -> None:
            """Every member expires, DeleteGroups, then the group forms again."""
            for k in g.present():
                old = g.ids[k]
                g.ids[k] = None
                recs: list[StaticMemberEventRecord | GroupMetadataRecord] = [g.event(k, rec.EXPIRED, old, None)]
                if not g.present():
                    g.generation += 1
                    g.assign()
                    recs.append(g.record())
                write(recs)
                clock[0] += rng.randrange(5, 500)
            # static event keys: every instance has had one (its `joined` at least)
            write([OffsetCommitRecord(g.gid, g.topic, p, tombstone=True) for p in range(P)]
                  + [GroupMetadataRecord(g.gid, tombstone=True)]
                  + [StaticMemberEventRecord(g.gid, iid, tombstone=True) for iid in g.iids])
            g.generation = 0
            g.previous = [None] * M
            later(rng.randrange(10_000, 60_000), g, lambda: form(g))

        def complete_rebalance(g: G) -> None:
            write([g.rebalanced()])

        def commit(g: G) -> bool:
            present = [k for k in g.present() if g.owner[k]]
            if not present:
                return False
            k = present[rng.randrange(len(present))]
            recs = []
            for p in g.owner[k]:
                g.offsets[p] += rng.randrange(0, 500)
                recs.append(OffsetCommitRecord(g.gid, g.topic, p, g.offsets[p], 3, "", clock[0]))
            write(recs)
            stats["commits"] += 1
            return True

        t0 = time.perf_counter()
        groups = []
        for i in range(cfg.groups):
            g = G(i)
            groups.append(g)
            if stats["records"] < cfg.records:
                form(g)
        step_ms = max(1, 5000 // max(1, cfg.groups * M))   # auto.commit.interval.ms=5000 across all members
        thresholds = list(itertools.accumulate(
            [cfg.delete_rate, cfg.rebalance_rate, cfg.restart_rate, cfg.expire_rate, cfg.leave_rate,
             cfg.remove_rate, cfg.force_rate]))
        last_report = t0
        while stats["records"] < cfg.records:
            clock[0] += step_ms
            run_due(clock[0])
            if stats["records"] >= cfg.records:
                break
            g = groups[rng.randrange(len(groups))]
            x = rng.random()
            if g.busy or x >= thresholds[-1] or not g.present():
                commit(g)
            elif x < thresholds[0]:
                stats["deletions"] += 1
                delete(g)
            elif x < thresholds[1]:
                stats["rebalances"] += 1
                write([g.rebalanced()])
            elif x < thresholds[2]:
                stats["restarts"] += 1
                restart(g)
            elif x < thresholds[6]:
                if x < thresholds[3]:
                    cause, stat = rec.EXPIRED, "expirations"
                elif x < thresholds[4]:
                    cause, stat = rec.LEFT, "leaves"
                elif x < thresholds[5]:
                    cause, stat = rec.REMOVED, "removals"
                else:
                    cause = None
                if cause is None:
                    stats["forced_rebalances"] += 1
                    write([g.event(k, rec.FORCED_REBALANCE, g.ids[k], g.ids[k]) for k in g.present()])
                    later(rng.randrange(1000, 5000), g, functools.partial(complete_rebalance, g))
                else:
                    stats[stat] += 1
                    present = g.present()
                    depart(g, present[rng.randrange(len(present))], cause)
            if progress is not None:
                now = time.perf_counter()
                if now - last_report > 15:
                    progress(stats, now - t0)
                    last_report = now
        run_due(None)                              # finish every change under way: all groups complete
        stats["write_s"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        for plog in topic.partitions:
            plog.flush()
            plog.close()
        stats["flush_s"] = time.perf_counter() - t1
    finally:
        data.close()
    segs = segment_files(data_dir)
    stats["bytes"] = sum(p.stat().st_size for p in segs)
    stats["segments"] = len(segs)
    stats["groups"] = len(groups)
    stats["distinct_keys"] = len(keys)
    stats["end_ms"] = clock[0]
    stats["causes"] = causes
    expected = {g.gid: {"topic": g.topic, "generation": g.generation,
                        "members": sorted(m for m in g.ids if m is not None),
                        "instances": {g.iids[k]: g.ids[k] for k in g.present()}}
                for g in groups if g.generation > 0}
    result = {"params": cfg.params(), "stats": stats, "expected": expected,
              "committed": {g: {str(p): o for p, o in ps.items()} for g, ps in committed.items() if ps}}
    check_against_shards(result, shards)
    return result


def check_against_shards(result: dict, shards: list) -> None:
    """The groups and offsets the coordinator's shards hold after replaying every record written are what
    the simulation expects (generation and instance map of each group, the last offset of each partition);
    AssertionError naming the first group that differs."""
    held = {gid: shard for shard in shards for gid in shard.group_ids()}
    expected, committed = result["expected"], result["committed"]
    if set(held) != set(expected) | set(committed):
        raise AssertionError(f"synth: the shards hold {len(held)} group(s), the simulation "
                             f"{len(set(expected) | set(committed))}")
    for gid, shard in held.items():
        g = shard.group(gid)
        want = expected.get(gid)
        if want is not None and (g.generation, g.static_members) != (want["generation"], want["instances"]):
            raise AssertionError(f"synth: group {gid}: the shard holds generation {g.generation} "
                                 f"{g.static_members}, the simulation {want['generation']} {want['instances']}")
        offsets = {str(p): r.offset for (_, p), r in shard.committed_offsets(gid).items()}
        if offsets != committed.get(gid, {}):
            raise AssertionError(f"synth: group {gid}: the shard holds offsets {offsets}, "
                                 f"the simulation {committed.get(gid, {})}")


def segment_files(data_dir: str | Path) -> list[Path]:
    from tenure.broker.topics import OFFSETS_TOPIC
    return sorted(Path(data_dir).glob(f"{OFFSETS_TOPIC}-*/*.log"))


def summary_line(data_dir: str | Path, result: dict) -> str:
    s = result["stats"]
    c = s["causes"]
    return (f"synth {data_dir}: {s['records']:,} records in {s['batches']:,} batches, {s['bytes'] / 2**20:,.1f} MiB "
            f"in {s['segments']} segment(s); {s['groups']:,} groups; {s['offset_records']:,} offset commits, "
            f"{s['group_records']:,} group records, {s['event_records']:,} static-member events ("
            + ", ".join(f"{k} {v:,}" for k, v in c.items() if v) +
            f"), {s['tombstones']:,} tombstones; simulated {(s['end_ms'] - START_MS) / 1000:,.0f} s; "
            f"written in {s['write_s'] + s['flush_s']:.1f} s")
