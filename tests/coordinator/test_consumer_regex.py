"""Regular-expression subscriptions (SubscribedTopicRegex) in the coordinator (coordinator/consumer/regex.py):
RE2/J's syntax and descriptions through the RE2 binding, whole-name matches, resolutions kept in Kafka's
ConsumerGroupRegularExpression records, refreshed when topics change but never within 10 s of the last, one
group-epoch bump for a changed resolution, the last subscriber's tombstone, names and a regex together."""
from __future__ import annotations

import pytest

from tenure.coordinator.consumer.regex import (
    REFRESH_INTERVAL_MS,
    REFRESH_MIN_INTERVAL_MS,
    InvalidRegex,
    compile_regex,
    matching,
)
from tenure.protocol.consumer_group_records import ConsumerGroupMetadataRecord, RegularExpressionRecord
from tenure.protocol.errors import ErrorCode as E

from .consumer_harness import ConsumerHarness, Topics


def err(h: ConsumerHarness, token: int) -> int:
    return h.responses[token]["error_code"]


def harness() -> ConsumerHarness:
    return ConsumerHarness(topics=Topics(**{"orders-eu": 2, "orders-us": 2, "payments": 2}))


def regexes(h: ConsumerHarness):
    return next(k for k in h.coordinator.kinds.all if k.name == "consumer").regexes


def regex_records(records) -> list[RegularExpressionRecord]:
    return [r for r in records if isinstance(r, RegularExpressionRecord)]


def epochs(records) -> list[int]:
    return [r.epoch for r in records if isinstance(r, ConsumerGroupMetadataRecord) and not r.tombstone]


# ------------------------------------------------------------------ syntax: RE2/J's, descriptions included
# (pattern, RE2/J 1.8's PatternSyntaxException.getDescription()), as RE2/J answers them
REFUSED = [
    ("orders(", "missing closing )"),
    ("orders[", "missing closing ]"),
    ("*", "missing argument to repetition operator"),
    ("a**", "invalid nested repetition operator"),
    ("a++", "invalid nested repetition operator"),
    ("a{2}{3}", "invalid nested repetition operator"),
    ("orders\\", "trailing backslash at end of expression"),
    ("a{2,1}", "invalid repeat count"),
    ("x{1001}", "invalid repeat count"),
    ("(?<!x)a", "invalid named capture"),
    ("(?P<>a)", "invalid named capture"),
    ("(?P=n)", "invalid or unsupported Perl syntax"),
    ("(?x)a b", "invalid or unsupported Perl syntax"),
    ("a)", "regexp/syntax: internal error"),
    ("\\8", "invalid escape sequence"),
    ("\\Z", "invalid escape sequence"),
    ("\\x{", "invalid escape sequence"),
    ("[z-a]", "invalid character class range"),
    ("[[:foo:]]", "invalid character class range"),
    ("\\p{Foo}", "invalid character class range"),
    # RE2/J refuses these, C++ RE2 takes them: RE2/J wins
    ("\\C", "invalid escape sequence"),
    ("(?P<n>a)(?P<n>b)", "duplicate capture group name"),
    ("(?<n>a)(?P<n>b)", "duplicate capture group name"),
]
TAKEN = ["orders-.*", "(?i)ORDERS.*", "\\pL+", "(?<name>x)", "a{,5}", "\\Qa.b\\E", "x{1000}", "[[:alpha:]]",
         "(?s).", "(?U)a*", "\\z", "(?P<n>a)|(?P<m>b)", "\\Q\\C\\E", ""]


@pytest.mark.parametrize("regex, description", REFUSED)
def test_a_pattern_re2j_refuses_is_refused_with_its_description(regex, description):
    with pytest.raises(InvalidRegex) as exc:
        compile_regex(regex)
    assert exc.value.description == description
    assert exc.value.message == f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {description}."


@pytest.mark.parametrize("regex", TAKEN)
def test_a_pattern_re2j_takes_is_taken(regex):
    compile_regex(regex)


def test_a_topic_matches_when_its_whole_name_matches():
    names = ["orders", "orders-eu", "my-orders", "Orders-x", "__consumer_offsets"]
    assert matching("orders", names) == {"orders"}
    assert matching("orders.*", names) == {"orders", "orders-eu"}
    assert matching("^orders-.*$", names) == {"orders-eu"}
    assert matching(".*orders.*", names) == {"orders", "orders-eu", "my-orders"}
    assert matching("(?i)orders-.*", names) == {"orders-eu", "Orders-x"}
    assert matching(".*", names) == set(names)                 # internal topics too, as Kafka's image lists them


# ------------------------------------------------------------------ the heartbeat
def test_a_regex_member_gets_the_matching_topics_with_kafkas_records():
    h = harness()
    t = h.hb("a", 0, topics=[], regex="orders-.*")
    assert err(h, t) == 0 and h.responses[t]["member_epoch"] == 1
    assert h.assignment_of(t) == {"orders-eu": [0, 1], "orders-us": [0, 1]}
    recs = h.take_records()
    assert regex_records(recs) == [RegularExpressionRecord("g", "orders-.*", ("orders-eu", "orders-us"),
                                                           regexes(h).version, h.now_ms)]
    assert epochs(recs) == [1]
    # the group value, from the records alone (the harness replays them after every input)
    assert h.group["g"].regexes["orders-.*"].topics == {"orders-eu", "orders-us"}
    assert h.group["g"].subscribed_topics() == {"orders-eu", "orders-us"}
    # a plain heartbeat changes nothing and resolves nothing again
    n = regexes(h).resolutions
    assert err(h, h.hb("a", 1, owned=h.owned("a"))) == 0 and h.take_records() == []
    assert regexes(h).resolutions == n


def test_an_invalid_regex_is_128_with_kafkas_message_and_nothing_written():
    h = harness()
    t = h.hb("a", 0, topics=[], regex="orders-(")
    assert (err(h, t), h.responses[t]["error_message"]) == (
        E.INVALID_REGULAR_EXPRESSION, "SubscribedTopicRegex `orders-(` is not a valid regular expression: "
                                      "missing closing ).")
    assert h.records == [] and "g" not in h.group


def test_a_second_member_with_the_same_regex_uses_its_resolution():
    h = harness()
    h.cjoin("a", topics=[], regex="orders-.*")
    n = regexes(h).resolutions
    h.take_records()
    t = h.hb("b", 0, topics=[], regex="orders-.*")
    assert err(h, t) == 0 and regexes(h).resolutions == n
    recs = h.take_records()
    assert regex_records(recs) == [] and epochs(recs) == [2]
    h.settle({"a": None, "b": None})
    assert [sum(len(ps) for ps in h.owned(m).values()) for m in ("a", "b")] == [2, 2]


def test_a_new_matching_topic_is_assigned_with_one_bump_once_10_s_have_passed():
    h = harness()
    h.cjoin("a", topics=[], regex="orders-.*")
    h.topics.create("orders-asia", 3)
    h.take_records()
    # within 10 s of the last resolution nothing is resolved again
    h.advance(REFRESH_MIN_INTERVAL_MS)
    assert err(h, h.hb("a", 1, owned=h.owned("a"))) == 0 and h.take_records() == []
    h.advance(1)
    t = h.hb("a", 1, owned=h.owned("a"))
    recs = h.take_records()
    assert regex_records(recs) == [RegularExpressionRecord(
        "g", "orders-.*", ("orders-asia", "orders-eu", "orders-us"), regexes(h).version, h.now_ms)]
    assert epochs(recs) == [2] and h.take_rebalances()[-1] == ("g", "consumer regex resolution changed")
    assert h.responses[t]["member_epoch"] == 2 and h.assignment_of(t)["orders-asia"] == [0, 1, 2]
    # a topic that does not match changes nothing
    h.topics.create("payments-eu", 1)
    h.advance(REFRESH_MIN_INTERVAL_MS + 1)
    h.hb("a", 2, owned=h.owned("a"))
    recs = h.take_records()
    assert [r.topics for r in regex_records(recs)] == [("orders-asia", "orders-eu", "orders-us")]
    assert epochs(recs) == []


def test_a_deleted_topic_is_revoked_with_one_bump():
    h = harness()
    h.cjoin("a", topics=[], regex="orders-.*")
    h.advance(REFRESH_MIN_INTERVAL_MS + 1)
    h.take_records()
    owned = h.owned("a")
    h.topics.delete("orders-us")
    t = h.hb("a", 1, owned=owned)
    recs = h.take_records()
    assert [r.topics for r in regex_records(recs)] == [("orders-eu",)] and epochs(recs) == [2]
    # it revokes the deleted topic's partitions first (it still reports them), then moves to the new epoch
    assert h.responses[t]["member_epoch"] == 1 and h.assignment_of(t) == {"orders-eu": [0, 1]}
    t = h.hb("a", 1, owned={"orders-eu": [0, 1]})
    assert h.responses[t]["member_epoch"] == 2 and h.take_records() != [] and epochs(h.records) == [1, 2]


def test_a_deleted_topic_within_10_s_is_revoked_by_the_metadata_hash_then_the_resolution_catches_up():
    """Kafka's way: the resolution is not refreshed within 10 s, but the topic is gone from the metadata hash
    (one bump, the partitions revoked); the next refresh drops the name and bumps again, as Kafka's does."""
    h = harness()
    h.cjoin("a", topics=[], regex="orders-.*")
    h.take_records()
    owned = h.owned("a")
    h.topics.delete("orders-us")
    t = h.hb("a", 1, owned=owned)
    recs = h.take_records()
    assert regex_records(recs) == [] and epochs(recs) == [2]
    assert h.assignment_of(t) == {"orders-eu": [0, 1]}
    assert h.responses[h.hb("a", 1, owned={"orders-eu": [0, 1]})]["member_epoch"] == 2
    h.advance(REFRESH_MIN_INTERVAL_MS + 1)
    h.hb("a", 2, owned=h.owned("a"))
    recs = h.take_records()
    assert [r.topics for r in regex_records(recs)] == [("orders-eu",)] and epochs(recs) == [3]


def test_the_refresh_interval_resolves_again_with_no_change():
    h = harness()
    h.cjoin("a", topics=[], regex="orders-.*")
    h.advance(REFRESH_MIN_INTERVAL_MS + 1)
    h.hb("a", 1, owned=h.owned("a"))               # topics unchanged since: nothing to do
    h.take_records()
    for _ in range(REFRESH_INTERVAL_MS // 30_000):                   # heartbeating all along
        h.advance(30_000)
        h.hb("a", 1, owned=h.owned("a"))
    recs = h.take_records()
    assert [r.timestamp for r in regex_records(recs)] == [h.now_ms] and epochs(recs) == []


def test_the_last_subscriber_leaving_tombstones_the_resolution():
    h = harness()
    h.cjoin("a", topics=[], regex="orders-.*")
    h.cjoin("b", topics=[], regex="orders-.*")
    h.take_records()
    h.hb("a", -1)
    assert regex_records(h.take_records()) == []
    h.hb("b", -1)
    assert regex_records(h.take_records()) == [RegularExpressionRecord("g", "orders-.*", tombstone=True)]
    assert h.group["g"].regexes == {}


def test_a_member_fenced_by_its_session_takes_its_resolution_with_it():
    h = harness()
    h.cjoin("a", topics=[], regex="orders-.*")
    h.take_records()
    h.advance(60_000)
    assert RegularExpressionRecord("g", "orders-.*", tombstone=True) in h.take_records()


def test_names_and_a_regex_together_subscribe_to_both():
    """Kafka refuses neither: the member's subscription is its names and what its regex resolves to."""
    h = harness()
    t = h.hb("a", 0, topics=["payments"], regex="orders-eu")
    assert err(h, t) == 0
    assert h.assignment_of(t) == {"orders-eu": [0, 1], "payments": [0, 1]}


def test_switching_from_a_regex_to_names_bumps_once_and_tombstones():
    h = harness()
    h.cjoin("a", topics=[], regex="orders-.*")
    h.take_records()
    t = h.hb("a", 1, topics=["payments"], regex="", owned=h.owned("a"))
    recs = h.take_records()
    assert RegularExpressionRecord("g", "orders-.*", tombstone=True) in recs and epochs(recs) == [2]
    assert h.group["g"].members["a"].subscribed_topic_regex is None
    assert h.responses[t]["member_epoch"] in (1, 2)


def test_librdkafkas_empty_regex_beside_names_is_no_regex():
    h = harness()
    t = h.hb("a", 0, topics=["payments"], regex="")
    assert err(h, t) == 0 and h.assignment_of(t) == {"payments": [0, 1]}
    assert regex_records(h.take_records()) == [] and h.group["g"].members["a"].subscribed_topic_regex is None


def test_a_regex_matching_nothing_yet_joins_with_nothing_then_gets_the_topic():
    h = harness()
    t = h.hb("a", 0, topics=[], regex="audit-.*")
    assert err(h, t) == 0 and h.assignment_of(t) == {}
    assert [r.topics for r in regex_records(h.take_records())] == [()]
    h.topics.create("audit-log", 1)
    h.advance(REFRESH_MIN_INTERVAL_MS + 1)
    t = h.hb("a", 1, owned={})
    assert h.assignment_of(t) == {"audit-log": [0]} and h.responses[t]["member_epoch"] == 2


def test_describe_shows_the_members_regex():
    h = harness()
    h.cjoin("a", topics=[], regex="orders-.*")
    t = h.describe_consumer("g")
    (m,) = h.responses[t]["groups"][0]["members"]
    assert m["subscribed_topic_regex"] == "orders-.*" and m["subscribed_topic_names"] == []


def test_a_failover_reloads_the_resolutions_and_resolves_again_at_the_first_chance():
    """The loaded group has its resolutions (from the type-16 records); the new shard has not resolved the
    group in this process, so it resolves again once 10 s have passed since the last resolution - with no bump
    when nothing changed."""
    h = harness()
    h.cjoin("a", topics=[], regex="orders-.*")
    live = h.group["g"].copy()
    h2 = h.failover()
    assert h2.group["g"] == live and h2.group["g"].regexes == live.regexes
    h2.take_records()
    h2.advance(REFRESH_MIN_INTERVAL_MS + 1)
    t = h2.hb("a", 1, owned={"orders-eu": [0, 1], "orders-us": [0, 1]})
    assert err(h2, t) == 0 and h2.responses[t]["member_epoch"] == 1
    recs = h2.take_records()
    assert [r.topics for r in regex_records(recs)] == [("orders-eu", "orders-us")] and epochs(recs) == []


def test_added_partitions_bump_through_the_hash_and_resolve_nothing_again():
    """Only a created or deleted topic can change what an expression matches: partitions added to a matching
    topic make the metadata hash's one bump, with no new resolution."""
    h = harness()
    h.cjoin("a", topics=[], regex="orders-.*")
    h.advance(REFRESH_MIN_INTERVAL_MS + 1)
    h.take_records()
    n = regexes(h).resolutions
    h.topics.add_partitions("orders-eu", 4)
    t = h.hb("a", 1, owned=h.owned("a"))
    recs = h.take_records()
    assert regex_records(recs) == [] and epochs(recs) == [2] and regexes(h).resolutions == n
    assert h.assignment_of(t)["orders-eu"] == [0, 1, 2, 3]
