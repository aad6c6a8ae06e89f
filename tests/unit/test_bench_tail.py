"""The tail suite's pure parts: pooled percentiles, block-bootstrap intervals and verdicts
(bench/bootstrap.py), the hiccup meters' summaries (bench/hiccup.py), and the suite's rows on a
synthetic run (bench/tail.py ``evaluate``)."""

import concurrent.futures

import numpy as np
import pytest

from hedgefs.bench import bootstrap, hiccup, tail


@pytest.fixture(autouse=True)
def fewer_resamples(monkeypatch):
    monkeypatch.setattr(bootstrap, "ITERATIONS", 400)   # enough for these checks, a fifth of the time


def rounds(rng, n, scale, size=2000):
    """n rounds of exponential latencies (seconds) with mean ``scale``, a round-level wobble each."""
    return [rng.exponential(scale * rng.uniform(0.9, 1.1), size) for _ in range(n)]


def test_pooled_percentile_is_over_every_round_together():
    a = [np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([])]
    assert bootstrap.pooled(a, 50) == 3.0 and bootstrap.pooled(a, 100) == 4.0
    assert bootstrap.pooled([np.array([])], 99) is None


def test_a_ratio_of_equal_arms_is_one_and_its_interval_holds_it():
    rng = np.random.default_rng(1)
    base = rounds(rng, 20, 0.002)
    iv = bootstrap.ratio_of_percentiles(base, [r.copy() for r in base], 99)
    assert iv.point == 1.0 and iv.low <= 1.0 <= iv.high


def test_a_real_difference_is_resolved_and_a_small_one_is_not():
    rng = np.random.default_rng(2)
    fast, slow, same = rounds(rng, 20, 0.002), rounds(rng, 20, 0.004), rounds(rng, 20, 0.002)
    twice = bootstrap.ratio_of_percentiles(slow, fast, 99)
    assert 1.8 < twice.low <= twice.point <= twice.high < 2.2
    assert bootstrap.verdict(twice, 1.2, 1.1) == "missed" and bootstrap.verdict(twice, 2.5) == "met"
    close = bootstrap.ratio_of_percentiles(same, fast, 99)   # the same distribution, drawn again
    assert bootstrap.verdict(close, 1.0) == "unresolved"


def test_resampling_is_by_round_so_one_stalled_round_widens_the_interval():
    rng = np.random.default_rng(3)
    a, b = rounds(rng, 20, 0.002), rounds(rng, 20, 0.002)
    steady = bootstrap.ratio_of_percentiles(a, b, 99)
    a[7] = a[7] + 0.050   # one round where the host stalled under arm a
    stalled = bootstrap.ratio_of_percentiles(a, b, 99)
    assert stalled.high - stalled.low > 3 * (steady.high - steady.low)


def test_verdicts():
    iv = bootstrap.Interval
    assert bootstrap.verdict(iv(1.05, 1.0, 1.15), 1.2, 1.1) == "met"
    assert bootstrap.verdict(iv(1.15, 1.12, 1.19), 1.2, 1.1) == "missed"     # within 1.2, surely above 1.1
    assert bootstrap.verdict(iv(1.15, 1.05, 1.25), 1.2, 1.1) == "unresolved"
    assert bootstrap.verdict(iv(1.5, 1.3, 1.7), 1.2) == "missed"
    assert bootstrap.verdict(iv(None, None, None), 1.2) == "unresolved"


def test_a_ratio_of_sums_by_round():
    iv = bootstrap.ratio_of_sums([1, 2, 3], [100, 100, 100], 100.0)
    assert iv.point == pytest.approx(2.0) and 1.0 <= iv.low <= iv.high <= 3.0
    assert bootstrap.scaled(iv, 2.0).point == pytest.approx(1.0)


def test_hiccup_p999_is_exact_above_what_is_recorded_and_a_floor_below():
    assert hiccup.summarize([30.0, 12.0, 1.0], 1000) == {"samples": 1000, "p999_ms": 12.0, "max_ms": 30.0}
    assert hiccup.summarize([30.0], 1000)["p999_ms"] == hiccup.RECORD_MS   # the 2nd latest was under it
    assert hiccup.summarize([], 0)["p999_ms"] is None


def test_the_rows_of_a_synthetic_run_say_met_missed_and_why():
    """S twice O under the fault (missed), H as H0 (met), S far under S0 (met), and the extra reads
    over their floor as the arms counted them."""
    rng = np.random.default_rng(4)
    arms = []
    for rnd in range(10):
        for name, fault, scale, extra in (("H0", None, 0.002, 0), ("H", None, 0.002, 0), ("S0", "slow-500ms", 0.2, 0),
                                          ("S", "slow-500ms", 0.008, 60), ("O", "slow-500ms", 0.004, 55)):
            arm = tail.Arm(name, "RS-6-3-1024k", fault, rnd)
            arm.latencies = list(rng.exponential(scale, 1500))
            arm.needed, arm.unit_reads = 1000, 1000 + extra
            arms.append(arm)
    floors = {("RS-6-3-1024k", "slow-500ms"): {"share": 0.12, "floor_pct": 6.0}}
    rows = tail.evaluate(arms, 10, ["RS-6-3-1024k"], [tail.FAULTS[0]], floors, set())
    by = {r["measure"]: r for r in rows}
    assert by["S vs O"]["verdict"] == "missed" and by["S vs O"]["percentile"] == 99
    assert by["S vs S0"]["verdict"] == "met"
    assert by["H vs H0"]["verdict"] in ("met", "unresolved") and by["extra unit reads in H (%)"]["verdict"] == "met"
    assert by["extra unit reads in S / floor"]["interval"]["point"] == pytest.approx(1.0)


class FakeCluster:
    """The bench cluster as the suite drives it: one faulty DataNode per file, and which are faulty now."""

    def __init__(self, victims):
        self.victims_of, self.faulty = victims, set()
        self.cluster = self

    def victims(self, n, path):
        return [self.victims_of[path]]

    def set_faults(self, datanode, config):
        (self.faulty.add if config is not None else self.faulty.discard)(datanode)

    def freeze(self, datanode):
        self.faulty.add(datanode)

    def thaw(self, datanode):
        self.faulty.discard(datanode)

    def fs(self, config):
        return FakeClient(self)


class FakeClient:
    """A client that notes every DataNode that was faulty while it read: what its breaker would see."""

    def __init__(self, bc):
        self.bc, self.saw = bc, set()
        self.metrics = self
        self.model = self

    def counter(self, name):
        return 0

    def slow_datanodes(self):
        return []

    def open(self, path):
        return FakeReader(self)


class FakeReader:
    length = 32 * tail.READ_SIZE

    def __init__(self, client):
        self.client = client

    def submit(self, offset, size, exclude):
        self.client.saw |= self.client.bc.faulty - exclude
        future = concurrent.futures.Future()
        future.set_result(b"")
        return future


class NoHiccups:
    def window(self, start, end):
        return {"samples": 1, "p999_ms": 0.0, "max_ms": 0.0}


def test_each_hedging_client_meets_one_faulty_datanode_so_its_breaker_never_sees_a_broad_slowdown():
    """Blocks of the three files' faults follow each other within seconds; a hedging client shared
    by the files met three faulty DataNodes within a minute and tripped its breaker (3 impaired in
    60 s), leaving S unhedged for 30 s at a time. One client set per file meets one."""
    victims = {tail.path_of(p): f"dn{i + 1}" for i, p in enumerate(tail.POLICIES)}
    bc = FakeCluster(victims)
    clients = tail.client_set(bc, list(tail.POLICIES))
    readers = {key: fs.open(tail.path_of(key[1])) for key, fs in clients.items()}
    suite = tail.Suite(tail.Settings(rounds=2, arm_s=0.02, warmup_s=0.0), list(tail.POLICIES), list(tail.FAULTS),
                       say=lambda line: None)
    suite.run(bc, clients, readers, 500.0, {"client": NoHiccups()})
    assert {a.name for a in suite.arms} == {"H0", "H", "S0", "S", "O"}
    for (mode, policy), client in clients.items():
        expected = set() if mode == "oracle" else {victims[tail.path_of(policy)]}
        assert client.saw == expected, (mode, policy)


def test_a_faulty_arm_is_measured_from_its_first_read_and_a_healthy_one_after_its_warm_up():
    """Each arm's client meets the fault afresh at its start; its reads before it knows are what
    hedging is for (the full REPLICATE-3 run of 2026-12-06 discarded them: S0 never waited out the
    +500 ms in a measured read)."""
    victims = {tail.path_of(p): "dn1" for p in tail.POLICIES}
    bc = FakeCluster(victims)
    clients = tail.client_set(bc, ["REPLICATE-3"])
    readers = {key: fs.open(tail.path_of(key[1])) for key, fs in clients.items()}
    settings = tail.Settings(rounds=1, arm_s=0.04, warmup_s=0.02)
    suite = tail.Suite(settings, ["REPLICATE-3"], list(tail.FAULTS), say=lambda line: None)
    suite.run(bc, clients, readers, 500.0, {"client": NoHiccups()})
    for arm in suite.arms:
        measured = arm.window[1] - arm.window[0]
        expected = settings.arm_s - (settings.warmup_s if arm.fault is None else 0.0)
        assert measured == pytest.approx(expected, abs=1e-6), (arm.name, arm.fault)


class VirtualTime:
    """``time`` for ``tail.drain``: each sleep advances the clock and lets the arm's reads end."""

    def __init__(self, arm, finish_per_sleep, stuck):
        self.now, self.arm, self.finish, self.stuck = 0.0, arm, finish_per_sleep, stuck

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        self.arm.outstanding = max(self.stuck, self.arm.outstanding - self.finish)


def test_the_next_arm_waits_for_a_queue_to_drain_but_not_for_reads_stuck_on_the_fault(monkeypatch):
    """Round 14 of the full REPLICATE-3 run: H's client ended hundreds of reads behind and H0
    began on the same core while they ran (H0 p50 315 ms, its worst round by 10 x). A queue goes down: the
    next arm waits for it; reads stuck on a frozen DataNode do not: it does not wait for them."""
    queued = tail.Arm("H", "REPLICATE-3", None, 0)
    queued.outstanding = 780
    clock = VirtualTime(queued, finish_per_sleep=5, stuck=0)
    monkeypatch.setattr(tail, "time", clock)
    waited = tail.drain(queued, 718.0)
    assert queued.outstanding <= 718.0 * tail.DRAIN_LEFT_S and waited > 1.0

    stuck = tail.Arm("S0", "REPLICATE-3", "frozen", 0)
    stuck.outstanding = 60
    clock = VirtualTime(stuck, finish_per_sleep=5, stuck=40)
    monkeypatch.setattr(tail, "time", clock)
    waited = tail.drain(stuck, 718.0)
    assert stuck.outstanding == 40 and waited < 2 * tail.DRAIN_STUCK_S


def test_an_arm_whose_client_fell_behind_flags_its_round():
    """Reads outstanding at an arm's end that then drained were queued in its client; reads stuck
    on a frozen DataNode (still outstanding after the drain) are the fault's, not a queue."""
    def arm(name, rnd, backlog, stuck=0):
        a = tail.Arm(name, "REPLICATE-3", None if name.startswith("H") else "frozen", rnd)
        a.backlog, a.stuck = backlog, stuck
        a.hiccups = {"client": {"p999_ms": 2.0}, "servers": {"p999_ms": 5.0}}
        return a
    arms = [arm("H", 0, 3), arm("H0", 0, 0), arm("S0", 0, 400, stuck=390), arm("H", 1, 660), arm("H0", 1, 2)]
    flags, bounds = tail.flag_rounds(arms, 718.0)
    assert set(flags) == {1} and "client behind: 660 reads queued" in flags[1][0]
    assert bounds["behind_reads"] == round(tail.BEHIND_S * 718.0)
    assert tail.flag_rounds(arms)[0] == {}   # without the rate: hiccups only
