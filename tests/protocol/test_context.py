"""protocol/context.py RequestContext: the copy the coordinator runtime makes per input."""
from __future__ import annotations

import dataclasses

from tenure.protocol.context import RequestContext


def test_for_input_is_replace_with_the_token_and_clock():
    ctx = RequestContext(0, 4, "client-1", "/127.0.0.1", 1_000, api_key=12, connection_id=7, peer="127.0.0.1:5000",
                         broker_id=2, listener="SASL", principal="User:alice")
    mine = ctx.for_input(41, 2_000)
    assert mine == dataclasses.replace(ctx, token=41, now_ms=2_000)
    assert mine is not ctx and type(mine) is RequestContext
    assert (ctx.token, ctx.now_ms) == (0, 1_000)          # the dispatcher's context is left as it was
    assert hash(mine) == hash(dataclasses.replace(ctx, token=41, now_ms=2_000))
    try:
        mine.token = 5                                    # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("the copy is not frozen")


def test_for_request_is_the_connections_context_with_the_requests_own_part():
    base = RequestContext(0, 0, "", "/10.0.0.1", 0, connection_id=3, peer="10.0.0.1:4000", broker_id=1,
                          listener="SSL", principal="User:bob")
    authorizer = object()
    ctx = base.for_request(19, 7, "cli", 5_000, authorizer)            # type: ignore[arg-type]
    assert ctx == RequestContext(0, 7, "cli", "/10.0.0.1", 5_000, api_key=19, connection_id=3, peer="10.0.0.1:4000",
                                 broker_id=1, listener="SSL", principal="User:bob",
                                 authorizer=authorizer)                # type: ignore[arg-type]
    assert (base.api_key, base.api_version, base.client_id, base.now_ms, base.authorizer) == (-1, 0, "", 0, None)


def test_a_copy_owns_its_fields_and_pickles_and_reads_as_its_source():
    """for_request and for_input give the copy a dict of its own: changing neither the source nor another copy
    shows through; the copy reads, compares, hashes and pickles as one built by the constructor."""
    import pickle
    base = RequestContext(0, 0, "", "/10.0.0.1", 0, connection_id=3, peer="10.0.0.1:4000", broker_id=1)
    a, b = base.for_request(12, 4, "a", 1, None), base.for_request(12, 4, "b", 2, None)
    c = a.for_input(9, 3)
    assert (a.client_id, b.client_id, c.client_id, c.token, a.token, base.client_id) == ("a", "b", "a", 9, 0, "")
    assert a.__dict__ is not base.__dict__ and c.__dict__ is not a.__dict__
    built = RequestContext(9, 4, "a", "/10.0.0.1", 3, api_key=12, connection_id=3, peer="10.0.0.1:4000", broker_id=1)
    assert c == built and hash(c) == hash(built) and repr(c) == repr(built) and pickle.loads(pickle.dumps(c)) == built
    assert dataclasses.asdict(c) == dataclasses.asdict(built) and c.host == "10.0.0.1"
