"""The request capture keeps each exchange's request and answer as their encoded bytes and decodes them with
kafka-python when read, and a finished exchange as a tuple of them: what a test reads equals what the client sent
and got, and the ring holds nothing the garbage collector walks (a full collection over 10,000 decoded bodies held the
heartbeat tail at tens of milliseconds - issue 30)."""
from __future__ import annotations

import gc
import time

from kafka.protocol.admin.groups import DescribeGroupsRequest
from kafka.protocol.consumer.group import HeartbeatRequest, HeartbeatResponse, OffsetFetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest

from tenure.control.capture import Capture
from tenure.protocol.codec import decode_request, encode_response
from tenure.protocol.errors import ErrorCode
from tenure.server import ServerThread
from tests.support.wire import (
    WireClient,
    build_batch,
    create_topic,
    fetch_request,
    metadata_request,
    produce_request,
    request_bytes,
)


def _same(a, b) -> bool:
    """Two kafka-python bodies hold the same fields (a client's decoded answer also carries its header)."""
    return a.__class__ is b.__class__ and all(getattr(a, n) == getattr(b, n) for n in a.fields)


def test_a_captured_exchange_decodes_to_the_request_sent_and_the_answer_got_for_each_api():
    G = OffsetFetchRequest.fields["groups"].data_class
    calls = [(ApiVersionsRequest(client_software_name="cap", client_software_version="1"), 3),
             (metadata_request("cap-t"), 12),
             (FindCoordinatorRequest(key_type=0, coordinator_keys=["cap-g"]), 4),
             (DescribeGroupsRequest(groups=["cap-g", "other"], include_authorized_operations=True), 5),
             (HeartbeatRequest(group_id="cap-g", generation_id=3, member_id="m-1", group_instance_id=None), 4),
             (OffsetFetchRequest(groups=[G(group_id="cap-g", member_id=None, member_epoch=-1, topics=None)],
                                 require_stable=False), 8)]
    with ServerThread() as st, WireClient.to(st.bootstrap) as c:
        create_topic(c, "cap-t")
        for sent, version in calls:
            got = c.call(sent, version)
            seen = st.requests(api=sent.API_KEY)[-1]
            assert seen.version == version and seen.outcome == "answered"
            assert _same(seen.request, sent), sent
            assert _same(seen.response, got), got
            assert seen.error == getattr(got, "error_code", 0) or sent.API_KEY != 18
        produced = c.call(produce_request("cap-t", 0, build_batch([(b"k", b"v")])), 9)
        fetched = c.call(fetch_request("cap-t", 0, 0), 12)
        assert fetched.responses[0].partitions[0].records
        produce, fetch = st.requests(api="Produce")[-1], st.requests(api="Fetch")[-1]
    assert produce.request is None and _same(produce.response, produced)     # a Produce's records not kept
    assert produce.summary()["topics"] == ["cap-t"] and produce.names_topic("cap-t")
    assert _same(fetch.request, fetch_request("cap-t", 0, 0)) and fetch.response is None   # nor a Fetch answer's
    assert fetch.summary() == {"topics": ["cap-t"]}


def test_a_hooks_rewritten_answer_is_captured_as_sent():
    with ServerThread() as st, st.on_request("Heartbeat", lambda call: call.error("REBALANCE_IN_PROGRESS")):
        with WireClient.to(st.bootstrap) as c:
            got = c.call(HeartbeatRequest(group_id="g", generation_id=1, member_id="m", group_instance_id=None), 4)
        seen = st.requests(api="Heartbeat")[-1]
    assert got.error_code == 27 and seen.response.error_code == 27 and seen.error_name == "REBALANCE_IN_PROGRESS"


class _Ctx:
    client_id, connection_id, peer, broker_id = "c", 1, "127.0.0.1:1", 0


def _record(cap: Capture, n: int) -> None:
    frames = [request_bytes(HeartbeatRequest(group_id=f"g-{i % 7}", generation_id=i, member_id=f"m-{i}",
                                             group_instance_id=None), 4, i)[4:] for i in range(n)]
    for payload in frames:
        req = decode_request(payload)
        resp = HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.NONE)
        seen = cap.record(req, _Ctx, resp, 0, time.perf_counter(), "answered")
        seen.answered(encode_response(req, resp))            # as the dispatcher does: the frame, sent, then done
        seen.duration_ms = 0.5
        cap.finish(seen)


def test_the_ring_holds_no_object_the_collector_walks():
    cap = Capture(2000)
    _record(cap, 10)                                     # the decoders compiled, the classes loaded
    cap.clear()
    gc.collect()
    before = len(gc.get_objects())
    _record(cap, 1000)
    gc.collect()
    grown = len(gc.get_objects()) - before
    assert grown <= 50, grown        # a finished exchange is an untracked tuple (decoded bodies: 3-15 objects each)
    assert not any(gc.is_tracked(row) for row in cap._ring)
    kept = cap.query()
    assert len(kept) == 1000 and cap.query() == kept and all(e.duration_ms == 0.5 for e in kept)
    for e in kept:
        assert not any(gc.is_tracked(getattr(e, slot)) for slot in type(e).__slots__)
    assert [e.request.member_id for e in kept[:3]] == ["m-0", "m-1", "m-2"] and kept[5].response.error_code == 0
    assert kept[8].summary() == {"group": "g-1", "generation_id": 8, "member_id": "m-8"}
    gc.collect()
    gc.collect()       # the collector stops tracking a tuple of strings once it has seen it (the inner ones first)
    assert not gc.is_tracked(kept[8]._summary)          # a summary worked out is kept as tuples of strings


def test_a_query_by_group_decodes_each_request_once_and_the_ring_keeps_what_it_found(monkeypatch):
    """A test polling `requests(group=...)` over a full ring: the first query decodes each request for its summary
    and keeps the summary beside the ring's row; the next queries decode nothing (each decode of a full ring of
    10,000 heartbeats took ~150-200 ms)."""
    from tenure.control import capture as capture_module
    cap = Capture(500)
    _record(cap, 500)
    decoded = []
    real = capture_module.summarize
    monkeypatch.setattr(capture_module, "summarize", lambda key, body: decoded.append(key) or real(key, body))
    first = cap.query(group="g-3")
    assert len(decoded) == 500 and [e.request.member_id for e in first[:2]] == ["m-3", "m-10"]
    assert len(first) == len([i for i in range(500) if i % 7 == 3])
    again, by_topic = cap.query(group="g-3"), cap.query(topic="t")
    assert len(decoded) == 500 and again == first and by_topic == []        # nothing decoded a second time
    assert all(row[0] in cap._summaries for row in cap._ring)          # each summary kept beside its row
    assert all(row[cap_slot("_summary")] is not None for _, row in cap._read())     # and read into it
    _record(cap, 10)          # ten newer exchanges (m-0..m-9, one of g-3) push the ten oldest (one of g-3) out
    assert len(cap.query(group="g-3")) == len(first) and len(decoded) == 510     # only the newer ones decoded
    for _ in range(3):        # a tuple is untracked once what it holds is: a level of the summary per collection
        gc.collect()
    assert not any(gc.is_tracked(row) for row in cap._ring)
    assert not any(gc.is_tracked(summary) for summary in cap._summaries.values())   # the summaries kept: untracked too
    assert len(cap._summaries) <= cap.capacity                 # those of the rows pushed out are let go


def cap_slot(name: str) -> int:
    from tenure.control.capture import Exchange
    return Exchange.__slots__.index(name)


def test_an_exchange_kept_at_once_is_the_one_recorded_then_finished():
    """Capture.keep (the dispatcher's usual way: the answer encoded on the loop) keeps the finished row at once and
    `written` its duration: query gives what record, answered and finish give, in the same slots; the row is
    untracked after a look; a Fetch answer and a Produce's records are not kept either way; a Produce, or a heavy
    request, goes by record."""
    from tenure.control.capture import HEAVY_BODIES_KEPT
    req = decode_request(request_bytes(HeartbeatRequest(group_id="g", generation_id=2, member_id="m",
                                                        group_instance_id="i"), 4, 41)[4:])
    frame = encode_response(req, HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.REBALANCE_IN_PROGRESS))
    two, one = Capture(10), Capture(10)
    seen = two.record(req, _Ctx, None, 27, time.perf_counter(), "answered")
    seen.answered(frame)
    two.finish(seen)
    kept = one.keep(req, _Ctx, 27, time.perf_counter(), frame)
    assert one.query(group="g")[0].duration_ms < 1000       # a query by group puts the summary in the row meanwhile
    assert one._ring[0] is kept and one._read()[0][1][16] is not None      # the summary kept beside the row
    one.written(kept, 1234.5)
    assert one._read()[0][1][16] is not None and one._read()[0][1][9] == 1234.5   # kept with the duration
    [a], [b] = two.query(), one.query()
    for slot in type(a).__slots__:
        if slot not in ("received", "duration_ms", "_summary"):
            assert getattr(a, slot) == getattr(b, slot), slot
    assert b.duration_ms == 1234.5 and abs(b.received - time.time()) < 5
    assert b.request.member_id == "m" and b.response.error_code == 27 and b.error_name == "REBALANCE_IN_PROGRESS"
    for _ in range(3):               # a tuple is untracked once what it holds is: the summary's pairs, the summary, the row
        gc.collect()
    assert not gc.is_tracked(one._ring[0])
    from kafka.protocol.consumer import FetchRequest
    fetch = decode_request(request_bytes(
        FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1024, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[], forgotten_topics_data=[], rack_id=""), 12, 42)[4:])
    one.written(one.keep(fetch, _Ctx, 0, time.perf_counter(), b"\x00" * 20), 1.0)
    assert one.query(api="Fetch")[0].response is None and one.query(api="Fetch")[0].request.max_bytes == 1024
    produce = decode_request(request_bytes(produce_request("t", 0, build_batch([(b"k", b"v")]), acks=1), 9, 44)[4:])
    one.written(one.keep(produce, _Ctx, 0, time.perf_counter(), frame), 150.0)
    done = one.query(api="Produce")[0]
    assert done.request is None and done.summary()["topics"] == ["t"] and done.duration_ms == 150.0
    many = DescribeGroupsRequest(groups=[f"g{i}" for i in range(6000)], include_authorized_operations=False)
    heavy = decode_request(request_bytes(many, 5, 43)[4:])
    one.written(one.keep(heavy, _Ctx, 0, time.perf_counter(), frame), 2.0)
    assert one.query(api="DescribeGroups")[0].duration_ms == 2.0 and len(one._heavy) == 1 <= HEAVY_BODIES_KEPT and one.query(api="DescribeGroups")[0].summary()["groups"]


def test_a_written_duration_is_noted_beside_the_ring_and_read_into_its_row():
    """`written` notes a kept row's duration beside the ring (no row rebuilt per request): every read (`query`,
    `all`) gives the row with it, a row not written yet keeps its duration until `keep`, what the ring drops
    the notes drop too (bounded by the capacity), and `clear` clears both."""
    req = decode_request(request_bytes(HeartbeatRequest(group_id="g", generation_id=2, member_id="m",
                                                        group_instance_id="i"), 4, 41)[4:])
    frame = encode_response(req, HeartbeatResponse(throttle_time_ms=0, error_code=0))
    cap = Capture(3)
    kept = [cap.keep(req, _Ctx, 0, time.perf_counter(), frame) for _ in range(3)]
    rows = list(cap._ring)
    cap.written(kept[0], 7.5)
    cap.written(kept[2], 9.5)
    assert list(cap._ring) == rows and all(a is b for a, b in zip(cap._ring, rows, strict=True))
    durations = [e.duration_ms for e in cap.query()]
    assert durations[0] == 7.5 and durations[2] == 9.5 and durations[1] < 1000
    assert [e.duration_ms for e in cap.all()] == durations
    assert cap.query(group="g")[0].duration_ms == 7.5          # a summary put back keeps the noted duration
    more = [cap.keep(req, _Ctx, 0, time.perf_counter(), frame) for _ in range(3)]
    for i, k in enumerate(more):
        cap.written(k, 100.0 + i)
    assert [e.duration_ms for e in cap.query()] == [100.0, 101.0, 102.0] and cap._took == [102.0, 100.0, 101.0]
    assert cap.clear() == 3 and cap._took == [None] * 3 and cap.query() == []


def test_noted_durations_survive_a_resize_and_a_ring_of_length_zero_notes_nothing():
    """A resize keeps the noted durations of the rows it keeps, each read into its own row; once the ring's length
    is 0, `written` notes nothing."""
    req = decode_request(request_bytes(HeartbeatRequest(group_id="g", generation_id=2, member_id="m",
                                                        group_instance_id="i"), 4, 41)[4:])
    frame = encode_response(req, HeartbeatResponse(throttle_time_ms=0, error_code=0))
    cap = Capture(4)
    kept = [cap.keep(req, _Ctx, 0, time.perf_counter(), frame) for _ in range(4)]
    for i, k in enumerate(kept):
        cap.written(k, 10.0 + i)
    cap.resize(3)                                    # the oldest row goes; the others keep their durations
    assert [(e.seq, e.duration_ms) for e in cap.query()] == [(2, 11.0), (3, 12.0), (4, 13.0)]
    cap.resize(7)
    assert [(e.seq, e.duration_ms) for e in cap.all()] == [(2, 11.0), (3, 12.0), (4, 13.0)]
    late = cap.keep(req, _Ctx, 0, time.perf_counter(), frame)
    cap.resize(0)
    cap.written(late, 1.0)                           # its answer written after the capture was turned off
    assert cap.query() == [] and cap._took == []


def test_a_reader_on_another_thread_reads_whole_rows_while_the_loop_keeps_and_writes_them():
    """`keep` and `written` take no lock: a query on another thread meanwhile reads consecutive exchanges, oldest
    first, each with the duration noted for it (or its own until its answer is written), never another row's, and
    with the summaries it worked out kept for the next query."""
    import threading
    req = decode_request(request_bytes(HeartbeatRequest(group_id="g", generation_id=2, member_id="m",
                                                        group_instance_id="i"), 4, 41)[4:])
    frame = encode_response(req, HeartbeatResponse(throttle_time_ms=0, error_code=0))
    cap = Capture(64)
    stop = threading.Event()
    reads: list[list[tuple[int, float]]] = []

    def read() -> None:
        while not stop.is_set():
            reads.append([(e.seq, e.duration_ms) for e in cap.query(group="g" if len(reads) % 2 else None)])
    t = threading.Thread(target=read)
    t.start()
    try:
        while cap.last_seq < 30_000 or (len(reads) < 20 and cap.last_seq < 300_000):
            cap.written(cap.keep(req, _Ctx, 0, time.perf_counter(), frame), 1000.0 + cap.last_seq)
    finally:
        stop.set()
        t.join()
    last = cap.last_seq
    assert len(reads) >= 20
    for rows in reads:
        seqs = [s for s, _ in rows]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) if seqs else True
        assert len(rows) <= 64 and all(d == 1000.0 + s or d < 1000.0 for s, d in rows)
        assert all(d == 1000.0 + s for s, d in rows[:-1])      # only the latest may not be written yet
    assert [(e.seq, e.duration_ms) for e in cap.query()] == [(s, 1000.0 + s) for s in range(last - 63, last + 1)]
    assert 0 < len(cap._summaries) <= 64                    # the group queries' summaries, of rows still held
    assert all(e.group == "g" for e in cap.query(group="g")) and len(cap.query(group="g")) == 64
