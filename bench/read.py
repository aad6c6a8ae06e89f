"""Read load generator: N threads doing random positional reads of one file through one client.

    from hedgefs.bench.read import run_read_bench
    run = run_read_bench(fs, "/bench/data.bin", threads=8, duration_s=30)
    run.summary()      # the one-line JSON dict of `hedgefs bench read --json`
    run.to_dict()      # summary + counters, percentile curve, time series, events (for plots)

Every reader thread loops: pick an offset at random (seeded per thread), `pread` `read_size`
bytes, record the latency. Offsets are multiples of `read_size`, so with the default 64 KiB reads
and 1 MiB cells every read lies inside one cell: one cell read, one DataNode.

Memory stays fixed however many reads are made: the latencies go into a LatencyHistogram
(HDR-style log buckets), and the time series keeps, per 100 ms of run time (by the read's start
time), only a count and a small histogram (for p50 / p99 / max of that bucket).

Bench-only instrumentation: the client's circuit breaker object is wrapped (its `record_slow`
and `try_hedge`, on this FileSystem's instance only) to time-stamp hedges, refusals, impaired
DataNodes and breaker trips. Nothing in the client's behaviour changes.
"""

from __future__ import annotations

import collections
import itertools
import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from hedgefs.client.breaker import ALLOWED, REFUSED_BREAKER
from hedgefs.client.metrics import LatencyHistogram
from hedgefs.ec import layout
from hedgefs.ec.policy import parse_policy

DEFAULT_READ_SIZE = 64 * 1024
DEFAULT_THREADS = 8
BUCKET_S = 0.1

# Percentiles sampled for the percentile-curve plot (HDR style: 0 .. 99.999).
CURVE_PERCENTILES = (0, 10, 25, 50, 75, 90, 95, 97, 98, 99, 99.3, 99.5, 99.7, 99.8, 99.9, 99.93, 99.95,
                     99.97, 99.98, 99.99, 99.995, 99.999, 100)

SUMMARY_KEYS = ("reads", "reads_per_s", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms", "hedges",
                "hedge_wins", "hedges_refused", "breaker_trips", "decodes", "extra_cell_reads_pct",
                "per_datanode")


@dataclass
class TimelineEvent:
    """Something to do at `at_s` seconds into the run (a fault starting or ending)."""
    at_s: float
    label: str
    action: Callable[[], None]
    kind: str = "fault"  # fault-start | fault-end | other: how plots mark it


class _Bucket:
    __slots__ = ("count", "hist")

    def __init__(self) -> None:
        self.count = 0
        self.hist = LatencyHistogram()


class TimeSeries:
    """Per-bucket (default 100 ms) latency summaries, keyed by the read's start time."""

    def __init__(self, bucket_s: float = BUCKET_S):
        self.bucket_s = bucket_s
        self._buckets: dict[int, _Bucket] = {}
        self._lock = threading.Lock()

    def record(self, t_s: float, seconds: float) -> None:
        index = int(t_s / self.bucket_s)
        with self._lock:
            bucket = self._buckets.get(index)
            if bucket is None:
                bucket = self._buckets[index] = _Bucket()
            bucket.count += 1
        bucket.hist.record(seconds)

    def rows(self) -> list[dict]:
        with self._lock:
            items = sorted(self._buckets.items())
        return [{"t": round(i * self.bucket_s, 3), "n": b.count,
                 "p50_ms": _ms(b.hist.percentile(50)), "p99_ms": _ms(b.hist.percentile(99)),
                 "max_ms": _ms(b.hist.max_s)} for i, b in items]


class BreakerProbe:
    """Time-stamps what the client's breaker decides, by wrapping one breaker instance."""

    def __init__(self, breaker, t0: float, bucket_s: float = BUCKET_S):
        self._breaker = breaker
        self._t0 = t0
        self.bucket_s = bucket_s
        self._lock = threading.Lock()
        self.first_slow: dict[str, float] = {}  # DataNode -> first time one of its reads crossed the threshold
        self.trips: list[dict] = []  # {"t", "impaired": [...]}
        self._per_bucket: dict[int, list[int]] = collections.defaultdict(lambda: [0, 0, 0])  # hedges, refused breaker, refused rate
        self._window: collections.deque[float] = collections.deque()
        self.max_hedges_in_1s = 0
        self.open_samples: list[tuple[float, bool]] = []
        orig_slow, orig_try = breaker.record_slow, breaker.try_hedge

        def record_slow(datanode: str) -> None:
            before = breaker.trips
            orig_slow(datanode)
            now = time.monotonic() - self._t0
            with self._lock:
                self.first_slow.setdefault(datanode, now)
                if breaker.trips != before:
                    self.trips.append({"t": round(now, 4), "after_slow_on": datanode,
                                       "impaired": list(getattr(breaker, "_tripped_by", []))})

        def try_hedge() -> str:
            verdict = orig_try()
            now = time.monotonic() - self._t0
            with self._lock:
                slot = self._per_bucket[int(now / self.bucket_s)]
                if verdict == ALLOWED:
                    slot[0] += 1
                    self._window.append(now)
                    while self._window and now - self._window[0] >= 1.0:
                        self._window.popleft()
                    self.max_hedges_in_1s = max(self.max_hedges_in_1s, len(self._window))
                elif verdict == REFUSED_BREAKER:
                    slot[1] += 1
                else:
                    slot[2] += 1
            return verdict

        breaker.record_slow = record_slow
        breaker.try_hedge = try_hedge

    def sample_open(self) -> None:
        self.open_samples.append((round(time.monotonic() - self._t0, 3), bool(self._breaker.is_open)))

    def to_dict(self) -> dict:
        with self._lock:
            buckets = sorted(self._per_bucket.items())
        return {
            "first_slow_s": {dn: round(t, 4) for dn, t in sorted(self.first_slow.items(), key=lambda kv: kv[1])},
            "trips": self.trips,
            "max_hedges_in_any_1s": self.max_hedges_in_1s,
            "hedge_series": [{"t": round(i * self.bucket_s, 3), "hedges": h, "refused_breaker": rb, "refused_rate": rr}
                             for i, (h, rb, rr) in buckets],
            # Breaker state sampled every bucket: only the changes are kept.
            "breaker_open": _changes(self.open_samples),
        }


@dataclass
class BenchRun:
    threads: int
    read_size: int
    seed: int
    path: str
    file_length: int
    policy: str
    hedge: dict
    wall_s: float
    reads: int
    errors: int
    error_samples: list[str]
    expected_cell_reads: int
    hist: LatencyHistogram
    series: TimeSeries
    stats: object  # client ReadStats at the end
    probe: BreakerProbe
    events: list[dict] = field(default_factory=list)
    host: dict = field(default_factory=dict)

    def summary(self) -> dict:
        """Exactly the keys of `hedgefs bench read --json` (issue 5)."""
        c = self.stats.counters
        extra = 0.0
        if self.expected_cell_reads:
            extra = 100.0 * (c["cell_reads"] - self.expected_cell_reads) / self.expected_cell_reads
        return {
            "reads": self.reads,
            "reads_per_s": round(self.reads / self.wall_s, 1) if self.wall_s > 0 else 0.0,
            "p50_ms": _ms(self.hist.percentile(50)),
            "p90_ms": _ms(self.hist.percentile(90)),
            "p99_ms": _ms(self.hist.percentile(99)),
            "p999_ms": _ms(self.hist.percentile(99.9)),
            "max_ms": _ms(self.hist.max_s),
            "hedges": c["hedges"],
            "hedge_wins": c["hedge_wins"],
            "hedges_refused": c["hedges_refused_breaker"] + c["hedges_refused_rate"],
            "breaker_trips": self.stats.breaker_trips,
            # Cells rebuilt because their read failed (dead DataNode, error, bad checksum); a
            # hedge's rebuild is counted in "hedges".
            "decodes": c["decodes_on_failure"],
            # Cell reads beyond the ones the reads themselves needed: hedges and rebuilds.
            "extra_cell_reads_pct": round(extra, 4),
            "per_datanode": {dn: {"p50_ms": round(row["p50_ms"], 2), "p99_ms": round(row["p99_ms"], 2),
                                  "cell_reads": row["cell_reads"]}
                             for dn, row in self.stats.per_datanode.items()},
        }

    def to_dict(self) -> dict:
        return {
            "summary": self.summary(),
            "config": {"threads": self.threads, "read_size": self.read_size, "seed": self.seed, "path": self.path,
                       "file_length": self.file_length, "policy": self.policy, "hedge": self.hedge},
            "wall_s": round(self.wall_s, 3),
            "errors": self.errors,
            "error_samples": self.error_samples,
            "counters": dict(self.stats.counters),
            "expected_cell_reads": self.expected_cell_reads,
            "percentile_curve": [{"p": p, "ms": _ms(self.hist.percentile(p) if p < 100 else self.hist.max_s)}
                                 for p in CURVE_PERCENTILES],
            "series_bucket_s": self.series.bucket_s,
            "series": self.series.rows(),
            "breaker": self.probe.to_dict(),
            "events": self.events,
            "host": self.host_summary(),
        }

    def host_summary(self) -> dict:
        """The client's CPU use and event-loop lag, and the machine's load: what a latency
        number owes to the machine rather than to the read path."""
        lags = sorted(lag for _, lag in self.host.get("loop_lag", []))
        cpu = self.host.get("client_cpu_s", 0.0)
        return {
            "client_cpu_s": cpu,
            "client_cpu_pct_of_one_core": round(100.0 * cpu / self.wall_s, 1) if self.wall_s > 0 else 0.0,
            "loadavg_start": self.host.get("loadavg_start"),
            "loadavg_end": self.host.get("loadavg_end"),
            "loop_lag_p50_ms": lags[len(lags) // 2] if lags else None,
            "loop_lag_p99_ms": lags[min(len(lags) - 1, int(len(lags) * 0.99))] if lags else None,
            "loop_lag_max_ms": lags[-1] if lags else None,
            "loop_lag": self.host.get("loop_lag", []),  # [t_s, ms], sampled every bucket
        }


def run_read_bench(fs, path: str, *, threads: int = DEFAULT_THREADS, duration_s: float | None = None,
                   reads: int | None = None, read_size: int = DEFAULT_READ_SIZE, seed: int = 0,
                   timeline: Iterable[TimelineEvent] = (), bucket_s: float = BUCKET_S) -> BenchRun:
    """Run the load; stop after `duration_s` seconds or `reads` reads (reads in flight finish).

    `timeline` actions run on a helper thread at their time into the run; what they did and when
    is in `BenchRun.events`.
    """
    if (duration_s is None) == (reads is None):
        raise ValueError("give exactly one of duration_s and reads")
    if threads < 1 or read_size < 1:
        raise ValueError("threads and read_size must be >= 1")
    f = fs.open(path)
    status = f.status
    policy = parse_policy(status.policy)
    slots = max(1, (f.length - read_size) // read_size + 1)

    hist = LatencyHistogram()
    series = TimeSeries(bucket_s)
    lock = threading.Lock()
    counts = {"reads": 0, "errors": 0, "cells": 0}
    error_samples: list[str] = []
    ticket = itertools.count()
    stop = threading.Event()
    t0 = time.monotonic()
    probe = BreakerProbe(fs.breaker, t0, bucket_s)
    deadline = t0 + duration_s if duration_s is not None else None
    last_done = [t0]

    def reader(index: int) -> None:
        rng = random.Random(seed * 1_000_003 + index)
        while not stop.is_set():
            if deadline is not None:
                if time.monotonic() >= deadline:
                    return
            elif next(ticket) >= reads:
                return
            offset = rng.randrange(slots) * read_size
            cells = _cells_touched(status, policy, offset, read_size)
            began = time.monotonic()
            try:
                f.pread(offset, read_size)
            except Exception as err:  # noqa: BLE001 - a failed read is counted and reported, not fatal
                with lock:
                    counts["errors"] += 1
                    if len(error_samples) < 5:
                        error_samples.append(f"{type(err).__name__}: {err}")
                continue
            done = time.monotonic()
            hist.record(done - began)
            series.record(began - t0, done - began)
            with lock:
                counts["reads"] += 1
                counts["cells"] += cells
                last_done[0] = max(last_done[0], done)

    events: list[dict] = []

    def scheduler() -> None:
        for event in sorted(timeline, key=lambda e: e.at_s):
            if stop.wait(max(0.0, t0 + event.at_s - time.monotonic())):
                return
            began = time.monotonic() - t0
            error = None
            try:
                event.action()
            except Exception as err:  # noqa: BLE001 - recorded; the run goes on
                error = f"{type(err).__name__}: {err}"
            events.append({"t": round(began, 3), "done_t": round(time.monotonic() - t0, 3), "label": event.label,
                           "kind": event.kind, **({"error": error} if error else {})})

    lags: list[tuple[float, float]] = []

    def loop_lag_sample() -> None:
        posted = time.monotonic()

        def ran() -> None:
            now = time.monotonic()
            lags.append((round(posted - t0, 2), round((now - posted) * 1000, 2)))

        try:
            fs.call_soon(ran)  # how late the client's event loop runs a callback
        except RuntimeError:  # loop closed
            pass

    def sampler() -> None:
        while not stop.wait(bucket_s):
            probe.sample_open()
            loop_lag_sample()

    workers = [threading.Thread(target=reader, args=(i,), name=f"bench-reader-{i}", daemon=True) for i in range(threads)]
    helpers = [threading.Thread(target=scheduler, name="bench-timeline", daemon=True),
               threading.Thread(target=sampler, name="bench-sampler", daemon=True)]
    cpu0, load0 = time.process_time(), os.getloadavg()
    for t in helpers + workers:
        t.start()
    try:
        for t in workers:
            while t.is_alive():
                t.join(0.2)
    finally:
        stop.set()
        for t in helpers:
            t.join(10)
    wall = last_done[0] - t0
    host = {"client_cpu_s": round(time.process_time() - cpu0, 2), "loadavg_start": [round(x, 2) for x in load0],
            "loadavg_end": [round(x, 2) for x in os.getloadavg()], "loop_lag": lags}
    return BenchRun(threads=threads, read_size=read_size, seed=seed, path=path, file_length=f.length,
                    policy=status.policy, hedge=_hedge_dict(fs.hedge), wall_s=wall, reads=counts["reads"],
                    errors=counts["errors"], error_samples=error_samples, expected_cell_reads=counts["cells"],
                    hist=hist, series=series, stats=fs.stats(), probe=probe, events=events, host=host)


def _cells_touched(status, policy, offset: int, length: int) -> int:
    """DataNode reads a pread of [offset, offset+length) needs when nothing is slow or lost: one
    per data unit it touches in each block group (the reader asks each unit for one contiguous
    range of its block). With the default 64 KiB aligned reads and 1 MiB cells that is 1."""
    n = 0
    for piece in layout.file_range_to_groups(offset, length, policy, status.block_size, status.length):
        group = status.groups[piece.group_index]
        cells = layout.group_range_to_cells(policy, group.length, piece.offset_in_group, piece.length)
        n += len({cell.index for cell in cells})
    return n


def _hedge_dict(config) -> dict:
    import dataclasses

    return dataclasses.asdict(config)


def _changes(samples: list[tuple[float, bool]]) -> list[dict]:
    out, last = [], None
    for t, is_open in samples:
        if is_open != last:
            out.append({"t": t, "open": is_open})
            last = is_open
    return out


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 2)


def format_summary(summary: dict) -> str:
    """A few human lines for `hedgefs bench read` without --json."""
    s = summary
    lines = [
        f"reads {s['reads']}  ({s['reads_per_s']:.1f}/s)",
        f"latency ms: p50 {s['p50_ms']:.1f}  p90 {s['p90_ms']:.1f}  p99 {s['p99_ms']:.1f}  "
        f"p99.9 {s['p999_ms']:.1f}  max {s['max_ms']:.1f}",
        f"hedges {s['hedges']} (wins {s['hedge_wins']}, refused {s['hedges_refused']}), breaker trips "
        f"{s['breaker_trips']}, decodes on failure {s['decodes']}, extra cell reads {s['extra_cell_reads_pct']:.3f} %",
    ]
    for dn, row in s["per_datanode"].items():
        lines.append(f"  {dn:>6}: cell_reads {row['cell_reads']:<7} p50 {row['p50_ms']:7.1f} ms  p99 {row['p99_ms']:7.1f} ms")
    return "\n".join(lines)
