"""`tenure log dump|verify|compact|synth DIR`: offline tools over a data dir's segment logs. The command
line and `compact` are here; `dump` is in logdump.py, `verify` in logverify.py (both over the data dir as
logdir.py lists it), `synth` in synth.py.

Each command reads the files directly (no server needed); they must not be run on a data dir a live
server is compacting (`compact` takes the data dir's lock, so it refuses a dir in use).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from pathlib import Path

from tenure.broker.topics import DEFAULT_TOPIC_CONFIGS, OFFSETS_TOPIC
from tenure.storage.compaction import CompactionPolicy, Compactor, is_compacted
from tenure.storage.datadir import CATALOG, DataDir, DataDirLocked
from tenure.storage.recovery import CorruptLogError
from tenure.tools.logdir import usage_error
from tenure.tools.logdump import dump
from tenure.tools.logverify import verify


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
    _add_synth_parser(lsub)


def _add_synth_parser(lsub) -> None:
    from tenure.tools.synth import SynthConfig
    d = SynthConfig()
    s = lsub.add_parser("synth", help="write a realistic synthetic __consumer_offsets log into a new data dir",
                        description="Write a realistic __consumer_offsets log (static groups committing, "
                        "restarting, rebalancing, expiring, leaving, removed, fenced, deleted; see "
                        "tenure/tools/synth.py) into DIR, which a server can open. DIR must hold no logs yet.")
    s.add_argument("dir")
    s.add_argument("--records", type=int, required=True, help="records to write (a few more may be written "
                   "to finish the changes under way)")
    for name, typ, hlp in (("groups", int, "consumer groups"), ("members", int, "static members per group"),
                           ("partitions", int, "partitions of each group's topic"),
                           ("topics", int, "distinct topics the groups consume"),
                           ("segment-bytes", int, "roll segments at this size"),
                           ("offsets-partitions", int, "__consumer_offsets partitions"),
                           ("seed", int, "random seed (same seed and options: same log)"),
                           ("restart-rate", float, "per step: chance of a rolling restart of a group"),
                           ("rebalance-rate", float, "per step: chance of a rebalance (generation + 1)"),
                           ("expire-rate", float, "per step: chance of a member's session expiring"),
                           ("leave-rate", float, "per step: chance of a member leaving (LeaveGroup)"),
                           ("remove-rate", float, "per step: chance of an admin removing a member"),
                           ("force-rate", float, "per step: chance of a forced rebalance"),
                           ("fence-rate", float, "per replaced member: chance its old pod is fenced"),
                           ("delete-rate", float, "per step: chance of a group deletion")):
        default = getattr(d, name.replace("-", "_"))
        s.add_argument(f"--{name}", type=typ, default=default, help=f"{hlp} (default {default})")


def run(args: argparse.Namespace) -> int:
    if args.log_command == "dump":
        return dump(args)
    if args.log_command == "verify":
        return verify(args)
    if args.log_command == "compact":
        return compact(args)
    if args.log_command == "synth":
        return synth(args)
    return 2


def synth(args: argparse.Namespace) -> int:
    from tenure.tools.synth import SynthConfig, generate, summary_line
    fields = {f.name for f in dataclasses.fields(SynthConfig)}
    cfg = SynthConfig(**{k: v for k, v in vars(args).items() if k in fields})
    try:
        result = generate(args.dir, cfg)
    except (ValueError, FileExistsError) as exc:
        return usage_error("synth", str(exc))
    except DataDirLocked as exc:
        print(f"tenure log synth: {exc}", file=sys.stderr)
        return 1
    print(summary_line(args.dir, result))
    return 0


# ---------------------------------------------------------------------- compact
def _log_size(plog) -> tuple[int, int, int]:
    """(segments, records, bytes) of a partition log, from its batch headers."""
    records = sum(h.records_count for h, _ in plog.batches(0))
    return len(plog.segments), records, plog.size_bytes


def compact(args: argparse.Namespace) -> int:
    """Compact every partition of every compacted topic (cleanup.policy holding `compact`; without a
    catalog, the `__consumer_offsets` partitions on disk) under the rules of storage/compaction.py, until
    there is nothing left to clean; the active segment of each is left alone. Takes the data dir's lock
    (refuses a dir a server is using). Prints one before -> after line per partition and a total.
    Exit 0 done, 1 locked or a log that does not open (damage), 2 usage."""
    root = Path(args.dir)
    if not root.is_dir():
        return usage_error("compact", f"{args.dir}: no such directory")
    catalog = root / CATALOG
    try:
        if catalog.exists():
            with open(catalog, encoding="utf-8") as f:
                entries = json.load(f)["topics"]
            wanted = [(str(e["name"]), int(e["partitions"]), dict(e.get("configs", {}))) for e in entries]
        else:
            parts = sorted(int(p.name[len(OFFSETS_TOPIC) + 1:]) for p in root.iterdir()
                           if p.is_dir() and re.fullmatch(re.escape(OFFSETS_TOPIC) + r"-\d+", p.name))
            wanted = [(OFFSETS_TOPIC, max(parts) + 1, {"cleanup.policy": "compact"})] if parts else []
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"tenure log compact: {catalog}: unreadable ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 1
    try:
        data = DataDir.open(root)
    except DataDirLocked as exc:
        print(f"tenure log compact: {exc}", file=sys.stderr)
        return 1
    compactor = Compactor()
    before_total = [0, 0, 0]
    after_total = [0, 0, 0]
    dropped = 0
    try:
        for topic, count, configs in wanted:
            def config(name: str, configs=configs) -> str | None:
                return configs.get(name, DEFAULT_TOPIC_CONFIGS.get(name))
            if not is_compacted(config("cleanup.policy")):
                continue
            policy = CompactionPolicy.from_configs(config)
            for i in range(count):
                if not (root / f"{topic}-{i}").is_dir():
                    continue
                try:
                    plog = data.open_log(topic, i)
                except CorruptLogError as exc:
                    print(f"tenure log compact: {exc}; nothing compacted in {topic}-{i} (see `tenure log verify "
                          f"{args.dir}`)", file=sys.stderr)
                    return 1
                plog.finish_recovery()
                for d in plog.truncated:
                    print(f"{topic}-{i}: note: opening it cut {d.path.name} at byte {d.position}: {d.reason}")
                before = _log_size(plog)
                st = compactor.clean_fully(plog, policy)
                after = _log_size(plog)
                plog.close()
                dropped += st.tombstones_dropped
                for tot, now in ((before_total, before), (after_total, after)):
                    for k in range(3):
                        tot[k] += now[k]
                print(f"{topic}-{i}: {before[0]} segment(s), {before[1]} record(s), {before[2]} byte(s) -> "
                      f"{after[0]} segment(s), {after[1]} record(s), {after[2]} byte(s); "
                      f"{st.tombstones_dropped} tombstone(s) dropped")
        print(f"{args.dir}: {before_total[1]} record(s), {before_total[2]} byte(s) -> {after_total[1]} record(s), "
              f"{after_total[2]} byte(s); {dropped} tombstone(s) dropped")
        sys.stdout.flush()
    finally:
        for plog in data.logs.values():
            plog.close()
        data.close()
    return 0
