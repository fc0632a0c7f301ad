"""A large read-only request (the describes, OffsetFetch v8+, DescribeTransactions) is answered in chunks of
`routing.CHUNK_ITEMS` items, a loop turn between chunks, and its answer is byte for byte the one a single pass
gives: the same items in the same order, repeated ids answered once where the handlers answer them once."""
from __future__ import annotations

import asyncio

import pytest
from kafka.protocol.admin import DescribeTransactionsRequest
from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest
from kafka.protocol.consumer.group import OffsetFetchRequest

from tenure.coordinator import routing
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request, encode_response
from tenure.protocol.consumer_group import ConsumerGroupDescribeRequest
from tenure.protocol.context import RequestContext
from tests.coordinator.test_routing import call, commit, fetch, runtime


def test_chunks_are_in_item_order_with_repeats_dropped_and_small_requests_untouched():
    body = DescribeGroupsRequest(groups=[f"g{i % 7}" for i in range(20)], include_authorized_operations=False)
    subs = list(routing.chunks(15, 5, body, size=3))
    assert [list(s.groups) for s in subs] == [["g0", "g1", "g2"], ["g3", "g4", "g5"], ["g6"]]
    assert body.groups == [f"g{i % 7}" for i in range(20)]            # the request itself is left as it was
    assert routing.chunks(15, 5, body, size=20) is None               # no more than a chunk: one pass
    # DeleteGroups changes state: never chunked; OffsetFetch below v8 names one group
    assert routing.chunks(42, 2, DeleteGroupsRequest(groups_names=["a"] * 9), size=2) is None
    assert routing.chunks(9, 7, fetch([("a", None)]), size=0) is None
    # DescribeTransactions answers every id it is given, repeats included (the handler does): kept
    txn = DescribeTransactionsRequest(transactional_ids=["t", "t", "u"])
    assert [list(s.transactional_ids) for s in list(routing.chunks(65, 0, txn, size=2))] == [["t", "t"], ["u"]]


def test_a_chunk_answered_with_the_wrong_number_of_answers_is_a_bug():
    D = SUPPORTED[15].response
    G = D.DescribedGroup
    subs = list(routing.chunks(15, 5, DescribeGroupsRequest(groups=["a", "b", "c"]), size=2))
    one = G(error_code=0, group_id="a", group_state="Dead", protocol_type="", protocol_data="", members=[],
            authorized_operations=-2147483648)
    with pytest.raises(AssertionError, match="a chunk of 2 item"):
        routing.join_chunks(15, subs, [D(throttle_time_ms=0, groups=[one]), D(throttle_time_ms=0, groups=[one])])


@pytest.mark.parametrize("partitions", [1, 8])
def test_a_chunked_answer_is_byte_for_byte_the_single_pass_answer(partitions, monkeypatch):
    """DescribeGroups, ConsumerGroupDescribe and OffsetFetch v8 over existing and unknown groups, with repeats,
    on one shard and on eight: encoded with chunks of 7 items and in one pass, the bytes are equal."""
    groups = [f"g{i}" for i in range(30)]
    asked = [g for i in range(3) for g in (groups[i::3] + ["nope", groups[0]])]
    requests = [
        (DescribeGroupsRequest(groups=asked, include_authorized_operations=True), 5),
        (ConsumerGroupDescribeRequest(group_ids=asked, include_authorized_operations=False), 0),
        (fetch([(g, None if i % 2 else [0, 1]) for i, g in enumerate(asked)]), 8),
    ]

    def answers(chunk: int) -> list[bytes]:
        monkeypatch.setattr(routing, "CHUNK_ITEMS", chunk)

        async def run():
            rt = runtime(partitions)
            for i, g in enumerate(groups):
                await call(rt, commit(g, {0: i, 1: 2 * i}), 8)
            out = []
            for body, version in requests:
                req = Request(type(body).API_KEY, version, 7, "test", body, SUPPORTED[type(body).API_KEY])
                ctx = RequestContext(0, version, "test", "/127.0.0.1", 0, api_key=req.api_key)
                out.append(encode_response(req, await rt.handle(req, ctx)))
            return out
        return asyncio.run(run())

    single, chunked = answers(10_000), answers(7)
    assert [len(a) for a in single] == [len(a) for a in chunked]
    assert single == chunked


def test_other_work_runs_between_the_chunks_of_one_request(monkeypatch):
    """A describe of 40 ids in chunks of 10 leaves the loop 3 times: a task started with it runs before it ends."""
    monkeypatch.setattr(routing, "CHUNK_ITEMS", 10)

    async def run():
        rt = runtime(1)
        body = ConsumerGroupDescribeRequest(group_ids=[f"g{i}" for i in range(40)], include_authorized_operations=False)
        req = Request(69, 0, 1, "test", body, SUPPORTED[69])
        ctx = RequestContext(0, 0, "test", "/127.0.0.1", 0, api_key=69)
        turns = []

        async def other():
            for _ in range(3):
                turns.append(len(turns))
                await asyncio.sleep(0)
        task = asyncio.ensure_future(other())
        answer = await rt.handle(req, ctx)
        done_before = len(turns)
        await task
        return answer, done_before
    answer, done_before = asyncio.run(run())
    assert [g.group_id for g in answer.groups] == [f"g{i}" for i in range(40)]
    assert {g.error_code for g in answer.groups} == {69}               # GROUP_ID_NOT_FOUND
    assert done_before == 3


def test_members_subscribing_the_same_names_share_one_subscription_and_the_group_counts_it_once():
    """KIP-848: a join into a group whose members subscribe many names costs the names once, not once per member
    (heartbeat.py `_shared_names`, regex.py `subscribed_union`); the group's topics, hash and assignment are those
    of the names, however many members share them and in whatever order each sent them."""
    from tenure.coordinator.consumer.regex import subscribed_union
    from tests.coordinator.consumer_harness import ConsumerHarness, Topics
    names = [f"n{i}" for i in range(2000)] + ["t", "u"]
    h = ConsumerHarness(topics=Topics(t=4, u=2))
    h.cjoin("a", topics=names)
    h.cjoin("b", topics=list(reversed(names)))
    h.cjoin("c", topics=["t"])
    g = h.group["g"]
    a, b, c = (g.members[m] for m in "abc")
    assert a.subscribed_topic_names is b.subscribed_topic_names == tuple(sorted(names))
    assert c.subscribed_topic_names == ("t",)
    assert subscribed_union(g.members.values(), {}) == frozenset(names)
    h.settle({"a": None, "b": None, "c": None})
    owned = [h.owned(m) for m in "abc"]
    assert sorted(p for o in owned for p in o.get("t", [])) == [0, 1, 2, 3]
    assert sorted(p for o in owned for p in o.get("u", [])) == [0, 1] and "u" not in owned[2]
    # the metadata hash covers the existing subscribed topics only, as with a short subscription
    other = ConsumerHarness(topics=Topics(t=4, u=2))
    other.cjoin("x", topics=["u", "t"])
    assert g.metadata_hash == other.group["g"].metadata_hash != 0


# ------------------------------------------------------------------ OffsetFetch v1-7: one group, many partitions
def fetch_v1(group: str, topics, version: int = 7):
    """An OffsetFetch below v8: one group, [(topic, partition indexes)]."""
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest(version=version, group_id=group, require_stable=version >= 7, topics=[
        T(version=version, name=name, partition_indexes=list(parts)) for name, parts in topics])


def test_partition_chunks_spread_a_topic_over_chunks_and_keep_topics_naming_no_partition():
    body = fetch_v1("g", [("a", range(5)), ("b", []), ("c", [7, 7]), ("a", [1])])
    subs = list(routing.partition_chunks(9, 7, body, size=3))
    assert [[(t.name, list(t.partition_indexes)) for t in s.topics] for s in subs] == [
        [("a", [0, 1, 2])], [("a", [3, 4]), ("b", []), ("c", [7])], [("c", [7]), ("a", [1])]]
    assert [list(t.partition_indexes) for t in body.topics] == [[0, 1, 2, 3, 4], [], [7, 7], [1]]   # left as it was
    assert all(s.group_id == "g" and s.require_stable for s in subs)
    assert routing.partition_chunks(9, 7, body, size=8) is None                  # no more than a chunk: one pass
    assert routing.partition_chunks(9, 7, OffsetFetchRequest(version=7, group_id="g", topics=None,
                                                             require_stable=False), size=1) is None   # all offsets
    assert routing.partition_chunks(15, 5, DescribeGroupsRequest(groups=["a"] * 9), size=2) is None


def test_partition_chunks_of_offset_fetch_v8_split_groups_and_answer_repeated_all_offsets_once():
    body = fetch([("a", [0, 1, 2, 3]), ("b", None), ("b", None), ("c", []), ("a", [4])])
    subs = list(routing.partition_chunks(9, 8, body, size=3))

    def shape(s):
        return [(q.group_id, None if q.topics is None else [list(t.partition_indexes) for t in q.topics])
                for q in s.groups]
    assert [shape(s) for s in subs] == [[("a", [[0, 1, 2]])], [("a", [[3]]), ("b", None), ("c", [[]]), ("a", [[4]])]]
    assert len(body.groups) == 5 and list(body.groups[0].topics[0].partition_indexes) == [0, 1, 2, 3]
    assert routing.partition_chunks(9, 8, body, size=5) is None


def test_partition_chunks_answered_with_the_wrong_partitions_are_a_bug():
    R = SUPPORTED[9].response
    T, P = R.OffsetFetchResponseTopic, R.OffsetFetchResponseTopic.OffsetFetchResponsePartition
    body = fetch_v1("g", [("a", range(4))])

    def part(i):
        return P(partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=0)
    chunks = routing.partition_chunks(9, 7, body, size=2)
    list(chunks)
    short = [R(throttle_time_ms=0, error_code=0, topics=[T(name="a", partitions=[part(0), part(1)])]),
             R(throttle_time_ms=0, error_code=0, topics=[T(name="a", partitions=[part(2)])])]
    with pytest.raises(AssertionError, match="3 answer"):
        chunks.join(short)
    with pytest.raises(AssertionError, match="1 answer"):
        chunks.join(short[:1])
    other = [R(throttle_time_ms=0, error_code=0, topics=[T(name="b", partitions=[part(0), part(1)])]),
             R(throttle_time_ms=0, error_code=0, topics=[T(name="b", partitions=[part(2), part(3)])])]
    with pytest.raises(AssertionError, match="'a'"):
        chunks.join(other)


@pytest.mark.parametrize("partitions", [1, 8])
def test_a_chunked_offset_fetch_below_v8_is_byte_for_byte_the_single_pass_answer(partitions, monkeypatch):
    """OffsetFetch v1-7 of a group with committed offsets (and of a group nobody knows), naming a topic's partitions
    across chunk borders, a topic twice, a topic with no partition, repeated and unknown partitions: encoded with
    chunks of 1, 3 and 7 partitions and in one pass, the bytes are equal at every version (v0-7)."""
    asked = [("t", [5, 0, 1, 2, 3, 99, 4, 4]), ("u", []), ("nope", [0, 1]), ("t", list(range(10)))]

    def answers(chunk: int) -> list[bytes]:
        monkeypatch.setattr(routing, "CHUNK_PARTITIONS", chunk)

        async def run():
            rt = runtime(partitions)
            await call(rt, commit("g", {i: 10 * i for i in range(6)}), 8)
            out = []
            for version in range(0, 8):
                for group in ("g", "unknown"):
                    body = fetch_v1(group, asked, version)
                    req = Request(9, version, 7, "test", body, SUPPORTED[9])
                    ctx = RequestContext(0, version, "test", "/127.0.0.1", 0, api_key=9)
                    out.append(encode_response(req, await rt.handle(req, ctx)))
            return out
        return asyncio.run(run())

    single = answers(10_000)
    assert len(single) == 16
    for chunk in (1, 3, 7):
        assert answers(chunk) == single, chunk


@pytest.mark.parametrize("partitions", [1, 8])
def test_a_chunked_offset_fetch_v8_of_a_few_groups_is_byte_for_byte_the_single_pass_answer(partitions, monkeypatch):
    """OffsetFetch v8 and v9 naming a few groups (so not chunked by group) and many partitions: groups with offsets,
    one nobody knows, repeated "all offsets" queries, a group named twice with topics, a topic with no partition,
    a v9 member a classic group ignores: chunks of 1, 3 and 7 partitions give the bytes one pass gives, and so do
    chunks of 2 groups each answered 3 partitions at a time."""
    from tests.coordinator.test_routing import fetch as fetch_v8
    queries = [("g0", [5, 0, 1, 2, 3, 99]), ("g1", None), ("nope", [0, 1]), ("g1", None), ("g2", []),
               ("g0", list(range(10))), ("g1", [1, 2, 3])]

    def answers(chunk: int, items: int = 10_000) -> list[bytes]:
        monkeypatch.setattr(routing, "CHUNK_PARTITIONS", chunk)
        monkeypatch.setattr(routing, "CHUNK_ITEMS", items)

        async def run():
            rt = runtime(partitions)
            for i in range(3):
                await call(rt, commit(f"g{i}", {p: 10 * p + i for p in range(6)}), 8)
            out = []
            for version in (8, 9):
                body = fetch_v8(queries)
                if version == 9:
                    for q in body.groups:
                        q.member_id, q.member_epoch = "someone", 3
                req = Request(9, version, 7, "test", body, SUPPORTED[9])
                ctx = RequestContext(0, version, "test", "/127.0.0.1", 0, api_key=9)
                out.append(encode_response(req, await rt.handle(req, ctx)))
            return out
        return asyncio.run(run())

    single = answers(10_000)
    for chunk in (1, 3, 7):
        assert answers(chunk) == single, chunk
    # more groups than a chunk of items: each chunk of 2 groups answered in turns of partitions too
    assert answers(3, items=2) == single


def test_other_work_runs_between_the_partition_chunks_of_one_offset_fetch(monkeypatch):
    """An OffsetFetch v7 of 40 partitions in chunks of 10 leaves the loop 3 times; the answer is whole."""
    monkeypatch.setattr(routing, "CHUNK_PARTITIONS", 10)

    async def run():
        rt = runtime(1)
        await call(rt, commit("g", {i: i + 100 for i in range(40)}), 8)
        req = Request(9, 7, 1, "test", fetch_v1("g", [("t", range(40))]), SUPPORTED[9])
        ctx = RequestContext(0, 7, "test", "/127.0.0.1", 0, api_key=9)
        turns = []

        async def other():
            for _ in range(3):
                turns.append(len(turns))
                await asyncio.sleep(0)
        task = asyncio.ensure_future(other())
        answer = await rt.handle(req, ctx)
        done_before = len(turns)
        await task
        return answer, done_before
    answer, done_before = asyncio.run(run())
    [t] = answer.topics
    assert [(p.partition_index, p.committed_offset) for p in t.partitions] == [(i, i + 100) for i in range(40)]
    assert done_before == 3


def test_a_group_refused_in_one_of_its_chunks_is_answered_with_that_error_as_one_pass_answers_it():
    """A group's pieces answered differently (its state changed between two chunks, e.g. a member fenced): the group's
    answer is the error with no topics, the shape a single pass gives a refused group; below v8, the request's
    error code is the first chunk error (a coordinator that moved meanwhile: the client retries the whole)."""
    R = SUPPORTED[9].response
    G = R.OffsetFetchResponseGroup
    T, P = G.OffsetFetchResponseTopics, G.OffsetFetchResponseTopics.OffsetFetchResponsePartitions
    chunks = routing.partition_chunks(9, 9, fetch([("a", [0, 1, 2, 3]), ("b", None)]), size=2)
    assert len(list(chunks)) == 3                      # [a: 0 1] [a: 2 3] [b: all offsets]

    def ok(i):
        return P(partition_index=i, committed_offset=5, committed_leader_epoch=-1, metadata="", error_code=0)
    first = R(throttle_time_ms=0, groups=[G(group_id="a", error_code=0, topics=[T(name="t", partitions=[ok(0), ok(1)])])])
    second = R(throttle_time_ms=0, groups=[G(group_id="a", error_code=110, topics=[])])
    third = R(throttle_time_ms=0, groups=[G(group_id="b", error_code=0, topics=[])])
    joined = chunks.join([first, second, third])
    assert [(g.group_id, g.error_code, g.topics) for g in joined.groups] == [("a", 110, []), ("b", 0, [])]

    R1 = SUPPORTED[9].response
    T1, P1 = R1.OffsetFetchResponseTopic, R1.OffsetFetchResponseTopic.OffsetFetchResponsePartition
    old = routing.partition_chunks(9, 5, fetch_v1("g", [("t", range(4))], 5), size=2)
    assert len(list(old)) == 2

    def part(i, code):
        return P1(partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=code)
    joined = old.join([R1(throttle_time_ms=0, error_code=0, topics=[T1(name="t", partitions=[part(0, 0), part(1, 0)])]),
                       R1(throttle_time_ms=0, error_code=16, topics=[T1(name="t", partitions=[part(2, 16), part(3, 16)])])])
    assert joined.error_code == 16
    assert [(p.partition_index, p.error_code) for p in joined.topics[0].partitions] == [(0, 0), (1, 0), (2, 16), (3, 16)]
