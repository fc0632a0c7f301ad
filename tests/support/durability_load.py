"""A load of static members and offset commits against a server that is about to be SIGKILLed.

Runs in its own process (`python -m tests.support.durability_load CONFIG_JSON`) so that the test can
SIGKILL it right after the server, the way an application dies with its broker: no client library is
left blocked on a dead port (librdkafka's close() waits for an outstanding commit for as long as the
session timeout, or longer). Everything the clients were told is printed on stdout, one JSON object
per line, flushed, in the order it happened - the test folds these lines into its ledger of what was
acknowledged. A line is printed BEFORE a request is sent ("attempt", "join") and AFTER its answer has
been received ("ack", "assigned"), so an answer lost with the process only ever weakens the ledger
(the value stays "in flight"), never makes it claim too much.

Drivers, one thread each, each the only writer of its own keys:
- "confluent": a confluent-kafka Consumer with group.instance.id; commits distinct, increasing offsets
  to its own partitions synchronously (commit(asynchronous=False)); now and then it is replaced by a new
  Consumer with the same group.instance.id (a static replacement; the old one is fenced and closed).
- "wire": a static member driven over the raw wire (JoinGroup v8, SyncGroup v5, OffsetCommit v8), so
  that exactly which request was answered, and how, is known.

Events ("inst"/"group" on each; "t" = time.monotonic(), comparable with the test process on Linux):
  start                                    the drivers are about to start
  join                                     a JoinGroup for a new member id of this instance is about to go
  answered  member                         a JoinGroup answered with this id, not yet durable (a rebalance)
  assigned  member, partitions             the id is acknowledged: SyncGroup answered / on_assign ran /
                                           a static replacement's JoinGroup answered (written first)
  attempt   keys, v                        an OffsetCommit of offset v for keys is about to go
  ack       keys, v                        it was answered without error
  refused   keys, v, code                  answered with an error: nothing was written
  failed    keys, v, code                  no answer (unknown: it may or may not have been written)
  error     what                           anything unexpected (the test prints these)
"""
from __future__ import annotations

import itertools
import json
import random
import sys
import threading
import time

_out_lock = threading.Lock()
_values = itertools.count(1)
_values_lock = threading.Lock()


def emit(**ev) -> None:
    ev["t"] = time.monotonic()
    line = json.dumps(ev)
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def next_value(base: int) -> int:
    with _values_lock:
        return base + next(_values)


# ---------------------------------------------------------------------- confluent-kafka
def confluent_driver(cfg: dict, d: dict, rng: random.Random) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    group, inst, topic = d["group"], d["instance"], cfg["topic"]
    keys = [[topic, p] for p in d["partitions"]]
    tag = dict(group=group, inst=inst)
    n = itertools.count()

    def join():
        emit(ev="join", **tag)
        state: dict = {}

        def on_assign(c, parts):
            mid = c.memberid()
            state["member"] = mid
            emit(ev="assigned", member=mid, partitions=sorted(p.partition for p in parts), **tag)

        c = Consumer({
            "bootstrap.servers": cfg["bootstrap"], "group.id": group, "group.instance.id": inst,
            "client.id": f"{inst}-r{cfg['round']}-{next(n)}", "session.timeout.ms": cfg["session_ms"],
            "heartbeat.interval.ms": 1000, "max.poll.interval.ms": cfg["session_ms"],
            "partition.assignment.strategy": "range", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "log_level": 0,
            "error_cb": lambda e: emit(ev="client_error", what=str(e), **tag)})
        c.subscribe([topic], on_assign=on_assign)
        deadline = time.monotonic() + 30
        while "member" not in state:
            c.poll(0.02)
            if time.monotonic() > deadline:
                emit(ev="error", what="no assignment within 30s", **tag)
                return None
        return c

    cons = join()
    if cons is None:
        return
    retired = []
    while True:
        if rng.random() < cfg["replace_p"]:
            new = join()
            retired.append(cons)        # fenced by now; closing it can wait (the process is killed anyway)
            if new is None:
                return
            cons = new
            continue
        v = next_value(cfg["value_base"])
        emit(ev="attempt", keys=keys, v=v, **tag)
        try:
            res = cons.commit(offsets=[TopicPartition(topic, p, v) for _, p in keys], asynchronous=False)
        except KafkaException as exc:
            err = exc.args[0]
            code = err.code()
            # a code >= 0 came back from the server (nothing written); a negative one is local (unknown)
            emit(ev="refused" if code > 0 else "failed", keys=keys, v=v, code=code, what=err.str(), **tag)
            cons.poll(0.05)
            continue
        bad = [tp for tp in res if tp.error is not None]
        if bad:
            emit(ev="failed", keys=keys, v=v, code=bad[0].error.code(), what=str(bad), **tag)
        else:
            emit(ev="ack", keys=keys, v=v, **tag)
        cons.poll(rng.uniform(*cfg["pause_s"]))


# ---------------------------------------------------------------------- raw wire
def wire_driver(cfg: dict, d: dict, rng: random.Random) -> None:
    from tests.support import groupwire as gw
    from tests.support.wire import WireClient

    group, inst, topic = d["group"], d["instance"], cfg["topic"]
    parts = d["partitions"]
    keys = [[topic, p] for p in parts]
    tag = dict(group=group, inst=inst)
    conn = WireClient.to(cfg["bootstrap"], timeout=15)

    def join():
        emit(ev="join", **tag)
        r = gw.join(conn, group, "", inst, topic, session_ms=cfg["session_ms"])
        if r.error_code:
            emit(ev="error", what=f"JoinGroup error {r.error_code}", **tag)
            return None
        mid, gen = r.member_id, r.generation_id
        if r.leader == mid:
            # it leads a rebalance: the mapping is written when the leader's SyncGroup is handled
            emit(ev="answered", member=mid, **tag)
            s = gw.sync(conn, group, mid, gen, inst, {mid: gw.assignment(topic, parts)})
            if s.error_code:
                emit(ev="error", what=f"SyncGroup (leader) error {s.error_code}", **tag)
                return None
            emit(ev="assigned", member=mid, partitions=parts, **tag)
        else:
            # a static replacement in a Stable group: answered only once the new mapping is written
            emit(ev="assigned", member=mid, partitions=None, via="join", **tag)
            s = gw.sync(conn, group, mid, gen, inst)
            if s.error_code or gw.decode_assignment(s.assignment) != {topic: sorted(parts)}:
                emit(ev="error", what=f"SyncGroup after replacement: error {s.error_code}, "
                                      f"assignment {gw.decode_assignment(s.assignment)}", **tag)
                return None
        return mid, gen

    try:
        joined = join()
        if joined is None:
            return
        mid, gen = joined
        while True:
            if rng.random() < cfg["replace_p"]:
                joined = join()
                if joined is None:
                    return
                mid, gen = joined
                continue
            v = next_value(cfg["value_base"])
            emit(ev="attempt", keys=keys, v=v, **tag)
            try:
                codes = gw.commit(conn, group, mid, gen, inst, topic, {p: v for p in parts})
            except (OSError, ConnectionError) as exc:
                emit(ev="failed", keys=keys, v=v, code=-1, what=repr(exc), **tag)
                return
            if any(codes.values()):
                emit(ev="refused", keys=keys, v=v, code=max(codes.values()), **tag)
                emit(ev="error", what=f"OffsetCommit errors {codes}", **tag)
            else:
                emit(ev="ack", keys=keys, v=v, **tag)
            time.sleep(rng.uniform(*cfg["pause_s"]))
    except (OSError, ConnectionError) as exc:
        emit(ev="disconnected", what=repr(exc), **tag)


def main(argv: list[str]) -> None:
    cfg = json.loads(argv[0])
    rng = random.Random(cfg["seed"])
    drivers = [(confluent_driver, d) for d in cfg["confluent"]] + [(wire_driver, d) for d in cfg["wire"]]
    emit(ev="start")
    threads = []
    for fn, d in drivers:
        r = random.Random(rng.random())

        def run(fn=fn, d=d, r=r):
            try:
                fn(cfg, d, r)
            except BaseException as exc:       # reported, then the thread ends
                emit(ev="error", what=f"driver crashed: {exc!r}", group=d["group"], inst=d["instance"])
        t = threading.Thread(target=run, daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    emit(ev="done")
    while True:            # wait to be killed: closing clients is not what is measured
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1:])
