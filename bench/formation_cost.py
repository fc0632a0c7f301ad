"""The coordinator's CPU to form one classic group of N static members, in process (no server, no codec): N
JoinGroup requests handed to `GroupRuntime.handle` together (the group expecting N, so no initial delay), then the
leader's SyncGroup with every assignment and the others'. What the runtime does besides the kind's rules shows here:
e.g. a rebalance's log lines, which read the group at each request of the rebalance.

    .venv/bin/python bench/formation_cost.py [--members 100,1000] [--rounds 3] [--baseline TREE]

Each tree runs in its own interpreter through bench/trees.py's launcher, the trees taking turns; best of the
rounds per tree, with the load average."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trees import python_argv, tree_label  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import asyncio, json, time
from kafka.protocol.consumer.group import JoinGroupRequest, SyncGroupRequest
from tenure.broker.topics import TopicRegistry
from tenure.coordinator import GroupShard
from tenure.coordinator.group_runtime import GroupRuntime
from tenure.protocol.apis import SUPPORTED
from tenure.protocol.codec import Request
from tenure.protocol.context import RequestContext
from tenure.protocol.internal_topics import OFFSETS_TOPIC
N = %d
P = JoinGroupRequest.JoinGroupRequestProtocol
A = SyncGroupRequest.SyncGroupRequestAssignment

async def call(rt, body, version):
    req = Request(type(body).API_KEY, version, 1, "bench", body, SUPPORTED[type(body).API_KEY])
    return await rt.handle(req, RequestContext(0, version, "bench", "/127.0.0.1", 0, api_key=req.api_key))

async def run():
    topic = TopicRegistry().create(OFFSETS_TOPIC, 4, internal=True, configs={"cleanup.policy": "compact"})
    rt = GroupRuntime(lambda p: GroupShard(partition=p), topic)
    rt.expect_group("g", N)
    # a consumer protocol assignment of 8 partitions of one topic, as a real leader sends
    assignment = b"\x00\x03\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x08" + b"".join(i.to_bytes(4, "big") for i in range(8)) + b"\xff\xff\xff\xff"
    c0 = time.thread_time()
    joins = await asyncio.gather(*(call(rt, JoinGroupRequest(version=8, group_id="g", session_timeout_ms=45000,
        rebalance_timeout_ms=60000, member_id="", group_instance_id=f"i-{i}", protocol_type="consumer",
        protocols=[P(version=8, name="range", metadata=b"\x00\x03\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff")]), 8)
        for i in range(N)))
    gen, leader = joins[0].generation_id, joins[0].leader
    ids = [j.member_id for j in joins]
    syncs = await asyncio.gather(*(call(rt, SyncGroupRequest(version=5, group_id="g", generation_id=gen, member_id=m,
        group_instance_id=f"i-{i}", protocol_type="consumer", protocol_name="range",
        assignments=[A(version=5, member_id=x, assignment=assignment) for x in ids] if m == leader else []), 5)
        for i, m in enumerate(ids)))
    took = time.thread_time() - c0
    assert all(s.error_code == 0 for s in syncs) and gen == 1
    rt.close()
    print("RESULT " + json.dumps({"s": took}))
asyncio.run(run())
"""


def once(tree: Path, n: int) -> float:
    out = subprocess.run(python_argv(tree, CHILD % n), capture_output=True, text=True, timeout=600)
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"{tree}: {out.stderr[-2000:]}")
    return json.loads(line[7:])["s"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", default="100,1000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", default=None, metavar="TREE")
    args = ap.parse_args()
    trees = [REPO] + ([Path(args.baseline)] if args.baseline else [])
    labels = [tree_label(t) for t in trees]
    for n in (int(x) for x in args.members.split(",")):
        best: dict[str, float] = {}
        for _ in range(args.rounds):
            for tree, label in zip(trees, labels, strict=True):
                s = once(tree, n)
                best[label] = min(best.get(label, s), s)
        line = ", ".join(f"{label} {best[label] * 1000:.0f} ms ({best[label] / n * 1e6:.0f} us per member)"
                         for label in labels)
        ratio = f"; ratio {best[labels[0]] / best[labels[1]]:.2f}x" if len(labels) > 1 else ""
        print(f"a classic group of {n} static members formed through the runtime, CPU (best of {args.rounds}): "
              f"{line}{ratio}; load average {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
