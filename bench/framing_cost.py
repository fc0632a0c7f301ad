"""`FrameDecoder.feed`'s CPU per frame, this tree's `protocol/framing.py` against another tree's, in one run:
ten Heartbeat-sized frames (68 bytes) per read, the same ten split over two reads, and one frame per read
(best of 5 x 20 runs of 1,000 frames each, with the load average).

    .venv/bin/python bench/framing_cost.py --baseline TREE [--rounds 2]"""
from __future__ import annotations

import argparse
import os
import struct
import timeit
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def decoder_of(tree: Path):
    ns = {"__name__": "tenure.protocol.framing_of_tree", "__package__": "tenure.protocol"}
    exec(compile((tree / "protocol" / "framing.py").read_text(), str(tree / "protocol" / "framing.py"), "exec"), ns)
    return ns["FrameDecoder"]


def measure(decoder) -> dict[str, float]:
    hb = struct.pack(">i", 64) + b"\x00\x0c\x00\x04" + bytes(60)
    ten = hb * 10

    def ten_per_read():
        feed = decoder().feed
        for _ in range(100):
            feed(ten)

    def split():
        feed = decoder().feed
        for _ in range(100):
            feed(ten[:333])
            feed(ten[333:])

    def one_per_read():
        feed = decoder().feed
        for _ in range(1000):
            feed(hb)
    return {name: min(timeit.repeat(fn, number=20, repeat=5)) / 20_000 * 1e6
            for name, fn in (("ten per read", ten_per_read), ("ten split over two reads", split),
                             ("one per read", one_per_read))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True, metavar="TREE")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    trees = {"this tree": decoder_of(REPO), "baseline": decoder_of(Path(args.baseline))}
    for rnd in range(args.rounds):
        got = {label: measure(d) for label, d in trees.items()}
        for name in got["this tree"]:
            a, b = got["this tree"][name], got["baseline"][name]
            print(f"round {rnd + 1}: {name:<26} {a:.3f} vs {b:.3f} us per frame = {a / b:.2f}x; "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
