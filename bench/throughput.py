"""Produce and fetch throughput with confluent-kafka: tenure versus librdkafka's mock cluster.

Targets, same workload for each:
  tenure  `python -m tenure serve --port 0` started as a subprocess (stopped with SIGTERM at the end)
  mock    librdkafka's built-in mock cluster: a client configured with `test.mock.num.brokers=1`
          starts it inside this process; its broker address comes from that client's
          `list_topics().brokers`, and the client is kept alive for the whole benchmark

Workload: a topic whose partition 0 is the only one used: on tenure a 1-partition topic made
with CreateTopics; on the mock the topic is auto-created by Metadata, with the mock's fixed default
of 4 partitions (the librdkafka 2.16 mock reports controller id 0 while its only broker is id 1, so
AdminClient.create_topics times out "waiting for controller"). Then one Producer
(linger.ms=5, acks=all, other settings default) produces N records to partition 0 with a 10-byte key
and a --value-size value, timed from the first produce() until flush() returns; then one Consumer with
a manual assign() from the log start offset reads up to the high watermark, timed from assign() until
the last record arrives. The consumer sets fetch.queue.backoff.ms=10: with the default (1000 ms) a
consumer whose local queue fills up (queued.min.messages=100000) stops fetching for a whole second,
which measures librdkafka's back-off, not the server.

librdkafka's mock keeps at most 5 MiB per partition and drops the oldest message sets beyond that, so
with the default workload (~25 MB) it retains only the last ~40,000 records. The script then also has
tenure serve exactly that offset range ("fetch-tail") for a like-for-like fetch ratio. Rounds alternate
(mock, tenure, mock, tenure, ...) so that changes in the machine's load hit both targets alike.

Every record is accounted for: delivery reports (ok/failed), log start/end offsets, consumed offsets
(must be contiguous), keys (record i has key i, so key == offset; each key read exactly once) and
value sizes.

    .venv/bin/python bench/throughput.py [--records 200000] [--value-size 100] [--rounds 5]
                                         [--targets tenure,mock] [--phase-timeout 30]

Prints figures only; it never asserts timings. Each phase stops after --phase-timeout seconds and
reports what it got, so a hung server shows up as a figure, not as a hung script; a target's later
rounds are skipped after a timeout, which bounds a run at about 3 x --phase-timeout per target.
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from benchcommon import wait_ready_line
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

KEY_BYTES = 10
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------------------------------- helpers
def proc_cpu_s(pid: int) -> float | None:
    """utime+stime of a process in seconds (Linux /proc), or None if it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def self_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


class ErrorLog:
    """error_cb for librdkafka clients: count client-level errors, keep the first few."""

    def __init__(self) -> None:
        self.count = 0
        self.first: list[str] = []

    def __call__(self, err) -> None:
        self.count += 1
        if len(self.first) < 5:
            self.first.append(str(err))


class TenureProcess:
    def __init__(self, python: str) -> None:
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([python, "-m", "tenure", "serve", "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=self.stderr, bufsize=0)
        self.bootstrap = self._wait_ready(30.0)

    def _wait_ready(self, timeout: float) -> str:
        bootstrap, buf = wait_ready_line(self.proc, timeout)
        if bootstrap is not None:
            return bootstrap
        self.stop()
        raise RuntimeError(f"tenure did not print its ready line; stdout {buf!r}; stderr:\n{self.log()}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def log(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")


# ------------------------------------------------------------------------------------------- phases
def create_topic(bootstrap: str, topic: str, use_admin: bool) -> str:
    """Create a 1-partition topic with CreateTopics, or (use_admin=False) by Metadata auto-creation."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    how = "auto-created by Metadata"
    if use_admin:
        fut = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)],
                                  operation_timeout=10, request_timeout=15)[topic]
        try:
            fut.result(20)
            how = "CreateTopics"
        except Exception as exc:
            how = f"CreateTopics failed ({exc}); auto-created by Metadata"
    deadline = time.monotonic() + 15
    while True:
        t = admin.list_topics(topic, timeout=15).topics.get(topic)
        if t is not None and t.error is None and t.partitions:
            return f"{how}; {len(t.partitions)} partition(s), only partition 0 is used"
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} not available: {t.error if t else 'missing'}")
        time.sleep(0.2)


def produce_phase(bootstrap: str, topic: str, n: int, value_size: int, timeout: float) -> dict:
    errs = ErrorLog()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "error_cb": errs})
    p.list_topics(topic, timeout=15)  # connect and learn the leader before the clock starts
    value = b"v" * value_size
    st = {"ok": 0, "failed": 0, "first_failure": None}

    def on_delivery(err, msg) -> None:
        if err is None:
            st["ok"] += 1
        else:
            st["failed"] += 1
            if st["first_failure"] is None:
                st["first_failure"] = str(err)

    buffer_full = 0
    sent = 0
    cpu0 = self_cpu_s()
    t0 = time.perf_counter()
    deadline = t0 + timeout
    timed_out = False
    for i in range(n):
        key = b"%010d" % i
        while True:
            try:
                p.produce(topic, value, key, partition=0, on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: serve delivery reports and retry
                buffer_full += 1
                p.poll(0.01)
                if time.perf_counter() > deadline:
                    timed_out = True
                    break
        if timed_out:
            break
        sent += 1
        if not i & 1023:
            p.poll(0)
    remaining = p.flush(max(0.0, deadline - time.perf_counter()))
    t1 = time.perf_counter()
    cpu1 = self_cpu_s()
    if remaining:
        timed_out = True
    # give late delivery reports a last chance to land (not timed)
    if remaining:
        remaining = p.flush(5)
    return {"seconds": t1 - t0, "sent": sent, "ok": st["ok"], "failed": st["failed"],
            "first_failure": st["first_failure"], "undelivered": remaining, "timed_out": timed_out,
            "buffer_full_retries": buffer_full, "client_errors": errs.count, "client_error_samples": errs.first,
            "client_cpu_s": cpu1 - cpu0}


CONSUMER_TUNING = {"fetch.queue.backoff.ms": 10}


def fetch_phase(bootstrap: str, topic: str, value_size: int, timeout: float,
                start: int | None = None) -> dict:
    """Read partition 0 from `start` (default: the log start offset) up to the high watermark.

    The watermarks are read before the clock starts; the clock runs from assign() until the last
    record up to the high watermark has arrived. Record i was produced with key i, so on one partition
    key == offset, and each key in [start, high) must be read exactly once.
    """
    errs = ErrorLog()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-" + uuid.uuid4().hex[:8],
                  "enable.auto.commit": False, "enable.auto.offset.store": False,
                  "auto.offset.reset": "error", "error_cb": errs, **CONSUMER_TUNING})
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)
    if start is None:
        start = low
    want = max(0, high - start)
    seen = bytearray(want)
    got = dups = out_of_order = key_ne_offset = bad_value = msg_errors = 0
    first_msg_error = None
    expected = start
    distinct = 0
    cpu0 = self_cpu_s()
    t0 = time.perf_counter()
    deadline = t0 + timeout
    c.assign([TopicPartition(topic, 0, start)])
    while distinct < want and time.perf_counter() < deadline:
        # never ask for more than is still due: consume() waits out its timeout for a short batch
        for m in c.consume(num_messages=min(10000, want - distinct), timeout=0.5):
            if m.error() is not None:
                msg_errors += 1
                if first_msg_error is None:
                    first_msg_error = str(m.error())
                continue
            got += 1
            off = m.offset()
            if off != expected:
                out_of_order += 1
            expected = off + 1
            k = int(m.key())
            if k != off:
                key_ne_offset += 1
            i = k - start
            if 0 <= i < want and not seen[i]:
                seen[i] = 1
                distinct += 1
            else:
                dups += 1
            if len(m.value()) != value_size:
                bad_value += 1
    t1 = time.perf_counter()
    cpu1 = self_cpu_s()
    c.close()
    return {"seconds": t1 - t0, "low": low, "high": high, "start": start, "want": want, "records": got,
            "distinct": distinct, "missing": want - distinct, "duplicates": dups,
            "offset_gaps_or_reorders": out_of_order, "key_ne_offset": key_ne_offset, "bad_values": bad_value,
            "msg_errors": msg_errors, "first_msg_error": first_msg_error, "timed_out": distinct < want,
            "client_errors": errs.count, "client_error_samples": errs.first, "client_cpu_s": cpu1 - cpu0}


def _timed(fn, server_pid: int | None, *a, **kw) -> dict:
    s0 = proc_cpu_s(server_pid) if server_pid else None
    r = fn(*a, **kw)
    s1 = proc_cpu_s(server_pid) if server_pid else None
    r["server_cpu_s"] = (s1 - s0) if s0 is not None and s1 is not None else None
    return r


def _line(label: str, phase: str, done: int, r: dict, args, extra: str = "") -> None:
    r["rate"] = done / r["seconds"] if r["seconds"] > 0 else 0.0
    print(f"[{label}] {phase:<10} {done:>9,} records in {r['seconds']:7.3f} s = {r['rate']:>10,.0f} rec/s  "
          f"{r['rate'] * (args.value_size + KEY_BYTES) / 1e6:6.1f} MB/s (key+value)"
          + ("  TIMED OUT" if r["timed_out"] else "") + extra, flush=True)


def run_round(name: str, label: str, bootstrap: str, args, server_pid: int | None,
              tail_from: int | None = None) -> dict:
    topic = f"bench-{name}-{uuid.uuid4().hex[:8]}"
    how = create_topic(bootstrap, topic, use_admin=(name != "mock"))
    print(f"[{label}] bootstrap {bootstrap}, topic {topic}: {how}", flush=True)
    out = {}
    out["produce"] = r = _timed(produce_phase, server_pid, bootstrap, topic, args.records, args.value_size,
                                args.phase_timeout)
    _line(label, "produce", r["ok"], r, args)
    out["fetch"] = r = _timed(fetch_phase, server_pid, bootstrap, topic, args.value_size, args.phase_timeout)
    extra = ""
    if r["low"] > 0:
        extra = f"  (offsets {r['low']:,}..{r['high'] - 1:,}; the {r['low']:,} before were dropped by retention)"
    _line(label, "fetch", r["distinct"], r, args, extra)
    if tail_from:
        out["fetch_tail"] = r = _timed(fetch_phase, server_pid, bootstrap, topic, args.value_size,
                                       args.phase_timeout, start=tail_from)
        _line(label, "fetch-tail", r["distinct"], r, args, f"  (offsets {tail_from:,}..{r['high'] - 1:,})")
    return out


def round_failed(r: dict) -> bool:
    return any(x.get("timed_out") for x in r.values())


# ------------------------------------------------------------------------------------------- report
SUM_FIELDS = ("sent", "ok", "failed", "undelivered", "buffer_full_retries", "records", "distinct", "want",
              "missing", "duplicates", "offset_gaps_or_reorders", "key_ne_offset", "bad_values", "msg_errors",
              "client_errors", "client_cpu_s", "server_cpu_s", "seconds")


def _sum(rounds: list[dict], phase: str) -> dict | None:
    xs = [r[phase] for r in rounds if phase in r]
    if not xs:
        return None
    out = {k: sum(x[k] for x in xs) for k in SUM_FIELDS if k in xs[0] and xs[0][k] is not None}
    out["n"] = len(xs)
    for k in ("first_failure", "first_msg_error"):
        out[k] = next((x[k] for x in xs if x.get(k)), None)
    out["client_error_samples"] = next((x["client_error_samples"] for x in xs if x["client_error_samples"]), [])
    out["last"] = xs[-1]
    return out


def describe(name: str, rounds: list[dict], n: int) -> list[str]:
    lines = [f"{name} ({len(rounds)} round(s), counts summed over rounds):"]
    p = _sum(rounds, "produce")
    lines.append(f"  produce: sent {p['sent']:,}/{n * p['n']:,}, delivered ok {p['ok']:,}, failed "
                 f"{p['failed']:,}, undelivered at end {p['undelivered']:,}, BufferError retries "
                 f"{p['buffer_full_retries']:,}")
    if p["first_failure"]:
        lines.append(f"    first delivery failure: {p['first_failure']}")
    for ph in ("fetch", "fetch_tail"):
        f = _sum(rounds, ph)
        if f is None:
            continue
        last = f["last"]
        lines.append(f"  {ph}: read {f['records']:,} records, distinct keys {f['distinct']:,}/{f['want']:,}, "
                     f"missing {f['missing']:,}, duplicates {f['duplicates']:,}, offset gaps/reorders "
                     f"{f['offset_gaps_or_reorders']:,}, key!=offset {f['key_ne_offset']:,}, wrong-size values "
                     f"{f['bad_values']:,}, message errors {f['msg_errors']:,}; last round: log "
                     f"{last['low']:,}..{last['high']:,}, read from {last['start']:,}")
        if f["first_msg_error"]:
            lines.append(f"    first message error: {f['first_msg_error']}")
    for ph in ("produce", "fetch", "fetch_tail"):
        x = _sum(rounds, ph)
        if x is None:
            continue
        cpu = f"client process {x['client_cpu_s']:.2f} s"
        if "server_cpu_s" in x:
            cpu += (f", tenure server process {x['server_cpu_s']:.2f} s "
                    f"({100 * x['server_cpu_s'] / x['seconds']:.0f}% of one core)")
        lines.append(f"  {ph} CPU: {cpu}, over {x['seconds']:.3f} s wall")
        if x.get("client_errors"):
            lines.append(f"  {ph} client errors: {x['client_errors']} e.g. {x['client_error_samples']}")
    return lines


def problems(name: str, rounds: list[dict], n: int) -> list[str]:
    """Records lost, failed or duplicated. A retention cut (log start > 0) counts only for tenure."""
    out = []
    for i, r in enumerate(rounds, 1):
        where = f"{name} round {i}"
        p = r["produce"]
        if p["ok"] != n:
            out.append(f"{where}: {n - p['ok']:,} of {n:,} records not acknowledged ({p['failed']:,} failed, "
                       f"{p['undelivered']:,} still queued)")
        for ph in ("fetch", "fetch_tail"):
            f = r.get(ph)
            if f is None:
                continue
            if f["missing"] or f["duplicates"] or f["bad_values"] or f["msg_errors"] or f["key_ne_offset"]:
                out.append(f"{where} {ph}: missing {f['missing']:,}, duplicates {f['duplicates']:,}, key!=offset "
                           f"{f['key_ne_offset']:,}, bad values {f['bad_values']:,}, errors {f['msg_errors']:,}")
            if ph == "fetch" and f["high"] != p["ok"]:
                out.append(f"{where}: log end offset {f['high']:,} != {p['ok']:,} acknowledged records")
            if ph == "fetch" and f["low"] and name != "mock":
                out.append(f"{where}: log start offset is {f['low']:,}; the records below it are gone")
    return out


def rates(rounds: list[dict], phase: str) -> list[float]:
    return [r[phase]["rate"] for r in rounds if phase in r and not r[phase]["timed_out"]]


def run_all(args, targets: set[str], notes: list[str]) -> dict[str, list[dict]]:
    """Rounds alternate between the targets (mock, then tenure) so that drift in the machine's load
    hits both alike; each tenure round re-reads the offset range the preceding mock round retained."""
    results: dict[str, list[dict]] = {t: [] for t in ("mock", "tenure") if t in targets}
    holder = srv = None
    try:
        if "mock" in targets:
            # This client owns the mock cluster (its broker runs on threads of this process) and is
            # kept alive until the end. log_level 4 hides its "Mock cluster enabled" notice.
            holder = Producer({"test.mock.num.brokers": 1, "log_level": 4})
            b = next(iter(holder.list_topics(timeout=10).brokers.values()))
            mock_bootstrap = f"{b.host}:{b.port}"
        if "tenure" in targets:
            srv = TenureProcess(args.python)
        live = set(results)
        for i in range(1, args.rounds + 1):
            tail_from = None
            for name in ("mock", "tenure"):
                if name not in live:
                    continue
                if name == "mock":
                    r = run_round("mock", f"mock {i}/{args.rounds}", mock_bootstrap, args, None)
                    if r["fetch"]["low"] > 0:
                        tail_from = args.records - r["fetch"]["want"]
                else:
                    if not srv.alive():
                        notes.append(f"tenure: the server process exited before round {i}")
                        live.discard(name)
                        continue
                    r = run_round("tenure", f"tenure {i}/{args.rounds}", srv.bootstrap, args, srv.pid, tail_from)
                results[name].append(r)
                if round_failed(r):
                    notes.append(f"{name}: round {i} timed out; its remaining rounds are skipped")
                    live.discard(name)
            if not live:
                break
    except Exception as exc:
        notes.append(f"benchmark aborted: {exc!r}")
    finally:
        if srv is not None:
            was_alive = srv.alive()
            rc = srv.stop()
            bad = [ln for ln in srv.log().splitlines() if re.search(r"WARNING|ERROR|CRITICAL|Traceback", ln)]
            notes.append(f"tenure: {'still running' if was_alive else 'HAD ALREADY EXITED'} at the end; "
                         f"exit code after SIGTERM {rc}; {len(bad)} warning/error lines in its log")
            notes.extend("  " + ln for ln in bad[:10])
        del holder
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000, help="records to produce and fetch (default 200000)")
    ap.add_argument("--value-size", type=int, default=100, help="value bytes per record (default 100)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds per target, each on a fresh topic; medians are reported (default 5)")
    ap.add_argument("--targets", default="tenure,mock", help="tenure, mock or both (default tenure,mock)")
    ap.add_argument("--phase-timeout", type=float, default=30.0,
                    help="give up on a produce or fetch phase after this many seconds (default 30); "
                    "a target's remaining rounds are skipped after a timeout")
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs tenure (default: this one)")
    args = ap.parse_args()
    targets = {t.strip() for t in args.targets.split(",") if t.strip()}
    if not targets or targets - {"tenure", "mock"}:
        ap.error(f"--targets: expected tenure and/or mock, got {args.targets!r}")
    if args.records < 1 or args.rounds < 1 or args.value_size < 0:
        ap.error("--records and --rounds must be positive, --value-size not negative")
    import confluent_kafka
    print(f"confluent-kafka {confluent_kafka.__version__}, librdkafka {confluent_kafka.libversion()[0]}, "
          f"python {sys.version.split()[0]}, cpus {os.cpu_count()}; {args.records:,} records x {args.rounds} "
          f"rounds, key {KEY_BYTES} B, value {args.value_size} B; producer linger.ms=5 acks=all; consumer "
          + " ".join(f"{k}={v}" for k, v in CONSUMER_TUNING.items()), flush=True)

    notes: list[str] = []
    results = run_all(args, targets, notes)
    tails = [r["fetch_tail"]["want"] for r in results.get("tenure", []) if "fetch_tail" in r]

    print()
    print("accounting:")
    for name in ("tenure", "mock"):
        if results.get(name):
            print("\n".join(describe(name, results[name], args.records)))
    for ln in notes:
        print(ln)

    def med(name: str, phase: str) -> float | None:
        xs = rates(results.get(name, []), phase)
        return statistics.median(xs) if xs else None

    def spread(name: str, phase: str) -> str:
        xs = rates(results.get(name, []), phase)
        return f"{min(xs):,.0f}-{max(xs):,.0f}" if xs else "-"

    def row(label: str, tph: str, mph: str) -> None:
        t, m = med("tenure", tph), med("mock", mph)
        ratio = f"{t / m:.2f}" if t and m else "-"
        print(f"{label:<30}{(f'{t:,.0f}' if t else '-'):>11}{(f'{m:,.0f}' if m else '-'):>11}{ratio:>13}"
              f"   tenure {spread('tenure', tph)}, mock {spread('mock', mph)}")

    print()
    print(f"median rec/s over rounds       {'tenure':>11}{'mock':>11}{'tenure/mock':>13}   (min-max)")
    row("produce", "produce", "produce")
    if tails:
        n_tail = int(statistics.median(tails))
        row("fetch, all each one kept", "fetch", "fetch")
        row(f"fetch, same last ~{n_tail:,}", "fetch_tail", "fetch")
        print(f"The mock kept only ~{n_tail:,} of {args.records:,} records per round (librdkafka's mock keeps "
              f"at most 5 MiB or 100000 message sets per partition and drops the oldest), so the like-for-like "
              f"fetch ratio is the 'same last' row: tenure re-reads the offset range the mock kept in that round.")
    else:
        row("fetch", "fetch", "fetch")

    found = [x for name, rounds in results.items() for x in problems(name, rounds, args.records)]
    for ln in found:
        print("PROBLEM: " + ln)
    if not found and all(results.get(t) for t in targets):
        print("no records lost, failed or duplicated on any target (the mock's retention aside)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
