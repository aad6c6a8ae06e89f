"""Tail claims this host can decide: hedged reads against the oracle, in one cluster, with intervals.

    hedgefs bench tail [--quick] [--rounds N] [--policies P,...] [--faults F,...] [--out DIR]
    python -m hedgefs.bench.tail ...          # the same

Five **arms**, switched without restarting anything: healthy without hedging (H0), healthy with
(H), one DataNode faulty without hedging (S0), with (S), and the **oracle** (O: the faulty
DataNode left out from every read's first try, each of its cells read by the code's cheapest
rebuild). Three long-lived clients per file in this process serve them (hedging off: H0, S0; on:
H, S; on, leaving the faulty DataNode out: O), so switching an arm is choosing a client. A client
per file, because each file has its own faulty DataNode: one hedging client reading all three
would see three DataNodes turn slow within a minute, as a host-wide slowdown looks, and its breaker
would trip (``max_impaired_nodes``) and leave S unhedged for its cooldown. Faults, on the
DataNode holding most of the file's data cells: +500 ms on every read, frozen (SIGSTOP) for its
block, 1 % of reads +2 s. Policies: RS-6-3-1024k, LRC-6-2-2-1024k, REPLICATE-3 (one file each).

**Rounds.** A round runs, per policy, a healthy block (H0, H) and a block per fault (the fault
set, then S0, S, O, then cleared; a freeze lasts its block: 3 arms of 2.75 s and the switches,
about 9 s), blocks and the arms inside them in a new random order each round, so a slow spell of the
shared host falls on every arm alike. Each arm reads **open loop** (Poisson arrivals at a third of
the healthy capacity, measured once; latency from the scheduled start: no coordinated omission)
random 64 KiB reads, one cell each. A healthy arm's first ``warmup_s`` is discarded (a client
picking up after idling); a faulty arm's is not: each arm's client meets the fault afresh at its
start (it read nothing while the other arms ran), and its first reads to the faulty DataNode,
before it knows, are what hedging is for (discarded, they hid every read of a REPLICATE-3 S0 that
waited out +500 ms, and most that waited out a freeze: the full run of 2026-12-06). Reads
outstanding at an arm's end finish in the background and still count for it; the next arm starts
once they are down to a few (``drain``), so an arm's queue is not handed to the next arm's client on
the same core. Only reads held by a frozen DataNode are left to finish after the next arm has begun:
S0's of a freeze, counted (its client does not hedge, so each of its unit reads in flight on the
frozen DataNode is one of its reads, held until the thaw); S's end at their hedge, so S drains. An
arm's extra unit reads are counted once it has drained, and again once its block's reads have all
ended (each arm of a block has a client of its own): a client behind counts a read as needed when
it starts it and its unit reads as they run, and cut at the schedule's end, a backlog's unit reads
fell into no arm (REPLICATE-3 H round 7: 301 unit reads for 509 needed).

**Dispatch lag.** Every read's lag, how late the load generator issued it against its schedule,
is recorded per arm (p50, p99, max; reads issued after the arm's end), and so is how late this
thread woke while it drained the arm. An arm whose lag p99 passes ``LAG_BOUND_S``, or whose drain
saw a stall past it, flags its round "client behind": the client's own core, not the DataNodes,
set its latencies. Latencies are still taken from the scheduled start, lag included.

**Isolation.** This process (load generator and clients) is pinned to one CPU and every server
process (each thread) to the other (``os.sched_setaffinity``; printed), its heap frozen after the
warm-up (``gc.freeze``); a hiccup meter runs in this process and one beside the servers, pinned to
their CPU (bench/hiccup.py); a round whose hiccup p99.9 passes a bound is flagged, reported, and
its rows are given again without the flagged rounds, never silently dropped.

**Statistics** (bench/bootstrap.py): every ratio is of the arms' percentiles over all rounds
pooled, with a 95 % round-level block-bootstrap interval, and a verdict: met, missed, unresolved;
void for a latency row when every round is flagged (the extra-read counts still stand).
The percentile gated on is p99.9 where each arm has 100,000 reads, else p99 with p99.9 beside it;
except for a fault that touches fewer than 1 % of the reads (1 % of one DataNode's), which p99
cannot see at all: there p99.9, said to be under-sampled.

**Targets** (issue 46): S vs O <= 1.2 x (upper bound), point <= 1.1 x, each fault and EC policy;
S vs S0 upper bound <= 0.5 x (hedging pays); H vs H0 p99 <= 1.05 x; extra unit reads in H <= 2 %;
extra unit reads in S <= 1.1 x their arithmetic floor (bench/rounds.py). Writes
``<date>-<name>.json.gz`` (per round and arm: reads, a 1 %-bucket latency histogram, extra
reads, hiccups) and ``<date>-<name>-summary.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gc
import gzip
import json
import logging
import math
import os
import pathlib
import random
import shlex
import sys
import tempfile
import threading
import time
from typing import Callable

import numpy as np

from hedgefs.bench import bootstrap, hiccup
from hedgefs.bench.cluster import BenchCluster, path_of
from hedgefs.bench.read import measure_capacity
from hedgefs.bench.rounds import floor_pct, rescue_sources
from hedgefs.client.config import HedgeConfig
from hedgefs.proto import hedgefs_pb2 as pb

log = logging.getLogger("hedgefs.bench")

RESULTS_DIR = pathlib.Path(__file__).resolve().parent / "results"
POLICIES = ("RS-6-3-1024k", "LRC-6-2-2-1024k", "REPLICATE-3")
DATANODES = 12
READ_SIZE = 64 * 1024
LOAD_SHARE = 1 / 3
CAPACITY_THREADS, CAPACITY_S = 8, 4.0
P999_READS = 100_000        # reads per arm before p99.9 is gated on
# A round is flagged when an arm's hiccup p99.9 passes max(floor, 3 x the run's median arm p99.9):
# relative, because a meter pinned beside 13 busy servers on one core sees their scheduling
# (10-20 ms) in every arm; what flags a round is a stall beyond the run's normal.
HICCUP_FLOOR_MS = {"client": 20.0, "servers": 20.0}
HICCUP_FACTOR = 3.0
SETTLE_S = 5.0              # after a block, at most this long for its reads to finish
DRAIN_LEFT_S = 0.05         # after an arm, wait while more than this many seconds of its reads are outstanding
DRAIN_TICK_S = 0.01
# An arm's client is behind when its dispatch lag p99 (how late reads were issued against their
# schedule) or a stall seen while it drained passes this: the client hiccup meter's floor, and
# about a healthy read's p99 on this host, so the lag would set the arm's percentiles.
LAG_BOUND_S = 0.020
RECOVER_S = 5.0             # after a fault, at most this long for the hedging client to see the recovery


@dataclasses.dataclass(frozen=True)
class Fault:
    name: str
    title: str
    kind: str                # delay | freeze
    delay_ms: int = 0
    probability: float = 1.0


FAULTS = (
    Fault("slow-500ms", "one DataNode +500 ms on every read", "delay", 500),
    Fault("frozen", "one DataNode frozen (SIGSTOP) for its block", "freeze"),
    Fault("tail-1pct-2s", "one DataNode, 1 % of reads +2 s", "delay", 2000, 0.01),
)


@dataclasses.dataclass(frozen=True)
class Settings:
    rounds: int = 20
    arm_s: float = 3.0
    warmup_s: float = 0.5
    file_bytes: int = 64 << 20


# 20 rounds of 33 arms of 2.75 s, the switches and a hedging client's recovery after each fault:
# about 38 minutes; a frozen block (3 arms) about 9 s. Quick: about 5 minutes.
FULL = Settings(arm_s=2.75)
QUICK = Settings(rounds=4, arm_s=1.25, warmup_s=0.25, file_bytes=32 << 20)

ARMS_HEALTHY = ("H0", "H")
ARMS_FAULT = ("S0", "S", "O")


# ---------------------------------------------------------------------------- one arm

class Arm:
    """One arm of one round: the latencies of its measured reads (from their scheduled starts)."""

    def __init__(self, name: str, policy: str, fault: str | None, rnd: int):
        self.name, self.policy, self.fault, self.round = name, policy, fault, rnd
        self.latencies: list[float] = []
        self.errors = 0
        self.issued = 0
        self.outstanding = 0
        self.window = (0.0, 0.0)
        self.unit_reads = self.needed = 0
        self.backlog = 0            # reads outstanding as its schedule ended
        self.stuck = 0              # ... and still outstanding once drained (held by a frozen DataNode)
        self.lags: list[float] = []  # dispatch lag of every read it issued (seconds after its scheduled start)
        self.after_end = 0          # reads scheduled in the arm but issued after its end
        self.drain_lag = 0.0        # the longest this thread woke late while it drained the arm
        self.hiccups: dict = {}
        self._lock = threading.Lock()

    def done(self, future, scheduled: float, kept: bool) -> None:
        now = time.monotonic()
        error = future.cancelled() or future.exception() is not None
        with self._lock:
            self.outstanding -= 1
            if not kept:
                return
            if error:
                self.errors += 1
            else:
                self.latencies.append(now - scheduled)

    def key(self) -> tuple:
        return (self.policy, self.fault, self.name)


def run_arm(arm: Arm, reader, rate: float, settings: Settings, exclude: frozenset[str], rng: random.Random,
            slots: int, pending: set, measuring: Callable[[], None] = lambda: None) -> None:
    """Open loop for ``settings.arm_s`` seconds; reads scheduled in the first ``warmup_s`` are not
    kept (``measuring()`` is called as the first kept one is issued). ``pending`` holds the reads
    still running: a finished one leaves it, with its buffer (a full run issues ~900,000 reads of
    64 KiB; keeping them all ran the bench out of memory in round 6)."""
    start = time.monotonic()
    measure, end = start + settings.warmup_s, start + settings.arm_s
    scheduled = start + rng.expovariate(rate)
    warm = True
    while scheduled < end:
        wait = scheduled - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        kept = scheduled >= measure
        if kept and warm:
            warm = False
            measuring()
        with arm._lock:
            arm.outstanding += 1
        issued = time.monotonic()
        arm.lags.append(issued - scheduled)
        arm.after_end += issued >= end
        future = reader.submit(rng.randrange(slots) * READ_SIZE, READ_SIZE, exclude)
        pending.add(future)
        future.add_done_callback(lambda f, s=scheduled, k=kept: arm.done(f, s, k))
        future.add_done_callback(pending.discard)
        arm.issued += kept
        scheduled += rng.expovariate(rate)
    arm.window = (measure, end)


def drain(arm: Arm, rate: float, held: Callable[[], int] = lambda: 0, most_s: float = SETTLE_S) -> float:
    """After an arm's schedule: wait while more than ``DRAIN_LEFT_S`` of its reads (at ``rate``)
    are outstanding besides the ``held()`` ones (held by a frozen DataNode: they end at its thaw),
    at most ``most_s``. Notes in ``arm.drain_lag`` the longest this thread woke late (a client that
    cannot run). Returns the seconds waited."""
    began = now = time.monotonic()
    left = max(1, int(rate * DRAIN_LEFT_S))
    while arm.outstanding - held() > left and now - began < most_s:
        time.sleep(DRAIN_TICK_S)
        woke = time.monotonic()
        arm.drain_lag = max(arm.drain_lag, woke - now - DRAIN_TICK_S)
        now = woke
    return now - began


def held_reads(name: str, fault: Fault | None, model, victim: str) -> Callable[[], int]:
    """How many of an arm's reads the fault holds: under a freeze, for S0, the unit reads its
    client (hedging off: no hedge, no second unit read of a cell) has in flight on the frozen
    DataNode, each one of its reads; none for any other arm (S's end at their hedge, a little
    after the ceiling, review of tail46 F3: cut at a flat 0.25 s, round 6's S handed 618 of its
    620 reads to O)."""
    if name != "S0" or fault is None or fault.kind != "freeze":
        return lambda: 0
    return lambda: (model.snapshot().get(victim) or {}).get("inflight", 0)


def play(arm: Arm, reader, metrics, rate: float, settings: Settings, exclude: frozenset[str], rng: random.Random,
         slots: int, pending: set, meters: dict, held: Callable[[], int] = lambda: 0) -> Callable[[], None]:
    """One arm: its open loop (``run_arm``), its hiccups, its drain, then its extra unit reads:
    the client's counters from its first kept read to the end of the drain, so the reads still
    queued as the schedule ended count in the arm that issued them, with their unit reads.
    Returns the count, to be taken again once the few reads the drain left have ended too."""
    before = [metrics.counter("unit_reads"), metrics.counter("unit_reads_needed")]

    def count():
        arm.unit_reads = metrics.counter("unit_reads") - before[0]
        arm.needed = metrics.counter("unit_reads_needed") - before[1]

    def measuring():
        before[:] = metrics.counter("unit_reads"), metrics.counter("unit_reads_needed")
    run_arm(arm, reader, rate, settings, exclude, rng, slots, pending, measuring)
    arm.hiccups = {who: meter.window(*arm.window) for who, meter in meters.items()}
    arm.backlog = arm.outstanding
    drain(arm, rate, held)
    arm.stuck = arm.outstanding
    count()
    return count


def warm_up(readers: dict, rate: float, seconds: float = 1.5) -> None:
    """Every client reads every file open loop for ``seconds``; nothing is kept."""
    rng = random.Random(0)
    for reader in readers.values():
        arm, futures = Arm("warm-up", "", None, -1), set()
        slots = max(1, (reader.length - READ_SIZE) // READ_SIZE + 1)
        run_arm(arm, reader, rate, Settings(rounds=1, arm_s=seconds, warmup_s=seconds), frozenset(), rng, slots,
                futures)
        for future in list(futures):
            try:
                future.result(30)
            except Exception:   # noqa: BLE001 - a warm-up read that failed is no measure
                pass


def recover(fs, reader, rate: float, rng: random.Random, slots: int) -> float:
    """After a fault is cleared: the hedging client reads on (not measured) until its latency model
    calls no DataNode slow any more (its probes saw the recovery), at most ``RECOVER_S``; the
    healthy arms measure a client in its steady state, not one still reading around. Returns the
    seconds it took."""
    began = time.monotonic()
    futures: set = set()
    while fs.model.slow_datanodes() and time.monotonic() - began < RECOVER_S:
        run_arm(Arm("recover", "", None, -1), reader, rate, Settings(arm_s=0.25, warmup_s=0.25), frozenset(), rng,
                slots, futures)
    return round(time.monotonic() - began, 2)


def client_set(bc, policies: list[str]) -> dict:
    """{(mode, policy): FileSystem}: hedging off, on, and on for the oracle, for each file (the
    module's docstring: one faulty DataNode per hedging client)."""
    configs = {"off": HedgeConfig(enabled=False), "on": HedgeConfig(), "oracle": HedgeConfig()}
    return {(mode, p): bc.fs(config) for p in policies for mode, config in configs.items()}


# ---------------------------------------------------------------------------- isolation

def cpu_plan() -> tuple[set[int], set[int]] | None:
    """(client CPUs, server CPUs): the last allowed CPU for this process, the others for the
    servers; None with a single CPU (nothing to pin apart)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    return {cpus[-1]}, set(cpus[:-1])


def pin_process(pid: int, cpus: set[int]) -> int:
    """Every thread of ``pid`` onto ``cpus`` (affinity is per thread on Linux); threads pinned."""
    pinned = 0
    for task in pathlib.Path(f"/proc/{pid}/task").glob("*"):
        try:
            os.sched_setaffinity(int(task.name), cpus)
            pinned += 1
        except (OSError, ValueError):
            continue
    return pinned


# ---------------------------------------------------------------------------- the suite

class Suite:
    def __init__(self, settings: Settings, policies: list[str], faults: list[Fault], say: Callable[[str], None],
                 seed: int = 46):
        self.settings, self.policies, self.faults, self.say = settings, policies, faults, say
        self.rng = random.Random(seed)
        self.arms: list[Arm] = []
        self.futures: set = set()   # reads still running
        self.recovery: list[float] = []   # seconds the hedging client took to call no DataNode slow after a fault

    # ---- faults
    def _apply(self, bc: BenchCluster, fault: Fault, victim: str) -> None:
        if fault.kind == "freeze":
            bc.cluster.freeze(victim)
        else:
            bc.set_faults(victim, pb.FaultConfig(read_delay_ms=fault.delay_ms, probability=fault.probability))

    def _clear(self, bc: BenchCluster, fault: Fault, victim: str) -> None:
        if fault.kind == "freeze":
            bc.cluster.thaw(victim)
        else:
            bc.set_faults(victim, None)

    def _settle(self, arms: list[Arm]) -> None:
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline and any(a.outstanding for a in arms):
            time.sleep(0.02)

    def run(self, bc: BenchCluster, clients: dict, readers: dict, rate: float, meters: dict) -> None:
        s = self.settings
        victims = {p: bc.victims(1, path_of(p))[0] for p in self.policies}
        slots = {p: max(1, (readers["on", p].length - READ_SIZE) // READ_SIZE + 1) for p in self.policies}
        for rnd in range(s.rounds):
            blocks = [(p, None) for p in self.policies] + [(p, f) for p in self.policies for f in self.faults]
            self.rng.shuffle(blocks)
            began = time.monotonic()
            for policy, fault in blocks:
                names = list(ARMS_HEALTHY if fault is None else ARMS_FAULT)
                self.rng.shuffle(names)
                victim = victims[policy]
                if fault is not None:
                    self._apply(bc, fault, victim)
                block, counts = [], []
                try:
                    for name in names:
                        arm = Arm(name, policy, fault.name if fault else None, rnd)
                        # a faulty arm is measured from its first read (the module's docstring)
                        settings = s if fault is None else dataclasses.replace(s, warmup_s=0.0)
                        client = {"H0": "off", "S0": "off", "H": "on", "S": "on", "O": "oracle"}[name]
                        exclude = frozenset({victim}) if name == "O" else frozenset()
                        held = held_reads(name, fault, clients[client, policy].model, victim)
                        counts.append(play(arm, readers[client, policy], clients[client, policy].metrics, rate, settings, exclude,
                             self.rng, slots[policy], self.futures, meters, held))
                        block.append(arm)
                        self.arms.append(arm)
                finally:
                    if fault is not None:
                        self._clear(bc, fault, victim)
                self._settle(block)
                for count in counts:   # each arm of a block has a client of its own: its counters are the arm's
                    count()
                if fault is not None:
                    self.recovery.append(recover(clients["on", policy], readers["on", policy], rate, self.rng, slots[policy]))
            mine = [a for a in self.arms if a.round == rnd]
            worst = {who: max((a.hiccups[who]["p999_ms"] or 0) for a in mine) for who in meters}
            laggard = max(mine, key=lambda a: lag_summary(a.lags)["p99_ms"] or 0)
            lag = lag_summary(laggard.lags)
            self.say(f"   round {rnd + 1}/{s.rounds}: {len(mine)} arms, {sum(len(a.latencies) for a in mine)} reads, "
                     f"{sum(a.errors for a in mine)} errors, {time.monotonic() - began:.0f} s; worst hiccup p99.9 "
                     + ", ".join(f"{who} {ms:.1f} ms" for who, ms in worst.items())
                     + f"; dispatch lag p99 {lag['p99_ms']} ms (max {lag['max_ms']} ms) in {laggard.policy} "
                     f"{laggard.fault or 'healthy'} {laggard.name}, drain stall {1000 * max(a.drain_lag for a in mine):.0f} ms")
        deadline = time.monotonic() + 60
        for future in list(self.futures):
            if not future.done() and time.monotonic() < deadline:
                try:
                    future.result(max(0.0, deadline - time.monotonic()))
                except Exception:   # noqa: BLE001 - counted by its arm
                    pass
        for future in list(self.futures):
            future.cancel()


def lag_summary(lags) -> dict:
    """Dispatch lags (seconds) as {"reads", "p50_ms", "p99_ms", "max_ms"} (None without reads)."""
    if not len(lags):
        return {"reads": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    v = np.asarray(lags)
    return {"reads": int(len(v)), **{k: round(1000 * float(np.percentile(v, q, method="higher")), 2)
                                     for k, q in (("p50_ms", 50), ("p99_ms", 99), ("max_ms", 100))}}


def flag_rounds(arms: list[Arm]) -> tuple[dict[int, list[str]], dict[str, float]]:
    """{round: why} for the rounds with an arm whose hiccup p99.9 passed its bound, or whose client
    was behind: its dispatch lag p99 (how late reads were issued against their schedule) or a stall
    while it drained passed ``LAG_BOUND_S``, so the client's core, not the DataNodes, set its
    latency (the full run of 2026-12-06, round 14: H's client had begun 939 of its 1,592 reads by
    the arm's end, p50 2.15 s); and the bounds."""
    bounds = {}
    for who, floor in HICCUP_FLOOR_MS.items():
        values = sorted(a.hiccups[who]["p999_ms"] for a in arms if a.hiccups.get(who, {}).get("p999_ms") is not None)
        bounds[who] = round(max(floor, HICCUP_FACTOR * values[len(values) // 2]) if values else floor, 1)
    flags: dict[int, list[str]] = {}
    for a in arms:
        where = f"{a.policy} {a.fault or 'healthy'} {a.name}"
        for who, bound in bounds.items():
            ms = a.hiccups.get(who, {}).get("p999_ms")
            if ms is not None and ms > bound:
                flags.setdefault(a.round, []).append(f"{who} hiccup p99.9 {ms} ms in {where}")
        lag = lag_summary(a.lags)
        if lag["p99_ms"] is not None and lag["p99_ms"] > 1000 * LAG_BOUND_S:
            flags.setdefault(a.round, []).append(
                f"client behind: dispatch lag p99 {lag['p99_ms']} ms (max {lag['max_ms']} ms, {a.after_end} of "
                f"{lag['reads']} reads issued after the arm's end) in {where}")
        if a.drain_lag > LAG_BOUND_S:
            flags.setdefault(a.round, []).append(f"client behind: stalled {1000 * a.drain_lag:.0f} ms while {where} "
                                                 f"drained")
    bounds["dispatch_lag_ms"] = 1000 * LAG_BOUND_S
    return flags, bounds


def round_table(arms: list[dict]) -> list[dict]:
    """Per round, from the arms as written to the json: its worst client hiccup, the arm with the
    worst dispatch lag p99, the longest stall seen while an arm drained."""
    out = []
    for rnd in sorted({a["round"] for a in arms}):
        mine = [a for a in arms if a["round"] == rnd]
        laggard = max(mine, key=lambda a: a["dispatch_lag"]["p99_ms"] or 0)
        out.append({"round": rnd,
                    "client_hiccup_p999_ms": max((a["hiccups"].get("client", {}).get("p999_ms") or 0) for a in mine),
                    "lag_p99_ms": laggard["dispatch_lag"]["p99_ms"], "lag_max_ms": max(
                        (a["dispatch_lag"]["max_ms"] or 0) for a in mine),
                    "lag_arm": f"{laggard['policy']} {laggard['fault'] or 'healthy'} {laggard['arm']}",
                    "after_end": sum(a["after_end"] for a in mine),
                    "drain_stall_ms": max(a["drain_lag_ms"] for a in mine)})
    return out


# ---------------------------------------------------------------------------- rows and verdicts

def rounds_of(arms: list[Arm], key: tuple, rounds: int) -> list[np.ndarray]:
    out = [np.array([]) for _ in range(rounds)]
    for a in arms:
        if a.key() == key:
            out[a.round] = np.asarray(a.latencies)
    return out


def histogram(latencies: list[float]) -> dict[int, int]:
    """1 % log buckets from 10 us: bucket i holds latencies in [10 us x 1.01^i, x 1.01)."""
    out: dict[int, int] = {}
    for v in latencies:
        i = max(0, int(math.log(max(v, 1e-5) / 1e-5) / math.log(1.01)))
        out[i] = out.get(i, 0) + 1
    return out


def evaluate(arms: list[Arm], rounds: int, policies: list[str], faults: list[Fault], floors: dict,
             flagged: set[int]) -> list[dict]:
    rows = []
    keep = [a for a in arms if a.round not in flagged]
    void = set(range(rounds)) <= flagged   # every round's client or host was off: no latency row stands

    def percentile_row(measure, policy, fault, a, b, q, bound, point_bound, note="", target=None):
        ra, rb = rounds_of(arms, (policy, fault, a), rounds), rounds_of(arms, (policy, fault, b), rounds)
        iv = bootstrap.ratio_of_percentiles(ra, rb, q)
        other_q = 99.9 if q == 99 else 99
        beside = bootstrap.ratio_of_percentiles(ra, rb, other_q)
        clean = bootstrap.ratio_of_percentiles(rounds_of(keep, (policy, fault, a), rounds),
                                               rounds_of(keep, (policy, fault, b), rounds), q) if flagged else None
        n = min(sum(len(r) for r in ra), sum(len(r) for r in rb))
        rows.append({"policy": policy, "fault": fault or "healthy", "measure": measure, "percentile": q,
                     "interval": dataclasses.asdict(iv), "verdict": "void" if void else bootstrap.verdict(iv, bound, point_bound),
                     "target": target or (f"<= {bound} x (upper)" + (f", point <= {point_bound} x" if point_bound else "")),
                     "beside": {"percentile": other_q, "interval": dataclasses.asdict(beside)},
                     "without_flagged": dataclasses.asdict(clean) if clean else None,
                     "reads": n, "note": note,
                     "pooled_ms": {arm: round(1000 * (bootstrap.pooled(rounds_of(arms, (policy, fault, arm), rounds), q) or 0), 2)
                                   for arm in (a, b)}})

    def extra(policy, fault, arm_name):
        sel = [x for x in arms if x.key() == (policy, fault, arm_name)]
        return bootstrap.ratio_of_sums([x.unit_reads - x.needed for x in sel], [x.needed for x in sel], 100.0)

    for policy in policies:
        n_h = min(sum(len(a.latencies) for a in arms if a.key() == (policy, None, arm)) for arm in ARMS_HEALTHY)
        percentile_row("H vs H0", policy, None, "H", "H0", 99, 1.05, None)
        iv = extra(policy, None, "H")
        rows.append({"policy": policy, "fault": "healthy", "measure": "extra unit reads in H (%)", "percentile": None,
                     "interval": dataclasses.asdict(iv), "verdict": bootstrap.verdict(iv, 2.0),
                     "target": "<= 2 % (upper)", "reads": n_h, "note": ""})
        for fault in faults:
            share_visible = floors[policy, fault.name]["share"] * fault.probability
            n = min(sum(len(a.latencies) for a in arms if a.key() == (policy, fault.name, arm)) for arm in ARMS_FAULT)
            if n >= P999_READS:
                q, note = 99.9, ""
            elif share_visible < 0.01:
                q, note = 99.9, (f"p99.9 under-sampled ({n} reads per arm < {P999_READS}): the fault touches "
                                 f"{100 * share_visible:.2f} % of reads, which p99 cannot see")
            else:
                q, note = 99, f"p99: {n} reads per arm < {P999_READS} (p99.9 beside)"
            ec = not policy.startswith("REPLICATE")
            percentile_row("S vs O", policy, fault.name, "S", "O", q, 1.2, 1.1,
                           note + ("" if ec else "; not a target (EC policies only)"))
            percentile_row("S vs S0", policy, fault.name, "S", "S0", q, 0.5, None, note)
            floor = floors[policy, fault.name]["floor_pct"]
            iv = extra(policy, fault.name, "S")
            if floor > 0:
                over = bootstrap.scaled(iv, floor)
                rows.append({"policy": policy, "fault": fault.name, "measure": "extra unit reads in S / floor",
                             "percentile": None, "interval": dataclasses.asdict(over),
                             "verdict": bootstrap.verdict(over, 1.1), "target": "<= 1.1 x (upper)", "reads": n,
                             "note": f"extra {iv.fmt()} % vs floor {floor:.2f} %"})
            else:
                rows.append({"policy": policy, "fault": fault.name, "measure": "extra unit reads in S (%)",
                             "percentile": None, "interval": dataclasses.asdict(iv),
                             "verdict": bootstrap.verdict(iv, 0.5), "target": "<= 0.5 points (floor 0)", "reads": n,
                             "note": "another replica costs no extra read"})
    return rows


def fmt_interval(d: dict | None, digits: int = 2) -> str:
    if not d or d.get("point") is None:
        return "-"
    return bootstrap.Interval(**d).fmt(digits)


def summary_markdown(doc: dict) -> str:
    lines = [f"# hedgefs bench tail, {doc['date']}", "",
             f"Command: `{doc['command']}`", "",
             f"Commit {doc['environment']['commit']}, {doc['environment']['cpus']} CPUs, load average "
             f"{doc['environment']['loadavg']} at the start, {doc['environment']['loadavg_end']} at the end; "
             f"{doc['wall_s'] / 60:.1f} min.", "",
             f"Isolation: {doc['isolation']}.", "",
             f"Load: open loop at {doc['load']['rate']:.0f} reads/s (a third of the healthy capacity, "
             f"{doc['load']['capacity']:.0f} reads/s with {CAPACITY_THREADS} closed-loop readers), 64 KiB random "
             f"reads; {doc['settings']['rounds']} rounds, arms of {doc['settings']['arm_s']} s "
             f"(a healthy arm's first {doc['settings']['warmup_s']} s discarded; a faulty arm measured from its "
             f"first read), blocks and arms in a new order each round.", "",
             "| policy | fault | measure | point (95 % interval) | target | verdict | reads per arm | beside | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        q = f" p{r['percentile']:g}" if r.get("percentile") else ""
        beside = f"p{r['beside']['percentile']:g}: {fmt_interval(r['beside']['interval'])}" if r.get("beside") else ""
        if r.get("without_flagged"):
            beside += f"; without flagged rounds {fmt_interval(r['without_flagged'])}"
        lines.append(f"| {r['policy']} | {r['fault']} | {r['measure']}{q} | {fmt_interval(r['interval'])} | "
                     f"{r['target']} | **{r['verdict']}** | {r['reads']} | {beside} | {r.get('note', '')} |")
    lines += ["", "## Arms (all rounds pooled)", "",
              "| policy | fault | arm | reads | errors | p50 ms | p99 ms | p99.9 ms | max ms | extra unit reads % |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for a in doc["arm_summary"]:
        lines.append(f"| {a['policy']} | {a['fault']} | {a['arm']} | {a['reads']} | {a['errors']} | {a['p50_ms']} | "
                     f"{a['p99_ms']} | {a['p999_ms']} | {a['max_ms']} | {a['extra_pct']} |")
    lines += ["", "## Flagged rounds (an arm's hiccup p99.9 over "
              f"{doc['hiccup_bounds_ms']['client']:g} ms in the client or {doc['hiccup_bounds_ms']['servers']:g} ms "
              f"beside the servers: max({HICCUP_FLOOR_MS['client']:g} ms, {HICCUP_FACTOR:g} x the run's median arm)"
              + f"; or its client behind: dispatch lag p99, or a stall while it drained, over "
                f"{doc['hiccup_bounds_ms']['dispatch_lag_ms']:g} ms)", ""]
    if doc["flagged"]:
        for rnd, flags in sorted(doc["flagged"].items(), key=lambda kv: int(kv[0])):
            flags = sorted(flags, key=lambda f: not f.startswith("client behind"))
            lines.append(f"- round {int(rnd) + 1}: " + "; ".join(flags[:4]) + (f" (+{len(flags) - 4})" if len(flags) > 4 else ""))
        lines.append("")
        lines.append("Every row above counts every round; 'without flagged rounds' gives the ratio again without them.")
    else:
        lines.append("- none")
    lines += ["", "## Rounds (the client: how late reads were issued against their schedule)", "",
              "| round | client hiccup p99.9 ms | worst dispatch lag p99 ms | in arm | lag max ms | reads issued "
              "after their arm's end | longest stall while an arm drained ms | flagged |",
              "|---|---|---|---|---|---|---|---|"]
    for r in doc["rounds"]:
        lines.append(f"| {r['round'] + 1} | {r['client_hiccup_p999_ms']} | {r['lag_p99_ms']} | {r['lag_arm']} | "
                     f"{r['lag_max_ms']} | {r['after_end']} | {r['drain_stall_ms']} | "
                     f"{'yes' if str(r['round']) in doc['flagged'] else ''} |")
    rec = doc.get("recovery_s") or []
    if rec:
        lines += ["", f"After each fault the hedging client read on (not measured) until it called no DataNode slow: "
                      f"median {sorted(rec)[len(rec) // 2]:.2f} s, max {max(rec):.2f} s over {len(rec)} faults."]
    lines += ["", "Verdicts: met = the interval's upper bound within the target (and the point within its point "
              "target); missed = the interval wholly above it; unresolved = the run cannot tell (bench/bootstrap.py); "
              "void = a latency row of a run whose every round is flagged (its ratios are given, none stands)."]
    return "\n".join(lines) + "\n"


def arm_summary(arms: list[Arm], policies: list[str], faults: list[Fault]) -> list[dict]:
    out = []
    for policy in policies:
        for fault, names in [(None, ARMS_HEALTHY)] + [(f.name, ARMS_FAULT) for f in faults]:
            for name in names:
                sel = [a for a in arms if a.key() == (policy, fault, name)]
                lat = np.concatenate([np.asarray(a.latencies) for a in sel]) if sel else np.array([])
                needed = sum(a.needed for a in sel)

                def p(q):
                    return round(1000 * float(np.percentile(lat, q, method="higher")), 2) if len(lat) else None
                out.append({"policy": policy, "fault": fault or "healthy", "arm": name, "reads": int(len(lat)),
                            "errors": sum(a.errors for a in sel), "p50_ms": p(50), "p99_ms": p(99), "p999_ms": p(99.9),
                            "max_ms": p(100),
                            "extra_pct": round(100 * (sum(a.unit_reads for a in sel) - needed) / needed, 2) if needed else None})
    return out


def environment() -> dict:
    from hedgefs.bench.scenarios import environment as env

    return env()


def run_tail(out: pathlib.Path = RESULTS_DIR, settings: Settings = FULL, policies: list[str] | None = None,
             faults: list[Fault] | None = None, name: str = "tail", command: str | None = None,
             say: Callable[[str], None] = print) -> dict:
    policies = policies or list(POLICIES)
    faults = faults or list(FAULTS)
    out.mkdir(parents=True, exist_ok=True)
    date = datetime.date.today().isoformat()
    command = command or ("python -m hedgefs.bench.tail " + shlex.join(sys.argv[1:])).strip()
    started = time.monotonic()
    doc: dict = {"date": date, "command": command, "environment": environment(),
                 "settings": dataclasses.asdict(settings), "policies": policies,
                 "faults": [dataclasses.asdict(f) for f in faults]}
    plan = cpu_plan()
    if plan:
        client_cpus, server_cpus = plan
        pin_process(os.getpid(), client_cpus)
    with tempfile.TemporaryDirectory(prefix="hedgefs-tail-") as tmp:
        t = time.monotonic()
        bc = BenchCluster(pathlib.Path(tmp) / "cluster", {path_of(p): p for p in policies}, settings.file_bytes,
                          datanodes=DATANODES)
        meters: dict = {}
        clients: dict = {}
        try:
            if plan:
                threads = sum(pin_process(bc.cluster.pid(n), server_cpus)
                              for n in [*bc.cluster.namenode_names, *bc.cluster.datanode_ids] if bc.cluster.pid(n))
                doc["isolation"] = (f"this process (load generator, clients) on CPU {sorted(client_cpus)}; "
                                    f"{threads} threads of the NameNode and {DATANODES} DataNodes on CPU(s) "
                                    f"{sorted(server_cpus)}; the client's heap frozen after warm-up")
            else:
                doc["isolation"] = "one CPU: nothing pinned apart; the client's heap frozen after warm-up"
            say(f"== cluster up ({DATANODES} DataNodes), {len(policies)} files of {settings.file_bytes >> 20} MiB in "
                f"{time.monotonic() - t:.1f} s; {doc['isolation']}")
            meters["client"] = hiccup.HiccupMeter().start()
            meters["servers"] = hiccup.ServerMeter(pathlib.Path(tmp) / "servers-hiccups.txt",
                                                   plan[1] if plan else None)
            clients = client_set(bc, policies)
            readers = {key: fs.open(path_of(key[1])) for key, fs in clients.items()}
            capacity = measure_capacity(clients["on", policies[0]], path_of(policies[0]), threads=CAPACITY_THREADS,
                                        duration_s=CAPACITY_S)
            rate = round(capacity * LOAD_SHARE, 1)
            doc["load"] = {"capacity": round(capacity, 1), "capacity_policy": policies[0], "rate": rate}
            warm_up(readers, rate)   # connections, the latency models, caches: not measured
            gc.collect()
            gc.freeze()
            say(f"== healthy capacity {capacity:.0f} reads/s ({policies[0]}): open loop at {rate:.0f} reads/s; "
                f"{settings.rounds} rounds of {len(policies) * (2 + 3 * len(faults))} arms of {settings.arm_s:g} s")
            suite = Suite(settings, policies, faults, say)
            floors = {}
            for p in policies:
                counts = bc.data_cells_per_datanode(path_of(p))
                victim = bc.victims(1, path_of(p))[0]
                share = counts[victim] / sum(counts.values())
                for f in faults:
                    floors[p, f.name] = {"victim": victim, "share": round(share, 4),
                                         "floor_pct": round(floor_pct(1.0, share, rescue_sources(bc.policies[path_of(p)]),
                                                                      f.probability), 3)}
            suite.run(bc, clients, readers, rate, meters)
        finally:
            for fs in clients.values():
                fs.close()
            for meter in meters.values():
                meter.stop()
            bc.down()
    flags, bounds = flag_rounds(suite.arms)
    flagged = set(flags)
    doc["floors"] = {f"{p} {f}": v for (p, f), v in floors.items()}
    doc["flagged"] = {str(k): v for k, v in flags.items()}
    doc["hiccup_bounds_ms"] = bounds
    doc["recovery_s"] = suite.recovery
    doc["rows"] = evaluate(suite.arms, settings.rounds, policies, faults, floors, flagged)
    doc["arm_summary"] = arm_summary(suite.arms, policies, faults)
    doc["arms"] = [{"policy": a.policy, "fault": a.fault, "arm": a.name, "round": a.round, "reads": len(a.latencies),
                    "errors": a.errors, "unit_reads": a.unit_reads, "needed": a.needed, "backlog": a.backlog,
                    "stuck": a.stuck, "dispatch_lag": lag_summary(a.lags), "lag_histogram": histogram(a.lags),
                    "after_end": a.after_end, "drain_lag_ms": round(1000 * a.drain_lag, 1),
                    "hiccups": a.hiccups,
                    "histogram": histogram(a.latencies)} for a in suite.arms]
    doc["rounds"] = round_table(doc["arms"])
    doc["wall_s"] = round(time.monotonic() - started, 1)
    doc["environment"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    base = out / f"{date}-{name}"
    with gzip.open(base.with_suffix(".json.gz"), "wt") as f:
        json.dump(doc, f)
    summary = out / f"{base.name}-summary.md"
    summary.write_text(summary_markdown(doc))
    for r in doc["rows"]:
        q = f" p{r['percentile']:g}" if r.get("percentile") else ""
        say(f"   {r['policy']:<16} {r['fault']:<13} {r['measure'] + q:<32} {fmt_interval(r['interval']):<22} "
            f"{r['target']:<28} {r['verdict'].upper()}")
    say(f"== summary {summary} ({doc['wall_s'] / 60:.1f} min)")
    return doc


def parse_names(text: str | None, known: list[str], what: str) -> list[str] | None:
    if not text:
        return None
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in known]
    if bad or not names:
        raise ValueError(f"no {what} {(bad or [text])[0]!r}: choose from {', '.join(known)}")
    return names


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 rounds of 1.25 s arms, 32 MiB files (about 5 min)")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--policies", help="comma-separated [" + ",".join(POLICIES) + "]")
    parser.add_argument("--faults", help="comma-separated [" + ",".join(f.name for f in FAULTS) + "]")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS_DIR)
    parser.add_argument("--name", default="tail")
    args = parser.parse_args(argv)
    try:
        policies = parse_names(args.policies, list(POLICIES), "policy")
        fault_names = parse_names(args.faults, [f.name for f in FAULTS], "fault")
        if args.rounds is not None and args.rounds < 2:
            raise ValueError("--rounds must be >= 2 (an interval needs rounds to resample)")
    except ValueError as err:
        parser.error(str(err))
    settings = QUICK if args.quick else FULL
    if args.rounds:
        settings = dataclasses.replace(settings, rounds=args.rounds)
    faults = [f for f in FAULTS if fault_names is None or f.name in fault_names]
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run_tail(args.out, settings, policies, faults, args.name, say=lambda s: print(s, flush=True))


if __name__ == "__main__":
    main()
