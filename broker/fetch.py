"""Reading, as the `Broker` (dataplane.py) answers it: Fetch (long poll; the request's byte budget; read through
the replica manager up to the high watermark or, read_committed, the last stable offset), ListOffsets and
OffsetsForLeaderEpoch."""
from __future__ import annotations

from typing import Any

from tenure.protocol.acl import CLUSTER_ACTION, DESCRIBE, READ, TOPIC
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.errors import ErrorCode

from .base import BrokerBase, per_partition_in_turns, resp
from .message_format import CannotDownConvert, downconvert
from .partition import Partition
from .topics import Topic

READ_COMMITTED = 1      # Fetch isolation level
LEGACY_FETCH_UNTIL = 3  # Fetch v0-3 read message formats v0 (v0-1) and v1 (v2-3): down-converted (message_format.py)
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def legacy_offsets(p: Partition, ts: int, max_num_offsets: int, now_ms: int) -> list[int]:
    """ListOffsets v0 (Kafka 2.8-3.9's UnifiedLog.legacyFetchOffsetsBefore, for a consumer): the table of each
    segment's base offset (not below the log start offset) with its last change - here the segment's newest record
    timestamp, where Kafka reads the file's modification time -, then the log end offset with now when the newest
    segment holds data; from the entry of the latest (-1), the earliest (-2) or the last changed at or before `ts`,
    at most `max_num_offsets` offsets going back; an offset past the high watermark is the high watermark."""
    spans = p.log.segment_spans()
    table = [(max(base, p.log_start_offset), newest) for base, _next, _size, newest in spans]
    if not table or spans[-1][2] > 0:
        table.append((p.log_end_offset, now_ms))
    if ts == -1:
        start = len(table) - 1
    elif ts == -2:
        start = 0
    else:
        start = max((i for i, (_o, changed) in enumerate(table) if changed <= ts), default=-1)
    offsets = [table[i][0] for i in range(start, max(start - max(max_num_offsets, 0), -1), -1)]
    hw = p.high_watermark
    if any(o > hw for o in offsets):
        offsets = [hw] + [o for o in offsets if o <= hw]
    return offsets


class FetchApis(BrokerBase):
    def _resolve_fetch_topic(self, t: Any, v: int) -> tuple[Topic | None, str | None]:
        if v >= 13:
            topic = self.topics.by_id(t.topic_id)
            return topic, (topic.name if topic else None)
        return self.topics.get(t.topic), t.topic

    async def fetch(self, req: Request, ctx: RequestContext) -> Any:
        body, v = req.body, req.api_version
        deadline = self.clock() + max(body.max_wait_ms, 0) / 1000.0
        while True:
            response, total, had_error, partitions = self._fetch_once(body, v, ctx)
            remaining = deadline - self.clock()
            if total >= body.min_bytes or had_error or remaining <= 0 or not partitions or self.replicas.stopping:
                return response
            await self.replicas.wait_for_append(partitions, remaining)

    def _preferred_replica(self, topic: str, index: int, rack: str | None, broker: int | None) -> int:
        """Kafka's RackAwareReplicaSelector (replica.selector.class) for a consumer's fetch on the leader: a live
        in-sync replica in the client's rack (the lowest id: all are caught up here, one storage), unless the
        leader is in that rack or none is; -1 (the leader serves it) otherwise."""
        if self.replica_selector != RACK_AWARE_SELECTOR or not rack:
            return -1
        st = self.cluster.state(topic, index)
        if broker is not None and broker != st.leader:
            return -1                                  # only the leader redirects
        same = [b for b in st.replicas if b in st.isr and self.cluster.brokers[b].up
                and self.cluster.brokers[b].rack == rack]
        if not same or st.leader in same:
            return -1
        return min(same)

    def _fetch_once(self, body: Any, v: int, ctx: RequestContext) -> tuple[Any, int, bool, list[Partition]]:
        R = resp(1)
        state = body.replica_state if v >= 15 else None            # a tagged field: absent for consumers
        replica = (state.replica_id if state is not None else -1) if v >= 15 else body.replica_id
        rack = body.rack_id if v >= 11 and replica < 0 else None   # a consumer's rack (KIP-392)
        TR, PD = R.FetchableTopicResponse, R.FetchableTopicResponse.PartitionData
        budget = body.max_bytes if v >= 3 else 2**31 - 1
        total = 0
        had_error = False
        read: list[Partition] = []
        topics_out = []
        follower_allowed = replica < 0 or ctx.allows_cluster(CLUSTER_ACTION)   # a follower's fetch: CLUSTER_ACTION
        for t in body.topics:
            topic, name = self._resolve_fetch_topic(t, v)
            # as Kafka: an id that names no topic is UNKNOWN_TOPIC_ID; else READ on the topic (a follower:
            # CLUSTER_ACTION on the cluster), then whether it is
            allowed = (v >= 13 and topic is None) or (
                ctx.allows(READ, TOPIC, name or "") if replica < 0 else follower_allowed)
            parts = []
            for fp in t.partitions:
                pd = PD(partition_index=fp.partition, error_code=0, high_watermark=-1, last_stable_offset=-1,
                        log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1, records=b"")
                parts.append(pd)
                if not allowed:
                    pd.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    had_error = True
                    continue
                p = self.replicas.get(name, fp.partition) if topic is not None and name is not None else None
                if p is None:
                    pd.error_code = (ErrorCode.UNKNOWN_TOPIC_ID if v >= 13 and topic is None
                                     else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    had_error = True
                    continue
                # a consumer's Fetch v11+ carries client metadata (KIP-392): as Kafka, a follower serves it too
                code = self.cluster.check(p.topic, p.index, fp.current_leader_epoch if v >= 9 else -1,
                                          broker=ctx.broker_id, require_leader=v < 11)
                if code:
                    pd.error_code = code
                    had_error = True
                    continue
                pd.high_watermark = p.high_watermark
                pd.last_stable_offset = p.last_stable_offset
                pd.log_start_offset = p.log_start_offset
                pd.preferred_read_replica = self._preferred_replica(p.topic, p.index, rack, ctx.broker_id)
                if pd.preferred_read_replica >= 0:
                    continue                    # as Kafka: no records, the client fetches from that replica
                if not p.log_start_offset <= fp.fetch_offset <= p.log_end_offset:
                    pd.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                    had_error = True
                    continue
                read.append(p)
                committed = v >= 4 and body.isolation_level == READ_COMMITTED
                if committed:
                    pd.aborted_transactions = []
                if fp.fetch_offset >= self.replicas.read_end(p, committed):
                    continue
                # Kafka's ReplicaManager.readFromLog: each partition reads min(its own max, what is left of
                # the request's max_bytes); only the first partition that returns data may exceed that by
                # returning its first batch whole, so that a consumer always progresses
                limit = min(fp.partition_max_bytes, budget - total)
                if limit <= 0 and total:
                    continue
                got = self.replicas.read(p, fp.fetch_offset, max(limit, 1), committed)
                if got.aborted is not None:
                    AT = PD.AbortedTransaction
                    pd.aborted_transactions = [AT(producer_id=pid, first_offset=first) for pid, first in got.aborted]
                if total and len(got.records) > limit:      # a single batch larger than what is left: not now
                    continue
                if v <= LEGACY_FETCH_UNTIL and got.records:
                    try:
                        pd.records = downconvert(got.records, 0 if v <= 1 else 1, fp.fetch_offset)
                    except CannotDownConvert as exc:
                        pd.error_code = exc.error_code
                        had_error = True
                        continue
                    total += len(got.records)
                    continue
                pd.records = got.records
                total += len(got.records)
            topics_out.append(TR(topic=name or "", topic_id=getattr(t, "topic_id", None) if v >= 13 else None,
                                 partitions=parts))
        response = R(throttle_time_ms=0, error_code=0, session_id=0, responses=topics_out)
        return response, total, had_error, read

    async def list_offsets(self, req: Request, ctx: RequestContext) -> Any:
        v = req.api_version
        R = resp(2)
        TR, PR = R.ListOffsetsTopicResponse, R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
        committed = v >= 2 and req.body.isolation_level == READ_COMMITTED

        def answer(topic: str, lp: Any) -> Any:
            # leader_epoch stays -1 (as Kafka answers) unless an offset is found
            pr = PR(partition_index=lp.partition_index, error_code=0, timestamp=-1, offset=-1, leader_epoch=-1)
            if not ctx.allows(DESCRIBE, TOPIC, topic):
                pr.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                return pr
            p, pr.error_code = self.served_partition(topic, lp.partition_index, ctx,
                                                     lp.current_leader_epoch if v >= 4 else -1)
            if p is None or pr.error_code:
                return pr
            ts = lp.timestamp
            if v == 0:
                pr.old_style_offsets = legacy_offsets(p, ts, lp.max_num_offsets, ctx.now_ms)
                return pr
            found: tuple[int, int] | None = None
            if ts == -1:            # LATEST: the high watermark; to READ_COMMITTED the last stable offset
                found = (p.last_stable_offset if committed else p.high_watermark), -1
            elif ts in (-2, -4):    # EARLIEST, EARLIEST_LOCAL
                found = p.log_start_offset, -1
            elif ts == -3:          # MAX_TIMESTAMP
                found = p.log.max_timestamp()
            elif (ts == -5 and v >= 9) or (ts == -6 and v >= 11):
                pass    # LATEST_TIERED (KIP-1005), EARLIEST_PENDING_UPLOAD (KIP-1023): no tiered storage, -1 as Kafka
            elif ts < 0:
                pr.error_code = ErrorCode.INVALID_REQUEST
            else:
                found = p.log.offset_for_timestamp(ts)
            if found:
                (pr.offset, pr.timestamp) = found
                pr.leader_epoch = p.leader_epoch
            return pr
        return R(throttle_time_ms=0, topics=await per_partition_in_turns(
            req.body.topics, answer, lambda name, parts: TR(name=name, partitions=parts)))

    async def offset_for_leader_epoch(self, req: Request, ctx: RequestContext) -> Any:
        R = resp(23)
        TR, E = R.OffsetForLeaderTopicResult, R.OffsetForLeaderTopicResult.EpochEndOffset
        cluster_action = ctx.allows_cluster(CLUSTER_ACTION)     # as Kafka: every topic; else DESCRIBE per topic

        def answer(topic: str, ep: Any) -> Any:
            e = E(error_code=0, partition=ep.partition, leader_epoch=-1, end_offset=-1)
            if not (cluster_action or ctx.allows(DESCRIBE, TOPIC, topic)):
                e.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                return e
            p, e.error_code = self.served_partition(topic, ep.partition, ctx, ep.current_leader_epoch)
            if not e.error_code and p is not None:
                # the epoch cache: the latest epoch ends at the log end; an older one where the next began;
                # -1 (no epoch) and newer epochs: -1/-1, as Kafka
                e.leader_epoch, e.end_offset = p.end_offset_for(ep.leader_epoch)
            return e
        return R(throttle_time_ms=0, topics=await per_partition_in_turns(
            req.body.topics, answer, lambda name, parts: TR(topic=name, partitions=parts), name="topic"))
