"""A synchronous harness around the pure `GroupShard`: a fake clock, deterministic member ids,
keyed timers, and the responses/records each input produced.

Every response is put through the wire codec at the request's api version (encode, then decode), so a
test sees exactly what a client of that version would read; it is kept as a plain dict
(`to_dict(json=False)`). Expected values are built the same way from kafka-python objects, so fields
that do not exist at a version drop out on both sides.

After every input the harness checks the event-sourcing invariants:
- replaying the journal (deep-copied as each event is recorded, so a later in-place mutation of live
  state cannot hide) into a fresh coordinator gives `groups` and `offsets` equal to the live ones;
- at a stable point (no request awaiting an answer, every group Stable or Empty), replaying only the
  durable records (what Kafka would load after a failover) gives the same generation, leader, protocol,
  members (ids, instance ids, assignments) and offsets - and so does replaying them after compaction
  (latest value per key);
- every record survives Kafka's key/value encoding unchanged;
- static-member events: the instance ids with an event key (`static_event_keys`) are the same after
  journal replay, records-only replay and compaction, and belong to live groups only (a deleted group
  leaves none behind); and folding the events gives each group's live instance map (`static_members`):
  the history in the log is complete and consistent with the state.
Each request is answered at most once. `rebalances` collects the (group, cause) of every rebalance the
inputs started (`Result.rebalances`; `take_rebalances()` gives those since the last call; `last_result` is
the Result of the latest input). `failover()` gives a new harness whose coordinator loaded only
the durable records, as a broker taking over the partition would.
"""
from __future__ import annotations

import copy
import dataclasses
import itertools

from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.producer import TxnOffsetCommitResponse

from tenure.coordinator import (
    EMPTY,
    KEY_TYPES,
    STABLE,
    CoordinatorConfig,
    GroupShard,
    GroupSnapshot,
    RequestContext,
    TimerKey,
    TimerWheel,
)
from tenure.protocol import records as wire_records
from tenure.protocol.consumer_group import ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse
from tenure.protocol.records import (
    EXPIRED,
    FENCED,
    FORCED_REBALANCE,
    GROUP_FULL,
    JOINED,
    LEFT,
    REGISTRATION_EXPIRED,
    REMOVED,
    REPLACED,
    SYNC_EXPIRED,
    GroupMetadataRecord,
    MemberRecord,
    OffsetCommitRecord,
    StaticMemberEventRecord,
    TransactionalOffsetCommit,
    TransactionEnd,
)
from tenure.protocol.share_group import ShareGroupDescribeResponse, ShareGroupHeartbeatResponse

REMOVAL_CAUSES = (EXPIRED, REGISTRATION_EXPIRED, SYNC_EXPIRED, GROUP_FULL, LEFT, REMOVED)

JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, FETCH, DESCRIBE, LIST, DELETE, OFFSET_DELETE = (
    11, 14, 12, 13, 8, 9, 15, 16, 42, 47)
TXN_OFFSET_COMMIT = 28
CONSUMER_HEARTBEAT, CONSUMER_DESCRIBE = 68, 69
SHARE_HEARTBEAT, SHARE_DESCRIBE = 76, 77

RESPONSE_CLASS = {
    JOIN: JoinGroupResponse, SYNC: SyncGroupResponse, HEARTBEAT: HeartbeatResponse,
    LEAVE: LeaveGroupResponse, COMMIT: OffsetCommitResponse, FETCH: OffsetFetchResponse,
    DESCRIBE: DescribeGroupsResponse, LIST: ListGroupsResponse, DELETE: DeleteGroupsResponse,
    OFFSET_DELETE: OffsetDeleteResponse, TXN_OFFSET_COMMIT: TxnOffsetCommitResponse,
    CONSUMER_HEARTBEAT: ConsumerGroupHeartbeatResponse, CONSUMER_DESCRIBE: ConsumerGroupDescribeResponse,
    SHARE_HEARTBEAT: ShareGroupHeartbeatResponse, SHARE_DESCRIBE: ShareGroupDescribeResponse,
}

SESSION = 10000        # default session timeout of the members in these tests
REBALANCE = 30000      # default rebalance timeout
HOST = "/10.0.0.1"
NEW_MEMBER_JOIN_TIMEOUT = 300000


class _CopyingJournal(list):
    """A journal that stores a deep copy of each event as it is recorded."""

    def append(self, event) -> None:
        super().append(copy.deepcopy(event))


def _normalise(d: dict) -> dict:
    """Kafka lists group members in no particular order (a HashMap): compare them sorted by member id."""
    if isinstance(d.get("members"), list) and d["members"] and "member_id" in d["members"][0] \
            and "error_code" not in d["members"][0]:          # not LeaveGroup's per-member replies
        d["members"] = sorted(d["members"], key=lambda m: m["member_id"])
    for g in d.get("groups") or []:
        if isinstance(g, dict) and g.get("members"):
            g["members"] = sorted(g["members"], key=lambda m: m["member_id"])
    return d


def wire(api_key: int, version: int, body) -> dict:
    """What a client at `version` reads: encode the body at that version and decode it again."""
    cls = RESPONSE_CLASS[api_key]
    body.API_VERSION = version
    data = body.encode(header=False)
    return _normalise(cls.decode(data, version=version, header=False).to_dict(json=False))


def shape(cls, version: int, **fields) -> dict:
    """An expected response: the kafka-python object at `version`, as the same kind of dict."""
    return _normalise(cls(version=version, **fields).to_dict(json=False))


def norm_record(r):
    """A GroupMetadataRecord with its members sorted by member id (their order carries no meaning)."""
    if isinstance(r, GroupMetadataRecord):
        return dataclasses.replace(r, members=tuple(sorted(r.members, key=lambda m: m.member_id)))
    return r


# ---------------------------------------------------------------- expected responses (J4, J14...)
def join_err(version: int, code: int, member_id: str = "") -> dict:
    """J4: every JoinGroup error: generation -1, protocol type/name null ("" before v7), leader "",
    no members, the member id as given."""
    return shape(JoinGroupResponse, version, throttle_time_ms=0, error_code=code, generation_id=-1,
                 protocol_type=None, protocol_name=None if version >= 7 else "", leader="",
                 skip_assignment=False, member_id=member_id, members=[])


def join_ok(version: int, member_id: str, generation: int, leader: str, *, protocol: str = "range",
            protocol_type: str = "consumer", members: list[tuple[str, str | None, bytes]] = (),
            skip_assignment: bool = False) -> dict:
    M = JoinGroupResponse.JoinGroupResponseMember
    return shape(JoinGroupResponse, version, throttle_time_ms=0, error_code=0, generation_id=generation,
                 protocol_type=protocol_type, protocol_name=protocol, leader=leader,
                 skip_assignment=skip_assignment, member_id=member_id,
                 members=[M(version=version, member_id=m, group_instance_id=i, metadata=meta)
                          for m, i, meta in members])


def sync_ok(version: int, assignment: bytes, *, protocol: str = "range", protocol_type: str = "consumer") -> dict:
    return shape(SyncGroupResponse, version, throttle_time_ms=0, error_code=0, protocol_type=protocol_type,
                 protocol_name=protocol, assignment=assignment)


def sync_err(version: int, code: int) -> dict:
    return shape(SyncGroupResponse, version, throttle_time_ms=0, error_code=code, protocol_type=None,
                 protocol_name=None, assignment=b"")


def heartbeat_resp(version: int, code: int) -> dict:
    return shape(HeartbeatResponse, version, throttle_time_ms=0, error_code=code)


def leave_resp(version: int, code: int, members: list[tuple[str, str | None, int]] = ()) -> dict:
    R = LeaveGroupResponse.MemberResponse
    return shape(LeaveGroupResponse, version, throttle_time_ms=0, error_code=code,
                 members=[R(version=version, member_id=m, group_instance_id=i, error_code=c)
                          for m, i, c in members])


def commit_resp(version: int, topics: dict[str, list[tuple[int, int]]]) -> dict:
    T = OffsetCommitResponse.OffsetCommitResponseTopic
    P = T.OffsetCommitResponsePartition
    return shape(OffsetCommitResponse, version, throttle_time_ms=0, topics=[
        T(version=version, name=name, partitions=[P(version=version, partition_index=i, error_code=c)
                                                  for i, c in parts])
        for name, parts in topics.items()])


def offset_delete_resp(code: int, topics: dict[str, list[tuple[int, int]]] = None) -> dict:
    T = OffsetDeleteResponse.OffsetDeleteResponseTopic
    P = T.OffsetDeleteResponsePartition
    return shape(OffsetDeleteResponse, 0, error_code=code, throttle_time_ms=0, topics=[
        T(version=0, name=name, partitions=[P(version=0, partition_index=i, error_code=c) for i, c in parts])
        for name, parts in (topics or {}).items()])


# ---------------------------------------------------------------- expected records
def member_record(member_id: str, instance_id: str | None, subscription: bytes, assignment: bytes = b"", *,
                  client_id: str = "client", host: str = HOST, rebalance: int = REBALANCE,
                  session: int = SESSION) -> MemberRecord:
    return MemberRecord(member_id, instance_id, client_id, host, rebalance, session, subscription, assignment)


def group_record(group_id: str, generation: int, protocol: str | None, leader: str | None, timestamp: int,
                 members: list[MemberRecord] = (), protocol_type: str = "consumer") -> GroupMetadataRecord:
    return norm_record(GroupMetadataRecord(
        group_id=group_id, protocol_type=protocol_type, generation=generation, protocol=protocol,
        leader=leader, current_state_timestamp=timestamp, members=tuple(members)))


def offset_record(group_id: str, topic: str, partition: int, offset: int, timestamp: int, *,
                  leader_epoch: int = -1, metadata: str = "") -> OffsetCommitRecord:
    return OffsetCommitRecord(group_id, topic, partition, offset, leader_epoch, metadata, timestamp)


def event_record(cause: str, instance_id: str, old: str | None, new: str | None, generation: int,
                 timestamp: int, *, group_id: str = "g", client_id: str = "client",
                 host: str = HOST) -> StaticMemberEventRecord:
    return StaticMemberEventRecord(group_id, instance_id, cause, old, new, generation, timestamp, client_id, host)


# ---------------------------------------------------------------- the harness
class Harness:
    def __init__(self, config: CoordinatorConfig | None = None, *, auto_check: bool = True, topics=None) -> None:
        self.now_ms = 1_000_000
        self._next_id = 1
        self.topics = topics                       # the topic table consumer groups assign from (None: none)
        self.coordinator = GroupShard(config or CoordinatorConfig(), member_id_generator=self._member_id,
                                            topics=topics)
        self.coordinator.journal = _CopyingJournal()
        self.wheel = TimerWheel()                  # armed timers, fired by (deadline, arming order)
        self._tokens = itertools.count(1)
        self.requests: dict[int, tuple[int, int]] = {}   # token -> (api key, version)
        self.bodies: dict[int, object] = {}               # token -> request body as sent
        self.responses: dict[int, dict] = {}             # token -> decoded response
        self.raw: dict[int, object] = {}                 # token -> response object as produced
        self.records: list = []                          # every durable record, in order
        self._taken = 0
        self.auto_check = auto_check
        self.last_result = None                          # the Result of the latest input
        self.rebalances: list[tuple[str, str]] = []     # (group, cause) of every rebalance started, in order
        self._rebalances_taken = 0
        self.durable_checks = 0                          # how many stable points were checked
        # the static-member event history is folded from here (a failover starts from the loaded maps)
        self._map_base: dict[tuple[str, str], str] = {}
        self._journal_mark = 0

    # ------------------------------------------------------------ ids and clock
    def _member_id(self, prefix: str) -> str:
        n, self._next_id = self._next_id, self._next_id + 1
        return f"{prefix}-{n}"

    def next_id(self, prefix: str) -> str:
        """The id the generator will hand out next for `prefix` (without consuming it)."""
        return f"{prefix}-{self._next_id}"

    @property
    def group(self):
        return self.coordinator.groups

    def g(self, group_id: str = "g"):
        return self.coordinator.groups[group_id]

    # ------------------------------------------------------------ applying results
    def _apply(self, result) -> None:
        self.last_result = result
        self.rebalances.extend(result.rebalances)
        for r in result.records:
            # what lands on disk is Kafka's key/value bytes: they must decode to the same record (an offset
            # committed in a transaction: the OffsetCommit record, its producer in the batch header)
            plain = r.record if isinstance(r, TransactionalOffsetCommit) else r
            assert wire_records.decode(*wire_records.encode(r)) == plain, r
        self.records.extend(result.records)
        for token, body in result.responses:
            assert token in self.requests, f"response to unknown token {token}"
            assert token not in self.responses, f"token {token} answered twice: {self.responses[token]} / {body}"
            api_key, version = self.requests[token]
            self.raw[token] = body
            self.responses[token] = wire(api_key, version, body)
        for op in result.timers:
            self.wheel.apply(op)
        if self.auto_check:
            self.check_journal_replay()
            self.check_static_map_history()
            if self.at_stable_point():
                self.check_durable_replay()

    def send(self, api_key: int, version: int, body, *, client_id: str = "client", host: str = HOST) -> int:
        token = next(self._tokens)
        self.requests[token] = (api_key, version)
        self.bodies[token] = body
        ctx = RequestContext(token, version, client_id, host, self.now_ms)
        self._apply(self.coordinator.handle(api_key, ctx, body))
        return token

    def advance(self, ms: int) -> None:
        """Move the clock forward by `ms`, firing due timers in deadline order (ties: arming order)."""
        target = self.now_ms + ms
        while (due := self.wheel.pop_due(target)) is not None:
            key, deadline = due
            self.now_ms = max(self.now_ms, deadline)
            self._apply(self.coordinator.on_timer(key, self.now_ms))
        self.now_ms = target

    def fire(self, key: TimerKey) -> None:
        """Fire one armed timer now, whatever its deadline (moves the clock to it if later)."""
        assert key in self.wheel, f"{key.name} is not armed"
        self.now_ms = max(self.now_ms, self.wheel.deadline(key))
        result = self.coordinator.on_timer(key, self.now_ms)     # if it raises, the timer stays armed
        self.wheel.cancel(key)
        self._apply(result)

    # ------------------------------------------------------------ looking at outputs
    def resp(self, token: int) -> dict:
        assert token in self.responses, f"request {token} is still parked"
        return self.responses[token]

    def parked(self, token: int) -> bool:
        return token not in self.responses

    def outstanding(self) -> list[int]:
        return [t for t in self.requests if t not in self.responses]

    def take_records(self) -> list:
        """Records emitted since the last call."""
        out = self.records[self._taken:]
        self._taken = len(self.records)
        return [norm_record(r) for r in out]

    def take_rebalances(self) -> list[tuple[str, str]]:
        """(group, cause) of the rebalances started since the last call (over every input, timers too)."""
        out = self.rebalances[self._rebalances_taken:]
        self._rebalances_taken = len(self.rebalances)
        return out

    @property
    def timers(self) -> dict[TimerKey, int]:
        """Armed timers: key -> deadline."""
        return dict(self.wheel.items())

    def timer(self, kind: str, group_id: str = "g", member_id: str | None = None) -> int | None:
        """The deadline of a timer by its kind ("heartbeat", "join", ...), or None if not armed."""
        cls = KEY_TYPES[kind]
        return self.wheel.deadline(cls(group_id) if member_id is None else cls(group_id, member_id))

    # ------------------------------------------------------------ requests
    def join(self, group_id: str = "g", member_id: str = "", instance_id: str | None = None, *,
             version: int = 9, protocols=(("range", b"sub"),), session: int = SESSION,
             rebalance: int = REBALANCE, protocol_type: str = "consumer", client_id: str = "client",
             host: str = HOST) -> int:
        P = JoinGroupRequest.JoinGroupRequestProtocol
        fields = dict(group_id=group_id, session_timeout_ms=session, member_id=member_id,
                      protocol_type=protocol_type,
                      protocols=[P(version=version, name=n, metadata=m) for n, m in protocols])
        if version >= 1:
            fields["rebalance_timeout_ms"] = rebalance
        if version >= 5:
            fields["group_instance_id"] = instance_id
        return self.send(JOIN, version, JoinGroupRequest(version=version, **fields), client_id=client_id, host=host)

    def sync(self, group_id: str = "g", member_id: str = "", generation: int = 1, instance_id: str | None = None,
             *, version: int = 5, assignments: dict[str, bytes] | None = None, protocol_type: str | None = "consumer",
             protocol_name: str | None = "range", client_id: str = "client", host: str = HOST) -> int:
        A = SyncGroupRequest.SyncGroupRequestAssignment
        fields = dict(group_id=group_id, generation_id=generation, member_id=member_id,
                      assignments=[A(version=version, member_id=m, assignment=a)
                                   for m, a in (assignments or {}).items()])
        if version >= 3:
            fields["group_instance_id"] = instance_id
        if version >= 5:
            fields["protocol_type"] = protocol_type
            fields["protocol_name"] = protocol_name
        return self.send(SYNC, version, SyncGroupRequest(version=version, **fields), client_id=client_id, host=host)

    def heartbeat(self, group_id: str = "g", member_id: str = "", generation: int = 1,
                  instance_id: str | None = None, *, version: int = 4, client_id: str = "client",
                  host: str = HOST) -> int:
        fields = dict(group_id=group_id, generation_id=generation, member_id=member_id)
        if version >= 3:
            fields["group_instance_id"] = instance_id
        return self.send(HEARTBEAT, version, HeartbeatRequest(version=version, **fields), client_id=client_id,
                         host=host)

    def leave(self, group_id: str = "g", members: list[tuple[str, str | None]] | str = (), *,
              version: int = 5, client_id: str = "client", host: str = HOST) -> int:
        if version < 3:
            assert isinstance(members, str)
            body = LeaveGroupRequest(version=version, group_id=group_id, member_id=members)
        else:
            M = LeaveGroupRequest.MemberIdentity
            body = LeaveGroupRequest(version=version, group_id=group_id, members=[
                M(version=version, member_id=m, group_instance_id=i) for m, i in members])
        return self.send(LEAVE, version, body, client_id=client_id, host=host)

    def commit(self, group_id: str = "g", member_id: str = "", generation: int = -1,
               instance_id: str | None = None, offsets: dict[str, list] | None = None, *, version: int = 8,
               client_id: str = "client", host: str = HOST) -> int:
        """offsets: topic -> [(partition, offset) or (partition, offset, metadata)]."""
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        P = T.OffsetCommitRequestPartition
        topics = []
        for name, parts in (offsets or {"t": [(0, 10)]}).items():
            ps = []
            for p in parts:
                part, off, meta = (p + ("",))[:3] if len(p) == 2 else p
                pf = dict(partition_index=part, committed_offset=off, committed_metadata=meta)
                if version >= 6:
                    pf["committed_leader_epoch"] = 5
                ps.append(P(version=version, **pf))
            topics.append(T(version=version, name=name, partitions=ps))
        fields = dict(group_id=group_id, generation_id_or_member_epoch=generation, member_id=member_id,
                      topics=topics)
        if version >= 7:
            fields["group_instance_id"] = instance_id
        return self.send(COMMIT, version, OffsetCommitRequest(version=version, **fields), client_id=client_id,
                         host=host)

    def fetch(self, group_id: str = "g", topics: dict[str, list[int]] | None = None, *, version: int = 7) -> int:
        if version >= 8:
            G = OffsetFetchRequest.OffsetFetchRequestGroup
            T = G.OffsetFetchRequestTopics
            body = OffsetFetchRequest(version=version, groups=[G(
                version=version, group_id=group_id, topics=None if topics is None else [
                    T(version=version, name=n, partition_indexes=ps) for n, ps in topics.items()])])
        else:
            T = OffsetFetchRequest.OffsetFetchRequestTopic
            body = OffsetFetchRequest(version=version, group_id=group_id, topics=None if topics is None else [
                T(version=version, name=n, partition_indexes=ps) for n, ps in topics.items()])
        return self.send(FETCH, version, body)

    def offset_delete(self, group_id: str = "g", topics: dict[str, list[int]] | None = None) -> int:
        """OffsetDelete v0 (its only version): topic -> partitions."""
        T = OffsetDeleteRequest.OffsetDeleteRequestTopic
        P = T.OffsetDeleteRequestPartition
        body = OffsetDeleteRequest(version=0, group_id=group_id, topics=[
            T(version=0, name=n, partitions=[P(version=0, partition_index=i) for i in ps])
            for n, ps in (topics or {}).items()])
        return self.send(OFFSET_DELETE, 0, body)

    def describe(self, *group_ids: str, version: int = 5) -> int:
        return self.send(DESCRIBE, version, DescribeGroupsRequest(version=version, groups=list(group_ids)))

    def list_groups(self, *, version: int = 4, states: list[str] | None = None) -> int:
        fields = {"states_filter": states or []} if version >= 4 else {}
        return self.send(LIST, version, ListGroupsRequest(version=version, **fields))

    def delete(self, *group_ids: str, version: int = 2) -> int:
        return self.send(DELETE, version, DeleteGroupsRequest(version=version, groups_names=list(group_ids)))

    def unload(self) -> None:
        """The shard gives its partition up (`GroupShard.unload`), applied like any input; the
        invariants are not checked against a journal whose state is gone: the journal starts again."""
        self.unloaded_records = self.durable_records()
        auto, self.auto_check = self.auto_check, False
        try:
            self._apply(self.coordinator.unload(self.now_ms))
        finally:
            self.auto_check = auto
        self.coordinator.journal = _CopyingJournal()
        self._map_base, self._journal_mark = {}, 0

    def force_rebalance(self, group_id: str = "g") -> None:
        """The admin operation (Python API), applied like any input."""
        self._apply(self.coordinator.force_rebalance(group_id, self.now_ms))

    # ------------------------------------------------------------ composite steps
    def join_dynamic(self, group_id: str = "g", *, version: int = 9, **kw) -> tuple[str, int]:
        """KIP-394 handshake (v4+): first JoinGroup gets 79 and an id; rejoin with it. Returns (id, token)."""
        if version >= 4:
            t0 = self.join(group_id, "", None, version=version, **kw)
            r = self.resp(t0)
            assert r["error_code"] == 79, r
            mid = r["member_id"]
            return mid, self.join(group_id, mid, None, version=version, **kw)
        t = self.join(group_id, "", None, version=version, **kw)
        return None, t

    def join_new(self, instance_ids: list[str], group_id: str = "g") -> list[str]:
        """Each static member in `instance_ids` joins as a new member (member id ""), then the clock moves
        by 0 ms, which ends the join phase at the default initial delay of 0: the group is
        CompletingRebalance, nobody has synced. Returns the member ids in join order."""
        tokens = [self.join(group_id, "", iid) for iid in instance_ids]
        self.advance(0)
        return [self.resp(t)["member_id"] for t in tokens]

    def form_group(self, instance_ids: list[str | None], group_id: str = "g", *, version: int = 9,
                   protocols=(("range", b"sub"),), assignments: dict[int, bytes] | None = None,
                   client_ids: list[str] | None = None) -> list[str]:
        """Take an Empty/new group to Stable with one member per entry (an instance id, or None for a
        dynamic member), all joining before the initial delay fires. The first member leads. Returns
        the member ids in join order. Assignment of member i: assignments[i] or b"assign-<i>"."""
        tokens, ids = [], []
        for i, iid in enumerate(instance_ids):
            cid = client_ids[i] if client_ids else "client"
            if iid is None and version >= 4:
                mid, t = self.join_dynamic(group_id, version=version, protocols=protocols, client_id=cid)
            else:
                t = self.join(group_id, "", iid, version=version, protocols=protocols, client_id=cid)
            tokens.append(t)
        self.advance(self.coordinator.config.initial_rebalance_delay_ms)
        for t in tokens:
            r = self.resp(t)
            assert r["error_code"] == 0, r
            ids.append(r["member_id"])
        gen = self.resp(tokens[0])["generation_id"]
        name = self.coordinator.groups[group_id].protocol_name
        sync_version = min(version, 5)
        given = {mid: (assignments or {}).get(i, f"assign-{i}".encode()) for i, mid in enumerate(ids)}
        sync_tokens = [self.sync(group_id, ids[0], gen, instance_ids[0], version=sync_version, assignments=given,
                                 protocol_name=name)]
        for mid, iid in zip(ids[1:], instance_ids[1:]):
            sync_tokens.append(self.sync(group_id, mid, gen, iid, version=sync_version, protocol_name=name))
        for t in sync_tokens:
            assert self.resp(t)["error_code"] == 0, self.resp(t)
        return ids

    def run(self, ms: int, members: list[tuple[str, str | None]] = (), *, every: int = 3000,
            group_id: str = "g") -> list[int]:
        """Advance `ms` while `members` (member id, instance id) heartbeat every `every` ms at the group's
        current generation (as a live consumer would). Returns the heartbeat tokens."""
        tokens = []
        end = self.now_ms + ms
        while self.now_ms < end:
            step = min(every, end - self.now_ms)
            self.advance(step)
            g = self.coordinator.groups.get(group_id)
            for mid, iid in members:
                if g is not None and mid in g.members:
                    tokens.append(self.heartbeat(group_id, mid, g.generation, iid))
        return tokens

    def state_history(self, group_id: str = "g") -> list[tuple[str, int]]:
        """(state, generation) of the group after each committed change, consecutive repeats dropped."""
        out = []
        for e in self.coordinator.journal:
            if isinstance(e, GroupSnapshot) and e.group_id == group_id and e.group is not None:
                v = (e.group.state, e.group.generation)
                if not out or out[-1] != v:
                    out.append(v)
        return out

    # ------------------------------------------------------------ invariants
    def check_journal_replay(self) -> None:
        fresh = GroupShard(self.coordinator.config)
        for event in self.coordinator.journal:
            fresh.replay(copy.deepcopy(event))
        live = self.coordinator
        assert fresh.groups == live.groups, "journal replay does not reproduce the groups"
        for gid, g in live.groups.items():
            assert list(fresh.groups[gid].members) == list(g.members), "member order differs after replay"
        assert fresh.offsets == live.offsets, "journal replay does not reproduce the offsets"
        assert fresh.static_event_keys == live.static_event_keys, "journal replay: static event keys differ"

    def live_static_map(self) -> dict[tuple[str, str], str]:
        return {(gid, iid): mid for gid, g in self.coordinator.groups.items()
                for iid, mid in g.static_members.items()}

    def check_static_map_history(self) -> None:
        """Fold the static-member events since the start (or the failover): each must fit the map as it
        was, and the result must be the live map."""
        m = dict(self._map_base)
        for e in self.coordinator.journal[self._journal_mark:]:
            if not isinstance(e, StaticMemberEventRecord):
                continue
            key = (e.group_id, e.group_instance_id)
            cur = m.get(key)
            if e.tombstone:
                assert cur is None, f"{key}: event key tombstoned while mapped to {cur}"
                continue
            if e.cause == JOINED:
                assert cur is None and e.old_member_id is None and e.new_member_id, (e, cur)
            elif e.cause == REPLACED:
                assert cur is not None and e.old_member_id == cur and e.new_member_id not in (None, cur), (e, cur)
            elif e.cause in REMOVAL_CAUSES:
                assert cur is not None and e.old_member_id == cur and e.new_member_id is None, (e, cur)
            elif e.cause == FENCED:
                assert cur is not None and e.new_member_id == cur and e.old_member_id != cur, (e, cur)
            elif e.cause == FORCED_REBALANCE:
                assert cur is not None and e.old_member_id == e.new_member_id == cur, (e, cur)
            else:
                raise AssertionError(f"unknown cause {e.cause!r}")
            if e.new_member_id is None:
                m.pop(key, None)
            else:
                m[key] = e.new_member_id
        assert m == self.live_static_map(), "the static-member events do not give the live instance map"

    def at_stable_point(self) -> bool:
        return not self.outstanding() and all(
            g.kind == "consumer" or g.state in (STABLE, EMPTY) for g in self.coordinator.groups.values())

    def durable_records(self) -> list:
        return [e for e in self.coordinator.journal if not isinstance(e, GroupSnapshot)]

    def durable_state(self, *, compacted: bool = False) -> GroupShard:
        """Replay only the durable records (optionally after log compaction: latest value per key,
        tombstones kept; offsets committed in a transaction and the markers stay where they are and
        supersede nothing, and nothing from the first record of a transaction still open on is cleaned - Kafka's
        cleaner stops at the first unstable offset) into a fresh coordinator."""
        recs = self.durable_records()
        if compacted:
            first_open: dict[int, int] = {}
            for i, r in enumerate(recs):
                if isinstance(r, TransactionalOffsetCommit):
                    first_open.setdefault(r.producer_id, i)
                elif isinstance(r, TransactionEnd):
                    first_open.pop(r.producer_id, None)
            end = min(first_open.values(), default=len(recs))
            latest: dict = {}
            for i, r in enumerate(recs[:end]):
                if isinstance(r, (TransactionalOffsetCommit, TransactionEnd)):
                    latest[("transactional", i)] = r
                    continue
                key = wire_records.encode(r)[0]
                latest.pop(key, None)
                latest[key] = r
            recs = list(latest.values()) + recs[end:]
        fresh = GroupShard(self.coordinator.config)
        for r in recs:
            fresh.replay(copy.deepcopy(r))
        return fresh

    def failover(self) -> Harness:
        """A new coordinator that loads this one's durable records (as after a broker failover) and
        restarts every member's heartbeat timer. Clock and member-id counter carry on."""
        other = type(self)(self.coordinator.config, auto_check=self.auto_check, topics=self.topics)
        other.now_ms = self.now_ms
        other._next_id = self._next_id
        for r in self.durable_records():
            other.coordinator.replay(copy.deepcopy(r))
        other._map_base = other.live_static_map()
        other._journal_mark = len(other.coordinator.journal)
        other._apply(other.coordinator.loaded(self.now_ms))
        return other

    def check_durable_replay(self) -> None:
        """At a stable point the records alone give what the live coordinator holds."""
        assert self.at_stable_point()
        loaded = self.durable_state()
        compacted = self.durable_state(compacted=True)
        assert {k: _durable_view(g) for k, g in compacted.groups.items()} == \
            {k: _durable_view(g) for k, g in loaded.groups.items()}, "compaction changes the loaded groups"
        assert compacted.offsets == loaded.offsets, "compaction changes the loaded offsets"
        assert compacted.static_event_keys == loaded.static_event_keys, "compaction changes the static event keys"
        live = self.coordinator
        for gid, g in live.groups.items():
            d = loaded.groups.get(gid)
            if d is None:
                # an Empty group that never reached a generation and holds no offsets is memory-only in
                # Kafka too (e.g. created by a KIP-394 handshake that never completed)
                assert g.state == EMPTY and getattr(g, "generation", 0) == 0 and gid not in live.offsets, (
                    f"group {gid!r} ({g.state}) has no durable record")
                continue
            assert _durable_view(d) == _durable_view(g), f"group {gid!r}: records disagree with live state"
        for gid in loaded.groups:
            assert gid in live.groups, f"records still hold group {gid!r}, which is gone"
        assert loaded.offsets == live.offsets, "records do not reproduce the offsets"
        assert compacted.pending_offsets == loaded.pending_offsets == live.pending_offsets, \
            "records do not reproduce the pending transactional offsets"
        assert loaded.static_event_keys == live.static_event_keys, "records do not reproduce the static event keys"
        for gid in live.static_event_keys:
            assert gid in live.groups, f"static event keys of group {gid!r}, which is gone"
        self.durable_checks += 1


def _durable_view(g) -> dict:
    if g.kind in ("consumer", "share"):        # consumer and share groups are all records: all must come back
        return {g.kind: dataclasses.asdict(g)}
    return {
        "state": g.state,
        "generation": g.generation,
        "protocol_type": g.protocol_type or "",
        "protocol": g.protocol_name,
        "leader": g.leader_id,
        "members": [(m.member_id, m.group_instance_id, m.assignment) for m in g.members.values()],
        "static_members": dict(g.static_members),
    }
