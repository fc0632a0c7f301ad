"""A CatchUpConsumer in its own process, to be killed (SIGKILL: no close, no commit, no leave).

    python -m tests.support.catchup_worker BOOTSTRAP TOPIC GROUP INSTANCE COMMIT_AT STOP_AT [on|off|plain]

Consumes partition 0 of TOPIC in GROUP as static member INSTANCE (a CatchUpConsumer with
enable.parallel.rebalance on - the default - or off, or a plain confluent-kafka Consumer),
commits COMMIT_AT once it has processed the record before it, prints `at STOP_AT` once it has processed
every record below STOP_AT, and then waits to be killed."""
from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, TopicPartition

from tenure.catchup import CatchUpConsumer


def main(argv: list[str]) -> int:
    bootstrap, topic, group, instance = argv[:4]
    commit_at, stop_at = int(argv[4]), int(argv[5])
    mode = argv[6] if len(argv) > 6 else "on"
    config = {"bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": instance,
              "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000}
    c = Consumer(config) if mode == "plain" else CatchUpConsumer({**config, "enable.parallel.rebalance": mode == "on"})
    c.subscribe([topic])
    seen: set[int] = set()
    committed = False
    while True:
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        seen.add(m.offset())
        if not committed and all(o in seen for o in range(commit_at)):
            c.commit(offsets=[TopicPartition(topic, 0, commit_at)], asynchronous=False)
            committed = True
        if committed and all(o in seen for o in range(stop_at)):
            break
    print(f"at {stop_at}", flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
