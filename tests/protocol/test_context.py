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
