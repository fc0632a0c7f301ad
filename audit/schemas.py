"""The Spark schemas of the audit's rows and tables (docs/audit.md describes every column)."""
from __future__ import annotations

from pyspark.sql import types as T

from . import read
from .fold import ANOMALY_FIELDS, GENERATION_FIELDS, HISTORY_FIELDS, RANGE_FIELDS
from .offsets_sink import OFFSETS_FIELDS
from .shares import DELIVERY_FIELDS

S, L, I, B = T.StringType(), T.LongType(), T.IntegerType(), T.BooleanType()
# a GroupMetadata record's member as the later stages read it (its client id and host are in no table)
MEMBER = T.StructType([T.StructField("member_id", S), T.StructField("instance_id", S)])
RECORD_SCHEMA = T.StructType([T.StructField(n, t) for n, t in (
    ("partition", I), ("offset", L), ("timestamp", L), ("type", S), ("group", S), ("tombstone", B),
    # static-member events
    ("instance_id", S), ("cause", S), ("old_member_id", S), ("new_member_id", S), ("event_generation", I),
    ("event_time", L), ("client_id", S), ("client_host", S),
    # group metadata
    ("generation", I), ("protocol_type", S), ("protocol", S), ("leader", S), ("state_timestamp", L),
    ("members", T.ArrayType(MEMBER)),
    # offset commits
    ("topic", S), ("topic_partition", I), ("committed_offset", L), ("commit_time", L), ("metadata", S),
    # transactions: an offset commit's producer (a transactional batch), a marker's producer and kind
    # (commit/abort), a __transaction_state record's producer, state name (in `marker`) and transactional id
    ("producer_id", L), ("producer_epoch", I), ("marker", S), ("transactional_id", S),
)])
# the record types the per-group pass and static_events read
GROUP_TYPES = ("group_metadata", "static_member_event", "coordinator_load", "consumer_group_metadata", "consumer_member",
               "consumer_assignment", "share_group_metadata", "share_member")
# what the read stage yields (read.unit_rows): kind R (a record), E (an error), I (how a unit's read went),
# G (a gap inside a file); the record columns; the payload of E/I/G rows as JSON
ROW_SCHEMA = T.StructType([T.StructField("kind", S), *RECORD_SCHEMA.fields, T.StructField("meta", S)])
ERROR_SCHEMA = T.StructType([T.StructField("file", S), T.StructField("log_partition", I),
                             T.StructField("position", L), T.StructField("offset", L),
                             T.StructField("kind", S), T.StructField("reason", S)])
assert tuple(RECORD_SCHEMA.names) == read.RECORD_FIELDS and tuple(ERROR_SCHEMA.names) == read.ERROR_FIELDS
OFFSETS_SCHEMA = T.StructType([T.StructField(n, {
    "group": S, "topic": S, "partition": I, "metadata": S, "deleted": B, "log_partition": I, "transactional_id": S,
    "producer_epoch": I, "outcome": S}.get(n, L)) for n in OFFSETS_FIELDS])
GAP_SCHEMA = T.StructType([T.StructField("log_partition", I), T.StructField("from_offset", L),
                           T.StructField("to_offset", L), T.StructField("where", S)])
HISTORY_SCHEMA = T.StructType([T.StructField(n, {
    "group": S, "instance_id": S, "member_id": S, "log_partition": I, "start_cause": S, "end_cause": S,
    "from_generation": I, "to_generation": I, "from_broker": I, "to_broker": I, "group_type": S}.get(n, L)) for n in HISTORY_FIELDS])
GENERATIONS_SCHEMA = T.StructType([T.StructField(n, t, nullable) for n, t, nullable in (
    ("group", S, True), ("generation", I, True), ("time", L, True), ("protocol_type", S, True), ("protocol", S, True),
    ("leader", S, True), ("member_count", I, False),
    ("members", T.ArrayType(MEMBER, False), False),
    ("trigger", S, False), ("rebalance_start", L, True), ("joined", T.ArrayType(S), False),
    ("left", T.ArrayType(S), False), ("log_partition", I, True), ("log_offset", L, True),
    ("state_timestamp", L, True), ("group_type", S, True))])
assert tuple(GENERATIONS_SCHEMA.names) == GENERATION_FIELDS
RANGE_SCHEMA = T.StructType([T.StructField(n, {"group": S, "topic": S, "partition": I, "merged_into": S,
                                                "instance_id": S, "log_partition": I}.get(n, L))
                             for n in RANGE_FIELDS])
ANOMALY_SCHEMA = T.StructType([T.StructField(n, t) for n, t in (
    ("kind", S), ("group", S), ("instance_id", S), ("count", L), ("first_time", L), ("last_time", L),
    ("detail", S))])
assert tuple(ANOMALY_SCHEMA.names) == ANOMALY_FIELDS
# fold.fold_groups' rows: a tag (fold.FOLD_TAGS) and one of a history row, a generation, an anomaly, or (as JSON)
# a task's counts or one group's drawing for the report
FOLD_SCHEMA = T.StructType([T.StructField("tag", S), T.StructField("h", HISTORY_SCHEMA),
                            T.StructField("g", GENERATIONS_SCHEMA), T.StructField("a", ANOMALY_SCHEMA),
                            T.StructField("s", S)])
DELIVERIES_SCHEMA = T.StructType([T.StructField(n, {"group": S, "topic_id": S, "topic": S, "partition": I,
                                                     "final_state": S, "log_partition": I}.get(n, L))
                                  for n in DELIVERY_FIELDS])
