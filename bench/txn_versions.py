"""Transactions v1 against v2 with Java kafka-clients 4.3 (figures, never assertions).

For each `--transaction-version` (2: Java runs transactions v2; 1: v1) an in-process tenure runs
tests/java/TxnRounds.java: a consume-transform-produce loop with a static read_committed consumer that commits
ROUNDS transactions of 2 records each (output and offsets), one producer throughout. Prints the wall time of the
Java program (its JVM start included) per version. The consumer's fetch.max.wait.ms is 10 so a caught-up
partition's long poll does not set the pace.

    .venv/bin/python bench/txn_versions.py [--rounds 200]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tenure.config import ServerConfig  # noqa: E402
from tenure.server import ServerThread  # noqa: E402
from tests.integration.test_transactions_java import seed  # noqa: E402
from tests.support.clients import create_topic  # noqa: E402
from tests.support.java import compile_java, run_java  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    compile_java()
    for tv in (2, 1):
        with ServerThread(ServerConfig(port=0, transaction_version=tv)) as srv:
            bs = srv.bootstrap
            create_topic(bs, "b-in", 2)
            create_topic(bs, "b-out", 2)
            seed(bs, "b-in", 0, args.rounds * 2)
            t0 = time.perf_counter()
            lines = run_java("TxnRounds", bs, "b-in", "b-out", "b-group", "b-static", "b-txn", args.rounds, 2,
                             "fetch.max.wait.ms=10", timeout=600)
            seconds = time.perf_counter() - t0
            if lines[-1].get("type") != "done":
                raise SystemExit(f"transaction.version={tv}: {lines[-1]}")
            print(f"transaction.version={tv}: {args.rounds} transactions of 2 records in {seconds:.2f} s "
                  f"({1000 * seconds / args.rounds:.1f} ms each, JVM start included)")


if __name__ == "__main__":
    main()
