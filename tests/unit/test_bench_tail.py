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

    # review of tail46 F4: a run whose every round is flagged decides no latency row (the quick run
    # printed MET / MISSED with every round flagged); its counts still stand
    rows = tail.evaluate(arms, 10, ["RS-6-3-1024k"], [tail.FAULTS[0]], floors, set(range(10)))
    assert {r["measure"]: r["verdict"] for r in rows} == {
        "H vs H0": "void", "S vs O": "void", "S vs S0": "void", "extra unit reads in H (%)": "met",
        "extra unit reads in S / floor": by["extra unit reads in S / floor"]["verdict"]}
    partly = tail.evaluate(arms, 10, ["RS-6-3-1024k"], [tail.FAULTS[0]], floors, set(range(9)))
    assert {r["measure"]: r["verdict"] for r in partly}["S vs O"] == "missed"


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

    def snapshot(self):
        return {}

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
    """``time`` for ``tail.drain`` and ``tail.run_arm``: each sleep advances the clock (by
    ``stall`` more, once, when it passes ``stall_at``: the client's core taken away) and lets the
    arm's reads end, none while the client is stalled."""

    def __init__(self, arm=None, finish_per_sleep=0, stuck=0, stall_at=None, stall=0.0):
        self.now, self.arm, self.finish, self.stuck = 0.0, arm, finish_per_sleep, stuck
        self.stall_at, self.stall = stall_at, stall

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        if self.stall_at is not None and self.now >= self.stall_at:
            self.now += self.stall
            self.stall_at = None
            return
        if self.arm is not None:
            self.arm.outstanding = max(self.stuck, self.arm.outstanding - self.finish)


class Inflight:
    """A client's latency model as ``held_reads`` reads it: unit reads in flight per DataNode."""

    def __init__(self, arm, victim, held):
        self.arm, self.victim, self.held = arm, victim, held

    def snapshot(self):
        return {self.victim: {"inflight": min(self.held, self.arm.outstanding)}, "dn2": {"inflight": 1}}


FREEZE = next(f for f in tail.FAULTS if f.kind == "freeze")


def test_the_next_arm_waits_for_a_queue_to_drain_but_not_for_reads_stuck_on_a_frozen_datanode(monkeypatch):
    """Round 14 of the full REPLICATE-3 run: H's client ended hundreds of reads behind and H0
    began on the same core while they ran (H0 p50 315 ms, its worst round by 10 x). A queue goes down: the
    next arm waits for it; S0's reads held by a frozen DataNode (its unhedged unit reads in flight
    there) do not end before the thaw: it does not wait for them."""
    queued = tail.Arm("H", "REPLICATE-3", None, 0)
    queued.outstanding = 780
    monkeypatch.setattr(tail, "time", VirtualTime(queued, finish_per_sleep=5))
    waited = tail.drain(queued, 718.0, tail.held_reads("H", None, Inflight(queued, "dn1", 780), "dn1"))
    assert queued.outstanding <= 718.0 * tail.DRAIN_LEFT_S and waited > 1.0

    stuck = tail.Arm("S0", "REPLICATE-3", "frozen", 0)
    stuck.outstanding = 200
    monkeypatch.setattr(tail, "time", VirtualTime(stuck, finish_per_sleep=5, stuck=40))
    waited = tail.drain(stuck, 718.0, tail.held_reads("S0", FREEZE, Inflight(stuck, "dn1", 40), "dn1"))
    assert 40 < stuck.outstanding <= 40 + 718.0 * tail.DRAIN_LEFT_S and waited == pytest.approx(0.25)
    assert stuck.drain_lag < 1e-9


def test_a_hedging_arm_of_a_freeze_drains_its_reads_that_end_at_their_hedge(monkeypatch):
    """review of tail46 F3: S's reads on the frozen DataNode end at their hedge, up to the
    ceiling (0.25 s) after they went out. 400 of them, none ending for 0.3 s while this thread
    wakes on time, then 5 a tick: the next arm waits for them (before: cut at a flat 0.25 s and
    handed on, no flag; replicate3 round 6, S left 618 of 620 reads to O). The same count flat
    in S0, whose client does not hedge, is held by the freeze: S0 stops at once."""
    for name, left in (("S", 718.0 * tail.DRAIN_LEFT_S), ("S0", 400)):
        arm = tail.Arm(name, "REPLICATE-3", "frozen", 6)
        arm.outstanding = 400
        clock = VirtualTime(arm, finish_per_sleep=0)
        monkeypatch.setattr(tail, "time", clock)
        real_sleep = clock.sleep

        def sleep(seconds, clock=clock, real_sleep=real_sleep):
            real_sleep(seconds)
            clock.finish = 5 if clock.now > 0.3 else 0
        clock.sleep = sleep
        tail.drain(arm, 718.0, tail.held_reads(name, FREEZE, Inflight(arm, "dn1", 400), "dn1"))
        assert arm.outstanding <= left, name
        assert arm.drain_lag < 1e-9


def test_a_flat_count_is_not_taken_for_reads_stuck_on_the_fault_when_nothing_can_be_stuck(monkeypatch):
    """review-b T1: a healthy arm's reads that stop ending for 0.3 s (its client starved) and then
    drain: the next arm still waits for them (before: 1,813 of 1,813 counted stuck, the queue
    handed on)."""
    arm = tail.Arm("H", "REPLICATE-3", None, 0)
    arm.outstanding = 400
    clock = VirtualTime(arm, finish_per_sleep=0)
    monkeypatch.setattr(tail, "time", clock)
    real_sleep = clock.sleep

    def sleep(seconds):   # nothing ends for the first 0.3 s, then 5 reads a tick
        real_sleep(seconds)
        clock.finish = 5 if clock.now > 0.3 else 0
    clock.sleep = sleep
    tail.drain(arm, 718.0)
    assert arm.outstanding <= 718.0 * tail.DRAIN_LEFT_S


def test_a_frozen_arm_whose_client_stalls_keeps_draining_and_flags_its_round(monkeypatch):
    """A frozen S arm whose client cannot run for 0.3 s: nothing ends then, but that is the
    client's stall, not reads held by the fault: drain waits on (the reads end after it), and
    the stall, seen by the draining thread waking late, flags the round."""
    arm = tail.Arm("S", "REPLICATE-3", "frozen", 3)
    arm.outstanding = 400
    arm.hiccups = {"client": {"p999_ms": 2.0}, "servers": {"p999_ms": 5.0}}
    monkeypatch.setattr(tail, "time", VirtualTime(arm, finish_per_sleep=5, stall_at=0.05, stall=0.3))
    tail.drain(arm, 718.0, tail.held_reads("S", FREEZE, Inflight(arm, "dn1", 400), "dn1"))
    assert arm.outstanding <= 718.0 * tail.DRAIN_LEFT_S
    assert arm.drain_lag == pytest.approx(0.3)
    flags, _ = tail.flag_rounds([arm])
    assert list(flags) == [3] and "client behind: stalled 300 ms while REPLICATE-3 frozen S drained" in flags[3]


class SubmitNow:
    """A reader whose reads end as they are issued (the lag under test is the generator's)."""
    length = 64 * tail.READ_SIZE

    def submit(self, offset, size, exclude):
        future = concurrent.futures.Future()
        future.set_result(b"")
        return future


def generate(monkeypatch, clock, rnd=0, name="H"):
    import random

    arm = tail.Arm(name, "RS-6-3-1024k", None, rnd)
    arm.hiccups = {"client": {"p999_ms": 2.0}, "servers": {"p999_ms": 5.0}}
    monkeypatch.setattr(tail, "time", clock)
    tail.run_arm(arm, SubmitNow(), 1000.0, tail.Settings(arm_s=1.0, warmup_s=0.0), frozenset(), random.Random(7),
                 64, set())
    return arm


def test_dispatch_lag_is_how_late_each_read_was_issued_and_a_client_behind_flags_its_round(monkeypatch):
    """On time, every read goes out at its scheduled start (lag 0, round not flagged); a client
    whose core is taken for 150 ms in the middle of the arm issues the reads scheduled then late,
    by up to 150 ms, some after the arm's end: dispatch lag p99 over the bound flags the round.
    Latencies still count from the scheduled start."""
    steady = generate(monkeypatch, VirtualTime(), rnd=0)
    assert len(steady.lags) > 900 and max(steady.lags) < 1e-9 and steady.after_end == 0
    assert max(steady.latencies) < 1e-9

    stalled = generate(monkeypatch, VirtualTime(stall_at=0.9, stall=0.15), rnd=1)
    lag = tail.lag_summary(stalled.lags)
    assert lag["max_ms"] == pytest.approx(150, abs=2) and lag["p99_ms"] > 1000 * tail.LAG_BOUND_S
    assert lag["reads"] == len(stalled.lags) and stalled.after_end > 0
    assert max(stalled.latencies) == pytest.approx(0.15, abs=0.002)   # the lag is in the read's latency
    flags, bounds = tail.flag_rounds([steady, stalled])
    assert list(flags) == [1] and flags[1][0].startswith("client behind: dispatch lag p99")
    assert bounds["dispatch_lag_ms"] == 1000 * tail.LAG_BOUND_S


def test_the_rounds_table_names_the_arm_with_the_worst_lag():
    def arm(rnd, name, p99, stall=0.0):
        return {"round": rnd, "policy": "REPLICATE-3", "fault": None, "arm": name, "after_end": 1 if p99 > 20 else 0,
                "dispatch_lag": {"reads": 100, "p50_ms": 0.1, "p99_ms": p99, "max_ms": 2 * p99},
                "drain_lag_ms": stall, "hiccups": {"client": {"p999_ms": 3.0}}}
    table = tail.round_table([arm(0, "H", 1.0), arm(0, "H0", 2.0, stall=40.0), arm(1, "H", 90.0), arm(1, "H0", 0.5)])
    assert [(r["round"], r["lag_arm"], r["lag_p99_ms"], r["lag_max_ms"], r["after_end"], r["drain_stall_ms"])
            for r in table] == [(0, "REPLICATE-3 healthy H0", 2.0, 4.0, 0, 40.0),
                                (1, "REPLICATE-3 healthy H", 90.0, 180.0, 1, 0.0)]


class QueuedClient:
    """A client on a virtual clock that falls behind: a read counts as needed when it is submitted
    and its unit read runs (and counts) ``1 / speed`` s after the one before, as the client counts
    them (reader.py, unit_reads.py); reads that come faster queue. Also the ``time`` of the bench."""
    length = 64 * tail.READ_SIZE

    def __init__(self, speed):
        self.now, self.speed, self.free = 0.0, speed, 0.0
        self.queue: list = []
        self.counts = {"unit_reads": 0, "unit_reads_needed": 0}

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        while self.queue and max(self.free, self.queue[0][0]) + 1 / self.speed <= self.now:
            came, future = self.queue.pop(0)
            self.free = max(self.free, came) + 1 / self.speed
            self.counts["unit_reads"] += 1
            future.set_result(b"")

    def counter(self, name):
        return self.counts[name]

    def submit(self, offset, size, exclude):
        self.counts["unit_reads_needed"] += 1
        future = concurrent.futures.Future()
        self.queue.append((self.now, future))
        return future


def test_an_arms_extra_unit_reads_count_the_reads_it_left_queued(monkeypatch):
    """review of tail46 F2: read at the schedule's end, the counters left out the unit reads of a
    client's backlog (REPLICATE-3 round 7, H: 301 unit reads for 509 needed, -40.9 %, which no
    real count can be). Reads at 1,000/s, a client that runs 800/s: about 200 queued at the end;
    counted after the drain, every read that ran has its unit read, and what is missing is only
    what is still outstanding (a few: the drain's ``left``)."""
    import random

    client = QueuedClient(speed=800.0)
    monkeypatch.setattr(tail, "time", client)
    arm = tail.Arm("H", "REPLICATE-3", None, 7)
    count = tail.play(arm, client, client, 1000.0, tail.Settings(arm_s=1.0, warmup_s=0.0), frozenset(), random.Random(7),
              64, set(), {})
    left = int(1000.0 * tail.DRAIN_LEFT_S)
    assert arm.backlog > 150 and arm.stuck <= left
    assert arm.needed == arm.issued and arm.needed - arm.unit_reads == arm.stuck
    assert abs(arm.unit_reads - arm.needed) / arm.needed < 0.06   # at the schedule's end: about -20 %
    client.sleep(1.0)   # the block settles: the last few run
    count()
    assert arm.unit_reads == arm.needed == arm.issued
