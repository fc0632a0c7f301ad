"""What the authorizer costs: authorize() calls per second over N ACLs, and a Metadata of every topic (each
topic's DESCRIBE checked) over the wire, with no authorizer and with N ACLs, in an in-process server.

    .venv/bin/python bench/acls.py [--acls 1000,10000,100000] [--topics 1000] [--rounds 50]

Bounded: per size one in-process server, --rounds Metadata calls; nothing outlives the script.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka.protocol.metadata import MetadataRequest  # noqa: E402

from tenure.config import ServerConfig  # noqa: E402
from tenure.protocol.acl import DESCRIBE, READ, TOPIC  # noqa: E402
from tenure.security.acls import parse_acl  # noqa: E402
from tenure.security.authorizer import Authorizer  # noqa: E402
from tenure.server import ServerThread  # noqa: E402
from tests.support.wire import WireClient  # noqa: E402


def bindings(n: int) -> list:
    """n ACLs: half literal topics, a quarter prefixed topics, a quarter groups, over 50 principals."""
    out = []
    for i in range(n):
        who = f"User:u{i % 50}"
        kind = i % 4
        text = (f"allow {who} read topic:t{i}" if kind < 2 else f"allow {who} write topic:prefixed:p{i}-"
                if kind == 2 else f"allow {who} read group:g{i}")
        out.append(parse_acl(text))
    out.append(parse_acl("allow User:ANONYMOUS describe topic:prefixed:m-"))
    return out


def authorize_rate(a: Authorizer, seconds: float = 1.0) -> float:
    names = [f"t{i}" for i in range(1000)] + [f"p{i}-x" for i in range(1000)]
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for name in names:
            a.authorize("User:u7", "127.0.0.1", READ if n % 2 else DESCRIBE, TOPIC, name)
        n += len(names)
    return n / (time.perf_counter() - t0)


def metadata_ms(config: ServerConfig, topics: int, rounds: int) -> tuple[float, float, int]:
    with ServerThread(config) as st:
        st.create_topics({f"m-{i}": 1 for i in range(topics)})
        with WireClient.to(st.bootstrap) as c:
            times, seen = [], 0
            for _ in range(rounds):
                t0 = time.perf_counter()
                r = c.call(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False), 12)
                times.append((time.perf_counter() - t0) * 1000)
                seen = len(r.topics)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1], seen


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--acls", default="1000,10000,100000")
    p.add_argument("--topics", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=50)
    args = p.parse_args()
    p50, p99, seen = metadata_ms(ServerConfig(port=0), args.topics, args.rounds)
    print(f"no authorizer: Metadata of {seen} topics p50 {p50:.1f} ms p99 {p99:.1f} ms")
    for n in (int(x) for x in args.acls.split(",")):
        acls = bindings(n)
        a = Authorizer()
        a.create(acls)
        rate = authorize_rate(a)
        config = ServerConfig(port=0, acls=tuple(b.text() for b in acls))
        p50, p99, seen = metadata_ms(config, args.topics, args.rounds)
        print(f"{n} ACLs: authorize() {rate / 1000:.0f}k calls/s; Metadata of {seen} topics p50 {p50:.1f} ms "
              f"p99 {p99:.1f} ms")


if __name__ == "__main__":
    main()
