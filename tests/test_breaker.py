"""The circuit breaker with a fake clock: each key's effect exactly at its boundary."""

import logging

import pytest

from hedgefs.client.breaker import ALLOWED, REFUSED_BREAKER, REFUSED_RATE, CircuitBreaker
from hedgefs.client.config import HedgeConfig


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance_ms(self, ms: float) -> None:
        self.now += ms / 1000.0


@pytest.fixture
def clock():
    return FakeClock()


def breaker(clock, **overrides) -> CircuitBreaker:
    return CircuitBreaker(HedgeConfig(**overrides), clock=clock)


def test_defaults_are_hubspots():
    c = HedgeConfig()
    assert (c.threshold_ms, c.max_impaired_nodes, c.impaired_window_ms, c.cooldown_ms, c.max_per_second) == (
        250, 2, 60_000, 30_000, 200)


def test_two_impaired_datanodes_still_allow_hedges(clock):
    b = breaker(clock)
    b.record_slow("dn1")
    b.record_slow("dn2")
    b.record_slow("dn1")  # the same DataNode again is not a new one
    assert b.try_hedge() == ALLOWED
    assert b.trips == 0


def test_third_distinct_impaired_datanode_opens_the_breaker(clock, caplog):
    b = breaker(clock)
    with caplog.at_level(logging.WARNING, logger="hedgefs.client.breaker"):
        for dn in ("dn1", "dn2", "dn3"):
            b.record_slow(dn)
    assert b.try_hedge() == REFUSED_BREAKER
    assert b.trips == 1
    opened = [r.getMessage() for r in caplog.records if "OFF" in r.getMessage()]
    assert len(opened) == 1 and all(dn in opened[0] for dn in ("dn1", "dn2", "dn3"))


def test_impaired_datanodes_outside_the_window_do_not_count(clock):
    b = breaker(clock)
    b.record_slow("dn1")
    clock.advance_ms(30_000)
    b.record_slow("dn2")
    clock.advance_ms(30_000)  # dn1 is now exactly 60 s old: out of the window
    b.record_slow("dn3")
    assert b.try_hedge() == ALLOWED
    # Had dn1 been 1 ms younger, it would have counted.
    b2 = breaker(clock)
    b2.record_slow("dn1")
    clock.advance_ms(59_999)
    b2.record_slow("dn2")
    b2.record_slow("dn3")
    assert b2.try_hedge() == REFUSED_BREAKER


def test_cooldown_ends_exactly_after_cooldown_ms(clock, caplog):
    b = breaker(clock)
    for dn in ("dn1", "dn2", "dn3"):
        b.record_slow(dn)
    clock.advance_ms(29_999)
    assert b.try_hedge() == REFUSED_BREAKER
    with caplog.at_level(logging.WARNING, logger="hedgefs.client.breaker"):
        clock.advance_ms(1)
        assert b.try_hedge() == ALLOWED
    closed = [r.getMessage() for r in caplog.records if "ON again" in r.getMessage()]
    assert len(closed) == 1 and "dn3" in closed[0]


def test_after_cooldown_the_window_starts_afresh(clock):
    b = breaker(clock)
    for dn in ("dn1", "dn2", "dn3"):
        b.record_slow(dn)
    clock.advance_ms(30_000)
    b.record_slow("dn4")
    b.record_slow("dn5")
    assert b.try_hedge() == ALLOWED
    b.record_slow("dn6")
    assert b.try_hedge() == REFUSED_BREAKER
    assert b.trips == 2


def test_rate_cap_refuses_the_201st_hedge_in_a_second(clock):
    b = breaker(clock)
    assert [b.try_hedge() for _ in range(200)] == [ALLOWED] * 200
    assert b.try_hedge() == REFUSED_RATE
    clock.advance_ms(999)
    assert b.try_hedge() == REFUSED_RATE
    clock.advance_ms(1)
    assert b.try_hedge() == ALLOWED


def test_rate_cap_holds_in_every_sliding_second(clock):
    b = breaker(clock, max_per_second=10)
    started = []
    for step in range(400):  # one attempt every 5 ms for 2 s
        if b.try_hedge() == ALLOWED:
            started.append(clock.now)
        clock.advance_ms(5)
    for t in started:
        assert sum(1 for u in started if t <= u < t + 1.0) <= 10
    assert len(started) == 20


def test_max_impaired_zero_trips_on_the_first(clock):
    b = breaker(clock, max_impaired_nodes=0)
    b.record_slow("dn1")
    assert b.try_hedge() == REFUSED_BREAKER


def test_config_flags_win_over_environment():
    env = {"HEDGEFS_HEDGE_THRESHOLD_MS": "100", "HEDGEFS_HEDGE_MAX_PER_SECOND": "7", "HEDGEFS_HEDGE_ENABLED": "false"}
    c = HedgeConfig.from_sources({"threshold_ms": 50.0}, env)
    assert (c.threshold_ms, c.max_per_second, c.enabled) == (50.0, 7, False)
    assert HedgeConfig.from_sources({}, {}).threshold_ms == 250
    with pytest.raises(ValueError, match="HEDGEFS_HEDGE_COOLDOWN_MS"):
        HedgeConfig.from_sources({}, {"HEDGEFS_HEDGE_COOLDOWN_MS": "soon"})
    with pytest.raises(ValueError):
        HedgeConfig.from_sources({"threshold_ms": 0.0}, {})
