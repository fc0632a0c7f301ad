"""A coordinator shard: the groups and committed offsets of one `__consumer_offsets` partition.

Inputs: a decoded request with a `RequestContext` (token, api version, client id/host, now_ms), or a
timer expiry with now_ms. Output: a `Result` (responses by token - possibly to other, parked requests -
durable records, timer changes). No sockets, no asyncio, no wall clock.

The group APIs are routed by one table built from the shard's parts: each group kind's `apis` (the kinds are
registered in kinds.py: classic, consumer), the offsets' and the admin APIs' (`ROUTES`); the runtime serves
exactly these APIs (`GROUP_APIS`). Records, timers, loads and unloads go to the kind that owns their type. A handler reads the
live state and returns a Result; `replay` - the only mutator - applies the Result's events once the
handler has returned, so a handler that raises changes nothing. `load` is replaying a partition's records,
`loaded` restarts the sessions, `unload` gives the partition up. The query methods give copies.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tenure.deferred import deferred
from tenure.protocol.errors import ErrorCode as E
from tenure.protocol.records import (
    CoordinatorLoadRecord,
    OffsetCommitRecord,
    StaticMemberEventRecord,
    TransactionalOffsetCommit,
    TransactionEnd,
)

from .classic import ClassicGroup
from .config import CoordinatorConfig, default_member_id
from .group_admin import GroupAdmin
from .kinds import KINDS, Group, GroupKind, LazyKind, ShardKinds
from .offsets import CommitPlan, Offsets
from .result import GroupSnapshot, RequestContext, Result
from .timers import Timer, TimerKey

if TYPE_CHECKING:
    from tenure.inspection import GroupInfo

    from .consumer.hash import TopicHashCache
# the consumer group kind's topic hashes (coordinator/kinds.py: the kind is made on first use, and so is its cache)
consumer_hash = deferred("tenure.coordinator.consumer.hash")

# the group APIs that are no kind's: the offsets' (OffsetCommit, OffsetFetch, OffsetDelete, TxnOffsetCommit) and
# the admin APIs' (ListGroups, DeleteGroups); each kind lists its own (`GroupKind.apis`)
ROUTES = frozenset({8, 9, 47, 28, 16, 42})
GROUP_APIS = ROUTES.union(*(kind.apis for kind in KINDS))


class NoTopics:
    """A topic table with no topics (a shard made without the broker's)."""

    def get(self, name: str):
        return None

    def by_id(self, topic_id):
        return None


class GroupShard:
    def __init__(self, config: CoordinatorConfig | None = None,
                 member_id_generator: Callable[[str], str] = default_member_id, *, partition: int = 0,
                 topics=None, kinds: Sequence[Callable[[GroupShard], GroupKind] | LazyKind] = (),
                 expectations: Mapping[str, int] | None = None) -> None:
        """`kinds`: the group kinds this shard serves (kinds.py's KINDS unless given: tests add kinds).
        `expectations`: group id -> the members a test said it starts (`expect_group`); the runtime's table,
        read, never written, here."""
        self.config = config if config is not None else CoordinatorConfig()
        self.expectations: Mapping[str, int] = expectations if expectations is not None else {}
        # the topic table consumer groups assign from (`get(name)`, `by_id(id)`: topics with `topic_id`,
        # `name` and `partitions`), and its KIP-1101 topic hashes (`topic_hashes`), computed lazily
        self.topics = topics if topics is not None else NoTopics()
        self._topic_hashes: TopicHashCache | None = None
        self._new_id = member_id_generator
        self.partition = partition            # the __consumer_offsets partition whose groups this shard owns
        # replayed state (these dicts are never rebound: the parts below hold them)
        self.groups: dict[str, Group] = {}     # of every kind
        self.offsets: dict[str, dict[tuple[str, int], OffsetCommitRecord]] = {}
        self.static_event_keys: dict[str, set[str]] = {}   # group -> instance ids with an event key in the log
        # offsets committed in open transactions: producer id -> group -> (topic, partition) -> record
        self.pending_offsets: dict[int, dict[str, dict[tuple[str, int], OffsetCommitRecord]]] = {}
        # the place in the partition's log of each committed offset's record and each pending one's, by
        # (group, topic, partition) (pending: per producer id): a transaction's commit marker keeps a pending
        # offset only if it was written after the committed one (Kafka's replayEndTransactionMarker). The
        # loader gives each record's log offset; live records, appended in the order they are replayed
        # (one writer), are numbered on from the highest place replayed, which orders them as the log does
        self.offset_places: dict[tuple[str, str, int], int] = {}
        self.pending_places: dict[int, dict[tuple[str, str, int], int]] = {}
        self.next_place = 0
        # soft state lives in each group (its parked requests, rebalance bookkeeping); the shard's own:
        self._armed: set[Timer] = set()    # timers this shard asked for and that have not fired or been cancelled
        self.journal: list | None = None      # set to [] to record every replayed event (tests, audit)
        self.last_load: CoordinatorLoadRecord | None = None    # the latest move of this partition's coordinator
        self.offset_store = Offsets(self)
        self.admin = GroupAdmin(self)
        self.kinds = ShardKinds(self, kinds)   # the group kinds (kinds.py) and what routes to each
        # api key -> its handler: the offsets' and the admin APIs, then the kinds' (routing only, no state)
        o, a = self.offset_store, self.admin
        self.routes: dict[int, Callable[[RequestContext, Any], Result]] = {
            8: o.offset_commit, 9: o.offset_fetch, 47: o.offset_delete, 28: o.txn_offset_commit,
            16: a.list_groups, 42: a.delete_groups, **self.kinds.handlers}

    @property
    def topic_hashes(self) -> TopicHashCache:
        """The KIP-1101 topic hashes of the topic table, for this shard's consumer groups: made the first time
        the consumer group kind asks (a cache over the topic table, watching it from then on; no group state)."""
        cache = self._topic_hashes
        if cache is None:
            cache = self._topic_hashes = consumer_hash.TopicHashCache(self.topics)
        return cache

    # ================================================================== the one mutator
    def replay(self, event, place: int | None = None) -> None:
        """Apply one event. `place`: where an offset record (plain or transactional) is in the partition's
        log - the loader passes its log offset; None (live, and a journal's replay): after every record
        replayed so far."""
        if self.journal is not None:
            self.journal.append(event)
        if isinstance(event, GroupSnapshot):
            if event.group is None:
                self.groups.pop(event.group_id, None)
            else:
                self.groups[event.group_id] = event.group
        elif isinstance(event, OffsetCommitRecord):
            at = self._place(place)
            if event.tombstone:
                self._delete_offset(event)
            else:                                  # (inline: the hot path of a load)
                gid = event.group_id
                self.offsets.setdefault(gid, {})[(event.topic, event.partition)] = event
                if gid not in self.groups:         # offsets-only ("simple") group
                    self.groups[gid] = ClassicGroup(gid)
                self.offset_places[(gid, event.topic, event.partition)] = at
        elif isinstance(event, TransactionalOffsetCommit):
            r, at = event.record, self._place(place)
            self.pending_offsets.setdefault(event.producer_id, {}).setdefault(r.group_id, {})[
                (r.topic, r.partition)] = r
            self.pending_places.setdefault(event.producer_id, {})[(r.group_id, r.topic, r.partition)] = at
        elif isinstance(event, TransactionEnd):     # the producer's marker: its offsets count, or are dropped
            held = self.pending_offsets.pop(event.producer_id, {})
            places = self.pending_places.pop(event.producer_id, {})
            if event.commit:
                for offsets in held.values():
                    for r in offsets.values():
                        # Kafka keeps the most recent of a transactional and a plain commit: the pending one
                        # counts only if no offset is committed or its record is later in the log
                        at = places[(r.group_id, r.topic, r.partition)]
                        before = self.offset_places.get((r.group_id, r.topic, r.partition))
                        if before is None or at > before:
                            self._commit_offset(r, at)
        elif isinstance(event, StaticMemberEventRecord):
            # history only: group state comes from GroupMetadata records; remember the key for deletion
            if event.tombstone:
                keys = self.static_event_keys.get(event.group_id)
                if keys is not None:
                    keys.discard(event.group_instance_id)
                    if not keys:
                        del self.static_event_keys[event.group_id]
            else:
                self.static_event_keys.setdefault(event.group_id, set()).add(event.group_instance_id)
        elif isinstance(event, CoordinatorLoadRecord):
            # history only (who coordinated this partition since when, and why): no group state
            self.last_load = None if event.tombstone else event
        else:
            try:
                kind = self.kinds.of_record[type(event)]
            except KeyError:
                raise TypeError(f"not a coordinator event: {event!r}") from None
            kind.replay(event)

    def _place(self, given: int | None) -> int:
        at = self.next_place if given is None else given
        if at >= self.next_place:
            self.next_place = at + 1
        return at

    def _commit_offset(self, r: OffsetCommitRecord, at: int) -> None:
        self.offsets.setdefault(r.group_id, {})[(r.topic, r.partition)] = r
        self.offset_places[(r.group_id, r.topic, r.partition)] = at
        if r.group_id not in self.groups:      # offsets-only ("simple") group
            self.groups[r.group_id] = ClassicGroup(r.group_id)

    def _delete_offset(self, r: OffsetCommitRecord) -> None:
        """A tombstone: the committed offset goes, and so does every open transaction's pending offset of
        the partition (Kafka's replay of a tombstone)."""
        key = (r.group_id, r.topic, r.partition)
        self.offset_places.pop(key, None)
        for pid in [pid for pid, places in self.pending_places.items() if key in places]:
            del self.pending_places[pid][key]
            held = self.pending_offsets[pid]
            del held[r.group_id][(r.topic, r.partition)]
            if not held[r.group_id]:
                del held[r.group_id]
            if not held:
                del self.pending_offsets[pid], self.pending_places[pid]
        offsets = self.offsets.get(r.group_id)
        if offsets is None:
            return
        offsets.pop((r.topic, r.partition), None)
        if not offsets:
            del self.offsets[r.group_id]
            # an offsets-only ("simple") group exists through its offsets alone: with the last one
            # gone it is gone, as Kafka's loader would not create it - so replay's result does not
            # depend on commits that compaction removes (fold(compact(log)) == fold(log))
            if self.groups.get(r.group_id) == ClassicGroup(r.group_id):
                del self.groups[r.group_id]

    def new_member_id(self, prefix: str) -> str:
        """A new member id (from the injected generator: reproducible in scenario tests)."""
        return self._new_id(prefix)

    def offsets_only_group(self, group_id: str) -> ClassicGroup:
        """The group a group id names while only committed offsets hold it (Kafka's "simple" group: classic)."""
        return ClassicGroup(group_id)

    def loaded(self, now_ms: int) -> Result:
        """After replaying a log at start-up: every member's heartbeat timer restarts."""
        res = Result()
        for g in self.groups.values():
            self.kind_of(g).loaded(res, g, now_ms)
        return self._track(res)

    def unload(self, now_ms: int) -> Result:
        """Give up this partition's groups (another coordinator takes them over): every parked JoinGroup
        and SyncGroup is answered NOT_COORDINATOR (16) in its version's error shape, so its client looks
        up the coordinator again; every timer this shard armed is cancelled; all state, replayed and soft,
        is dropped (the records stay in the log for the next owner to load). Kafka's onUnloaded does the
        same for classic groups."""
        res = Result()
        for kind in self.kinds.all:
            kind.unloaded(res, E.NOT_COORDINATOR)
        for key in sorted(self._armed):
            res.cancel_timer(key)
        self._armed.clear()
        self.groups.clear()
        self.offsets.clear()
        self.static_event_keys.clear()
        self.pending_offsets.clear()
        self.offset_places.clear()
        self.pending_places.clear()
        self.next_place = 0
        return res

    def _track(self, res: Result) -> Result:
        """Keep the set of armed timers in step with the timer changes a Result asks for."""
        for op in res.timers:
            if op.deadline_ms is None:
                self._armed.discard(op.key)
            else:
                self._armed.add(op.key)
        return res

    def is_armed(self, key: Timer) -> bool:
        """Whether this shard has asked for timer `key` and it has neither fired nor been cancelled."""
        return key in self._armed

    def kind_of(self, g) -> GroupKind:
        """The kind of a group value (kinds.py): its rules, for offsets and the admin APIs."""
        return self.kinds.of_group[type(g)]

    def group_ids(self) -> list[str]:
        """The ids of the groups this shard holds, sorted."""
        return sorted(self.groups)

    def group(self, group_id: str) -> Group | None:
        """A copy of one group's state (changing it changes nothing here); None if unknown."""
        g = self.groups.get(group_id)
        return None if g is None else g.copy()

    def group_info(self, group_id: str) -> GroupInfo | None:
        """One group as its kind describes it for inspection (tenure/inspection.py); None if unknown."""
        g = self.groups.get(group_id)
        return None if g is None else self.kind_of(g).info(g)

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], OffsetCommitRecord]:
        """A copy of one group's committed offsets: (topic, partition) -> the (frozen) commit record."""
        return dict(self.offsets.get(group_id, {}))

    def pending_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """The (topic, partition)s for which an open transaction holds an offset of the group."""
        return {tp for groups in self.pending_offsets.values() for tp in groups.get(group_id, ())}

    def has_pending_offsets(self, group_id: str, topic: str | None = None, partition: int | None = None) -> bool:
        """Whether an open transaction holds offsets for the group (for that partition, if named)."""
        for groups in self.pending_offsets.values():
            held = groups.get(group_id)
            if held and (topic is None or (topic, partition) in held):
                return True
        return False

    def handle(self, api_key: int, ctx: RequestContext, body) -> Result:
        """The handler's Result, then (and only then) replayed: `_done`, written out for the path every request
        takes (a heartbeat replays nothing and re-arms its member's session timer, already in `_armed`)."""
        res = self.routes[api_key](ctx, body)
        if res.events:
            for event in res.events:
                self.replay(event)
        if res.timers:
            armed = self._armed
            for op in res.timers:
                if op.deadline_ms is None:
                    armed.discard(op.key)
                else:
                    armed.add(op.key)
        return res

    def decide(self, api_key: int, ctx: RequestContext, body) -> Result:
        """`handle` without its replay: the handler's Result, nothing changed yet. The runtime then either
        replays it (`done`) or drops it whole (a heavy commit whose batch the topic would refuse), as Kafka's
        runtime reverts a write its log refused."""
        return self.routes[api_key](ctx, body)

    def decide_commit(self, api_key: int, ctx: RequestContext, body, plan: CommitPlan) -> Result:
        """`decide` for an OffsetCommit (8) or TxnOffsetCommit (28) whose plan (offsets.commit_plan,
        txn_commit_plan at `ctx.now_ms`) was made ahead."""
        store = self.offset_store
        return (store.offset_commit if api_key == 8 else store.txn_offset_commit)(ctx, body, plan)

    def done(self, res: Result) -> Result:
        """Replay a Result `decide` gave (see `_done`)."""
        return self._done(res)

    def on_timer(self, key: Timer, now_ms: int) -> Result:
        assert isinstance(key, TimerKey), f"not a group timer: {key!r}"
        res = self.kinds.of_timer[type(key)].on_timer(key, now_ms)
        self._armed.discard(key)
        return self._done(res)

    # ================================================================== admin operations (Python API)
    def force_rebalance(self, group_id: str, now_ms: int) -> Result:
        """See GroupAdmin.force_rebalance; raises AdminError if the group cannot be forced."""
        return self._done(self.admin.force_rebalance(group_id, now_ms))

    def expire_session(self, group_id: str, member: str, now_ms: int) -> Result | None:
        """See GroupAdmin.expire_session; None if there is no session to expire."""
        res = self.admin.expire_session(group_id, member, now_ms)
        return None if res is None else self._done(res)

    def _done(self, res: Result) -> Result:
        """A handler has returned its Result: now, and only now, replay what it produced."""
        for event in res.events:
            self.replay(event)
        return self._track(res)
