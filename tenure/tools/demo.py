"""`tenure demo`: the mission in about a minute, with real consumers (kafka-python, a core dependency).

1. start a server with a data dir (in-process, on 127.0.0.1:0) and produce to a topic;
2. start N static consumers (`group.instance.id`) and wait for one stable assignment;
3. restart them one by one: each gets exactly its partitions back, the generation stays, 0 rebalances;
4. restart the server on its data dir: the group and its committed offsets come back, no rebalance;
5. run the Spark audit over the data dir (if the `audit` extra is installed) and print where the report is.

It prints what it sees at every step and exits non-zero if anything it promises did not happen.
"""
from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

GROUP, TOPIC = "demo-group", "demo-topic"


class DemoConsumer:
    """One kafka-python static consumer on its own thread, committing what it reads."""

    def __init__(self, bootstrap: str, instance_id: str) -> None:
        self.bootstrap, self.instance_id = bootstrap, instance_id
        self.assigned: list[int] | None = None
        self.assignments = 0                 # how many assignment callbacks this consumer saw
        self.consumed = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"demo-{instance_id}", daemon=True)

    def start(self) -> DemoConsumer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        me = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                me.assigned = None

            def on_partitions_assigned(self, assigned):
                me.assignments += 1
                me.assigned = sorted(tp.partition for tp in assigned)

        try:
            c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=GROUP, group_instance_id=self.instance_id,
                              client_id=self.instance_id, session_timeout_ms=10000, heartbeat_interval_ms=500,
                              partition_assignment_strategy=(RangePartitionAssignor,), enable_auto_commit=False,
                              auto_offset_reset="earliest")
            c.subscribe([TOPIC], listener=Listener())
            c.topics()       # a metadata refresh before the first poll (avoids a kafka-python 3.0 rejoin race)
            try:
                while not self._stop.is_set():
                    batch = c.poll(timeout_ms=100)
                    n = sum(len(v) for v in batch.values())
                    if n:
                        self.consumed += n
                        c.commit()
            finally:
                c.close(timeout_ms=10000)    # a static member sends no LeaveGroup: its partitions wait
        except BaseException as exc:         # shown by the demo, not lost in a thread
            self.error = exc


def _wait(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


def run(members: int = 3, partitions: int = 6, records: int = 600, data_dir: str | None = None,
        audit: bool = True, out=print) -> int:
    """The demo in `data_dir` (kept), or in a temporary directory removed at the end - all but the
    audit's report and tables, if it wrote them, which stay for the reader (their path is printed)."""
    if data_dir is not None:
        return _story(Path(data_dir), members, partitions, records, audit, out)
    base = Path(tempfile.mkdtemp(prefix="tenure-demo-"))
    try:
        return _story(base, members, partitions, records, audit, out)
    finally:
        shutil.rmtree(base / "data", ignore_errors=True)
        if (base / "audit" / "report.html").is_file():
            out(f"         the data dir is removed; the audit's report and tables stay in {base / 'audit'}")
        else:
            shutil.rmtree(base, ignore_errors=True)


def tables_line(report_dir: Path) -> str:
    """Where the audit's tables are: one Parquet directory per table, as a shell pattern that matches their files."""
    names = sorted(p.name for p in report_dir.iterdir() if p.is_dir() and any(p.glob("*.parquet")))
    if not names:
        return f"tables: none in {report_dir}"
    where = names[0] if len(names) == 1 else "{" + ",".join(names) + "}"
    return f"tables (Parquet, a directory each): {report_dir}/{where}/*.parquet"


def _story(base: Path, members: int, partitions: int, records: int, audit: bool, out) -> int:
    """The demo's story, with kafka-python's own log lines (its reconnect chatter) silenced while it runs and its
    logger's level put back afterwards (a test may run the demo in its own process, beside other tests)."""
    kafka_log = logging.getLogger("kafka")
    level = kafka_log.level
    kafka_log.setLevel(logging.CRITICAL)
    try:
        return _tell(base, members, partitions, records, audit, out)
    finally:
        kafka_log.setLevel(level)


def _tell(base: Path, members: int, partitions: int, records: int, audit: bool, out) -> int:
    from kafka import KafkaProducer

    from tenure.config import ServerConfig
    from tenure.server import ServerThread

    t_start = time.monotonic()
    data, report_dir = base / "data", base / "audit"
    failures: list[str] = []

    def step(text: str) -> None:
        out(f"[{time.monotonic() - t_start:5.1f}s] {text}")

    def check(ok: bool, what: str) -> None:
        out(f"         {'ok  ' if ok else 'FAIL'} {what}")
        if not ok:
            failures.append(what)

    server = ServerThread(ServerConfig(port=0, data_dir=str(data), default_partitions=partitions)).start()
    consumers: dict[str, DemoConsumer] = {}
    try:
        step(f"server on {server.bootstrap}, data dir {data}")
        producer = KafkaProducer(bootstrap_servers=server.bootstrap)
        for i in range(records):
            producer.send(TOPIC, key=str(i).encode(), value=f"event {i}".encode())
        producer.flush(30)
        producer.close()
        step(f"produced {records} records to {TOPIC} ({partitions} partitions)")

        ids = [f"consumer-{i}" for i in range(members)]
        for iid in ids:
            consumers[iid] = DemoConsumer(server.bootstrap, iid).start()
        _wait(lambda: _settled(server, consumers, partitions), 60, "a stable assignment")
        g = server.wait_for_group(GROUP, state=None)
        step(f"{members} static consumers joined: generation {g.generation}, {g.rebalances} rebalance(s) so far")
        for iid in ids:
            out(f"         {iid:12} partitions {consumers[iid].assigned}")
        _wait(lambda: sum(c.consumed for c in consumers.values()) >= records, 60, "every record consumed")

        step("rolling restart: each consumer is closed and started again with the same group.instance.id")
        gen, before = g.generation, {iid: consumers[iid].assigned for iid in ids}
        rebalances = server.rebalances(GROUP)
        others_called = 0
        for iid in ids:
            seen = {o: c.assignments for o, c in consumers.items()}
            consumers[iid].stop()
            t0 = time.monotonic()
            consumers[iid] = DemoConsumer(server.bootstrap, iid).start()
            _wait(lambda iid=iid: consumers[iid].assigned is not None, 60, f"{iid} to get its partitions back")
            out(f"         {iid:12} back in {time.monotonic() - t0:.2f}s with partitions {consumers[iid].assigned}")
            others_called += sum(consumers[o].assignments - n for o, n in seen.items() if o != iid)
        check(server.wait_for_group(GROUP, state=None).generation == gen, f"generation unchanged ({gen})")
        check(server.rebalances(GROUP) == rebalances, f"0 rebalances during the restarts "
                                                      f"({server.rebalances(GROUP) - rebalances})")
        check({iid: consumers[iid].assigned for iid in ids} == before, "every consumer got exactly its partitions")
        check(others_called == 0, "no other consumer saw an assignment callback")

        offsets = {o.partition: o.offset for o in server.wait_for_group(GROUP, state=None).offsets}
        step(f"restarting the server on its data dir (committed offsets: {sum(offsets.values())} in "
             f"{len(offsets)} partitions)")
        rebalances = server.rebalances(GROUP)
        server.restart()
        after = server.group(GROUP)
        check(after is not None and after.generation == gen and set(after.static_members) == set(ids),
              f"group reloaded Stable in generation {gen} with {len(ids)} static members")
        check(after is not None and {o.partition: o.offset for o in after.offsets} == offsets,
              "every committed offset is back")
        time.sleep(2)                               # the consumers reconnect and heartbeat
        check(server.rebalances(GROUP) == rebalances, "no rebalance after the server restart")
        for c in consumers.values():
            if c.error is not None:
                failures.append(f"{c.instance_id}: {c.error!r}")
    finally:
        for c in consumers.values():
            c.stop()
        server.stop()

    if audit:
        try:
            import pyspark  # noqa: F401
        except ImportError:
            from tenure.audit import INSTALL_HINT
            step(f"audit skipped: to run it, {INSTALL_HINT}")
            audit = False
    if audit:
        step(f"running the Spark audit over {data} (local[2]) ...")
        r = subprocess.run([sys.executable, "-m", "tenure", "audit", str(data), "--out", str(report_dir),
                            "--master", "local[2]"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           timeout=600)
        out("\n".join("         " + ln for ln in r.stdout.rstrip().splitlines()))
        check(r.returncode == 0 and (report_dir / "report.html").is_file(), f"audit finished (exit {r.returncode}) "
              f"and wrote report.html")
        step(f"report: {report_dir / 'report.html'}")
        step(tables_line(report_dir))
    step("demo " + ("passed" if not failures else "FAILED: " + "; ".join(failures)))
    return 0 if not failures else 1


def _settled(server, consumers, partitions: int) -> bool:
    g = server.group(GROUP)
    if g is None or g.state != "Stable" or len(g.members) != len(consumers):
        return False
    got = [c.assigned for c in consumers.values()]
    return all(a is not None for a in got) and sorted(p for a in got for p in a) == list(range(partitions))
