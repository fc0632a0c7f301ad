"""How responsive the server's event loop stays while a large __consumer_offsets log is recovered.

A data dir of --records records is written by tenure/tools/synth.py (the generator of bench/recovery.py),
then started twice in this process with a ticker on the loop (a callback every --tick-ms that records when
it ran):

- `Server.start()` as tenure does it: the data dir open, the log recovery and the load on a worker thread;
- the same recovery called on the loop itself (`server._recover()`; what start-up did before recovery
  moved off the loop), then the listeners.

For each: the recovery's seconds, the ticks that ran during it, and the longest gap between two ticks (the
longest time the loop could not run a timer, answer the admin endpoint or a restarting ServerThread's
caller). Prints figures only; nothing is asserted.

    .venv/bin/python bench/loop_during_recovery.py [--records 1000000] [--groups 2000] [--keep DIR]
"""
from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


async def measure(data_dir: str, tick_ms: float, on_loop: bool) -> dict:
    from tenure.config import ServerConfig
    from tenure.server import Server
    loop = asyncio.get_running_loop()
    ticks: list[float] = []
    stop = False

    def tick() -> None:
        ticks.append(time.perf_counter())
        if not stop:
            loop.call_later(tick_ms / 1000, tick)
    tick()
    await asyncio.sleep(tick_ms / 1000 * 3)
    server = Server(ServerConfig(port=0, data_dir=data_dir, cleaner_interval_ms=0))
    t0 = time.perf_counter()
    if on_loop:
        server._recover()                      # the old way: everything on the loop
        await server._start_serving()
    else:
        await server.start()
    seconds = time.perf_counter() - t0
    stop = True
    await server.close()
    during = [t for t in ticks if t0 <= t <= t0 + seconds]
    edges = [t0] + during + [t0 + seconds]
    return {"seconds": seconds, "ticks": len(during), "max_gap_ms": max(b - a for a, b in zip(edges, edges[1:])) * 1000,
            "groups": server.load_report.groups, "records": server.load_report.records}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--groups", type=int, default=2000)
    p.add_argument("--tick-ms", type=float, default=10.0)
    p.add_argument("--keep", default=None, help="generate into this dir (reused if it holds a log) and keep it")
    args = p.parse_args()
    from tenure.tools.synth import SynthConfig, generate
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tenure-loop-bench-"))
    try:
        if not any(base.glob("*/*.log")):
            t = time.perf_counter()
            generate(base, SynthConfig(records=args.records, groups=args.groups))
            print(f"generated {args.records} records in {time.perf_counter() - t:.1f}s into {base}")
        rows = {"off the loop (tenure)": asyncio.run(measure(str(base), args.tick_ms, on_loop=False)),
                "on the loop (before)": asyncio.run(measure(str(base), args.tick_ms, on_loop=True))}
        print(f"{'recovery':24} {'seconds':>8} {'records':>9} {'groups':>7} {'ticks':>6} {'longest loop stall':>19}")
        for name, r in rows.items():
            print(f"{name:24} {r['seconds']:8.2f} {r['records']:9} {r['groups']:7} {r['ticks']:6} "
                  f"{r['max_gap_ms']:16.0f} ms")
        off, on = rows["off the loop (tenure)"], rows["on the loop (before)"]
        print(f"longest stall: {off['max_gap_ms']:.0f} ms vs {on['max_gap_ms']:.0f} ms "
              f"({on['max_gap_ms'] / max(off['max_gap_ms'], 1e-9):.0f}x shorter); recovery time ratio "
              f"{off['seconds'] / on['seconds']:.2f}")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
