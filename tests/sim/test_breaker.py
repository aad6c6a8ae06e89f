"""The circuit breaker with a fake clock: each key's effect exactly at its boundary.

Fixed mode (a number for the threshold) is HubSpot's breaker as it was; adaptive mode takes its
impaired DataNodes from the latency model and spends an extra-read budget.
"""

import logging

import pytest

from hedgefs.client.breaker import ALLOWED, BURST, REFUSED_BREAKER, REFUSED_RATE, BudgetBreaker, FixedBreaker
from hedgefs.client.config import HedgeConfig, parse_threshold
from nn_support import FakeClock


@pytest.fixture
def clock():
    return FakeClock(start=1000.0)


def breaker(clock, **overrides) -> FixedBreaker:
    """A fixed-threshold breaker (today's rules)."""
    return FixedBreaker(HedgeConfig(**{"threshold_ms": 250.0, **overrides}), clock=clock)


def test_defaults_are_hubspots_with_the_adaptive_threshold():
    c = HedgeConfig()
    assert (c.threshold_ms, c.max_impaired_nodes, c.impaired_window_ms, c.cooldown_ms, c.max_per_second) == (
        None, 2, 60_000, 30_000, 200)
    assert c.adaptive and c.budget_pct == 5.0 and c.read_extra == 0
    assert not HedgeConfig(threshold_ms=250).adaptive


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
    clock.advance(30.0)
    b.record_slow("dn2")
    clock.advance(30.0)  # dn1 is now exactly 60 s old: out of the window
    b.record_slow("dn3")
    assert b.try_hedge() == ALLOWED
    # Had dn1 been 1 ms younger, it would have counted.
    b2 = breaker(clock)
    b2.record_slow("dn1")
    clock.advance(59.999)
    b2.record_slow("dn2")
    b2.record_slow("dn3")
    assert b2.try_hedge() == REFUSED_BREAKER


def test_cooldown_ends_exactly_after_cooldown_ms(clock, caplog):
    b = breaker(clock)
    for dn in ("dn1", "dn2", "dn3"):
        b.record_slow(dn)
    clock.advance(29.999)
    assert b.try_hedge() == REFUSED_BREAKER
    with caplog.at_level(logging.WARNING, logger="hedgefs.client.breaker"):
        clock.advance(0.001)
        assert b.try_hedge() == ALLOWED
    closed = [r.getMessage() for r in caplog.records if "ON again" in r.getMessage()]
    assert len(closed) == 1 and "dn3" in closed[0]


def test_after_cooldown_the_window_starts_afresh(clock):
    b = breaker(clock)
    for dn in ("dn1", "dn2", "dn3"):
        b.record_slow(dn)
    clock.advance(30.0)
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
    clock.advance(0.999)
    assert b.try_hedge() == REFUSED_RATE
    clock.advance(0.001)
    assert b.try_hedge() == ALLOWED


def test_rate_cap_holds_in_every_sliding_second(clock):
    b = breaker(clock, max_per_second=10)
    started = []
    for step in range(400):  # one attempt every 5 ms for 2 s
        if b.try_hedge() == ALLOWED:
            started.append(clock.now)
        clock.advance(0.005)
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
    assert HedgeConfig.from_sources({}, {}).threshold_ms is None
    assert HedgeConfig.from_sources({}, {"HEDGEFS_HEDGE_THRESHOLD_MS": "auto"}).adaptive
    assert HedgeConfig.from_sources({}, {"HEDGEFS_HEDGE_THRESHOLD_MS": "250"}).threshold_ms == 250
    assert (parse_threshold("auto"), parse_threshold(" 40 ")) == (None, 40.0)
    with pytest.raises(ValueError, match="--hedge-threshold-ms"):
        parse_threshold("fast")
    with pytest.raises(ValueError):
        HedgeConfig.from_sources({"read_extra": -1}, {})
    with pytest.raises(ValueError, match="HEDGEFS_HEDGE_COOLDOWN_MS"):
        HedgeConfig.from_sources({}, {"HEDGEFS_HEDGE_COOLDOWN_MS": "soon"})
    with pytest.raises(ValueError):
        HedgeConfig.from_sources({"threshold_ms": 0.0}, {})


# ---------------------------------------------------------------------------- adaptive mode

class SlowSet:
    """Stands in for the latency model: the breaker only asks which DataNodes are slow, and since when."""

    def __init__(self, clock):
        self._clock = clock
        self.since: dict[str, float] = {}

    def mark(self, *datanodes: str) -> None:
        for dn in datanodes:
            self.since.setdefault(dn, self._clock())

    def clear(self, *datanodes: str) -> None:
        for dn in datanodes:
            self.since.pop(dn, None)

    def slow_datanodes(self, for_at_least: float = 0.0) -> frozenset[str]:
        return frozenset(dn for dn, t in self.since.items() if self._clock() - t >= for_at_least)


def adaptive(clock, model, **overrides) -> BudgetBreaker:
    return BudgetBreaker(HedgeConfig(**overrides), model, clock=clock)


def test_adaptive_impaired_datanodes_are_the_ones_the_model_calls_slow_for_a_second(clock):
    model = SlowSet(clock)
    b = adaptive(clock, model)   # (it hears of no read crossing a threshold: no record_slow)
    assert b.try_hedge() == ALLOWED and b.allows_read_around()
    model.mark("dn1", "dn2")
    clock.advance(1.0)
    assert b.try_hedge() == ALLOWED and b.allows_read_around() and b.impaired == ["dn1", "dn2"]
    model.mark("dn3")
    assert not b.allows_read_around()     # 3 slow at once: nobody is read around ...
    assert b.try_hedge() == ALLOWED       # ... but dn3 is not impaired yet: no trip
    clock.advance(0.999)
    assert b.trips == 0 and b.try_hedge() == ALLOWED
    clock.advance(0.001)
    assert b.try_hedge() == REFUSED_BREAKER and b.trips == 1 and b.try_extra() == REFUSED_BREAKER


def test_a_moments_slowness_of_three_datanodes_trips_nothing(clock):
    model = SlowSet(clock)
    b = adaptive(clock, model)
    model.mark("dn1", "dn2", "dn3")
    clock.advance(0.5)
    assert not b.allows_read_around()
    model.clear("dn1", "dn2", "dn3")
    assert b.allows_read_around() and b.try_hedge() == ALLOWED and b.trips == 0


def test_adaptive_breaker_opens_again_after_cooldown_while_three_are_still_slow(clock):
    model = SlowSet(clock)
    b = adaptive(clock, model)
    model.mark("dn1", "dn2", "dn3")
    clock.advance(1.0)
    assert b.is_open
    clock.advance(30.0)
    assert b.is_open and b.trips == 2     # still slow: the first question after the cooldown re-trips
    model.clear("dn2", "dn3")
    clock.advance(30.0)
    assert not b.is_open and b.trips == 2


def test_budget_refuses_extra_reads_beyond_5_percent_plus_the_burst(clock):
    b = adaptive(clock, SlowSet(clock))
    assert [b.try_extra(1) for _ in range(BURST)] == [ALLOWED] * BURST   # the burst
    assert b.try_extra(1) == REFUSED_RATE
    b.earn(100)                      # 100 unit reads needed earn 5 extra ones
    assert [b.try_extra(1) for _ in range(5)] == [ALLOWED] * 5
    assert b.try_extra(1) == REFUSED_RATE
    b.earn(140)                      # 7: exactly one hedge of a one-cell read (k + 1 sources)
    assert b.try_hedge(cost=8) == REFUSED_RATE and b.try_hedge(cost=7) == ALLOWED
    b.earn(10 ** 6)
    assert [b.try_extra(1) for _ in range(BURST)] == [ALLOWED] * BURST and b.try_extra(1) == REFUSED_RATE


def test_budget_over_a_long_run_is_the_share_of_reads(clock):
    b = adaptive(clock, SlowSet(clock), budget_pct=2.0)
    spent = 0
    for _ in range(10_000):   # one unit read needed, one extra asked for, every time
        b.earn(1)
        spent += b.try_extra(1) == ALLOWED
    assert BURST + 199 <= spent <= BURST + 200   # the first earn finds the bucket full


def test_budget_zero_allows_only_the_burst_and_the_cap_still_holds(clock):
    b = adaptive(clock, SlowSet(clock), budget_pct=0.0, max_per_second=3)
    b.earn(10 ** 6)
    assert [b.try_hedge() for _ in range(4)] == [ALLOWED] * 3 + [REFUSED_RATE]


def test_fixed_mode_has_no_budget_and_extra_reads_are_always_allowed(clock):
    b = breaker(clock)
    assert all(b.try_extra(1) == ALLOWED for _ in range(10 * BURST))
    for dn in ("dn1", "dn2", "dn3"):
        b.record_slow(dn)
    assert b.try_extra(1) == ALLOWED   # today's rebuilds brought in sources whatever the breaker said
