"""200 connections doing round trips at once: every one is served, and none is starved."""
import asyncio

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from tests.support.wire import AsyncWireClient, build_batch, fetch_request, metadata_request, produce_request

CONNECTIONS = 200
ROUNDS = 10


@pytest.mark.asyncio
async def test_200_concurrent_connections_round_trip_fairly(tenure_server):
    bs = tenure_server.bootstrap
    order: list[tuple[int, int]] = []   # (connection, round) in global completion order

    async def one(i: int):
        c = await AsyncWireClient.connect(bs)
        try:
            await c.call(ApiVersionsRequest(), 3)
            topic = f"conc-{i % 20}"
            await c.call(metadata_request(topic), 12)
            for r in range(ROUNDS):
                pr = await c.call(produce_request(topic, 0, build_batch([(f"{i}".encode(), f"{r}".encode())])), 9)
                assert pr.responses[0].partition_responses[0].error_code == 0
                fr = await c.call(fetch_request(topic, 0, pr.responses[0].partition_responses[0].base_offset), 12)
                assert fr.responses[0].partitions[0].error_code == 0 and fr.responses[0].partitions[0].records
                order.append((i, r))
                await asyncio.sleep(0)
        finally:
            await c.close()

    await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(CONNECTIONS))), 240)
    assert len(order) == CONNECTIONS * ROUNDS
    # fairness without timing: no connection finished all its rounds before every connection had
    # completed its first round trip
    first_done = max(order.index((i, 0)) for i in range(CONNECTIONS))
    earliest_finish = min(order.index((i, ROUNDS - 1)) for i in range(CONNECTIONS))
    assert earliest_finish > first_done, (first_done, earliest_finish)
    # and every produced record is in the logs
    total = sum(tenure_server.call(lambda t: tenure_server.server.topics.partition(t, 0).log_end_offset,
                                   f"conc-{k}") for k in range(20))
    assert total == CONNECTIONS * ROUNDS


def test_pipelined_requests_of_one_connection_do_not_hold_back_another(tenure_server):
    """One request per loop turn: a connection that sends 2,000 requests in one write is served in turn
    with a connection that sends one right after, not all 2,000 first (issue 11, finding 4)."""
    import socket
    import threading

    from kafka.protocol.metadata import MetadataRequest

    from tests.support.wire import WireClient, request_bytes

    server = tenure_server.server
    handled: list[int] = []                          # correlation ids in the order the server handles them
    metadata = server.handlers[3]

    async def recording(req, ctx):
        handled.append(req.correlation_id)
        return await metadata(req, ctx)

    tenure_server.call(server.handlers.__setitem__, 3, recording)
    try:
        many = b"".join(request_bytes(MetadataRequest(topics=[]), 12, correlation_id=i) for i in range(1, 2001))
        with WireClient.to(tenure_server.bootstrap) as a, WireClient.to(tenure_server.bootstrap) as b:
            drain = threading.Thread(target=lambda: [a.read_frame() for _ in range(2000)], daemon=True)
            drain.start()
            a.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            a.send_raw(many)
            b.send_raw(request_bytes(MetadataRequest(topics=[]), 12, correlation_id=9999))
            b.read_frame()
            drain.join(60)
            assert not drain.is_alive()
    finally:
        tenure_server.call(server.handlers.__setitem__, 3, metadata)
    assert sorted(handled) == sorted(list(range(1, 2001)) + [9999])
    assert handled.index(9999) < 1999, "the other connection waited for all 2,000 pipelined requests"
