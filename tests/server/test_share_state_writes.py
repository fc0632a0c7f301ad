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
