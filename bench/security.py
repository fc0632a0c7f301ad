"""Connection set-up time and produce/fetch throughput per listener type, with confluent-kafka: PLAINTEXT, SSL and
SASL_SSL with SCRAM-SHA-512 on one `tenure serve` (a subprocess with the three listeners, the generated CA), as
ratios to PLAINTEXT in the same run (figures, never assertions).

Set-up: --connects times, a new AdminClient whose list_topics() returns (TCP connect, the TLS handshake, the SASL
exchange - SCRAM's salted credential checks included - ApiVersions, Metadata), timed per client; the median.
Throughput: one Producer (linger.ms=5, acks=all) produces --records records of a 10-byte key and a --value-size
value to a 1-partition topic of that listener, timed from the first produce() to flush(); then one Consumer with
a manual assign() reads them back, timed from assign() to the last record. Every record is counted (delivery
reports, records read). Rounds alternate the listeners; medians over --rounds.

    .venv/bin/python bench/security.py [--records 50000] [--value-size 100] [--rounds 3] [--connects 20]
                                       [--phase-timeout 60]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
USER, PASSWORD = "bench", "bench-secret"


def start_server(ready: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "tenure", "serve", "--port", "0", "--no-admin", "--ready-file", str(ready),
           "--user", f"{USER}:{PASSWORD}", *[a for name in LISTENERS for a in ("--listener", f"{name}://127.0.0.1:0")]]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("tenure serve did not become ready")
        time.sleep(0.05)
    return proc


def conf_of(listener: str, info: dict) -> dict:
    conf = {"bootstrap.servers": info["listeners"][listener], "security.protocol": listener.lower()}
    if listener in ("SSL", "SASL_SSL"):
        conf["ssl.ca.location"] = info["ca_file"]
    if listener == "SASL_SSL":
        conf.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD})
    return conf


def setup_ms(conf: dict, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        AdminClient(conf).list_topics(timeout=10)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def produce_rate(conf: dict, topic: str, records: int, value: bytes, timeout: float) -> tuple[float, int]:
    delivered = [0, 0]

    def report(err, msg):
        delivered[0 if err is None else 1] += 1
    p = Producer({**conf, "linger.ms": 5, "acks": "all"})
    t0 = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, str(i).zfill(10).encode(), partition=0, on_delivery=report)
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(timeout)
    elapsed = time.perf_counter() - t0
    assert left == 0 and delivered == [records, 0], (left, delivered)
    return records / elapsed, delivered[0]


def fetch_rate(conf: dict, topic: str, records: int, timeout: float) -> float:
    c = Consumer({**conf, "group.id": "bench-unused", "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
    t0 = time.perf_counter()
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = 0, time.monotonic() + timeout
    while got < records and time.monotonic() < deadline:
        for m in c.consume(10000, 0.5):
            if m.error() is None:
                got += 1
    elapsed = time.perf_counter() - t0
    c.close()
    assert got == records, (got, records)
    return records / elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--connects", type=int, default=20)
    ap.add_argument("--phase-timeout", type=float, default=60)
    args = ap.parse_args()
    value = os.urandom(args.value_size)
    with tempfile.TemporaryDirectory() as tmp:
        ready = Path(tmp) / "ready.json"
        proc = start_server(ready)
        try:
            info = json.loads(ready.read_text())
            results: dict[str, dict[str, list[float]]] = {n: {"setup": [], "produce": [], "fetch": []}
                                                          for n in LISTENERS}
            for r in range(args.rounds):
                for name in LISTENERS:
                    conf = conf_of(name, info)
                    topic = f"bench-{name}-{r}"
                    admin = AdminClient(conf)          # kept referenced until the answer
                    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
                    results[name]["setup"].append(setup_ms(conf, args.connects))
                    results[name]["produce"].append(produce_rate(conf, topic, args.records, value,
                                                                 args.phase_timeout)[0])
                    results[name]["fetch"].append(fetch_rate(conf, topic, args.records, args.phase_timeout))
                    print(f"round {r + 1} {name}: set-up {results[name]['setup'][-1]:.1f} ms, produce "
                          f"{results[name]['produce'][-1]:,.0f} rec/s, fetch {results[name]['fetch'][-1]:,.0f} rec/s",
                          flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    med = {n: {k: statistics.median(v) for k, v in d.items()} for n, d in results.items()}
    base = med["PLAINTEXT"]
    print(f"\nmedians of {args.rounds} round(s), {args.records} records of {args.value_size} B, {args.connects} "
          "connects per round")
    print("| listener | set-up ms | x PLAINTEXT | produce rec/s | / PLAINTEXT | fetch rec/s | / PLAINTEXT |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in LISTENERS:
        m = med[name]
        print(f"| {name} | {m['setup']:.1f} | {m['setup'] / base['setup']:.2f} | {m['produce']:,.0f} | "
              f"{m['produce'] / base['produce']:.2f} | {m['fetch']:,.0f} | {m['fetch'] / base['fetch']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
