"""broker/retention.py retained_start: Kafka's retention rules over a log's segments (oldest first, whole
segments, retention.ms before retention.bytes, never past the high watermark)."""
from tenure.broker.retention import retained_start

# (base offset, next offset, bytes, max timestamp)
SPANS = [(0, 10, 1000, 100), (10, 20, 1000, 200), (20, 30, 1000, 300)]


def test_retention_ms_removes_the_segments_whose_newest_record_is_older():
    assert retained_start(SPANS, now_ms=1150, retention_ms=1000, retention_bytes=-1, high_watermark=30) == 10
    assert retained_start(SPANS, now_ms=1250, retention_ms=1000, retention_bytes=-1, high_watermark=30) == 20
    assert retained_start(SPANS, now_ms=5000, retention_ms=1000, retention_bytes=-1, high_watermark=30) == 30
    assert retained_start(SPANS, now_ms=1050, retention_ms=1000, retention_bytes=-1, high_watermark=30) is None
    # a segment without timestamps is kept, and so is everything after it
    assert retained_start([(0, 5, 10, -1), *SPANS], 9999, 1000, -1, 30) is None


def test_retention_bytes_removes_the_oldest_while_the_rest_is_at_least_that_big():
    assert retained_start(SPANS, 0, -1, 2000, 30) == 10          # 3000 - 1000 >= 2000
    assert retained_start(SPANS, 0, -1, 1999, 30) == 10          # another would leave 1000 < 1999
    assert retained_start(SPANS, 0, -1, 1000, 30) == 20
    assert retained_start(SPANS, 0, -1, 0, 30) == 30
    assert retained_start(SPANS, 0, -1, 3000, 30) is None


def test_never_past_the_high_watermark_and_both_limits_apply_in_turn():
    assert retained_start(SPANS, 5000, 1000, -1, high_watermark=25) == 20
    assert retained_start(SPANS, 1150, 1000, 1000, 30) == 20       # ms takes the first, bytes the second
    assert retained_start([], 5000, 0, 0, 0) is None
