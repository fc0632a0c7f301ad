"""`tenure log dump|verify|compact DIR`: offline tools over a data dir's segment logs.

Each command reads the files directly (no server needed); they must not be run on a data dir a live
server is compacting (`compact` takes the data dir's lock, so it refuses a dir in use).
"""
from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    p = sub.add_parser("log", help="inspect, verify or compact a data dir's logs offline")
    lsub = p.add_subparsers(dest="log_command", required=True)
    d = lsub.add_parser("dump", help="print the decoded records of a data dir")
    d.add_argument("dir")
    d.add_argument("--topic", default=None, help="only this topic (default: every topic)")
    d.add_argument("--group", default=None, help="only __consumer_offsets records of this group")
    d.add_argument("--json", action="store_true", help="one JSON object per record")
    v = lsub.add_parser("verify", help="check every batch's CRC and offsets; exit 1 on damage")
    v.add_argument("dir")
    c = lsub.add_parser("compact", help="compact the compacted topics' logs offline")
    c.add_argument("dir")


def run(args: argparse.Namespace) -> int:
    if args.log_command == "dump":
        return dump(args)
    if args.log_command == "verify":
        return verify(args)
    if args.log_command == "compact":
        return compact(args)
    return 2


def dump(args: argparse.Namespace) -> int:
    raise NotImplementedError("tenure log dump")


def verify(args: argparse.Namespace) -> int:
    raise NotImplementedError("tenure log verify")


def compact(args: argparse.Namespace) -> int:
    raise NotImplementedError("tenure log compact")
