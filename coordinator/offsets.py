"""Committed offsets: OffsetCommit (O1-O5), OffsetFetch (O6) and OffsetDelete, over one offset store per
shard (the OffsetCommit records, replayed).

What a commit must prove about its member (generation, identity, state) and which topics a group still
consumes depend on the group's kind: `validate_commit`, `committed`, `offset_delete_error` and
`subscribed_topics` are asked of the group kind (`GroupShard.kind_of`), so a second kind of group
plugs in its own rules. A commit to a group nobody knows makes a "simple" group, a classic one, as Kafka.

OffsetCommit v0-9 and OffsetFetch v0-9 share ONE offset store (the OffsetCommit records). Kafka before
KIP-896 (4.0 dropped both v0s and OffsetCommit v1) kept v0 commits in ZooKeeper and served v0 fetches
from there, a store separate from __consumer_offsets; a single store is right here: there is no
ZooKeeper, and a group's offsets must not depend on the version that committed them. v0 carries no
generation, member id or instance id: it is a commit with generation -1 and member "" (O1-O3: accepted
for an unknown or Empty group, 25 on a group with members). v1 adds a per-partition commit timestamp: -1
means now, anything else is stored as given (Kafka's OffsetAndMetadata.fromRequest). The leader epoch
exists from v6, -1 before.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer.group import OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchResponse

from tenure.protocol.acl import DESCRIBE, GROUP, READ, TOPIC
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.error_responses import offset_commit_error, offset_delete_error
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.records import OffsetCommitRecord, TransactionalOffsetCommit

from .classic.group import DEAD, ClassicGroup
from .handler import ShardHandler
from .result import RequestContext, Result

TXN_OFFSET_COMMIT = 28      # its classes come from the served-API table, imported at its first request


def commit_record(group_id: str, version: int, topic: str, p, meta: str, now_ms: int) -> OffsetCommitRecord:
    """The record an accepted OffsetCommit of `version` writes for its partition `p` of `topic` (v1's own
    commit timestamp kept; the leader epoch from v6)."""
    stamp = p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now_ms
    return OffsetCommitRecord(group_id, topic, p.partition_index, p.committed_offset,
                              p.committed_leader_epoch if version >= 6 else -1, meta, stamp)


@dataclass(frozen=True)
class CommitPlan:
    """What an OffsetCommit writes and answers if its group accepts it: its records, in the order they are
    emitted, and its answer's topics (every partition NONE, or OFFSET_METADATA_TOO_LARGE and no record)."""
    records: list
    topics: list


def plan_partitions(topics_in, T, record_of: Callable[[str, Any, str], Any], metadata_max_bytes: int) -> CommitPlan:
    """Each partition of an OffsetCommit or TxnOffsetCommit: the metadata size check (O5), else NONE with the
    record `record_of(topic, partition, metadata)`. A pure function of the request."""
    P = T.fields["partitions"].data_class
    records: list = []
    topics = []
    for t in topics_in:
        parts = []
        for p in t.partitions:
            pcode = E.NONE
            meta = p.committed_metadata or ""
            if len(meta.encode()) > metadata_max_bytes:
                pcode = E.OFFSET_METADATA_TOO_LARGE                        # O5
            else:
                records.append(record_of(t.name, p, meta))
            parts.append(P(partition_index=p.partition_index, error_code=pcode))
        topics.append(T(name=t.name, partitions=parts))
    return CommitPlan(records, topics)


def commit_plan(req, version: int, now_ms: int, metadata_max_bytes: int) -> CommitPlan:
    """The plan of an OffsetCommit at `now_ms`. A pure function of the request, so a heavy commit's plan
    is made and its records encoded off the loop before its handler runs (group_runtime.py)."""
    gid = req.group_id
    return plan_partitions(req.topics, OffsetCommitResponse.OffsetCommitResponseTopic,
                           lambda topic, p, meta: commit_record(gid, version, topic, p, meta, now_ms),
                           metadata_max_bytes)


def txn_commit_plan(req, version: int, now_ms: int, metadata_max_bytes: int) -> CommitPlan:
    """The plan of a TxnOffsetCommit at `now_ms`: its offsets as the producer's (written in its transactional
    batch). A pure function of the request, as `commit_plan`."""
    gid, pid, epoch = req.group_id, req.producer_id, req.producer_epoch
    return plan_partitions(req.topics, SUPPORTED[TXN_OFFSET_COMMIT].response.TxnOffsetCommitResponseTopic,
                           lambda topic, p, meta: TransactionalOffsetCommit(pid, epoch, OffsetCommitRecord(
                               gid, topic, p.partition_index, p.committed_offset,
                               p.committed_leader_epoch if version >= 2 else -1, meta, now_ms)),
                           metadata_max_bytes)


class Offsets(ShardHandler):
    def offset_commit(self, ctx: RequestContext, req, plan: CommitPlan | None = None) -> Result:
        """`plan`: `commit_plan(req, ctx.api_version, ctx.now_ms, ...)` made ahead (a heavy commit); made
        here if None."""
        res = Result()
        v, gid = ctx.api_version, req.group_id
        generation, mid = req.generation_id_or_member_epoch, req.member_id
        iid = req.group_instance_id if v >= 7 else None
        live = self.groups.get(gid)
        code: int = E.NONE
        member = None
        if live is None:
            if generation >= 0:                                            # O1
                code = E.GROUP_ID_NOT_FOUND if v >= 9 else E.ILLEGAL_GENERATION
        elif live.state == DEAD:
            code = E.COORDINATOR_NOT_AVAILABLE
        else:                                                              # O2-O4: the group kind's rule
            code, member = self.shard.kind_of(live).validate_commit(res, live, ctx, generation, mid, iid)
        if code:                                                           # the whole request refused
            res.respond(ctx.token, offset_commit_error(req.topics, code))
            return res

        if plan is None:
            plan = commit_plan(req, v, ctx.now_ms, self.config.offset_metadata_max_bytes)
        res.emit_all(plan.records)
        topics = plan.topics
        if live is None:                                                   # O1: a simple group
            res.install(gid, ClassicGroup(gid, state_timestamp=ctx.now_ms))
        if member is not None:
            self.shard.kind_of(live).committed(res, live, member, ctx.now_ms)
        res.respond(ctx.token, OffsetCommitResponse(throttle_time_ms=0, topics=topics))
        return res

    # TxnOffsetCommit: offsets committed inside the producer's transaction (KIP-98; v3+ carries the member
    # id, generation and group instance id, checked by the group's kind as OffsetCommit's are, so a fenced
    # static member cannot commit - KIP-447). They are written as the producer's transactional batch and
    # count for the group only once its commit marker follows (the shard replays TransactionEnd); an abort
    # drops them. Before v3 (no member fields) the commit is accepted whatever the group's generation, as
    # Kafka does for old producers.
    def txn_offset_commit(self, ctx: RequestContext, req, plan: CommitPlan | None = None) -> Result:
        """`plan`: `txn_commit_plan(req, ctx.api_version, ctx.now_ms, ...)` made ahead; made here if None."""
        res, TxnOffsetCommitResponse = Result(), SUPPORTED[TXN_OFFSET_COMMIT].response
        v, gid = ctx.api_version, req.group_id
        generation, mid = (req.generation_id, req.member_id) if v >= 3 else (-1, "")
        iid = req.group_instance_id if v >= 3 else None
        live = self.groups.get(gid)
        code: int = E.NONE
        if live is None:
            if generation >= 0:
                code = E.ILLEGAL_GENERATION
        elif live.state == DEAD:
            code = E.COORDINATOR_NOT_AVAILABLE
        elif generation >= 0 or mid or iid is not None:
            code, _ = self.shard.kind_of(live).validate_commit(res, live, ctx, generation, mid, iid,
                                                               transactional=True)
        if code:
            res.respond(ctx.token, offset_commit_error(req.topics, code, TxnOffsetCommitResponse))
            return res

        if plan is None:
            plan = txn_commit_plan(req, v, ctx.now_ms, self.config.offset_metadata_max_bytes)
        res.emit_all(plan.records)
        topics = plan.topics
        if live is None:                                                   # a simple group
            res.install(gid, ClassicGroup(gid, state_timestamp=ctx.now_ms))
        res.respond(ctx.token, TxnOffsetCommitResponse(throttle_time_ms=0, topics=topics))
        return res

    def offset_fetch(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v = ctx.api_version
        R = OffsetFetchResponse
        if v >= 8:
            G = R.OffsetFetchResponseGroup
            T, P = G.OffsetFetchResponseTopics, G.OffsetFetchResponseTopics.OffsetFetchResponsePartitions
            # a group asked for all its offsets twice is answered once (see describe_groups)
            wanted = list({(q.group_id, None) if q.topics is None else (q.group_id, i): q
                           for i, q in enumerate(req.groups)}.values())
            groups = []
            for q in wanted:
                if not ctx.allows(DESCRIBE, GROUP, q.group_id):    # each group of the batch on its own
                    groups.append(G(group_id=q.group_id, error_code=E.GROUP_AUTHORIZATION_FAILED, topics=[]))
                    continue
                code = self._fetch_member_error(q) if v >= 9 else E.NONE
                groups.append(G(group_id=q.group_id, error_code=code, topics=[] if code else
                                self._fetch_offsets(q.group_id, q.topics, T, P, req.require_stable, ctx)))
            res.respond(ctx.token, R(throttle_time_ms=0, groups=groups))
        else:
            T, P = R.OffsetFetchResponseTopic, R.OffsetFetchResponseTopic.OffsetFetchResponsePartition
            res.respond(ctx.token, R(throttle_time_ms=0, error_code=0, topics=self._fetch_offsets(
                req.group_id, req.topics, T, P, v >= 7 and req.require_stable, ctx)))
        return res

    def _fetch_member_error(self, q) -> int:
        """OffsetFetch v9 names the fetching member of a consumer group (member id and epoch): the group
        kind says whether it may (a classic group ignores them, as Kafka's)."""
        g = self.groups.get(q.group_id)
        return E.NONE if g is None else self.shard.kind_of(g).validate_fetch(g, q.member_id, q.member_epoch)

    def _fetch_offsets(self, gid: str, topics, T, P, require_stable: bool = False,
                       ctx: RequestContext | None = None) -> list:
        """require_stable (v7+, a read_committed consumer): a partition whose offset an open transaction
        holds is answered UNSTABLE_OFFSET_COMMIT (88) until the transaction ends (the client retries). A topic
        the principal may not DESCRIBE: left out of "all offsets", TOPIC_AUTHORIZATION_FAILED when named."""
        def visible(topic: str) -> bool:
            return ctx is None or ctx.allows(DESCRIBE, TOPIC, topic)
        have = self.offsets.get(gid, {})
        stable = not (require_stable and self.shard.has_pending_offsets(gid))

        def unstable(topic: str, idx: int):
            if stable or not self.shard.has_pending_offsets(gid, topic, idx):
                return None
            return P(partition_index=idx, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                     error_code=E.UNSTABLE_OFFSET_COMMIT)

        if topics is None:                                                 # all committed offsets
            by_topic: dict[str, list] = {}
            for (topic, _part), rec in sorted(have.items()):
                if visible(topic):
                    by_topic.setdefault(topic, []).append(rec)
            return [T(name=topic, partitions=[unstable(topic, r.partition) or
                                              P(partition_index=r.partition, committed_offset=r.offset,
                                                committed_leader_epoch=r.leader_epoch, metadata=r.metadata,
                                                error_code=0) for r in recs])
                    for topic, recs in by_topic.items()]
        out = []
        for t in topics:                                                   # O6
            parts = []
            for idx in t.partition_indexes:
                if not visible(t.name):
                    parts.append(P(partition_index=idx, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                                   error_code=E.TOPIC_AUTHORIZATION_FAILED))
                    continue
                held = unstable(t.name, idx)
                if held is not None:
                    parts.append(held)
                    continue
                r = have.get((t.name, idx))
                parts.append(P(partition_index=idx, committed_offset=r.offset if r else -1,
                               committed_leader_epoch=r.leader_epoch if r else -1,
                               metadata=r.metadata if r else "", error_code=0))
            out.append(T(name=t.name, partitions=parts))
        return out

    def offset_delete(self, ctx: RequestContext, req) -> Result:
        """Kafka 4's OffsetMetadataManager.deleteOffsets for a classic group: unknown -> 69; non-empty and
        not "consumer" -> 68; else per partition 86 if the group subscribes to the topic, otherwise 0 with
        a tombstone if an offset is committed or pending in an open transaction. Kafka snapshots the
        subscribed topics when a generation starts; this reads the current members' subscriptions (they
        differ only mid-rebalance)."""
        res = Result()
        R = OffsetDeleteResponse
        T, P = R.OffsetDeleteResponseTopic, R.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition
        g = self.groups.get(req.group_id)
        if g is None or g.state == DEAD:
            res.respond(ctx.token, offset_delete_error(E.GROUP_ID_NOT_FOUND))
            return res
        kind = self.shard.kind_of(g)
        code = kind.offset_delete_error(g)
        if code:
            res.respond(ctx.token, offset_delete_error(code))
            return res
        subscribed = kind.subscribed_topics(g)
        committed = set(self.offsets.get(g.group_id, {}))
        deleted: set[tuple[str, int]] = set()
        topics = []
        for t in req.topics:
            parts = []
            readable = ctx.allows(READ, TOPIC, t.name)
            for p in t.partitions:
                if not readable:                       # as Kafka: the topic's error, nothing deleted
                    parts.append(P(partition_index=p.partition_index, error_code=E.TOPIC_AUTHORIZATION_FAILED))
                    continue
                if subscribed is None or t.name in subscribed:
                    parts.append(P(partition_index=p.partition_index, error_code=E.GROUP_SUBSCRIBED_TO_TOPIC))
                    continue
                # a tombstone if an offset is committed or an open transaction holds one (the tombstone drops
                # both, as Kafka's); a repeated partition: one tombstone
                tp = (t.name, p.partition_index)
                if tp not in deleted and (tp in committed or self.shard.has_pending_offsets(g.group_id, *tp)):
                    deleted.add(tp)
                    res.emit(OffsetCommitRecord(g.group_id, t.name, p.partition_index, tombstone=True))
                parts.append(P(partition_index=p.partition_index, error_code=0))
            topics.append(T(name=t.name, partitions=parts))
        res.respond(ctx.token, R(error_code=0, throttle_time_ms=0, topics=topics))
        return res
