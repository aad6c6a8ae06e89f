"""distcp's pure parts: segments, job names, the hedge budget and the auto hedge delay."""

import pytest

from hedgefs.distcp.plan import HedgeDelay, Segment, hedge_budget, job_id, segments
from hedgefs.distcp.sides import Location, parse_location
from hedgefs.client.errors import UsageError


@pytest.mark.parametrize("length,size,expected", [
    (0, 10, [Segment(0, 0, 0)]),
    (1, 10, [Segment(0, 0, 1)]),
    (10, 10, [Segment(0, 0, 10)]),
    (11, 10, [Segment(0, 0, 10), Segment(1, 10, 1)]),
    (30, 10, [Segment(0, 0, 10), Segment(1, 10, 10), Segment(2, 20, 10)]),
])
def test_segments_cover_the_file_in_whole_pieces(length, size, expected):
    assert segments(length, size) == expected


def test_the_same_arguments_name_the_same_job():
    assert job_id(["a", "b"], "c") == job_id(["a", "b"], "c")
    assert job_id(["a", "b"], "c") != job_id(["b", "a"], "c")
    assert job_id(["a"], "c") != job_id(["a"], "c", "update")


@pytest.mark.parametrize("percent,planned,budget", [(10, 0, 0), (10, 9, 0), (10, 10, 1), (5, 200, 10), (100, 3, 3),
                                                    (0, 1000, 0)])
def test_hedge_budget_is_at_most_the_percentage(percent, planned, budget):
    assert hedge_budget(percent, planned) == budget


def test_a_fixed_delay_is_the_delay():
    assert HedgeDelay(2.0).delay_s(123) == 2.0


def test_auto_waits_for_samples_then_uses_a_high_quantile_of_comparable_segments():
    delay = HedgeDelay(None)
    for _ in range(HedgeDelay.MIN_SAMPLES - 1):
        delay.record(1000, 1.0)
    assert delay.delay_s(1000) is None              # too few samples: no hedge yet
    delay.record(1000, 1.0)
    assert delay.delay_s(1000) == pytest.approx(1.5)
    for _ in range(20):
        delay.record(10, 0.01)                      # many small segments do not lower a big one's delay
    assert delay.delay_s(1000) == pytest.approx(1.5)
    assert delay.delay_s(10) == pytest.approx(1.5)  # a small segment is compared with all above half its size
    for t in range(1, 96):
        delay.record(2000, t / 100)
    # comparable to 2000 bytes: the 95 new samples and the five 1.0 s ones; their p95 is 0.95 s
    assert delay.delay_s(2000) == pytest.approx(1.5 * 0.95)


@pytest.mark.parametrize("text,expected", [
    ("hedgefs://10.0.0.1:8020/data/x", Location("10.0.0.1:8020", "/data/x")),
    ("hedgefs://h:1/", Location("h:1", "/")),
    ("hedgefs:///data/", Location("nn:9", "/data")),
    ("/data", Location("nn:9", "/data")),
    ("hedgefs://nohost/x", Location("nohost:8020", "/x")),      # HDFS's default port
    ("hedgefs://nn:9//a//b/", Location("nn:9", "/a/b")),
    ("file:///tmp/x", Location(None, "/tmp/x")),
])
def test_locations(text, expected):
    assert parse_location(text, "nn:9") == expected


@pytest.mark.parametrize("text", ["s3://bucket/key", "hedgefs://nohost:port/x", "file://relative", ""])
def test_bad_locations_are_usage_errors(text):
    with pytest.raises(UsageError):
        parse_location(text, "nn:9")
