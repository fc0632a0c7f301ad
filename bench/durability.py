"""The durable log under each --fsync policy: produce throughput and OffsetCommit latency.

Targets, each a fresh server per round:
  memory  `tenure serve --port 0` (no --data-dir: every log in memory, nothing is fsynced)
  never   `tenure serve --port 0 --data-dir TMP --fsync never`   (written to the OS, never fsynced)
  batch   `tenure serve --port 0 --data-dir TMP --fsync batch`   (group commit: one fsync per burst)
  always  `tenure serve --port 0 --data-dir TMP --fsync always`  (one fsync per write, serialized)
  mock    librdkafka's mock cluster (`test.mock.num.brokers=1`, inside this process): the peer for the
          produce path. It keeps everything in memory and has no durability at all.

The server runs as `python bench/durability.py --instrumented-server serve ...`: tenure's own CLI
(`tenure.tools.cli.main`) in a process where `os.fsync` is wrapped to count calls and the time spent in
them, and SIGUSR1 prints those counts and the Durability objects' sync count to stderr; the figures are
differences between such snapshots taken before and after each phase. `--plain` runs `python -m
tenure serve` instead (no fsync counts).

Phases, per target and round:
  produce  One confluent-kafka Producer (acks=all, linger.ms=5, otherwise defaults; the same
           produce phase as bench/throughput.py, imported from it) sends --records records with a
           10 B key and a --value-size value to partition 0 of a new 1-partition topic; timed from the
           first produce() to flush(); every delivery report is counted.
  commit   For each C in --committers: C raw wire clients (tests/support/wire.py, one asyncio loop in
           this process, one connection each), each in a group of its own (an offsets-only group:
           generation -1, no member id, as an admin tool or a manually assigned consumer commits), send
           OffsetCommit v8 for --commit-partitions partitions back to back for --commit-seconds;
           latency from the request being written to its response decoded. commits/s, p50, p99, max.
           Not run against the mock (the brief's peer is for the produce path).

Targets rotate within a round (mock, memory, never, batch, always), so drift in the machine's load hits
all alike; medians over --rounds are reported, with ratios against `never` and `memory`.

    .venv/bin/python bench/durability.py [--records 500000] [--rounds 3] [--committers 1,16]
                                         [--commit-seconds 5] [--targets mock,memory,never,batch,always]

Prints figures only; it never asserts timings. Each phase is bounded (--phase-timeout for produce,
--commit-seconds for commits), so a default run takes about 2-3 minutes.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from benchcommon import tree_version, wait_ready_line

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(1, str(HERE))

SNAPSHOT = re.compile(r"^bench-fsync (\d+): calls=(\d+) seconds=([0-9.]+) syncs=(\d+)$", re.M)
POLICIES = ("never", "batch", "always")
ALL_TARGETS = ("mock", "memory") + POLICIES
KEY_BYTES = 10


# ------------------------------------------------------------------------------ instrumented server
def instrumented_server(argv: list[str]) -> int:
    """tenure.tools.cli.main(argv) with os.fsync counted; SIGUSR1 prints the counts to stderr."""
    lock = threading.RLock()           # re-entrant: the SIGUSR1 handler runs on the main thread
    counts = {"calls": 0, "seconds": 0.0, "snap": 0}
    real_fsync = os.fsync

    def fsync(fd):
        t = time.perf_counter()
        try:
            return real_fsync(fd)
        finally:
            dt = time.perf_counter() - t
            with lock:
                counts["calls"] += 1
                counts["seconds"] += dt

    os.fsync = fsync
    from tenure.storage import durability
    instances = []
    real_init = durability.Durability.__init__

    def init(self, *a, **kw):
        real_init(self, *a, **kw)
        instances.append(self)

    durability.Durability.__init__ = init

    def snapshot(signum, frame):
        with lock:
            counts["snap"] += 1
            line = (f"bench-fsync {counts['snap']}: calls={counts['calls']} seconds={counts['seconds']:.6f} "
                    f"syncs={sum(d.fsyncs for d in instances)}\n")
        os.write(2, line.encode())

    signal.signal(signal.SIGUSR1, snapshot)
    from tenure.tools.cli import main
    return main(argv)


class Server:
    """A tenure server subprocess for one target; `fsync_snapshot()` reads its counters."""

    def __init__(self, target: str, python: str, plain: bool) -> None:
        self.target = target
        self.tmp = tempfile.mkdtemp(prefix=f"tenure-durability-{target}-") if target in POLICIES else None
        serve = ["serve", "--port", "0", "--log-level", "WARNING"]
        if self.tmp:
            serve += ["--data-dir", self.tmp, "--fsync", target]
        self.instrumented = not plain
        self.cmd = ([python, "-m", "tenure"] if plain else
                    [python, str(Path(__file__).resolve()), "--instrumented-server"]) + serve
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=self.stderr, bufsize=0)
        self._snaps = 0
        self.bootstrap = self._wait_ready(30.0)

    def _wait_ready(self, timeout: float) -> str:
        bootstrap, _ = wait_ready_line(self.proc, timeout)
        if bootstrap is not None:
            return bootstrap
        self.stop()
        raise RuntimeError(f"{self.target}: tenure did not print its ready line; stderr:\n{self.log()[-2000:]}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def fsync_snapshot(self) -> dict | None:
        """{calls, seconds, syncs} so far, or None when not instrumented / no answer."""
        if not self.instrumented or self.proc.poll() is not None:
            return None
        self._snaps += 1
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for m in SNAPSHOT.finditer(self.log()):
                if int(m.group(1)) == self._snaps:
                    return {"calls": int(m.group(2)), "seconds": float(m.group(3)), "syncs": int(m.group(4))}
            time.sleep(0.01)
        return None

    def disk_bytes(self) -> int | None:
        if self.tmp is None:
            return None
        return sum(p.stat().st_size for p in Path(self.tmp).rglob("*.log"))

    def log(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return self.proc.returncode


def diff(a: dict | None, b: dict | None) -> dict | None:
    if a is None or b is None:
        return None
    return {k: b[k] - a[k] for k in a}


# ------------------------------------------------------------------------------------------ produce
def produce(bootstrap: str, target: str, args, server: Server | None) -> dict:
    from throughput import create_topic, proc_cpu_s, produce_phase

    topic = f"durability-{target}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, use_admin=(target != "mock"))
    snap0 = server.fsync_snapshot() if server else None
    cpu0 = proc_cpu_s(server.pid) if server else None
    r = produce_phase(bootstrap, topic, args.records, args.value_size, args.phase_timeout)
    cpu1 = proc_cpu_s(server.pid) if server else None
    r["fsync"] = diff(snap0, server.fsync_snapshot() if server else None)
    r["server_cpu_s"] = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
    r["rate"] = r["ok"] / r["seconds"] if r["seconds"] > 0 else 0.0
    r["mb_s"] = r["rate"] * (args.value_size + KEY_BYTES) / 1e6
    return r


# ------------------------------------------------------------------------------------------ commits
async def commit_load(bootstrap: str, committers: int, partitions: int, seconds: float) -> dict:
    from kafka.protocol.consumer.group import OffsetCommitRequest

    from tests.support.wire import AsyncWireClient, WireClient, create_topic

    with WireClient.to(bootstrap) as w:        # offsets are only accepted for partitions that exist
        create_topic(w, "orders", partitions)
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    run = uuid.uuid4().hex[:8]
    conns = [await AsyncWireClient.connect(bootstrap) for _ in range(committers)]
    lat: list[float] = []
    codes: dict[int, int] = {}
    timeouts = 0

    async def one(i: int, conn) -> None:
        nonlocal timeouts
        gid, offset = f"commit-{run}-{i}", 0
        while time.monotonic() < stop:
            offset += 100
            req = OffsetCommitRequest(
                group_id=gid, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                topics=[T(name="orders", partitions=[
                    P(partition_index=p, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="")
                    for p in range(partitions)])])
            t = time.perf_counter()
            try:
                resp = await asyncio.wait_for(conn.call(req, 8), 10)
            except TimeoutError:
                timeouts += 1
                return
            lat.append(time.perf_counter() - t)
            for tr in resp.topics:
                for pr in tr.partitions:
                    codes[pr.error_code] = codes.get(pr.error_code, 0) + 1

    cpu0 = os.times()
    stop = time.monotonic() + seconds
    t0 = time.perf_counter()
    await asyncio.gather(*(one(i, c) for i, c in enumerate(conns)))
    elapsed = time.perf_counter() - t0
    cpu1 = os.times()
    for c in conns:
        await c.close()
    lat.sort()

    def pct(q: float) -> float:
        return lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else float("nan")
    return {"commits": len(lat), "seconds": elapsed, "per_s": len(lat) / elapsed if elapsed else 0.0,
            "p50_ms": pct(0.50), "p99_ms": pct(0.99), "max_ms": lat[-1] * 1000 if lat else float("nan"),
            "errors": sum(n for c, n in codes.items() if c), "codes": codes, "timeouts": timeouts,
            "client_cpu_s": (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)}


def commits(server: Server, c: int, args) -> dict:
    from throughput import proc_cpu_s

    snap0 = server.fsync_snapshot()
    cpu0 = proc_cpu_s(server.pid)
    r = asyncio.run(commit_load(server.bootstrap, c, args.commit_partitions, args.commit_seconds))
    cpu1 = proc_cpu_s(server.pid)
    r["fsync"] = diff(snap0, server.fsync_snapshot())
    r["server_cpu_s"] = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
    return r


# ------------------------------------------------------------------------------------------ report
def med(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and x == x]
    return statistics.median(xs) if xs else None


def fmt(x: float | None, spec: str = ",.0f") -> str:
    return "-" if x is None else format(x, spec)


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def report(results: dict, args, targets: list[str]) -> None:
    print()
    print(f"produce: {args.records:,} records x {args.value_size + KEY_BYTES} B (key+value), acks=all, linger.ms=5; "
          f"medians over rounds")
    print(f"{'target':<8}{'rec/s':>10}{'MB/s':>7}{'/never':>8}{'/memory':>8}{'min-max rec/s':>20}{'fsyncs':>8}"
          f"{'ms/fsync':>9}{'KB/fsync':>9}{'server CPU':>11}  delivered")
    prod = {t: [r for r in results[t]["produce"]] for t in targets}
    rate = {t: med([r["rate"] for r in prod[t] if not r["timed_out"]]) for t in targets}
    for t in targets:
        rs = prod[t]
        if not rs:
            continue
        ok = [r["rate"] for r in rs if not r["timed_out"]]
        fs = [r["fsync"] for r in rs if r.get("fsync")]
        calls = med([f["calls"] for f in fs]) if fs else None
        ms_per = med([1000 * f["seconds"] / f["calls"] for f in fs if f["calls"]]) if fs else None
        kb_per = med([r["ok"] * (args.value_size + KEY_BYTES) / 1024 / f["calls"]
                      for r, f in zip(rs, [r.get("fsync") for r in rs]) if f and f["calls"]])
        cpu = med([100 * r["server_cpu_s"] / r["seconds"] for r in rs if r.get("server_cpu_s") is not None])
        delivered = f"{sum(r['ok'] for r in rs):,}/{args.records * len(rs):,}"
        if any(r["failed"] or r["undelivered"] for r in rs):
            delivered += f" ({sum(r['failed'] for r in rs)} failed, {sum(r['undelivered'] for r in rs)} undelivered)"
        mm = f"{min(ok):,.0f}-{max(ok):,.0f}" if ok else "timed out"
        print(f"{t:<8}{fmt(rate[t]):>10}{fmt(rate[t] and rate[t] * (args.value_size + KEY_BYTES) / 1e6, '.1f'):>7}"
              f"{ratio(rate[t], rate.get('never')):>8}{ratio(rate[t], rate.get('memory')):>8}{mm:>20}"
              f"{fmt(calls):>8}{fmt(ms_per, '.2f'):>9}{fmt(kb_per, ',.0f'):>9}{(fmt(cpu) + '%') if cpu else '-':>11}"
              f"  {delivered}")
    print("(fsyncs = os.fsync calls in the server during the phase; ms/fsync = mean time inside them; server CPU "
          "= % of one core; mock runs inside this process, so no server figures)")

    for c in args.committer_list:
        print()
        print(f"OffsetCommit v8, {c} committer(s), one offsets-only group each, {args.commit_partitions} partition(s) "
              f"per commit, {args.commit_seconds:.0f} s per round; medians over rounds")
        print(f"{'target':<8}{'commits/s':>10}{'/never':>8}{'/memory':>8}{'min-max':>12}{'p50 ms':>8}{'p99 ms':>8}"
              f"{'max ms':>8}"
              f"{'fsyncs/s':>9}{'commits/fsync':>14}{'ms/fsync':>9}{'server CPU':>11}{'client CPU':>11}  errors")
        rows = {t: [r for r in results[t]["commit"].get(c, [])] for t in targets}
        per_s = {t: med([r["per_s"] for r in rows[t]]) for t in targets}
        for t in targets:
            rs = rows[t]
            if not rs:
                continue
            fs = [(r, r["fsync"]) for r in rs if r.get("fsync")]
            fps = med([f["calls"] / r["seconds"] for r, f in fs]) if fs else None
            cpf = med([r["commits"] / f["calls"] for r, f in fs if f["calls"]]) if fs else None
            msf = med([1000 * f["seconds"] / f["calls"] for r, f in fs if f["calls"]]) if fs else None
            scpu = med([100 * r["server_cpu_s"] / r["seconds"] for r in rs if r.get("server_cpu_s") is not None])
            ccpu = med([100 * r["client_cpu_s"] / r["seconds"] for r in rs])
            errs = sum(r["errors"] for r in rs)
            tos = sum(r["timeouts"] for r in rs)
            print(f"{t:<8}{fmt(per_s[t]):>10}{ratio(per_s[t], per_s.get('never')):>8}"
                  f"{ratio(per_s[t], per_s.get('memory')):>8}"
                  f"{min(r['per_s'] for r in rs):>6,.0f}-{max(r['per_s'] for r in rs):<5,.0f}"
                  f"{fmt(med([r['p50_ms'] for r in rs]), '.2f'):>8}"
                  f"{fmt(med([r['p99_ms'] for r in rs]), '.2f'):>8}{fmt(max(r['max_ms'] for r in rs), '.1f'):>8}"
                  f"{fmt(fps):>9}{fmt(cpf, '.1f') if cpf else '-':>14}{fmt(msf, '.2f'):>9}"
                  f"{(fmt(scpu) + '%') if scpu else '-':>11}{(fmt(ccpu) + '%'):>11}  {errs}"
                  + (f" ({tos} timed out)" if tos else ""))
        print("(commits/fsync = commits per os.fsync call: a group commit covers several under batch; under always "
              "a commit whose data an earlier fsync already covered skips its own; max is over all rounds; the "
              "client is one asyncio loop in this process)")


# ------------------------------------------------------------------------------------------ main
def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--instrumented-server":
        return instrumented_server(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000, help="records per produce phase (default 500000)")
    ap.add_argument("--value-size", type=int, default=100, help="value bytes per record (default 100)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; medians are reported (default 3)")
    ap.add_argument("--targets", default=",".join(ALL_TARGETS),
                    help=f"any of {', '.join(ALL_TARGETS)} (default all)")
    ap.add_argument("--committers", default="1,16", help="concurrent committers, a list (default 1,16)")
    ap.add_argument("--commit-seconds", type=float, default=5.0, help="seconds per commit phase (default 5)")
    ap.add_argument("--commit-partitions", type=int, default=4, help="partitions per OffsetCommit (default 4)")
    ap.add_argument("--phase-timeout", type=float, default=60.0, help="give up on a produce phase after this")
    ap.add_argument("--no-produce", action="store_true")
    ap.add_argument("--no-commit", action="store_true")
    ap.add_argument("--plain", action="store_true", help="run `python -m tenure serve` (no fsync counts)")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    targets = [t for t in ALL_TARGETS if t in {x.strip() for x in args.targets.split(",")}]
    if not targets:
        ap.error(f"--targets: choose from {', '.join(ALL_TARGETS)}")
    args.committer_list = [int(x) for x in args.committers.split(",") if x.strip() and int(x) > 0]

    import confluent_kafka
    print(f"confluent-kafka {confluent_kafka.__version__}, librdkafka {confluent_kafka.libversion()[0]}, python "
          f"{sys.version.split()[0]}, cpus {os.cpu_count()}; data dirs under {tempfile.gettempdir()} "
          f"({fs_type(tempfile.gettempdir())}); {args.rounds} round(s); load average {load_avg()}; "
          f"tree {tree_version()}", flush=True)
    results = {t: {"produce": [], "commit": {}} for t in targets}
    notes: list[str] = []
    holder = mock_bootstrap = None
    if "mock" in targets and not args.no_produce:
        from confluent_kafka import Producer
        holder = Producer({"test.mock.num.brokers": 1, "log_level": 4})
        b = next(iter(holder.list_topics(timeout=10).brokers.values()))
        mock_bootstrap = f"{b.host}:{b.port}"
    try:
        for rnd in range(1, args.rounds + 1):
            for t in targets:
                if t == "mock":
                    if mock_bootstrap is None:
                        continue
                    r = produce(mock_bootstrap, t, args, None)
                    results[t]["produce"].append(r)
                    print(f"[round {rnd}] {t:<7} produce {r['ok']:,} rec in {r['seconds']:.2f} s = "
                          f"{r['rate']:,.0f} rec/s" + ("  TIMED OUT" if r["timed_out"] else ""), flush=True)
                    continue
                srv = Server(t, args.python, args.plain)
                if rnd == 1:
                    print(f"[{t}] {' '.join(srv.cmd[1:])}", flush=True)
                try:
                    if not args.no_produce:
                        r = produce(srv.bootstrap, t, args, srv)
                        results[t]["produce"].append(r)
                        f = r["fsync"]
                        print(f"[round {rnd}] {t:<7} produce {r['ok']:,} rec in {r['seconds']:.2f} s = "
                              f"{r['rate']:,.0f} rec/s, {r['mb_s']:.1f} MB/s"
                              + (f", {f['calls']} fsyncs ({f['seconds']:.2f} s in fsync)" if f else "")
                              + (f", {srv.disk_bytes() / 1e6:.1f} MB on disk" if srv.tmp else "")
                              + ("  TIMED OUT" if r["timed_out"] else ""), flush=True)
                    if not args.no_commit:
                        for c in args.committer_list:
                            r = commits(srv, c, args)
                            results[t]["commit"].setdefault(c, []).append(r)
                            f = r["fsync"]
                            print(f"[round {rnd}] {t:<7} commit C={c:<3} {r['commits']:,} commits = "
                                  f"{r['per_s']:,.0f}/s, "
                                  f"p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, max {r['max_ms']:.1f} ms"
                                  + (f", {f['calls']} fsyncs in {f['syncs']} syncs" if f else "")
                                  + f", errors {r['errors']}", flush=True)
                finally:
                    rc = srv.stop()
                    bad = [ln for ln in srv.log().splitlines()
                           if re.search(r"WARNING|ERROR|CRITICAL|Traceback", ln)]
                    if rc != 0 or bad:
                        notes.append(f"{t} round {rnd}: exit code {rc}; {len(bad)} warning/error lines: {bad[:3]}")
    except Exception as exc:
        notes.append(f"benchmark aborted: {exc!r}")
    finally:
        del holder
    report(results, args, targets)
    print(f"load average at the end {load_avg()} (other processes on this machine compete for its "
          f"{os.cpu_count()} cores)")
    for n in notes:
        print("NOTE: " + n)
    if "mock" in targets:
        print("mock = librdkafka's in-process mock cluster: memory only, no durability (nothing survives it).")
    return 0


def load_avg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def fs_type(path: str) -> str:
    """The filesystem type holding `path` (from /proc/mounts): fsync on tmpfs costs nothing."""
    best, kind = "", "unknown"
    try:
        real = os.path.realpath(path)
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                mnt = parts[1]
                if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                    best, kind = mnt, parts[2]
    except OSError:
        pass
    return f"{kind} on {best or '?'}"


if __name__ == "__main__":
    sys.exit(main())
