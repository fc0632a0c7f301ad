"""The audit's tables as Spark DataFrames over what the read stage loaded: static_events, offsets_history
(with each transactional commit's outcome), catchup_ranges, the per-group fold's input and its rows
(member_map_history, generations, anomalies), the anomalies of the log itself, and the --since/--until
window; `Tables` holds them by name (docs/audit.md)."""
from __future__ import annotations

import functools

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from . import read
from .fold import ANOMALY_FIELDS, Checks, fold_catchup_ranges, fold_groups, fold_member_map, in_arrow
from .load import DirectOffsets
from .offsets_sink import OFFSETS_FIELDS
from .options import Options
from .schemas import DELIVERIES_SCHEMA, FOLD_SCHEMA, GROUP_TYPES, HISTORY_SCHEMA, RANGE_SCHEMA, L, S
from .shares import fold_share_deliveries


def static_events(records: DataFrame) -> DataFrame:
    return (records.filter(F.col("type") == "static_member_event")
            .select("group", "instance_id", "cause", "old_member_id", "new_member_id",
                    F.col("event_generation").alias("generation"), "event_time", "client_id", "client_host",
                    "tombstone", F.col("partition").alias("log_partition"), F.col("offset").alias("log_offset"),
                    F.col("timestamp").alias("log_time")))


def offsets_history(records: DataFrame, plain: DataFrame | None = None) -> DataFrame:
    """offsets_history rows of the offset commits among `records` (all of them, or with the read tasks
    writing the plain ones themselves, the transactional ones and the catch-up checkpoints; `plain`: then
    the read tasks' rows, which the verdict at a commit marker reads). An offset committed inside a
    transaction (TxnOffsetCommit: a transactional batch of a producer) gets its producer id and epoch, the
    transactional id that producer id belongs to (from `__transaction_state`; null if no record of it is
    left), and its outcome: the first commit or abort marker of that producer id after it in the same
    partition decides (`committed`, `aborted`, with `marker_offset`), none yet is `open`. As the group
    coordinator's replay of a commit marker (Kafka's replayEndTransactionMarker), a committed one becomes
    the group's offset only if it is the partition's most recent at its marker: a write of the same
    (group, topic, partition) later in the log than it and already in effect at the marker - a plain commit
    or tombstone between it and its marker, or another transaction's offset written after it and committed
    before this marker - keeps it out (`superseded`). Plain commits have nulls there."""
    commits = (records.filter(F.col("type") == "offset_commit")
               .select("group", "topic", F.col("topic_partition").alias("partition"),
                       F.col("committed_offset").alias("offset"), "commit_time", "metadata",
                       F.col("tombstone").alias("deleted"), F.col("partition").alias("log_partition"),
                       F.col("offset").alias("log_offset"), F.col("timestamp").alias("log_time"),
                       "producer_id", "producer_epoch"))
    markers = (records.filter(F.col("type") == "txn_marker")
               .select(F.col("partition").alias("m_partition"), F.col("offset").alias("m_offset"),
                       F.col("producer_id").alias("m_producer"), F.col("marker").alias("m_kind")))
    txn = commits.filter(F.col("producer_id").isNotNull())
    ends = (txn.join(markers, (txn["log_partition"] == markers["m_partition"])
                     & (txn["producer_id"] == markers["m_producer"]) & (markers["m_offset"] > txn["log_offset"]))
            .groupBy("log_partition", "log_offset")
            .agg(F.min("m_offset").alias("marker_offset"), F.min_by("m_kind", "m_offset").alias("m_kind")))
    ids = (records.filter((F.col("type") == "transaction_state") & F.col("producer_id").isNotNull())
           .groupBy("producer_id")
           .agg(F.max_by("transactional_id", F.struct("timestamp", "partition", "offset")).alias("transactional_id")))
    rows = commits.join(ends, ["log_partition", "log_offset"], "left")
    lost = superseded(rows, plain)
    outcome = (F.when(F.col("producer_id").isNull(), F.lit(None).cast(S))
               .when((F.col("m_kind") == "commit") & F.col("lost").isNotNull(), F.lit("superseded"))
               .when(F.col("m_kind") == "commit", F.lit("committed"))
               .when(F.col("m_kind") == "abort", F.lit("aborted")).otherwise(F.lit("open")))
    return (rows.join(lost, ["log_partition", "log_offset"], "left").join(ids, "producer_id", "left")
            .select(*(outcome.alias(n) if n == "outcome" else F.col(n) for n in OFFSETS_FIELDS)))


_KEY = ("log_partition", "group", "topic", "partition")      # one committed offset's key in the log


def superseded(rows: DataFrame, plain: DataFrame | None) -> DataFrame:
    """(log_partition, log_offset, lost) of each offset committed in a committed transaction that does not
    become the group's at its marker: a write of its key is in effect at the marker that is later in the
    log than it - a plain commit or tombstone between the two (`rows`' plain ones and `plain`'s), or a
    committed transaction's offset written after it whose marker came first. Such a write beats it whether
    or not it became the group's itself (what kept it out is later still), so no fold is needed."""
    won = (rows.filter(F.col("m_kind") == "commit")
           .select(*_KEY, "log_offset", "marker_offset"))
    writes = rows.filter(F.col("producer_id").isNull()).select(*_KEY, "log_offset")
    if plain is not None:
        writes = writes.unionByName(plain.select(*_KEY, "log_offset"))
    later = (writes.select(*_KEY, F.col("log_offset").alias("w_offset"), F.col("log_offset").alias("w_at"))
             .unionByName(won.select(*_KEY, F.col("log_offset").alias("w_offset"),
                                     F.col("marker_offset").alias("w_at"))))
    c, w = won.alias("c"), later.alias("w")
    cond = [F.col(f"c.{k}") == F.col(f"w.{k}") for k in _KEY]
    cond += [F.col("w.w_offset") > F.col("c.log_offset"), F.col("w.w_at") < F.col("c.marker_offset")]
    return (c.join(w, functools.reduce(lambda a, b: a & b, cond), "left_semi")
            .select("log_partition", "log_offset", F.lit(True).alias("lost")))


def catchup_ranges(offsets: DataFrame) -> DataFrame:
    """The catch-up consumer's range tokens (the OffsetCommit metadata of its companion group), folded per
    (group, topic, partition) on the executors: one row per range, when it opened, when it was fully
    processed (or merged into a wider range), and what it still owes at the end of the log. `offsets`:
    offsets_history rows (before --since/--until) holding every checkpoint; one committed in a transaction
    counts at its commit marker (two of one transaction in their log order), an aborted, open or superseded
    one not at all."""
    from tenure.catchup.ranges import PREFIX
    commits = (offsets.filter(~F.col("deleted") & F.col("metadata").startswith(PREFIX + " instance=")
                              & (F.col("outcome").isNull() | (F.col("outcome") == "committed")))
               .select("group", "topic", "partition", "metadata",
                       # the commit's own time (the consumer's clock at the broker), else the record's
                       F.coalesce(F.when(F.col("commit_time") >= 0, F.col("commit_time")),
                                  F.col("log_time")).alias("time"),
                       "log_partition", F.coalesce("marker_offset", "log_offset").alias("at"),
                       "log_offset"))
    key = ("group", "topic", "partition")
    rows = (commits.repartition(*key).sortWithinPartitions(*key, "log_partition", "at", "log_offset")
            .drop("at"))
    return rows.mapInArrow(in_arrow(fold_catchup_ranges, to_arrow_schema(RANGE_SCHEMA)), RANGE_SCHEMA)


def topic_names(data_dir: str) -> dict[str, str]:
    """Topic id -> name, from the data dir's topic catalog (none: an in-memory server's dir, or no topics)."""
    import json
    import os

    from tenure.storage.datadir import CATALOG
    try:
        with open(os.path.join(data_dir, CATALOG), encoding="utf-8") as f:
            return {e["topic_id"]: e["name"] for e in json.load(f).get("topics", [])}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def share_deliveries(records: DataFrame, topics: dict[str, str]) -> DataFrame:
    """One row per record of a share partition delivered more than once or archived (`shares.fold_share_deliveries`
    over each share partition's `__share_group_state` records in log order, on the executors)."""
    key = ("group", "topic", "topic_partition")
    rows = (records.filter(F.col("type") == "share_state")
            .select(*key, "protocol_type", "committed_offset", "metadata", "tombstone", "partition", "offset",
                    "timestamp")
            .repartition(*key).sortWithinPartitions(*key, "partition", "offset"))
    fold = functools.partial(fold_share_deliveries, topics=topics)
    return rows.mapInArrow(in_arrow(fold, to_arrow_schema(DELIVERIES_SCHEMA)), DELIVERIES_SCHEMA)


def fold_input(records: DataFrame, moves: bool = True) -> DataFrame:
    """What the per-group folds read: the GroupMetadata and static-member records, and each coordinator move
    (CoordinatorLoad record) given to every group of its partition, one group's rows together in log order
    (sorted by group, partition, offset). Only the columns the folds read; a snapshot's members as two arrays
    of strings (member ids, instance ids), not structs. `moves=False`: the records hold no coordinator move
    (the read counted none), and the join that gives each one to its partition's groups is left out."""
    members = F.coalesce("members", F.array())
    records = records.select("group", "partition", "offset", "timestamp", "type", "tombstone", "instance_id", "cause",
                             "old_member_id", "new_member_id", "event_time", "generation", "protocol_type", "protocol",
                             "leader", "state_timestamp", "metadata",
                             F.transform(members, lambda m: m["member_id"]).alias("all_member_ids"),
                             F.transform(members, lambda m: m["instance_id"]).alias("all_instance_ids"))
    rows = records.filter(F.col("type").isin(*(t for t in GROUP_TYPES if t != "coordinator_load")))
    if moves:
        rows = rows.unionByName(records.filter(F.col("type") == "coordinator_load").drop("group")
                                .join(rows.select("group", "partition").distinct(), "partition"))
    return rows.repartition("group").sortWithinPartitions("group", "partition", "offset")


def member_map_history(grouped: DataFrame) -> DataFrame:
    """The member-map intervals of each (group, instance), and a row per coordinator move of the group's
    offsets partition (`fold_input`'s rows folded by `fold.fold_member_map`)."""
    return (grouped.select("group", "partition", "offset", "timestamp", "type", "tombstone", "instance_id", "cause",
                           "old_member_id", "new_member_id", "event_time", "generation", "all_member_ids",
                           "all_instance_ids", "metadata")
            .mapInArrow(in_arrow(fold_member_map, to_arrow_schema(HISTORY_SCHEMA)), HISTORY_SCHEMA))


def fold_all(grouped: DataFrame, checks: Checks) -> DataFrame:
    """`fold_input`'s rows folded in one pass per group on the executors (`fold.fold_groups`): FOLD_SCHEMA rows,
    member_map_history rows (tag h), generations (g) and anomalies (a) inside the window, each task's counts
    for the summary (s) and what report.html draws of each task's most active groups (r)."""
    return grouped.mapInArrow(in_arrow(functools.partial(fold_groups, checks=checks), to_arrow_schema(FOLD_SCHEMA)),
                              FOLD_SCHEMA)


def anomalies(per_group: DataFrame, errors: DataFrame, gaps: DataFrame, ranges: DataFrame | None = None,
              deliveries: DataFrame | None = None) -> DataFrame:
    """The anomalies: those of each group's rows in the --since/--until window (`fold.group_anomalies`, in
    the per-group pass), the catch-up ranges still owing offsets, the share partitions with records delivered
    more than once or archived (share_deliveries, in the window), and the log's own problems (damage, gaps),
    which have no time and are always reported."""
    cols = list(ANOMALY_FIELDS)
    damage = (errors.filter(~F.col("kind").isin(*read.NOT_DAMAGE))
              .select(F.lit("log_damage").alias("kind"), F.lit(None).cast(S).alias("group"),
                      F.lit(None).cast(S).alias("instance_id"), F.lit(1).cast(L).alias("count"),
                      F.lit(None).cast(L).alias("first_time"), F.lit(None).cast(L).alias("last_time"),
                      F.concat_ws(" ", "kind", "file", F.lit("at byte"), "position", F.lit(":"), "reason")
                      .alias("detail")))
    log_gaps = gaps.select(
        F.lit("log_gap").alias("kind"), F.lit(None).cast(S).alias("group"), F.lit(None).cast(S).alias("instance_id"),
        (F.col("to_offset") - F.col("from_offset")).alias("count"), F.lit(None).cast(L).alias("first_time"),
        F.lit(None).cast(L).alias("last_time"),
        F.concat(F.lit("offsets "), F.col("from_offset").cast(S), F.lit(".."), (F.col("to_offset") - 1).cast(S),
                 F.lit(f" of {read.OFFSETS_TOPIC}-"), F.col("log_partition").cast(S),
                 F.lit(" missing (never cleaned: at or above the cleaner checkpoint), "), F.col("where"))
        .alias("detail"))
    extra = []
    if ranges is not None:
        # a catch-up range still owing offsets at the end of the log: never committed (yet)
        extra.append(ranges.filter(F.col("owed_from").isNotNull()).select(
            F.lit("catchup_unfinished").alias("kind"), "group", "instance_id",
            (F.col("owed_to") - F.col("owed_from")).alias("count"), F.col("opened").alias("first_time"),
            F.col("last_checkpoint").alias("last_time"),
            F.concat(F.lit("topic "), F.col("topic"), F.lit(" partition "), F.col("partition").cast(S),
                     F.lit(": range "), F.col("lo").cast(S), F.lit("-"), F.col("hi").cast(S),
                     F.lit(", offsets "), F.col("owed_from").cast(S), F.lit(".."), (F.col("owed_to") - 1).cast(S),
                     F.lit(" never committed")).alias("detail")))
    if deliveries is not None:
        # one per share partition: how many of its records came back, the most delivered first in the detail
        top = F.max_by(F.struct("offset", "delivery_count", "final_state"),
                       F.struct("delivery_count", -F.col("offset")))
        extra.append(deliveries.groupBy("group", "topic_id", "topic", "partition").agg(
            F.count("*").alias("count"), F.min("first_time").alias("first_time"),
            F.max("last_time").alias("last_time"), top.alias("top"),
            F.sum(F.when(F.col("final_state").isin("archived", "done"), 1).otherwise(0)).alias("ended"))
            .select(F.lit("share_redelivery").alias("kind"), "group", F.lit(None).cast(S).alias("instance_id"),
                    "count", "first_time", "last_time",
                    F.concat(F.lit("topic "), F.coalesce("topic", F.concat(F.lit("id "), "topic_id")),
                             F.lit(" partition "), F.col("partition").cast(S), F.lit(": most delivered offset "),
                             F.col("top.offset").cast(S), F.lit(" ("), F.col("top.delivery_count").cast(S),
                             F.lit(" deliveries, "), F.col("top.final_state"), F.lit("); "), F.col("ended").cast(S),
                             F.lit(" of them archived or done after redeliveries")).alias("detail")))
    out = per_group.select(*cols)
    for df in (damage, log_gaps, *extra):
        out = out.unionByName(df.select(*cols))
    return out


def window(df: DataFrame, start: str, end: str | None, opts: Options) -> DataFrame:
    if opts.since is not None:
        df = df.filter(F.col(end).isNull() | (F.col(end) >= opts.since)) if end else df.filter(F.col(start) >= opts.since)
    if opts.until is not None:
        df = df.filter(F.col(start) < opts.until)
    return df


class Tables(dict):
    """The tables by name; with the read tasks' own offsets_history part files, what they hold
    (`direct`) and the table's rows computed by Spark (`offset_rows`, appended to those files); the
    per-group pass's counts (`counts`) and drawings (`drawings`)."""
    direct: DirectOffsets | None = None
    # set by `build` (job.py) with the tables
    offset_rows: DataFrame
    counts: DataFrame                      # the per-group pass's counts, a JSON row per task (fold._Counts)
    drawings: DataFrame                    # what report.html draws of each task's most active groups (JSON)
    shares: bool = False                   # the data dir has __share_group_state (else share_deliveries is empty)
