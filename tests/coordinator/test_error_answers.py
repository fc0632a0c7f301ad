"""Errors become responses in one place per API (protocol/error_responses.py): for every group API and
version where the coordinator answers a whole-request error itself, fault injection's answer with the
same code (`error_response`, what `faults.error(...)` sends) is the same answer, field for field, as a
client of that version reads it."""
import pytest

from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request
from tenure.protocol.error_responses import error_response

from .harness import COMMIT, DELETE, HEARTBEAT, JOIN, LEAVE, OFFSET_DELETE, SYNC, Harness, wire


def _versions(api_key: int) -> range:
    return range(SUPPORTED[api_key].min_version, SUPPORTED[api_key].max_version + 1)


# (api key, how the harness sends a request the coordinator refuses as a whole at `v`, the code it answers)
CASES = {
    "join: empty group id": (JOIN, lambda h, v: h.join("", "m-1", version=v), 24),
    "join: unknown member of an unknown group": (JOIN, lambda h, v: h.join("nope", "m-1", version=v), 25),
    "join: session timeout out of range": (JOIN, lambda h, v: h.join("g", "", session=1, version=v), 26),
    "sync: unknown group": (SYNC, lambda h, v: h.sync("nope", "m", 1, version=v), 25),
    "sync: empty group id": (SYNC, lambda h, v: h.sync("", "m", 1, version=v), 24),
    "heartbeat: unknown group": (HEARTBEAT, lambda h, v: h.heartbeat("nope", "m", 1, version=v), 25),
    "leave v0-2: unknown group": (LEAVE, lambda h, v: h.leave("nope", "m", version=v), 25),
    "leave: empty group id": (LEAVE, lambda h, v: h.leave("", "m" if v < 3 else [], version=v), 24),
    "commit: unknown group, a generation": (COMMIT, lambda h, v: h.commit("nope", "m", 3, offsets={
        "t": [(0, 1), (1, 2)], "u": [(5, 3)]}, version=v), None),
    "offset delete: unknown group": (OFFSET_DELETE, lambda h, v: h.offset_delete("nope", {"t": [0, 1]}), 69),
    "delete groups: unknown groups": (DELETE, lambda h, v: h.delete("a", "b", version=v), 69),
}


# LeaveGroup v3+ answers an unknown group per member (L1), not as a whole request
VERSIONS = {"leave v0-2: unknown group": range(3)}


@pytest.mark.parametrize("case, version", [(c, v) for c, (k, _, _) in CASES.items()
                                           for v in VERSIONS.get(c, _versions(k))])
def test_the_injected_error_is_the_handlers_own_answer(case, version):
    api_key, send, code = CASES[case]
    h = Harness()
    t = send(h, version)
    mine = h.resp(t)
    if code is None:            # the code depends on the version (OffsetCommit v9: 69, before: 22)
        code = mine["topics"][0]["partitions"][0]["error_code"]
    assert code
    injected = error_response(Request(api_key, version, 7, "client", h.bodies[t], SUPPORTED[api_key]), code)
    assert wire(api_key, version, injected) == mine
