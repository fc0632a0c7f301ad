"""Range tokens and their commit-metadata text, against a model: the set of owed offsets."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenure.catchup import ranges as R


def owed(tokens) -> set[int]:
    return {o for t in tokens for o in range(t.next, t.hi)}


def test_the_seeds_two_crashes():
    tokens = R.add([], 70, 120)
    assert [str(t) for t in tokens] == ["70-120:70"]
    tokens = R.processed_below(tokens, 85)                 # the secondary processed 70..84
    tokens = R.add(tokens, 140, 190)                       # crash at 170, last commit 140, end 190
    text = R.encode(tokens, "worker-1")
    assert text == "tenure.catchup/1 instance=worker-1 ranges=70-120:85,140-190:140"
    assert [str(t) for t in R.decode(text)] == ["70-120:85", "140-190:140"]
    assert R.low(tokens) == 85
    assert R.owed_at(tokens, 120) and R.owed_at(tokens, 141) and not R.owed_at(tokens, 130)
    assert R.decode(R.encode([], "w")) == [] and R.low([]) is None


def test_a_crash_before_anything_was_committed_reopens_one_token():
    tokens = R.processed_below(R.add([], 70, 120), 80)
    assert [str(t) for t in R.add(tokens, 70, 130)] == ["70-130:70"]


def test_a_checkpoint_as_the_log_holds_it_ends_with_the_c_strings_nul():
    """confluent-kafka's commits carry the C string's terminator: the audit reads them from the log so."""
    text = R.encode(R.add([], 70, 120), "w")
    assert R.decode(text + "\x00") == R.decode(text) == [R.Token(70, 120, 70)]
    assert R.decode(R.encode([], "w") + "\x00") == []
    assert R.history([(1, text + "\x00"), (2, R.encode([], "w") + "\x00")]) == [R.TokenHistory(70, 120, 1, 2)]


@pytest.mark.parametrize("text", [None, "", "plain metadata", "tenure.catchup/1 running instance=w"])
def test_not_a_checkpoint(text):
    assert R.decode(text) is None


@pytest.mark.parametrize("text", ["tenure.catchup/1 ranges=70-120", "tenure.catchup/1 ranges=70-120:130",
                                  "tenure.catchup/1 ranges=a-b:c"])
def test_a_damaged_checkpoint_is_an_error_not_an_empty_one(text):
    with pytest.raises(ValueError, match="catch-up checkpoint"):
        R.decode(text)


def test_markers():
    assert R.is_crash_marker(R.marker(R.RUNNING, "w1"))
    assert not R.is_crash_marker(R.marker(R.CLEAN, "w1"))
    assert not R.is_crash_marker("") and not R.is_crash_marker(None) and not R.is_crash_marker("app data")


ops = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, 300), st.integers(1, 60)),
    st.tuples(st.just("commit"), st.integers(0, 400), st.just(0))), max_size=25)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_tokens_follow_the_model(steps):
    tokens, model = [], set()
    for op, a, b in steps:
        if op == "add":
            tokens = R.add(tokens, a, a + b)
            model |= set(range(a, a + b))
        else:
            tokens = R.processed_below(tokens, a)
            model = {o for o in model if o >= a}
        assert owed(tokens) == model
        assert all(t.lo <= t.next < t.hi for t in tokens)
        assert all(x.hi < y.next for x, y in zip(tokens, tokens[1:]))     # disjoint, sorted, not touching
        assert R.decode(R.encode(tokens, "w")) == tokens
        assert R.low(tokens) == (min(model) if model else None)


def test_the_history_of_tokens_for_an_audit():
    w = "w1"
    commits = [
        (1000, R.encode(R.add([], 70, 120), w)),                                  # crash: 70-120 opens
        (1100, "some other metadata"),                                            # not a checkpoint
        (1200, R.encode([R.Token(70, 120, 90)], w)),                              # progress
        (1300, R.encode([R.Token(70, 120, 90), R.Token(140, 190, 140)], w)),      # a second crash
        (1400, R.encode([R.Token(140, 190, 150)], w)),                            # 70-120 fully processed
        (1500, R.encode([R.Token(140, 200, 150)], w)),                            # a recurrence merges it
    ]
    h = R.history(commits)
    assert [(x.lo, x.hi, x.opened_ms, x.closed_ms, x.merged_into, x.owed) for x in h] == [
        (70, 120, 1000, 1400, None, None),
        (140, 190, 1300, 1500, (140, 200), None),
        (140, 200, 1500, None, None, (150, 200)),      # still open at the end: [150, 200) never committed
    ]
