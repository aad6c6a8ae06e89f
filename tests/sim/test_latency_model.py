"""The per-DataNode latency model (client/latency.py) on a hand-driven clock.

Reads are played one after another: ``read(dn, ms)`` starts a unit read, advances the clock by
its latency and finishes it, so time passes only as the test says.
"""

import threading

import pytest

from hedgefs.client import latency
from hedgefs.client.decayed import DecayedHistogram
from hedgefs.client.latency import LatencyModel, ceiling, size_class
from latency_support import CELL, PEERS, changes, clock, model, read, warm  # noqa: F401 (fixtures)


def test_size_classes_and_the_ceiling():
    assert [size_class(n) for n in (1, CELL, CELL + 1, 1 << 20, 4 << 20, 16 << 20, 64 << 20)] == [0, 0, 1, 2, 3, 4, 5]
    assert ceiling(CELL) == pytest.approx(0.252, abs=1e-3)
    assert ceiling(4 << 20) == pytest.approx(0.375)


def test_a_new_model_hedges_at_the_ceiling(model):
    assert model.threshold(CELL) == ceiling(CELL)
    assert model.threshold(8 << 20) == ceiling(8 << 20) > model.threshold(CELL)
    assert model.healthy_p99(CELL) is None


def test_threshold_is_1_5_x_the_healthy_p99_within_floor_and_ceiling(model, clock):
    warm(model, clock, ms=2.0)
    assert model.threshold(CELL) == latency.FLOOR_S          # 1.5 x ~2.4 ms is under the floor
    warm(model, clock, ms=40.0, rounds=200)                   # the machine got busy: 40 ms reads
    assert 0.048 * 1.5 <= model.threshold(CELL) <= 0.048 * 1.15 * 1.5   # the slowest, in a 15 % bucket
    warm(model, clock, ms=400.0, rounds=50)
    assert model.threshold(CELL) == ceiling(CELL)            # never later than the ceiling


def test_sizes_are_judged_by_their_own_clock(model, clock):
    """4 MiB reads taking 40 ms are normal for 4 MiB; a 64 KiB read taking 40 ms is not."""
    warm(model, clock, ms=2.0)
    warm(model, clock, ms=40.0, nbytes=4 << 20)
    assert model.threshold(CELL) == latency.FLOOR_S
    assert model.threshold(4 << 20) > 0.05
    assert not model.slow_datanodes()
    for _ in range(5):
        read(model, clock, "dn3", 40.0, CELL)
        read(model, clock, "dn4", 40.0, 4 << 20)
    assert model.slow_datanodes() == {"dn3"}


def test_uniform_slowness_makes_nobody_slow(model, clock, changes):
    """A CPU hog: every DataNode's reads take 10 x longer, at once. Each is still like its peers."""
    warm(model, clock, ms=2.0)
    for _ in range(30):
        warm(model, clock, ms=20.0, rounds=1)
    warm(model, clock, ms=20.0, rounds=100)
    assert not model.slow_datanodes() and changes == []
    assert model.threshold(CELL) > 0.025


def test_a_moment_when_every_read_is_late_makes_nobody_slow(model, clock, changes):
    """The client stalls for 300 ms (its event loop busy, the host swapping): every read in flight,
    on every DataNode, ends late at once. That is nobody's fault in particular."""
    warm(model, clock, ms=2.0, rounds=50)
    tokens = [model.started(dn) for dn in PEERS for _ in range(6)]
    clock.advance(0.3)
    for token in tokens:
        model.finished(token, CELL)
    warm(model, clock, ms=2.0, rounds=5)
    assert changes == [] and not model.slow_datanodes()


def test_everyone_late_at_once_makes_nobody_slow(model, clock):
    """Every DataNode has reads in flight and none has answered for 300 ms (the client stalled, or
    the host is overloaded): nobody is slow, then or once they answer."""
    warm(model, clock, ms=2.0, rounds=50)
    tokens = [model.started(dn) for dn in PEERS for _ in range(3)]
    clock.advance(0.3)
    assert not model.slow_datanodes()
    for token in tokens:
        model.finished(token, CELL)
    warm(model, clock, ms=2.0, rounds=30)
    assert not model.slow_datanodes()


def test_one_datanode_500ms_slower_is_slow_after_a_few_reads(model, clock, changes):
    warm(model, clock, ms=2.0)
    reads = 0
    while not model.is_slow("dn7"):
        read(model, clock, "dn7", 502.0)
        warm(model, clock, ms=2.0, rounds=1, peers=[p for p in PEERS if p != "dn7"])
        reads += 1
        assert reads <= 5, "dn7 should have been judged slow after a few reads"
    assert changes == [("dn7", "slow")]
    assert model.slow_datanodes() == {"dn7"}
    assert model.score("dn7") > model.score("dn1")


def test_a_datanode_that_stops_answering_is_slow_within_a_quarter_second(model, clock):
    """Reads keep going to dn2 every 10 ms, as before, but none of them ends: each crosses its
    threshold, and that alone is the evidence."""
    for _ in range(50):   # a busy client: every DataNode read every 10 ms, at ~2 ms
        for dn in PEERS:
            read(model, clock, dn, 1.0 if dn != "dn2" else 2.0)
    stopped, pending = clock.now, []
    while not model.is_slow("dn2"):
        pending.append(model.started("dn2"))
        for dn in PEERS[2:]:
            read(model, clock, dn, 10 / 8)
        for token in [t for t in pending if model.age(t) >= model.slow_after(CELL)]:
            model.slow_evidence(token, CELL)     # what the reader's timer does for a read still running
            pending.remove(token)
        assert clock.now - stopped < 0.25 + model.slow_after(CELL), "dn2 should be slow by now"


def test_a_frozen_datanode_stays_slow_when_its_peers_slow_down_too(model, clock):
    """Recovery takes fast reads of its own: a host getting busy is no evidence that the
    DataNode answering nothing is back."""
    warm(model, clock, ms=2.0)
    for _ in range(20):
        token = model.started("dn2")
        clock.advance(model.slow_after(CELL))
        model.slow_evidence(token, CELL)
    assert model.is_slow("dn2")
    warm(model, clock, ms=200.0, rounds=3, peers=PEERS[2:])   # everyone else 100 x slower now
    assert model.is_slow("dn2")
    token = model.started("dn2")
    clock.advance(0.001)
    model.abandoned(token, CELL)       # cancelled early: "at least 1 ms" says nothing
    assert model.is_slow("dn2")


def test_probes_notice_recovery_within_seconds(model, clock, changes):
    warm(model, clock, ms=2.0)
    for _ in range(5):
        read(model, clock, "dn7", 502.0)
    assert model.is_slow("dn7")
    # Fixed: reads go around dn7; a probe at most every 250 ms, one at a time.
    probes, started = 0, clock.now
    while model.is_slow("dn7"):
        if ticket := model.book_probe("dn7"):
            assert not model.book_probe("dn7")   # one at a time
            read(model, clock, "dn7", 2.0)
            ticket.done()
            probes += 1
        warm(model, clock, ms=2.0, rounds=1, peers=PEERS[:3])
        assert clock.now - started < 3.0, f"not recovered after {probes} probes"
    assert changes == [("dn7", "slow"), ("dn7", "recovered")]
    assert 1 <= probes <= 8


def test_probes_are_spaced(model, clock):
    assert model.book_probe("dn1") is None   # unknown DataNode: nothing to probe
    model.started("dn1")
    ticket = model.book_probe("dn1")
    ticket.done()
    ticket.done()                            # once is enough: a second is nothing
    clock.advance(0.249)
    assert not model.book_probe("dn1")
    clock.advance(0.001)
    assert model.book_probe("dn1")


def test_a_datanode_with_reads_in_flight_that_answers_nothing_is_silent(model, clock):
    warm(model, clock, ms=2.0)
    assert model.silent_after() == latency.SILENT_MIN_S
    assert not model.is_silent("dn5")
    model.started("dn5")
    clock.advance(0.999)
    assert not model.is_silent("dn5")
    clock.advance(0.001)
    assert model.is_silent("dn5") and model.silent_for("dn5") == pytest.approx(1.0)
    model.started("dn5")                  # more reads do not reset the silence
    clock.advance(0.5)
    assert model.is_silent("dn5")
    read(model, clock, "dn5", 3.0)        # any answer does
    assert not model.is_silent("dn5")


def test_silence_is_relative_to_peers(model, clock):
    warm(model, clock, ms=100.0, rounds=50)   # a slow cluster: p99 ~ 120 ms
    assert model.silent_after() > 2.0


def test_a_datanode_idle_for_long_is_not_silent(model, clock):
    read(model, clock, "dn1", 2.0)
    clock.advance(3600)
    model.started("dn1")                   # its first read in an hour
    clock.advance(0.5)
    assert not model.is_silent("dn1")


def test_failures_are_answers_but_not_latencies(model, clock):
    warm(model, clock, ms=2.0)
    token = model.started("dn4")
    clock.advance(0.9)
    model.failed(token)
    assert model.failed_recently("dn4") and not model.is_slow("dn4") and not model.is_silent("dn4")
    clock.advance(latency.FAILURE_MEMORY_S)
    assert not model.failed_recently("dn4")


def test_a_read_cancelled_early_says_nothing(model, clock):
    warm(model, clock, ms=2.0)
    for _ in range(10):
        token = model.started("dn6")
        clock.advance(0.001)
        model.abandoned(token, CELL)
    assert model.score("dn6") < 1 and not model.is_slow("dn6")


def test_slowness_without_news_is_forgotten(model, clock):
    warm(model, clock, ms=2.0)
    for _ in range(5):
        read(model, clock, "dn9", 502.0)
    assert model.is_slow("dn9")
    clock.advance(latency.SLOW_FORGET_S)
    assert not model.is_slow("dn9") and not model.slow_datanodes()


def test_a_score_without_news_is_forgotten_too(model, clock):
    """Replicas and rebuild sources are ranked by score: a DataNode slow long ago and not read
    since must not stay at the back of the order for ever."""
    warm(model, clock, ms=2.0)
    for _ in range(30):
        read(model, clock, "dn9", 502.0)
    assert model.score("dn9") > 4      # its reads took many times their threshold
    clock.advance(latency.SLOW_FORGET_S)
    assert model.score("dn9") == 0.0   # unknown: asking it is how we learn
    read(model, clock, "dn9", 2.0)
    assert 0 < model.score("dn9") < 1


def test_a_score_moves_with_each_read_and_as_its_oldest_reads_are_forgotten(model, clock):
    """Rebuild sources and replicas are ranked by score, which must answer what the reads so
    far say: a new read counts at once, and the oldest leave it on time."""
    warm(model, clock, ms=2.0)   # its peers; dn42 is new
    for _ in range(5):
        read(model, clock, "dn42", 502.0)
    assert model.score("dn42") > 4
    clock.advance(latency.SLOW_FORGET_S / 2)
    for _ in range(4):
        read(model, clock, "dn42", 2.0)
        assert model.score("dn42") > 4     # the median of the 5 slow and up to 4 fast reads
    read(model, clock, "dn42", 2.0)
    read(model, clock, "dn42", 2.0)
    assert model.score("dn42") < 1         # 6 fast of 11: the median is a fast one
    clock.advance(latency.SLOW_FORGET_S / 2)
    assert model.score("dn42") < 1         # the slow ones forgotten, the fast ones kept
    clock.advance(latency.SLOW_FORGET_S / 2)
    assert model.score("dn42") == 0.0      # every read forgotten


def test_memory_is_bounded(model, clock):
    for i in range(latency.MAX_DATANODES + 500):
        read(model, clock, f"dn{i}", 1.0)
    assert len(model.snapshot()) == latency.MAX_DATANODES
    assert "dn0" not in model.snapshot() and f"dn{latency.MAX_DATANODES + 499}" in model.snapshot()


def test_threads_record_at_once(clock):
    """Eight threads at once: every read in flight is accounted for at the end. The clock stands
    still while they run (on the real one a preempted thread recorded a read over the floor's p99
    and the threshold rose: 1 run in 6 at load 10), so every read takes 0 s and the threshold,
    from every DataNode's recorded reads, is the floor."""
    real = LatencyModel(clock)

    def work(n):
        for i in range(2000):
            token = real.started(f"dn{(n + i) % 10}")
            if i % 3:
                real.finished(token, CELL)
            else:
                real.abandoned(token, CELL)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = real.snapshot()
    assert sorted(snap) == sorted(f"dn{i}" for i in range(10))
    assert all(row["inflight"] == 0 for row in snap.values())
    clock.advance(latency.THRESHOLD_CACHE_S)   # past the threshold cached before the reads were known
    assert real.threshold(CELL) == latency.FLOOR_S


def test_decayed_histogram_forgets_by_half_lives(clock):
    h = DecayedHistogram(1e-4, 100.0, 1.1, half_life_s=1.0, now=clock.now)
    for _ in range(100):
        h.record(0.002, clock.now)
    assert h.weight(clock.now) == pytest.approx(100)
    clock.advance(1.0)
    assert h.weight(clock.now) == pytest.approx(50)
    for _ in range(60):
        h.record(0.050, clock.now)
    assert h.quantile(0.5) == pytest.approx(0.050, rel=0.1)   # 60 new outweigh 100 a half-life old
    clock.advance(100.0)                                        # far past the rescaling point
    h.record(0.010, clock.now)
    assert h.weight(clock.now) == pytest.approx(1.0, rel=1e-6) and h.quantile(0.5) == pytest.approx(0.010, rel=0.1)


def contended(model, clock, seed: int, reads: int = 4000, extra: dict[str, float] | None = None) -> None:
    """Four closed-loop readers on ten DataNodes sharing a contended host, played on the fake
    clock: every read takes ~0.8 ms x lognormal(sigma 0.5); one in 200 is descheduled for 5-40
    ms more (any DataNode, at random); every ~0.5 s the host stalls for 10-50 ms: a read pauses
    while it lasts. Readers read one cell of dn1..dn7 (data) at a
    time; a read still running at its threshold is hedged as the reader does it, with 5 other
    data DataNodes and the first two parity DataNodes (dn8, dn9: read only then), and the reader
    goes on when the read or its hedge is done; a read running at twice its threshold is slow
    evidence, as the reader's timer reports it. ``extra``: seconds added to a DataNode's reads."""
    import heapq
    import random

    rng = random.Random(seed)
    stalls = [(clock.now + i * 0.5 + rng.uniform(0, 0.5), rng.uniform(0.01, 0.05)) for i in range(reads // 100)]
    events, seq, running = [], iter(range(10 ** 9)), set()

    def start(dn: str, request: list | None) -> float:
        now = clock.now
        took = 0.0008 * rng.lognormvariate(0, 0.5) + (extra or {}).get(dn, 0.0)
        if rng.random() < 0.005:
            took += rng.uniform(0.005, 0.040)
        end = now + took
        for at, length in stalls:
            if at < end and at + length > now:
                end += at + length - max(at, now)   # paused while it lasts
        token = model.started(dn, CELL)
        running.add(token)
        heapq.heappush(events, (end, next(seq), "end", token, request))
        heapq.heappush(events, (now + model.slow_after(CELL), next(seq), "late", token, None))
        if request is not None:
            heapq.heappush(events, (now + model.threshold(CELL), next(seq), "hedge", token, request))
        return end

    def request() -> None:
        start(rng.choice(PEERS[:7]), [False])   # [done]

    for _ in range(4):
        request()
    done = 0
    while done < reads:
        clock.now, _, kind, token, req = heapq.heappop(events)
        if kind == "end" and token in running:
            running.discard(token)
            model.finished(token, CELL)
        elif kind == "late" and token in running:
            model.slow_evidence(token, CELL)
        elif kind == "hedge" and token in running and not req[0]:
            others = rng.sample([p for p in PEERS[:7] if p != token.datanode], 5) + PEERS[7:9]
            heapq.heappush(events, (max(start(dn, None) for dn in others), next(seq), "hedged", token, req))
        if kind in ("end", "hedged") and req is not None and not req[0]:
            req[0] = True
            done += 1
            request()


@pytest.mark.parametrize("seed", [2, 6, 12])
def test_a_contended_host_marks_nobody_slow(model, clock, changes, seed):
    """Every DataNode a little slower at random, the host stalling now and then: the parity
    DataNodes, read only by hedges and hedges only when the host is slow, were judged by a few
    reads all taken in stalls, beside data DataNodes whose many fast reads dilute the stalls
    (of seeds 1-12, these three marked dn8 or dn9 slow). A slow read whose peers beside it were as
    late is no evidence now."""
    contended(model, clock, seed)
    assert changes == []


def test_a_datanode_20ms_slower_on_a_contended_host_is_slow(model, clock, changes):
    contended(model, clock, 4, reads=1500, extra={"dn3": 0.020})
    assert changes[0] == ("dn3", "slow") and {dn for dn, state in changes if state == "slow"} == {"dn3"}




# ---------------------------------------------------------------- questions change nothing


def test_asking_about_silence_does_not_move_the_last_trouble(model, clock):
    """``last_trouble`` (when an open file asks the NameNode again where its units are) is when
    dn5 went silent, however often and however late anyone asks whether it is."""
    warm(model, clock, ms=2.0)
    before = model.last_trouble
    model.started("dn5")
    went_silent = clock.now + latency.SILENT_MIN_S
    clock.advance(latency.SILENT_MIN_S)
    assert model.is_silent("dn5") and model.is_silent("dn5")
    clock.advance(0.5)
    assert model.is_silent("dn5")
    clock.advance(latency.THRESHOLD_CACHE_S)
    assert before < model.last_trouble == pytest.approx(went_silent)


def test_forgotten_slowness_is_logged_by_its_next_read_not_by_a_question(model, clock, caplog):
    warm(model, clock, ms=2.0)
    for _ in range(5):
        read(model, clock, "dn9", 502.0)
    clock.advance(latency.SLOW_FORGET_S)
    with caplog.at_level("INFO", logger="hedgefs.client.latency"):
        assert not model.is_slow("dn9") and not model.is_slow("dn9") and not model.slow_datanodes()
        assert "no longer avoided" not in caplog.text
        model.started("dn9")
    assert "dn9: no news for 10 s; no longer avoided" in caplog.text


def test_an_overtaken_read_is_looked_at_no_sooner_than_it_could_be(model, clock):
    """Under its threshold, a read can be overtaken once the healthy p99 old: the policy's next
    look is then, not every millisecond before; with the reads sent with it (its mates) all
    answered, the moment they leave it behind (1.5 x the slowest of them)."""
    warm(model, clock, ms=2.0)
    gate = model.healthy_p99(CELL)
    token = model.started("dn1", CELL)
    mates = [model.started(dn, CELL) for dn in ("dn2", "dn3", "dn4")]
    assert model.overtaken_look_at(token, tuple(m.entry for m in mates)) == pytest.approx(token.began + gate)
    clock.advance(0.004)
    for mate in mates:
        model.finished(mate, CELL)
    clock.advance(0.001)
    assert model.overtaken_look_at(token, tuple(m.entry for m in mates)) == pytest.approx(token.began + 0.006)
