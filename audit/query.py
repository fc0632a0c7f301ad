"""`tenure audit DIR --instance G/I --at TIME [--format json]`: which member id held an instance id then,
since when and why.

DIR is either an audit's output (it has a `member_map_history` Parquet table: read with pyarrow, no Spark)
or a data dir (the member map of that one group is built with Spark, as the audit builds it, and nothing
is kept).
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from .fold import END_CAUSES
from .report import cause_words, duration, iso

FIELDS = ("member_id", "valid_from_time", "valid_to_time", "start_cause", "end_cause", "from_generation",
          "to_generation", "valid_from_offset", "last_seen_offset")


def intervals(dir_: str, group: str, instance: str, master: str = "local[*]", spark=None) -> list[dict]:
    """member_map_history rows of (group, instance), in log order. `spark`: a running session to use
    (else one is started and stopped) when DIR is a data dir."""
    table = Path(dir_) / "member_map_history"
    if table.is_dir():
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
        t = pq.read_table(table, columns=["group", "instance_id", *FIELDS])
        t = t.filter(pc.and_(pc.equal(t["group"], group), pc.equal(t["instance_id"], instance)))
        rows = t.select(list(FIELDS)).to_pylist()
    else:
        from . import job, tables
        own = spark is None
        if own:
            spark = job.session(master, app="tenure-audit-query")
        scratch = tempfile.mkdtemp(prefix="tenure-audit-query-")
        try:
            opts = job.Options(dir_, "", master=master, group=group, report=False)
            # the offset commits are not needed: with a local master the read tasks write them to a scratch
            # directory (removed after) instead of making them rows (a cluster's executors may not see it)
            local = spark.sparkContext.master.startswith("local")
            loaded = job.load(spark, opts, offsets_dir=scratch if local else None)
            h = tables.member_map_history(tables.fold_input(loaded.records))
            rows = [r.asDict() for r in h.filter(h["instance_id"] == instance).select(*FIELDS).collect()]
        finally:
            if own:
                spark.stop()
            shutil.rmtree(scratch, ignore_errors=True)
    return sorted(rows, key=lambda r: r["valid_from_offset"])


def _held(r: dict, at: int) -> bool:
    return r["valid_from_time"] <= at and (r["valid_to_time"] is None or at < r["valid_to_time"])


def answer(rows: list[dict], group: str, instance: str, at: int) -> dict:
    """What held the instance at `at` (a list: two member ids can overlap, an anomaly), the member id
    before and the one after."""
    def view(r):
        if r is None:
            return None
        certain = r["end_cause"] in END_CAUSES
        return {
            "member_id": r["member_id"], "since": iso(r["valid_from_time"]), "since_ms": r["valid_from_time"],
            "started_by": r["start_cause"], "from_generation": r["from_generation"],
            "until": iso(r["valid_to_time"]) if r["valid_to_time"] is not None else None,
            "until_ms": r["valid_to_time"], "ended_by": r["end_cause"], "to_generation": r["to_generation"],
            # without an end event the end is only known to lie after the last snapshot showing the pair
            "end_is_exact": certain,
        }
    held = [r for r in rows if _held(r, at)]
    before = [r for r in rows if r["valid_to_time"] is not None and r["valid_to_time"] <= at]
    after = [r for r in rows if r["valid_from_time"] > at]
    return {"group": group, "instance_id": instance, "at": iso(at), "at_ms": at,
            "held_by": [view(r) for r in held], "previous": view(before[-1] if before else None),
            "next": view(after[0] if after else None), "known": bool(rows)}


def text(a: dict) -> str:
    who = f"{a['group']}/{a['instance_id']} at {a['at']}"
    if not a["known"]:
        return f"{who}: this instance id never held a place in the group's member map (in this log)"
    lines = []
    for h in a["held_by"]:
        lines.append(f"{who}: held by member id {h['member_id']}")
        lines.append(f"  since {h['since']} ({cause_words(h['started_by'])}; generation {h['from_generation']}),"
                     f" {duration(a['at_ms'] - h['since_ms'])} before")
        if h["until"] is None:
            lines.append("  still held at the end of the log")
        else:
            exact = "" if h["end_is_exact"] else " (at the latest; its end event is not in the log)"
            lines.append(f"  until {h['until']}{exact} ({cause_words(h['ended_by'])}), held for "
                         f"{duration(h['until_ms'] - h['since_ms'])} in all")
    if not a["held_by"]:
        lines.append(f"{who}: no member id held it")
    if a["previous"] is not None:
        p = a["previous"]
        lines.append(f"  before: member id {p['member_id']}, {p['since']} to {p['until']} "
                     f"(ended by {cause_words(p['ended_by'])})")
    if a["next"] is not None:
        n = a["next"]
        lines.append(f"  after: member id {n['member_id']} from {n['since']} ({cause_words(n['started_by'])})")
    return "\n".join(lines)


def run(dir_: str, spec: str, at: int, fmt: str = "text", master: str = "local[*]") -> tuple[int, str]:
    """(exit status, output): 0 if a member id held the instance then, 1 if none did."""
    group, _, instance = spec.partition("/")
    a = answer(intervals(dir_, group, instance, master), group, instance, at)
    out = json.dumps(a, indent=2) if fmt == "json" else text(a)
    return (0 if a["held_by"] else 1), out
