"""What a share partition writes to the share coordinator on each transition, record by record against Kafka's
SharePartition (writeShareGroupState): the records whose state changed - ACKNOWLEDGED on accept, ARCHIVED on
reject, AVAILABLE with the delivery count on release and on lock expiry, ARCHIVED with the delivery count when a
release or expiry reaches the delivery limit - with the start offset as it stood before them (Kafka moves the
start once the write is done: the next write carries it). tenure also writes an acquisition (the records
available with their new count) so a restart counts the delivery. The share coordinator's records and what a
new broker reads back from them follow."""
from __future__ import annotations

import asyncio

from tenure.coordinator.share_state import ShareStateShard
from tenure.protocol.share_group import ACCEPT, REJECT, RELEASE
from tenure.protocol.share_state_records import ShareStateRecord, decode, encode

from .test_share_partitions import LOCK, Persisted, Share, acquired

AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


class Recorded(Persisted):
    """The share coordinator's state machine, keeping every write and every record it made of one."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[int, tuple]] = []
        self.records: list[ShareStateRecord] = []

    async def write(self, group_id, topic_id, partition, start_offset, batches) -> bool:
        key = (group_id, topic_id, partition)
        record = self.shard.write(key, start_offset, batches)
        assert decode(*encode(record)) == record
        self.records.append(record)
        self.log.append((start_offset, batches))
        self.shard.replay(record)
        return True


def writes(store: Recorded, since: int) -> list[tuple[int, tuple]]:
    return store.log[since:]


def test_each_transition_writes_the_changed_records_state_with_the_start_before_it():
    s = Share()
    s.b.topics.dynamic_configs["group"]["g"]["share.delivery.count.limit"] = "2"
    store = s.b.share_state = Recorded()
    s.produce(4)
    assert acquired(s.fetch("a", max_records=3, mode=1)) == [(0, 2, 1)]
    assert writes(store, 0) == [(0, ((0, 2, AVAILABLE, 1),))]                # the acquisition, counted
    assert acquired(s.fetch("b", max_records=1, mode=1)) == [(3, 3, 1)]
    assert writes(store, 1) == [(0, ((3, 3, AVAILABLE, 1),))]
    s.ack("a", [(0, 2, [ACCEPT, RELEASE, REJECT])])
    assert writes(store, 2) == [(0, ((0, 0, ACKNOWLEDGED, 1), (1, 1, AVAILABLE, 1), (2, 2, ARCHIVED, 1)))]
    assert s.state()["start_offset"] == 1                                     # moved once written
    s.clock.ms += LOCK                                                        # b's lock on 3 passes
    sp = s.b.share_partition("g", s.b.replicas.get("t", 0))
    asyncio.run(s.b.persist_share_state("g"))
    assert writes(store, 3) == [(1, ((3, 3, AVAILABLE, 1),))]                 # expired: available again
    assert acquired(s.fetch("a")) == [(1, 1, 2), (3, 3, 2)]
    assert writes(store, 4) == [(1, ((1, 1, AVAILABLE, 2), (3, 3, AVAILABLE, 2)))]
    s.ack("a", [(1, 1, [RELEASE])])                                           # released at the limit (2)
    assert writes(store, 5) == [(1, ((1, 1, ARCHIVED, 2),))]                  # archived, its count kept
    s.clock.ms += LOCK                                                        # 3 expires at the limit
    s.b.share_partition("g", s.b.replicas.get("t", 0))
    asyncio.run(s.b.persist_share_state("g"))
    assert writes(store, 6) == [(3, ((3, 3, ARCHIVED, 2),))]                  # the start had moved to 3
    assert sp.start == 4 and sp.records == {}
    s.produce(1)
    assert acquired(s.fetch("b")) == [(4, 4, 1)]
    assert writes(store, 7) == [(4, ((4, 4, AVAILABLE, 1),))]                 # the next write carries it
    asyncio.run(s.b.persist_share_state("g"))
    assert len(store.log) == 8                                                # nothing changed: no write


def test_the_coordinators_records_name_each_record_as_it_ended_and_a_new_broker_reads_the_state_back():
    s = Share()
    store = s.b.share_state = Recorded()
    s.produce(3)
    s.fetch("a")
    s.ack("a", [(0, 2, [REJECT, ACCEPT, RELEASE])])
    s.fetch("a")
    s.ack("a", [(2, 2, [ACCEPT])])
    first, *updates = store.records
    assert first.snapshot and first.batches == ((0, 2, AVAILABLE, 1),) and not any(r.snapshot for r in updates)
    assert [(r.start_offset, r.batches) for r in updates] == [
        (0, ((0, 0, ARCHIVED, 1), (1, 1, ACKNOWLEDGED, 1), (2, 2, AVAILABLE, 1))),
        (2, ((2, 2, AVAILABLE, 2),)),
        (2, ((2, 2, ACKNOWLEDGED, 2),))]
    # the coordinator's state: the start as last written and each record as it ended
    assert store.shard.read(("g", s.tid, 0)) == (2, ((2, 2, ACKNOWLEDGED, 2),))
    # a full replay of the records in log order, as the loader does, gives the same state
    fresh = ShareStateShard()
    for r in store.records:
        fresh.replay(decode(*encode(r)))
    assert fresh.read(("g", s.tid, 0)) == store.shard.read(("g", s.tid, 0))
    # a new broker over it: every record done, the start past them, nothing delivered again
    s2 = Share()
    s2.b = s.b.__class__(s.b.node, s.b.topics, share_clock=s.clock,
                         share_group=lambda gid: ("share", frozenset({"a", "b"})), share_state=store)
    s2.tid = s.tid
    assert s2.state()["start_offset"] == 3 and s2.state()["records"] == []
    assert acquired(s2.fetch("b")) == []


class Initialized(Recorded):
    """With the share coordinator's InitializeShareGroupState and its summary, as the broker asks them."""

    def refusal(self, group_id, topic_id, partition, broker_id) -> int:
        return 0

    def summary(self, group_id, topic_id, partition, leader_epoch):
        return 0, self.shard.states.get((group_id, topic_id, partition))

    async def initialize(self, group_id, topic_id, partition, state_epoch, start_offset) -> int:
        record = self.shard.initialize((group_id, topic_id, partition), state_epoch, start_offset)
        self.records.append(record)
        self.shard.replay(record)
        return 0


def test_altering_a_share_partitions_start_replaces_its_recorded_state():
    """AlterShareGroupOffsets starts a share partition again at an offset as Kafka's does, by initializing its
    state (a snapshot: the start, nothing in flight, the next state epoch): records recorded above the new
    start are not kept, and a new broker delivers them again."""
    from tenure.protocol.apis import SUPPORTED
    from tenure.protocol.codec import Request
    from tenure.protocol.context import RequestContext
    from tenure.protocol.share_group import AlterShareGroupOffsetsRequest as A
    s = Share()
    store = s.b.share_state = Initialized()
    s.produce(4)
    s.fetch("a")
    s.ack("a", [(0, 3, [ACCEPT, REJECT, ACCEPT, RELEASE])])
    assert store.shard.read(("g", s.tid, 0)) == (
        0, ((0, 0, ACKNOWLEDGED, 1), (1, 1, ARCHIVED, 1), (2, 2, ACKNOWLEDGED, 1), (3, 3, AVAILABLE, 1)))
    s.members = frozenset()                                                   # an empty group
    T = A.AlterShareGroupOffsetsRequestTopic
    body = A(group_id="g", topics=[T(topic_name="t", partitions=[T.AlterShareGroupOffsetsRequestPartition(
        partition_index=0, start_offset=1)])])
    ctx = RequestContext(0, 0, "c", "/127.0.0.1", s.clock.ms, api_key=91, broker_id=None)
    out = asyncio.run(s.b.alter_share_group_offsets(Request(91, 0, 1, "c", body, SUPPORTED[91]), ctx))
    assert [p.error_code for t in out.responses for p in t.partitions] == [0]
    last = store.records[-1]
    assert last.snapshot and last.state_epoch == 1 and (last.start_offset, last.batches) == (1, ())
    assert store.shard.read(("g", s.tid, 0)) == (1, ())                      # 2's acceptance not kept
    s.members = None
    assert acquired(s.fetch("b")) == [(1, 3, 1)]                              # delivered again from 1
