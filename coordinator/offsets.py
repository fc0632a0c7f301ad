"""Committed offsets: OffsetCommit (O1-O5), OffsetFetch (O6) and OffsetDelete, over one offset store per
shard (the OffsetCommit records, replayed).

What a commit must prove about its member (generation, identity, state) and which topics a group still
consumes depend on the group's kind: `validate_commit`, `committed`, `offset_delete_error` and
`subscribed_topics` are asked of the group kind (`GroupCoordinator.kind_of`), so a second kind of group
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

from kafka.protocol.consumer.group import OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchResponse

from tenure.protocol.error_responses import offset_commit_error, offset_delete_error
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.records import OffsetCommitRecord

from .classic.group import DEAD, ClassicGroup
from .part import ShardPart
from .result import RequestContext, Result


class Offsets(ShardPart):
    def offset_commit(self, ctx: RequestContext, req) -> Result:
        res = Result()
        v, gid = ctx.api_version, req.group_id
        generation, mid = req.generation_id_or_member_epoch, req.member_id
        iid = req.group_instance_id if v >= 7 else None
        live = self.groups.get(gid)
        code = E.NONE
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
        T, P = OffsetCommitResponse.OffsetCommitResponseTopic, \
            OffsetCommitResponse.OffsetCommitResponseTopic.OffsetCommitResponsePartition
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                pcode = E.NONE
                meta = p.committed_metadata or ""
                if len(meta.encode()) > self.config.offset_metadata_max_bytes:
                    pcode = E.OFFSET_METADATA_TOO_LARGE                    # O5
                else:
                    stamp = p.commit_timestamp if v == 1 and p.commit_timestamp != -1 else ctx.now_ms
                    res.emit(OffsetCommitRecord(gid, t.name, p.partition_index, p.committed_offset,
                                                p.committed_leader_epoch if v >= 6 else -1, meta, stamp))
                parts.append(P(partition_index=p.partition_index, error_code=pcode))
            topics.append(T(name=t.name, partitions=parts))
        if live is None:                                                   # O1: a simple group
            res.install(gid, ClassicGroup(gid, state_timestamp=ctx.now_ms))
        if member is not None:
            self.shard.kind_of(live).committed(res, live, member, ctx.now_ms)
        res.respond(ctx.token, OffsetCommitResponse(throttle_time_ms=0, topics=topics))
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
            groups = [G(group_id=q.group_id, error_code=0,
                        topics=self._fetch_offsets(q.group_id, q.topics, T, P))
                      for q in wanted]
            res.respond(ctx.token, R(throttle_time_ms=0, groups=groups))
        else:
            T, P = R.OffsetFetchResponseTopic, R.OffsetFetchResponseTopic.OffsetFetchResponsePartition
            res.respond(ctx.token, R(throttle_time_ms=0, error_code=0,
                                     topics=self._fetch_offsets(req.group_id, req.topics, T, P)))
        return res

    def _fetch_offsets(self, gid: str, topics, T, P) -> list:
        have = self.offsets.get(gid, {})
        if topics is None:                                                 # all committed offsets
            by_topic: dict[str, list] = {}
            for (topic, part), rec in sorted(have.items()):
                by_topic.setdefault(topic, []).append(rec)
            return [T(name=topic, partitions=[P(partition_index=r.partition, committed_offset=r.offset,
                                                committed_leader_epoch=r.leader_epoch, metadata=r.metadata,
                                                error_code=0) for r in recs])
                    for topic, recs in by_topic.items()]
        out = []
        for t in topics:                                                   # O6
            parts = []
            for idx in t.partition_indexes:
                r = have.get((t.name, idx))
                parts.append(P(partition_index=idx, committed_offset=r.offset if r else -1,
                               committed_leader_epoch=r.leader_epoch if r else -1,
                               metadata=r.metadata if r else "", error_code=0))
            out.append(T(name=t.name, partitions=parts))
        return out

    def offset_delete(self, ctx: RequestContext, req) -> Result:
        """Kafka 4's OffsetMetadataManager.deleteOffsets for a classic group: unknown -> 69; non-empty and
        not "consumer" -> 68; else per partition 86 if the group subscribes to the topic, otherwise 0 with
        a tombstone if an offset exists. Kafka snapshots the subscribed topics when a generation starts;
        this reads the current members' subscriptions (they differ only mid-rebalance)."""
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
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                if subscribed is None or t.name in subscribed:
                    parts.append(P(partition_index=p.partition_index, error_code=E.GROUP_SUBSCRIBED_TO_TOPIC))
                    continue
                if (t.name, p.partition_index) in committed:             # a repeated partition: one tombstone
                    committed.discard((t.name, p.partition_index))
                    res.emit(OffsetCommitRecord(g.group_id, t.name, p.partition_index, tombstone=True))
                parts.append(P(partition_index=p.partition_index, error_code=0))
            topics.append(T(name=t.name, partitions=parts))
        res.respond(ctx.token, R(error_code=0, throttle_time_ms=0, topics=topics))
        return res
