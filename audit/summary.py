"""The audit's summary: its counts (`summarize`, mostly from what the per-group pass and the read tasks
counted themselves) and the table printed at the end of a run (`summary_table`)."""
from __future__ import annotations

import json

from pyspark.sql import functions as F

from . import read
from .fold import CONVERTED, COORDINATOR_MOVED
from .tables import Tables


def summarize(tables: Tables) -> dict:
    """The summary's counts: the member ids, generations and static events counted by the per-group pass
    itself (a row per task), the errors, offset commits and anomalies by one small aggregate job each;
    offsets_history's part files written by the read tasks are counted by the tasks themselves, not read
    again."""
    by_cause: dict[str, int] = {}
    member_ids = moves = conversions = groups = instances = n_gens = n_events = 0
    events: dict[str, int] = {}
    firsts: list[int | None] = []
    lasts: list[int | None] = []
    for r in tables.counts.collect():
        c = json.loads(r["s"])
        for start, end, member, n in c["intervals"]:
            if start == COORDINATOR_MOVED:
                moves += n
            elif start == CONVERTED:
                conversions += n
            if not member:
                continue
            member_ids += n
            for cause in (start, end):
                if cause is not None:
                    by_cause[cause] = by_cause.get(cause, 0) + n
        groups += c["groups"]
        instances += c["instances"]
        n_gens += c["generations"]
        firsts.append(c["gen_first"])
        lasts.append(c["gen_last"])
        for cause, tombstone, n, a, b in c["events"]:
            n_events += n
            firsts.append(a)
            lasts.append(b)
            if not tombstone:
                events[cause] = events.get(cause, 0) + n
    errs = {r["kind"]: r["count"] for r in tables["errors"].groupBy("kind").count().collect()}
    direct = tables.direct
    offsets = tables["offsets_history"] if direct is None else tables.offset_rows
    n_offsets, txn = 0, {}
    for r in (offsets.groupBy("outcome")
              .agg(F.count("*").alias("n"), F.min("log_time").alias("a"), F.max("log_time").alias("b")).collect()):
        n_offsets += r["n"]
        firsts.append(r["a"])
        lasts.append(r["b"])
        if r["outcome"] is not None:
            txn[r["outcome"]] = r["n"]
    if direct is not None and direct.rows:
        n_offsets += direct.rows
        firsts.append(direct.first_time)
        lasts.append(direct.last_time)
    known_firsts = [x for x in firsts if x is not None]
    known_lasts = [x for x in lasts if x is not None]
    return {
        "events_by_cause": dict(sorted(events.items())),     # as the server's static-event counters
        "first_time": min(known_firsts) if known_firsts else None,
        "last_time": max(known_lasts) if known_lasts else None,
        "groups": groups,
        "instances": instances,
        "member_ids": member_ids,
        "coordinator_moves": moves,                         # rows per group of each moved offsets partition
        "conversions": conversions,                         # classic <-> consumer (online migration)
        # share records redelivered or archived (no job when the data dir has no __share_group_state)
        "share_deliveries": tables["share_deliveries"].count() if tables.shares else 0,
        "changes_by_cause": dict(sorted(by_cause.items())),
        "generations": n_gens,
        "static_events": n_events,
        # the group's commits: plain ones and those of committed transactions (aborted, open and superseded
        # ones never count for the group; they are in transactional_commits)
        "offset_commits": n_offsets - txn.get("aborted", 0) - txn.get("open", 0) - txn.get("superseded", 0),
        "transactional_commits": dict(sorted(txn.items())),
        "anomalies": {r["kind"]: r["count"] for r in tables["anomalies"].groupBy("kind").count().collect()},
        "errors": sum(n for k, n in errs.items() if k != read.TORN_TAIL),     # unstable counts: records left out
        "errors_by_kind": errs,
    }


def summary_table(s: dict) -> str:
    rows = [("groups", s["groups"]), ("instances", s["instances"]), ("member ids (intervals)", s["member_ids"])]
    rows += [("generations", s["generations"]), ("static events", s["static_events"])]
    if s.get("coordinator_moves"):
        rows += [("coordinator moves (per group)", s["coordinator_moves"])]
    if s.get("conversions"):
        rows += [("group conversions (classic <-> consumer)", s["conversions"])]
    rows += [(f"  {c}", n) for c, n in s["events_by_cause"].items()]
    rows += [("offset commits", s["offset_commits"])]
    if s.get("share_deliveries"):
        rows += [("share records redelivered or archived", s["share_deliveries"])]
    rows += [(f"  in transactions, {k}", n) for k, n in s.get("transactional_commits", {}).items()]
    rows += [("anomalies", sum(s["anomalies"].values()))]
    rows += [(f"  {k}", n) for k, n in sorted(s["anomalies"].items())]
    rows += [("errors", s["errors"])]
    rows += [(f"  {k}", n) for k, n in sorted(s["errors_by_kind"].items())]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v:>8}" for k, v in rows)
