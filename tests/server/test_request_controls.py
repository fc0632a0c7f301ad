"""The test controls at their layers: network faults in `Connection` (a fed reader and a list-backed writer,
as tests/server/test_connection.py drives it), request hooks in the dispatcher after the fault rules (a
wire client against a ServerThread), the capture's ring and summaries, and the rules' checks."""
from __future__ import annotations

import asyncio
import json
import struct
import time
import uuid

import pytest
from kafka.protocol.admin.groups import DescribeGroupsRequest
from kafka.protocol.consumer.group import HeartbeatRequest, OffsetFetchRequest
from kafka.protocol.metadata import ApiVersionsResponse, FindCoordinatorRequest, MetadataRequest

from tenure.control.capture import Capture, summarize
from tenure.control.hooks import Hooks
from tenure.control.network import Network
from tenure.protocol.errors import ErrorCode
from tenure.server import ServerThread
from tests.server.test_connection import ChunkReader, EchoDispatch, answered, api_versions, connection
from tests.support.wire import WireClient, request_bytes


# ---------------------------------------------------------------------- network faults in Connection
def _conn(reader, dispatch, net: Network, **kw):
    conn, writer = connection(reader, dispatch, **kw)
    conn.network = net
    return conn, writer


def test_a_partition_holds_requests_and_answers_until_healed():
    async def run():
        net = Network()
        cut = net.partition(port=5001)
        dispatch = EchoDispatch()
        conn, writer = _conn(ChunkReader(api_versions(1) + api_versions(2)), dispatch, net)
        task = asyncio.create_task(conn.run())
        await asyncio.sleep(0.1)
        assert dispatch.seen == [] and writer.frames == []         # nothing passes either way
        cut.heal()
        await asyncio.wait_for(task, 5)
        return dispatch.seen, answered(writer), cut.applied
    assert asyncio.run(run()) == ([1, 2], [1, 2], 1)


def test_a_partition_of_another_port_or_broker_lets_this_connection_through():
    async def run():
        net = Network()
        net.partition(port=6000)
        net.partition(broker=3)
        net.partition(client_id="someone-else")
        conn, writer = _conn(ChunkReader(api_versions(1)), EchoDispatch(), net)
        await asyncio.wait_for(conn.run(), 5)
        return answered(writer)
    assert asyncio.run(run()) == [1]


def test_one_way_loss_drops_requests_or_answers():
    async def run(direction):
        net = Network()
        net.loss(direction, client_id="wire")           # the client id api_versions() sends
        dispatch = EchoDispatch()
        conn, writer = _conn(ChunkReader(api_versions(1), api_versions(2)), dispatch, net)
        await asyncio.wait_for(conn.run(), 5)
        return dispatch.seen, answered(writer)
    assert asyncio.run(run("in")) == ([], [])
    assert asyncio.run(run("out")) == ([1, 2], [])
    with pytest.raises(ValueError, match="one-way"):
        Network().loss("both")


def test_delay_and_bandwidth_pace_each_direction():
    async def run(setup):
        net = Network()
        setup(net)
        conn, writer = _conn(ChunkReader(api_versions(1), api_versions(2)), EchoDispatch(), net)
        t0 = time.monotonic()
        await asyncio.wait_for(conn.run(), 10)
        return time.monotonic() - t0, answered(writer)
    took, got = asyncio.run(run(lambda n: n.delay(100, direction="out")))
    assert got == [1, 2] and took >= 0.2
    took, got = asyncio.run(run(lambda n: n.delay(100)))
    assert got == [1, 2] and took >= 0.4                           # each way
    frame = len(api_versions(1)) + 4
    took, got = asyncio.run(run(lambda n: n.bandwidth(frame * 10, direction="in")))
    assert got == [1, 2] and took >= 0.15                          # two frames at 10 frames a second


def test_a_reset_after_n_bytes_ends_the_connection_with_what_got_through():
    async def run(after, count=None, conns=1):
        net = Network()
        rule = net.reset(after, count=count, direction="out")
        out = []
        for i in range(conns):
            dispatch = EchoDispatch()
            conn, writer = _conn(ChunkReader(api_versions(1), api_versions(2)), dispatch, net, conn_id=i + 1)
            await asyncio.wait_for(conn.run(), 5)
            out.append(b"".join(writer.frames))
        return out, rule.applied, conn.metrics.closed_connections["network_reset"]
    frames, applied, resets = asyncio.run(run(10))
    assert frames == [(4).to_bytes(4, "big") + (1).to_bytes(4, "big") + b"\x00\x00"] and applied == 1 and resets == 1
    frames, applied, _ = asyncio.run(run(0, count=1, conns=2))
    assert frames[0] == b"" and len(frames[1]) == 16 and applied == 1       # the second connection passes


def test_a_draining_connection_behind_a_partition_ends():
    async def run():
        net = Network()
        net.partition()
        conn, writer = _conn(ChunkReader(api_versions(1)), EchoDispatch(), net)
        task = asyncio.create_task(conn.run())
        await asyncio.sleep(0.05)
        conn.draining = True
        await asyncio.wait_for(task, 2)
        return writer.frames
    assert asyncio.run(run()) == []


def test_network_rules_refuse_bad_values_and_list_themselves():
    net = Network()
    for bad in ({"fault": "partition", "port": 0}, {"fault": "partition", "broker": -1},
                {"fault": "partition", "client_id": 5}, {"fault": "delay", "ms": -1}, {"fault": "delay", "ms": True},
                {"fault": "bandwidth", "bytes_per_s": 0}, {"fault": "reset", "after_bytes": 1, "count": 0},
                {"fault": "delay", "ms": 1, "direction": "up"}, {"fault": "reset"}, {"fault": None}, {}):
        with pytest.raises(ValueError):
            net.add(bad)
    assert net.rules() == [] and not net.active
    r = net.add({"fault": "reset", "after_bytes": 5, "count": 2, "client_id": "c", "port": 1234, "broker": 0})
    assert r.to_dict() == {"id": r.id, "fault": "reset", "direction": "both", "applied": 0, "client_id": "c",
                           "port": 1234, "broker": 0, "after_bytes": 5, "count": 2}
    with net.delay(5):
        assert len(net.rules()) == 2
    assert net.rules() == [r] and net.heal(r.id) == 1 and net.heal() == 0 and not net.active


# ---------------------------------------------------------------------- hooks in the dispatcher
def _heartbeat(c: WireClient, group: str = "g"):
    return c.call(HeartbeatRequest(group_id=group, generation_id=1, member_id="m", group_instance_id=None), 4)


def test_hooks_run_after_the_fault_rules_and_see_the_request_and_its_context():
    with ServerThread() as st:
        seen = []

        def answer(call):
            seen.append((call.api, call.version, call.request.group_id, call.ctx.client_id, call.ctx.broker_id,
                         call.summary()["group"]))
            return call.error(ErrorCode.GROUP_AUTHORIZATION_FAILED)

        with st.on_request("Heartbeat", answer, group="g", broker=0) as hook:
            st.faults.fail("Heartbeat", "NOT_COORDINATOR")
            with WireClient.to(st.bootstrap) as c:
                first = _heartbeat(c)              # the fault rule answers: the hook is not called
                second = _heartbeat(c)             # the hook answers
                other = _heartbeat(c, group="h")   # not its group: the coordinator answers
        assert (first.error_code, second.error_code) == (ErrorCode.NOT_COORDINATOR, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        assert other.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert seen == [("Heartbeat", 4, "g", "wire", 0, "g")] and hook.calls == 1 and hook.answered == 1
        assert [e.error for e in st.requests(api="Heartbeat")] == [ErrorCode.NOT_COORDINATOR,
                                                                    ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                                                    ErrorCode.UNKNOWN_MEMBER_ID]
        assert st.metrics.faults[("Heartbeat", "hook_answer")] == 1


def test_an_async_hook_a_drop_and_errors_in_hooks_and_rewrites_never_stop_the_server():
    with ServerThread() as st:
        async def waits(call):
            await asyncio.sleep(0.2)
            call.on_response(lambda r: 1 / 0)               # a rewrite that raises: reported, skipped
            return None

        with pytest.raises(AssertionError, match="ZeroDivisionError"):
            with st.on_request("Heartbeat", waits):
                with WireClient.to(st.bootstrap) as c:
                    t0 = time.monotonic()
                    assert _heartbeat(c).error_code == ErrorCode.UNKNOWN_MEMBER_ID
                    assert time.monotonic() - t0 >= 0.2
        hook = st.on_request("Metadata", lambda call: call.error("UNKNOWN_SERVER_ERROR"))   # no error answer
        with WireClient.to(st.bootstrap) as c:
            assert c.call(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12).brokers
        with pytest.raises(AssertionError, match="Metadata has no whole-request error answer"):
            hook.remove()
        with st.on_request("*", lambda call: call.drop(), client_id="dropped"):
            with WireClient.to(st.bootstrap) as c:
                c.send_raw(request_bytes(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12,
                                         client_id="dropped"))
                assert c.is_closed_by_peer()
            with WireClient.to(st.bootstrap) as c:        # everyone else is served
                assert c.call(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12).brokers
        assert st.metrics.closed_connections["hook"] == 1
        assert [e.outcome for e in st.requests(client_id="dropped")] == ["closed"]
        assert st.hooks.errors == [] and st.hooks.hooks() == ()


def test_a_rewrite_changing_an_answer_in_place_changes_that_answer_only():
    """The coordinator shares one Heartbeat answer object per error code between requests: a hook's
    on_response that changes its answer in place works on a copy, so the next heartbeats are answered as
    before (the coordinator's own answer, not the rewritten one)."""
    def rewrite(r):
        r.error_code = ErrorCode.REBALANCE_IN_PROGRESS     # in place, returning None

    with ServerThread() as st:
        with WireClient.to(st.bootstrap) as c:
            before = _heartbeat(c).error_code
            with st.on_request("Heartbeat", lambda call: call.on_response(rewrite)):
                rewritten = [_heartbeat(c).error_code for _ in range(2)]
            after = [_heartbeat(c).error_code for _ in range(2)]
    assert before == ErrorCode.UNKNOWN_MEMBER_ID
    assert rewritten == [ErrorCode.REBALANCE_IN_PROGRESS] * 2
    assert after == [ErrorCode.UNKNOWN_MEMBER_ID] * 2


def test_on_request_refuses_bad_arguments():
    hooks = Hooks()
    for api, fn, filters, match in (("NoSuchApi", print, {}, "unknown API"), ("Heartbeat", 5, {}, "callable"),
                                    ("Heartbeat", print, {"colour": "red"}, "unknown filter"),
                                    ("Heartbeat", print, {"broker": "0"}, "broker"),
                                    ("Heartbeat", print, {"group": 5}, "group")):
        with pytest.raises(ValueError, match=match):
            hooks.add(api, fn, **filters)
    assert hooks.hooks() == () and not hooks.active


# ---------------------------------------------------------------------- the capture
def test_the_summary_names_groups_topics_and_members_of_each_kind_of_request():
    fc = FindCoordinatorRequest(key_type=0, coordinator_keys=["g1", "g2"])
    assert summarize(10, fc) == {"groups": ["g1", "g2"]}
    txn = FindCoordinatorRequest(key_type=1, coordinator_keys=["t1"])
    assert summarize(10, txn) == {"transactional_ids": ["t1"]}
    assert summarize(15, DescribeGroupsRequest(groups=["a", "b"], include_authorized_operations=False)) == \
        {"groups": ["a", "b"]}
    G = OffsetFetchRequest.fields["groups"].data_class
    of = OffsetFetchRequest(groups=[G(group_id="og", member_id=None, member_epoch=-1, topics=None)],
                            require_stable=False)
    assert summarize(9, of)["groups"] == ["og"]
    hb = HeartbeatRequest(group_id="g", generation_id=3, member_id="m-1", group_instance_id="i-1")
    assert summarize(12, hb) == {"group": "g", "generation_id": 3, "member_id": "m-1", "group_instance_id": "i-1"}
    assert summarize(3, MetadataRequest(topics=None, allow_auto_topic_creation=False)) == {}


def test_a_captured_request_naming_topic_ids_turns_into_json_with_its_bodies():
    cap = Capture(2)
    tid = uuid.uuid4()
    T = MetadataRequest.fields["topics"].data_class

    class Req:
        api_key, api_version, correlation_id = 3, 12, 7
        body = MetadataRequest(topics=[T(topic_id=tid, name=None)], allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False)

    class Ctx:
        client_id, connection_id, peer, broker_id = "c", 1, "127.0.0.1:1", 0
    cap.record(Req, Ctx, None, 0, time.perf_counter(), "answered")
    d = json.loads(json.dumps(cap.query()[0].to_dict(bodies=True)))
    assert d["request"]["topics"] == [{"topic_id": str(tid), "name": None}]


def test_only_the_latest_describes_of_thousands_of_groups_keep_their_bodies_older_ones_their_summary():
    """The ring holds the decoded bodies of its last N requests: of the exchanges whose request or answer has
    more than 5,000 array elements (a describe of 6,000 groups), only the latest HEAVY_BODIES_KEPT keep their
    bodies - an older one keeps its summary -, so large describes do not keep megabytes alive for the ring's
    whole length; a small describe keeps both bodies."""
    from tenure.control.capture import HEAVY_BODIES_KEPT
    many = [f"g-{i}" for i in range(6000)]
    with ServerThread() as st, WireClient.to(st.bootstrap) as c:
        for n in range(HEAVY_BODIES_KEPT + 1):
            big = c.call(DescribeGroupsRequest(groups=many[n:], include_authorized_operations=False), 5)
            assert len(big.groups) == 6000 - n
        small = c.call(DescribeGroupsRequest(groups=["a", "b"], include_authorized_operations=False), 5)
        assert len(small.groups) == 2
        *heavy, light = st.requests(api="DescribeGroups")
    oldest, kept = heavy[0], heavy[1:]
    assert oldest.request is None and oldest.response is None
    assert oldest.summary()["groups"] == many and oldest.names_group("g-5999") and oldest.error == 0
    assert json.loads(json.dumps(oldest.to_dict(bodies=True)))["request"] is None
    assert [(len(e.request.groups), len(e.response.groups)) for e in kept] == \
        [(6000 - n, 6000 - n) for n in range(1, HEAVY_BODIES_KEPT + 1)]
    assert light.request.groups == ["a", "b"] and [g.group_id for g in light.response.groups] == ["a", "b"]


def test_the_ring_keeps_the_latest_and_checks_its_size():
    cap = Capture(3)

    class Req:
        api_key, api_version, correlation_id = 18, 3, 0
        body = None

    class Ctx:
        client_id, connection_id, peer, broker_id = "c", 1, "127.0.0.1:1", 0
    for i in range(5):
        Req.correlation_id = i
        cap.record(Req, Ctx, None, 0, time.perf_counter(), "answered")
    assert [e.correlation_id for e in cap.query()] == [2, 3, 4] and cap.last_seq == 5
    assert [e.seq for e in cap.query(since=4)] == [5]
    assert cap.query(api="ApiVersions", client_id="c", broker=0, connection=1) == cap.query()
    assert cap.query(client_id="d") == [] and cap.query(error="NONE") == cap.query()
    cap.resize(1)
    assert [e.correlation_id for e in cap.query()] == [4]
    for bad in (-1, True, "5"):
        with pytest.raises(ValueError):
            cap.resize(bad)
    assert cap.clear() == 1 and cap.query() == []


def test_hooks_network_rules_and_the_capture_outlive_a_restart():
    with ServerThread() as st:
        calls = []
        hook = st.on_request("Heartbeat", lambda call: calls.append(call.ctx.connection_id))
        rule = st.network.delay(1, client_id="nobody")
        with WireClient.to(st.bootstrap) as c:
            _heartbeat(c)
        st.restart()
        with WireClient.to(st.bootstrap) as c:
            _heartbeat(c)
        assert len(calls) == 2 and st.network.rules() == [rule]
        assert [e.api for e in st.requests(api="Heartbeat")] == ["Heartbeat", "Heartbeat"]
        hook.remove()


def test_a_hook_raising_on_every_request_keeps_its_first_exceptions_and_counts_the_rest():
    from types import SimpleNamespace

    from tenure.control.hooks import MAX_ERRORS_KEPT, HookError
    hooks = Hooks()
    n = [0]

    def broken(call):
        n[0] += 1
        raise RuntimeError(f"call {n[0]}")
    hook = hooks.add("Heartbeat", broken)
    req = SimpleNamespace(api_key=12, api_version=4, name="Heartbeat",
                          body=HeartbeatRequest(group_id="g", generation_id=1, member_id="m", group_instance_id=None))
    ctx = SimpleNamespace(client_id="c", broker_id=0)

    async def run():
        return [await hooks.intercept(req, ctx) for _ in range(MAX_ERRORS_KEPT + 50)]
    decisions = asyncio.run(run())
    assert all(d.response is None and not d.close for d in decisions)       # the requests went on
    assert hook.failures == MAX_ERRORS_KEPT + 50 and len(hook.errors) == len(hooks.errors) == MAX_ERRORS_KEPT
    with pytest.raises(HookError, match=f"raised {MAX_ERRORS_KEPT + 50} time\\(s\\); first: RuntimeError: call 1"):
        hook.remove()
    assert hooks.errors == [] and hooks.hooks() == ()
    hook.check()                                                           # reported once


def test_a_hooks_apiversions_error_is_answered_in_v0_as_kafka_answers_it():
    with ServerThread() as st, st.on_request("ApiVersions", lambda call: call.error("UNSUPPORTED_VERSION")):
        with WireClient.to(st.bootstrap) as c:
            c.send_raw(api_versions(3))
            payload = c.read_frame()
        answer = ApiVersionsResponse.decode(struct.pack(">i", len(payload)) + payload, version=0, header=True,
                                            framed=True)
        assert answer.error_code == ErrorCode.UNSUPPORTED_VERSION and answer.api_keys       # the ranges served
