"""Share partitions and share sessions at the broker layer (broker/share.py, broker/share_apis.py): ShareFetch and
ShareAcknowledge handled by a `Broker` made without a server, its lock clock a plain number the tests move.
What is acquired (ranges, delivery counts), acknowledged, released, rejected, archived at the delivery limit,
expired by the clock, limited in flight, and read_committed; the session epochs and their errors; the
acknowledgement checks (overlap, shape, type, records not acquired, by another member, out of range); a group
of another kind served as Kafka serves it."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from tenure.broker.share import DELIVERY_COUNT_LIMIT, MAX_IN_FLIGHT
from tenure.coordinator.share_state import ShareStateShard
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.errors import ErrorCode
from tenure.protocol.markers import TxnMarker
from tenure.protocol.share_group import ACCEPT, GAP, REJECT, RELEASE, RENEW, ShareAcknowledgeRequest, ShareFetchRequest
from tenure.storage import parse_batches

from .test_partitions import batch, broker, produce

INVALID_RECORD_STATE, SESSION_NOT_FOUND, INVALID_SESSION_EPOCH = 121, 122, 123
LOCK = 30000


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


class Share:
    """A Broker with topic `t`, a group `g` (share unless told), and helpers speaking ShareFetch/ShareAcknowledge."""

    def __init__(self, partitions: int = 1, kind: str | None = "share") -> None:
        self.b = broker("t", partitions=partitions)
        self.clock = Clock()
        self.b.share_clock = self.clock
        self.members: frozenset[str] | None = None          # None: every member the tests name is one
        self.b.share_group = lambda gid: None if gid != "g" or kind is None else (
            kind, self.members if self.members is not None else frozenset(self.epochs) | {"a", "b", "c"})
        self.tid = self.b.topics.get("t").topic_id
        self.b.topics.dynamic_configs["group"] = {"g": {"share.auto.offset.reset": "earliest"}}
        self.epochs: dict[str, int] = {}

    def produce(self, n: int, index: int = 0) -> None:
        produce(self.b, "t", batch(n), index)

    def _run(self, api: int, body, version: int):
        req = Request(api, version, 1, "c", body, SUPPORTED[api])
        ctx = RequestContext(0, version, "c", "/127.0.0.1", self.clock.ms, api_key=api, broker_id=0)
        handler = self.b.share_fetch if api == 78 else self.b.share_acknowledge
        return asyncio.run(handler(req, ctx)).to_dict(json=False)

    def fetch(self, member: str, *, acks: list | None = None, epoch: int | None = None, max_records: int = 500,
              index: int = 0, version: int = 2, group: str = "g", mode: int = 0, renew: bool = False) -> dict:
        """A ShareFetch of partition `index` by `member` at its session's next epoch (0 the first time)."""
        if epoch is None:
            epoch = self.epochs.get(member, 0)
        F = ShareFetchRequest.FetchTopic
        P = F.FetchPartition
        A = P.AcknowledgementBatch
        body = ShareFetchRequest(
            group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=0, min_bytes=1,
            max_bytes=1 << 20, max_records=max_records, batch_size=500, share_acquire_mode=mode, is_renew_ack=renew,
            topics=[F(topic_id=self.tid, partitions=[P(partition_index=index, acknowledgement_batches=[
                A(first_offset=f, last_offset=last, acknowledge_types=types) for f, last, types in acks or []])])],
            forgotten_topics_data=[])
        out = self._run(78, body, version)
        if out["error_code"] == 0:
            self.epochs[member] = 1 if epoch == 0 else (0 if epoch == -1 else epoch + 1)
        return out

    def ack(self, member: str, acks: list, *, epoch: int | None = None, index: int = 0, version: int = 2) -> dict:
        if epoch is None:
            epoch = self.epochs[member]
        T = ShareAcknowledgeRequest.AcknowledgeTopic
        P = T.AcknowledgePartition
        A = P.AcknowledgementBatch
        body = ShareAcknowledgeRequest(
            group_id="g", member_id=member, share_session_epoch=epoch, is_renew_ack=False,
            topics=[T(topic_id=self.tid, partitions=[P(partition_index=index, acknowledgement_batches=[
                A(first_offset=f, last_offset=last, acknowledge_types=types) for f, last, types in acks])])])
        out = self._run(79, body, version)
        if out["error_code"] == 0:
            self.epochs[member] = 0 if epoch == -1 else epoch + 1
        return out

    def state(self) -> dict:
        return self.b.share_partition_view("g", "t", 0)

    def states(self) -> dict[int, tuple[str, int, str | None]]:
        return {r["offset"]: (r["state"], r["delivery_count"], r["member_id"]) for r in self.state()["records"]}


def acquired(resp: dict) -> list[tuple[int, int, int]]:
    return [(a["first_offset"], a["last_offset"], a["delivery_count"])
            for t in resp["responses"] for p in t["partitions"] for a in p["acquired_records"]]


def part(resp: dict) -> dict:
    return resp["responses"][0]["partitions"][0]


def test_records_are_acquired_once_and_accepted_records_move_the_start():
    s = Share()
    s.produce(3)
    s.produce(2)
    a = s.fetch("a")
    assert a["error_code"] == 0 and a["acquisition_lock_timeout_ms"] == LOCK
    assert acquired(a) == [(0, 4, 1)]
    assert [h.base_offset for h in parse_batches(part(a)["records"])] == [0, 3]
    assert acquired(s.fetch("b")) == []                       # nothing left for another member
    r = s.fetch("a", acks=[(0, 2, [ACCEPT])])
    assert part(r)["acknowledge_error_code"] == 0
    assert s.state()["start_offset"] == 3 and set(s.states()) == {3, 4}


def test_release_redelivers_with_a_higher_count_reject_never_and_the_limit_archives():
    s = Share()
    s.produce(3)
    s.fetch("a")
    s.ack("a", [(0, 2, [RELEASE, REJECT, ACCEPT])])
    assert s.states() == {0: ("available", 1, None), 1: ("archived", 1, None), 2: ("acknowledged", 1, None)}
    assert acquired(s.fetch("b")) == [(0, 0, 2)]             # another member gets it, delivered twice
    for n in range(3, DELIVERY_COUNT_LIMIT + 1):
        s.ack("b", [(0, 0, [RELEASE])])
        assert acquired(s.fetch("b")) == [(0, 0, n)]
    s.ack("b", [(0, 0, [RELEASE])])                           # released at the limit: archived
    assert s.state()["start_offset"] == 3 and s.states() == {}
    assert acquired(s.fetch("b")) == []


def test_a_lock_expires_on_the_clock_into_redelivery_and_renew_extends_it():
    s = Share()
    s.produce(2)
    s.fetch("a")
    s.clock.ms += LOCK - 1
    s.ack("a", [(1, 1, [RENEW])])                             # offset 1's lock runs from now
    assert acquired(s.fetch("b")) == []
    s.clock.ms += 1
    assert acquired(s.fetch("b")) == [(0, 0, 2)]              # 0's lock passed; 1 is still a's
    assert s.states()[1] == ("acquired", 1, "a")
    r = s.ack("a", [(0, 0, [ACCEPT])])                        # a no longer holds 0
    assert part(r)["error_code"] == INVALID_RECORD_STATE and s.states()[0] == ("acquired", 2, "b")
    s.clock.ms += LOCK
    assert s.b.expire_share_locks("g") == 0 and s.states()[1] == ("available", 1, None)


def test_the_expire_control_releases_every_held_record_now():
    s = Share()
    s.produce(4)
    s.fetch("a", max_records=2, mode=1)
    assert s.states() == {0: ("acquired", 1, "a"), 1: ("acquired", 1, "a")}
    assert s.b.expire_share_locks("g") == 2
    assert acquired(s.fetch("b")) == [(0, 1, 2), (2, 3, 1)]


def test_record_limit_mode_and_the_in_flight_limit():
    s = Share()
    s.produce(10)
    assert acquired(s.fetch("a", max_records=3, mode=1)) == [(0, 2, 1)]     # record_limit: exactly 3
    assert acquired(s.fetch("b", max_records=3)) == [(3, 9, 1)]             # batch_optimized: the whole batch
    for _ in range(3):
        s.produce(1000)
    got = acquired(s.fetch("c", max_records=10_000))
    assert got == [(10, MAX_IN_FLIGHT - 1, 1)]               # at most MAX_IN_FLIGHT past the start (0)
    s.ack("a", [(0, 2, [ACCEPT])])
    assert acquired(s.fetch("c", max_records=10_000)) == [(MAX_IN_FLIGHT, MAX_IN_FLIGHT + 2, 1)]


def test_read_committed_never_delivers_aborted_records_nor_markers():
    s = Share()
    s.b.topics.dynamic_configs["group"]["g"]["share.isolation.level"] = "read_committed"
    s.produce(1)                                                                   # 0
    produce(s.b, "t", batch(2, producer_id=7, epoch=0, sequence=0, transactional=True))   # 1-2
    s.produce(1)                                                                   # 3
    assert acquired(s.fetch("a")) == [(0, 0, 1)]             # up to the last stable offset
    s.b.write_txn_markers([TxnMarker("tx", "t", 0, 7, 0, False)], 2000)          # 4: abort marker
    assert acquired(s.fetch("a")) == [(3, 3, 1)]             # 1-2 aborted and 4 the marker: archived
    assert s.states() == {0: ("acquired", 1, "a"), 1: ("archived", 0, None), 2: ("archived", 0, None),
                          3: ("acquired", 1, "a"), 4: ("archived", 0, None)}


def test_latest_starts_at_the_high_watermark():
    s = Share()
    del s.b.topics.dynamic_configs["group"]["g"]
    s.produce(3)
    assert acquired(s.fetch("a")) == []
    s.produce(1)
    assert acquired(s.fetch("a")) == [(3, 3, 1)]


def test_session_epochs():
    s = Share()
    s.produce(1)
    assert s.fetch("a")["error_code"] == 0
    stale = s.fetch("a", epoch=5)
    assert (stale["error_code"], stale["responses"]) == (INVALID_SESSION_EPOCH, [])
    assert s.fetch("nobody", epoch=1)["error_code"] == SESSION_NOT_FOUND
    assert s.fetch("a", epoch=0, acks=[(0, 0, [ACCEPT])])["error_code"] == ErrorCode.INVALID_REQUEST
    assert s.ack("a", [(0, 0, [ACCEPT])], epoch=0)["error_code"] == INVALID_SESSION_EPOCH
    assert s.ack("nobody", [(0, 0, [ACCEPT])], epoch=3)["error_code"] == SESSION_NOT_FOUND
    assert s.fetch("a")["error_code"] == 0                    # the right epoch still works
    # a new session of the same member releases what the old one held (and this fetch takes it again)
    assert s.states() == {0: ("acquired", 1, "a")}
    assert acquired(s.fetch("a", epoch=0)) == [(0, 0, 2)]
    s.produce(1)
    assert acquired(s.fetch("b")) == [(1, 1, 1)]
    # closing (-1) applies its acknowledgements, releases the rest and ends the session
    closed = s.ack("a", [(0, 0, [ACCEPT])], epoch=-1)
    assert part(closed)["error_code"] == 0 and s.states() == {1: ("acquired", 1, "b")}
    assert s.fetch("a", epoch=3)["error_code"] == SESSION_NOT_FOUND
    last = s.fetch("b", epoch=-1)
    assert last["error_code"] == 0 and acquired(last) == [] and s.states() == {1: ("available", 1, None)}


@pytest.mark.parametrize("acks, code", [
    ([(0, 1, [ACCEPT]), (1, 2, [ACCEPT])], ErrorCode.INVALID_REQUEST),          # overlapping
    ([(2, 2, [ACCEPT]), (0, 0, [ACCEPT])], ErrorCode.INVALID_REQUEST),          # out of order
    ([(2, 1, [ACCEPT])], ErrorCode.INVALID_REQUEST),                            # first > last
    ([(0, 2, [ACCEPT, ACCEPT])], ErrorCode.INVALID_REQUEST),                    # types neither 1 nor per offset
    ([(0, 0, [])], ErrorCode.INVALID_REQUEST),
    ([(0, 0, [9])], ErrorCode.INVALID_REQUEST),                                 # no such type
    ([(0, 0, [-1])], ErrorCode.INVALID_REQUEST),
    ([(5, 7, [ACCEPT])], INVALID_RECORD_STATE),                                 # never acquired (out of range)
    ([(-4, 0, [ACCEPT])], ErrorCode.INVALID_REQUEST),
    ([(0, 2**62, [ACCEPT])], INVALID_RECORD_STATE),                             # huge: refused at the first
])
def test_bad_acknowledgements_are_refused_whole_and_change_nothing(acks, code):
    s = Share()
    s.produce(3)
    s.fetch("a")
    before = s.states()
    r = s.ack("a", acks)
    assert r["error_code"] == 0 and part(r)["error_code"] == code and part(r)["error_message"]
    assert s.states() == before
    assert part(s.ack("a", [(0, 2, [ACCEPT])]))["error_code"] == 0                # the session goes on


def test_acknowledging_another_members_records_or_renew_before_v2():
    s = Share()
    s.produce(2)
    s.fetch("a", max_records=1, mode=1)
    s.fetch("b")
    assert part(s.ack("b", [(0, 1, [ACCEPT])]))["error_code"] == INVALID_RECORD_STATE   # 0 is a's
    assert part(s.ack("b", [(1, 1, [RENEW])], version=1))["error_code"] == ErrorCode.INVALID_REQUEST
    assert part(s.ack("b", [(1, 1, [GAP])]))["error_code"] == 0                # a gap: archived
    assert s.states() == {0: ("acquired", 1, "a"), 1: ("archived", 1, None)}


def test_a_renew_only_fetch_acquires_nothing():
    s = Share()
    s.produce(1)
    s.fetch("a")
    s.produce(1)
    r = s.fetch("a", acks=[(0, 0, [RENEW])], renew=True)
    assert part(r)["acknowledge_error_code"] == 0 and acquired(r) == []


def test_a_group_of_another_kind_is_served_as_kafka_serves_it_and_requests_without_group_or_member():
    """Kafka's broker does not ask a share request's group kind (KafkaApis, SharePartitionManager; the share
    coordinator answers an unknown share partition with start offset -1): a consumer group's id gets a share
    partition of its own, from share.auto.offset.reset, acquired and acknowledged as any."""
    s = Share(kind="consumer")
    s.produce(2)
    r = s.fetch("a")
    assert r["error_code"] == 0 and acquired(r) == [(0, 1, 1)]
    assert s.ack("a", [(0, 1, [ACCEPT])])["error_code"] == 0
    view = s.b.share_partition_view("g", "t", 0)
    assert view["start_offset"] == 2 and view["records"] == []
    assert s.fetch("a", group="")["error_code"] == ErrorCode.INVALID_REQUEST
    assert s.fetch("", group="other")["error_code"] == ErrorCode.INVALID_REQUEST


def test_unknown_topic_ids_and_partitions():
    s = Share()
    s.tid = uuid.uuid4()
    assert part(s.fetch("a"))["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID
    s2 = Share()
    assert part(s2.fetch("a", index=7))["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_huge_and_negative_counts_are_bounded():
    s = Share()
    s.produce(3)
    F = ShareFetchRequest.FetchTopic
    body = ShareFetchRequest(
        group_id="g", member_id="a", share_session_epoch=0, max_wait_ms=-1, min_bytes=-7, max_bytes=-5,
        max_records=2**31 - 1, batch_size=-1, share_acquire_mode=-3, is_renew_ack=False,
        topics=[F(topic_id=s.tid, partitions=[F.FetchPartition(partition_index=0, acknowledgement_batches=[])])],
        forgotten_topics_data=[])
    r = s._run(78, body, 2)
    assert r["error_code"] == 0 and acquired(r) == [(0, 2, 1)]
    body.share_session_epoch, body.max_records = 1, 0          # 0: the default (500)
    s.produce(2)
    assert acquired(s._run(78, body, 2)) == [(3, 4, 1)]


class Persisted:
    """A ShareStateSide keeping what the broker writes (`saved`: each share partition's last write) in the share
    coordinator's state machine, which reads it back (its part, tested in tests/coordinator/test_share_state.py)."""

    def __init__(self) -> None:
        self.saved: dict = {}
        self.writes = 0
        self.shard = ShareStateShard()

    async def ready(self) -> None:
        """Its one store never moves."""

    def read(self, group_id, topic_id, partition):
        return self.shard.read((group_id, topic_id, partition))

    async def write(self, group_id, topic_id, partition, start_offset, batches) -> bool:
        key = (group_id, topic_id, partition)
        self.saved[key] = (start_offset, batches)
        self.shard.replay(self.shard.write(key, start_offset, batches))
        self.writes += 1
        return True


def test_state_is_written_before_the_answer_and_read_back_by_a_new_broker():
    s = Share()
    store = s.b.share_state = Persisted()
    s.produce(4)
    s.fetch("a")
    assert store.saved[("g", s.tid, 0)] == (0, ((0, 3, 0, 1),))        # acquired: written available, counted
    s.ack("a", [(0, 3, [RELEASE, ACCEPT, REJECT, RELEASE])])
    assert store.saved[("g", s.tid, 0)] == (0, ((0, 0, 0, 1), (1, 1, 2, 1), (2, 2, 4, 1), (3, 3, 0, 1)))
    writes = store.writes
    s.fetch("a", max_records=1, mode=1)                                  # takes 0 again: count 2
    assert store.writes == writes + 1
    # a restart: a new broker over the same log and the same share coordinator
    s2 = Share()
    s2.b = s.b.__class__(s.b.node, s.b.topics, share_clock=s.clock, share_group=lambda gid: ("share", frozenset({"a", "b"})),
                         share_state=store)
    s2.tid = s.tid
    assert [(r["offset"], r["state"], r["delivery_count"]) for r in s2.state()["records"]] == [
        (0, "available", 2), (1, "acknowledged", 1), (2, "archived", 1), (3, "available", 1)]
    assert acquired(s2.fetch("b")) == [(0, 0, 3), (3, 3, 2)]


def test_records_of_a_member_the_group_no_longer_has_are_released():
    s = Share()
    s.produce(2)
    s.fetch("a", max_records=1, mode=1)
    s.fetch("b", max_records=1, mode=1)
    s.members = frozenset({"b"})                # a left the group (or its session expired)
    assert s.states() == {0: ("available", 1, None), 1: ("acquired", 1, "b")}
    assert acquired(s.fetch("b")) == [(0, 0, 2)]


def test_at_the_session_limit_sessions_of_members_gone_are_evicted(monkeypatch):
    import tenure.broker.share_apis as apis
    monkeypatch.setattr(apis, "MAX_SESSIONS", 2)
    s = Share()
    s.produce(1)
    s.members = frozenset({"a", "b", "c"})
    s.fetch("a")
    s.fetch("b")
    assert s.fetch("c")["error_code"] == 133                  # SHARE_SESSION_LIMIT_REACHED
    s.members = frozenset({"b", "c"})                          # a's client died and its session expired
    assert acquired(s.fetch("c")) == [(0, 0, 2)]              # a's session evicted, its record released
    assert s.fetch("a", epoch=1)["error_code"] == SESSION_NOT_FOUND


def test_the_groups_own_delivery_limit_and_in_flight_limit():
    s = Share()
    s.b.topics.dynamic_configs["group"]["g"].update({"share.delivery.count.limit": "2",
                                                     "share.partition.max.record.locks": "100"})
    s.produce(150)
    assert acquired(s.fetch("a", max_records=1000)) == [(0, 99, 1)]
    s.ack("a", [(0, 99, [RELEASE])])
    assert acquired(s.fetch("a", max_records=1000)) == [(0, 99, 2)]
    s.ack("a", [(0, 99, [RELEASE])])                        # the second delivery was the last: archived
    assert s.state()["start_offset"] == 100
    assert acquired(s.fetch("a", max_records=1000)) == [(100, 149, 1)]


def test_a_topic_deleted_and_made_again_starts_a_new_share_partition():
    s = Share()
    s.produce(3)
    s.fetch("a")
    s.b.topics.delete("t")
    s.b.topics.create("t")
    s.tid = s.b.topics.get("t").topic_id
    s.produce(1)
    assert acquired(s.fetch("a")) == [(0, 0, 1)]            # the new topic's record, not the old state
