"""Read load generator: random positional reads of one file through one client, open or closed loop.

    from hedgefs.bench.read import run_read_bench
    run = run_read_bench(fs, "/bench/data.bin", rate=400, duration_s=30)         # open loop
    run = run_read_bench(fs, "/bench/data.bin", threads=8, duration_s=30)        # closed loop
    run = run_read_bench(fs, "/bench/data.bin", rate=20, fanout=20, duration_s=30)  # pages of 20
    run.summary()      # the one-line JSON dict of `hedgefs bench read --json`
    run.to_dict()      # summary + counters, percentile curve, time series, events (for plots)

**Open loop** (``rate``, what the suite uses; as wrk2 does): reads start on a Poisson schedule
of ``rate`` per second whether or not earlier ones have finished, and a read's latency counts
from its *scheduled* start. A read stuck behind a slow one is therefore measured with the wait,
and so is any lag of the load generator itself. (A closed loop, where each of N threads starts
its next read when its last one returns, stops issuing reads exactly when the system stalls, and
its percentiles hide the stall: coordinated omission.) Reads are issued without a thread each
(``FileReader.submit``), so thousands can be outstanding.

**Fan-out** (``fanout`` N): each scheduled event is a *page* of N random reads issued together,
and the page's latency is its slowest read's (the HBase guide's 20-row page: 1 - 0.99^20 = 18 %
of pages see some read's p99). Percentiles are then page percentiles; counts are of reads.

Offsets are random multiples of ``read_size`` (seeded), so with the default 64 KiB reads and
1 MiB cells every read lies inside one cell: one unit read, one DataNode.

Memory stays fixed however many reads are made: latencies go into a LatencyHistogram (HDR-style
log buckets), and the time series keeps, per 100 ms of run time (by scheduled start), a count
and a small histogram. Every 100 ms a sampler also notes the client's unit reads, the ones the
reads needed, the breaker and the DataNodes the latency model calls slow, so extra reads can be
checked over every one-second window.

Bench-only instrumentation (``ClientProbe``, bench/probe.py): the breaker's observer time-stamps
hedges, refusals and trips; bench/trace.py breaks reads down. Nothing the client does changes.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from hedgefs.bench import gcwatch
from hedgefs.bench.probe import ClientProbe
from hedgefs.bench.timeseries import BUCKET_S, TimeSeries, ms
from hedgefs.client.metrics import LatencyHistogram
from hedgefs.ec import layout
from hedgefs.ec.policy import parse_policy

DEFAULT_READ_SIZE = 64 * 1024
DEFAULT_THREADS = 8
# Open loop: reads outstanding at most (then the generator waits, and the run says it saturated).
MAX_OUTSTANDING = 20_000
# Reads still running this long after the run's end are cancelled and counted as errors.
DRAIN_S = 120.0

# Percentiles sampled for the percentile-curve plot (HDR style: 0 .. 99.999).
CURVE_PERCENTILES = (0, 10, 25, 50, 75, 90, 95, 97, 98, 99, 99.3, 99.5, 99.7, 99.8, 99.9, 99.93, 99.95,
                     99.97, 99.98, 99.99, 99.995, 99.999, 100)

SUMMARY_KEYS = ("reads", "reads_per_s", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms", "hedges",
                "hedge_wins", "hedges_refused", "breaker_trips", "decodes", "extra_unit_reads_pct",
                "max_extra_pct_1s", "avoided", "probes", "load", "per_datanode")


@dataclass
class TimelineEvent:
    """Something to do at `at_s` seconds into the run (a fault starting or ending)."""
    at_s: float
    label: str
    action: Callable[[], None]
    kind: str = "fault"  # fault-start | fault-end | other: how plots mark it


@dataclass
class BenchRun:
    threads: int
    rate: float | None
    fanout: int
    read_size: int
    seed: int
    path: str
    file_length: int
    policy: str
    hedge: dict
    wall_s: float
    reads: int      # pages (reads, with fanout 1) completed
    errors: int
    error_samples: list[str]
    expected_unit_reads: int
    hist: LatencyHistogram
    series: TimeSeries
    stats: object  # client ReadStats at the end
    probe: ClientProbe
    saturated: bool = False
    events: list[dict] = field(default_factory=list)
    host: dict = field(default_factory=dict)
    t0: float = 0.0     # the run's start (time.monotonic)

    def summary(self) -> dict:
        """The keys of `hedgefs bench read --json`."""
        c = self.stats.counters
        extra = 0.0
        if self.expected_unit_reads:
            extra = 100.0 * (c["unit_reads"] - self.expected_unit_reads) / self.expected_unit_reads
        return {
            "reads": self.reads,
            "reads_per_s": round(self.reads / self.wall_s, 1) if self.wall_s > 0 else 0.0,
            "p50_ms": ms(self.hist.percentile(50)),
            "p90_ms": ms(self.hist.percentile(90)),
            "p99_ms": ms(self.hist.percentile(99)),
            "p999_ms": ms(self.hist.percentile(99.9)),
            "max_ms": ms(self.hist.max_s),
            "hedges": c["hedges"],
            "hedge_wins": c["hedge_wins"],
            "hedges_refused": c["hedges_refused_breaker"] + c["hedges_refused_rate"],
            "breaker_trips": self.stats.breaker_trips,
            # Cells rebuilt because their read failed (dead DataNode, error, bad checksum); a
            # hedge's rebuild is counted in "hedges".
            "decodes": c["rebuilt_on_failure"],
            # Unit reads beyond the ones the reads themselves needed: hedges, reading around,
            # probes, rebuilds, late binding.
            "extra_unit_reads_pct": round(extra, 4),
            "max_extra_pct_1s": self.probe.max_extra_pct_1s(),
            "avoided": c["avoided"],
            "probes": c["probes"],
            "load": {"mode": "open" if self.rate else "closed", "rate": self.rate, "threads": self.threads,
                     "fanout": self.fanout, "saturated": self.saturated},
            "per_datanode": {dn: {"p50_ms": round(row["p50_ms"], 2), "p99_ms": round(row["p99_ms"], 2),
                                  "unit_reads": row["unit_reads"], "avoided": row["avoided"], "probes": row["probes"]}
                             for dn, row in self.stats.per_datanode.items()},
        }

    def to_dict(self) -> dict:
        return {
            "summary": self.summary(),
            "config": {"threads": self.threads, "rate": self.rate, "fanout": self.fanout, "read_size": self.read_size,
                       "seed": self.seed, "path": self.path, "file_length": self.file_length, "policy": self.policy,
                       "hedge": self.hedge},
            "wall_s": round(self.wall_s, 3),
            "errors": self.errors,
            "error_samples": self.error_samples,
            "counters": dict(self.stats.counters),
            "expected_unit_reads": self.expected_unit_reads,
            "percentile_curve": [{"p": p, "ms": ms(self.hist.percentile(p) if p < 100 else self.hist.max_s)}
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
            "gc": self.host.get("gc"),   # the client process's collections in the run (bench/gcwatch.py)
        }


class _Tally:
    """What every page and read did, from whichever thread finishes it."""

    def __init__(self, t0: float, hist: LatencyHistogram, series: TimeSeries):
        self.t0, self.hist, self.series = t0, hist, series
        self.lock = threading.Condition()
        self.reads = self.errors = self.cells = self.outstanding = 0
        self.error_samples: list[str] = []
        self.last_done = t0

    def page_done(self, scheduled: float, cells: int, error: BaseException | None) -> None:
        done = time.monotonic()
        if error is None:
            self.hist.record(done - scheduled)
            self.series.record(scheduled - self.t0, done - scheduled)
        with self.lock:
            if error is None:
                self.reads += 1
                self.cells += cells
                self.last_done = max(self.last_done, done)
            else:
                self.errors += 1
                if len(self.error_samples) < 5:
                    self.error_samples.append(f"{type(error).__name__}: {error}")

    def started(self, n: int) -> None:
        with self.lock:
            self.outstanding += n

    def ended(self, n: int) -> None:
        with self.lock:
            self.outstanding -= n
            self.lock.notify_all()


class _Page:
    """N reads issued together; done when the last one is (its latency is the page's)."""

    def __init__(self, tally: _Tally, scheduled: float, cells: int, n: int):
        self.tally, self.scheduled, self.cells, self.left = tally, scheduled, cells, n
        self.error: BaseException | None = None
        self._lock = threading.Lock()

    def read_done(self, future) -> None:
        error = None
        if future.cancelled():
            error = RuntimeError("cancelled at the end of the run")
        elif future.exception() is not None:
            error = future.exception()
        with self._lock:
            self.left -= 1
            self.error = self.error or error
            last = self.left == 0
        self.tally.ended(1)
        if last:
            self.tally.page_done(self.scheduled, self.cells, self.error)


def run_read_bench(fs, path: str, *, threads: int = DEFAULT_THREADS, duration_s: float | None = None,
                   reads: int | None = None, read_size: int = DEFAULT_READ_SIZE, seed: int = 0,
                   timeline: Iterable[TimelineEvent] = (), bucket_s: float = BUCKET_S,
                   rate: float | None = None, fanout: int = 1, tracer=None,
                   exclude: tuple[float, float, frozenset[str]] | None = None) -> BenchRun:
    """Run the load; stop after `duration_s` seconds or `reads` pages (reads in flight finish).

    ``rate`` (pages per second): open loop; else ``threads`` closed-loop readers. `timeline`
    actions run on a helper thread at their time into the run; what they did and when is in
    `BenchRun.events`. ``tracer`` (bench/trace.py): each read through it, broken down.
    ``exclude`` (start_s, end_s, DataNodes): reads scheduled in that window leave those DataNodes
    out from the first read (the suite's oracle: perfect detection).
    """
    if (duration_s is None) == (reads is None):
        raise ValueError("give exactly one of duration_s and reads")
    if threads < 1 or read_size < 1 or fanout < 1 or (rate is not None and rate <= 0):
        raise ValueError("threads, read_size and fanout must be >= 1, and a rate > 0")
    f = fs.open(path)
    hist = LatencyHistogram()
    series = TimeSeries(bucket_s)
    stop = threading.Event()
    gc_watch = gcwatch.GcWatch().start()   # the bench's own heap walked by no collection in the run
    t0 = time.monotonic()
    tally = _Tally(t0, hist, series)
    probe = ClientProbe(fs, t0, bucket_s)
    pages = _Pages(f, read_size, fanout, tally, stop, t0 + duration_s if duration_s is not None else None, reads,
                   tracer, exclude)
    events: list[dict] = []
    lags: list[tuple[float, float]] = []
    if rate is None:
        workers = [threading.Thread(target=_closed_loop, args=(pages, i, seed), name=f"bench-reader-{i}", daemon=True)
                   for i in range(threads)]
    else:
        workers = [threading.Thread(target=_open_loop, args=(pages, rate, seed), name="bench-dispatcher", daemon=True)]
    helpers = [threading.Thread(target=_run_timeline, args=(timeline, t0, stop, events), name="bench-timeline",
                                daemon=True),
               threading.Thread(target=_sample, args=(fs, probe, t0, stop, bucket_s, lags), name="bench-sampler",
                                daemon=True)]
    cpu0, load0 = time.process_time(), os.getloadavg()
    for t in helpers + workers:
        t.start()
    try:
        for t in workers:
            while t.is_alive():
                t.join(0.2)
        with tally.lock:   # the open loop's last reads
            tally.lock.wait_for(lambda: tally.outstanding == 0, timeout=DRAIN_S)
    finally:
        stop.set()
        for t in helpers:
            t.join(10)
        gc_watch.stop()
    probe.sample()
    wall = tally.last_done - t0
    host = {"client_cpu_s": round(time.process_time() - cpu0, 2), "loadavg_start": [round(x, 2) for x in load0],
            "loadavg_end": [round(x, 2) for x in os.getloadavg()], "loop_lag": lags, "gc": gc_watch.summary()}
    return BenchRun(threads=threads, rate=rate, fanout=fanout, read_size=read_size, seed=seed, path=path,
                    file_length=f.length, policy=f.status.policy, hedge=dataclasses.asdict(fs.hedge), wall_s=wall,
                    reads=tally.reads, errors=tally.errors, error_samples=tally.error_samples,
                    expected_unit_reads=tally.cells, hist=hist, series=series, stats=fs.stats(), probe=probe,
                    saturated=pages.saturated, events=events, host=host, t0=t0)


class _Pages:
    """The pages of one run, for either loop: random offsets (multiples of ``read_size``, from the
    loop's own seeded generator) issued through one open file, until the deadline or the budget
    of pages."""

    def __init__(self, f, read_size: int, fanout: int, tally: _Tally, stop: threading.Event,
                 deadline: float | None, reads: int | None, tracer=None, exclude=None):
        self.f, self.read_size, self.fanout, self.tally, self.stop = f, read_size, fanout, tally, stop
        self.tracer, self.exclude = tracer, exclude
        self.t0 = tally.t0
        self._status = f.status
        self._policy = parse_policy(self._status.policy)
        self._slots = max(1, (f.length - read_size) // read_size + 1)
        self._deadline, self._reads = deadline, reads
        self._ticket = itertools.count()
        self.saturated = False   # the open loop had to wait for reads outstanding

    def more(self, now: float) -> bool:
        if self._deadline is not None:
            return now < self._deadline
        return next(self._ticket) < self._reads

    def offsets(self, rng: random.Random) -> tuple[list[int], int]:
        offsets = [rng.randrange(self._slots) * self.read_size for _ in range(self.fanout)]
        cells = sum(_cells_touched(self._status, self._policy, o, self.read_size) for o in offsets)
        return offsets, cells

    def issue(self, offsets: list[int], cells: int, scheduled: float) -> list:
        page = _Page(self.tally, scheduled, cells, len(offsets))
        self.tally.started(len(offsets))
        futures = []
        leave_out: frozenset[str] = frozenset()
        if self.exclude and self.exclude[0] <= scheduled - self.t0 < self.exclude[1]:
            leave_out = self.exclude[2]
        for offset in offsets:
            if self.tracer is not None:
                future = self.tracer.submit(self.f, offset, self.read_size, scheduled, leave_out)
            else:
                future = self.f.submit(offset, self.read_size, leave_out)
            future.add_done_callback(page.read_done)
            futures.append(future)
        return futures


def _closed_loop(pages: _Pages, index: int, seed: int) -> None:
    """One closed-loop reader: its next page when its last one is done."""
    rng = random.Random(seed * 1_000_003 + index)
    while not pages.stop.is_set() and pages.more(time.monotonic()):
        offsets, cells = pages.offsets(rng)
        for future in pages.issue(offsets, cells, time.monotonic()):
            try:
                future.result()
            except Exception:  # noqa: BLE001 - counted by the page
                pass


def _open_loop(pages: _Pages, rate: float, seed: int) -> None:
    """The dispatcher: pages on a Poisson schedule of ``rate`` per second, whether or not the
    earlier ones are done."""
    rng = random.Random(seed)
    tally, stop = pages.tally, pages.stop
    scheduled = pages.t0 + rng.expovariate(rate)
    while pages.more(scheduled) and not stop.is_set():
        delay = scheduled - time.monotonic()
        if delay > 0 and stop.wait(delay):
            return
        with tally.lock:
            while tally.outstanding >= MAX_OUTSTANDING and not stop.is_set():
                pages.saturated = True
                tally.lock.wait(0.1)
        offsets, cells = pages.offsets(rng)
        pages.issue(offsets, cells, scheduled)   # latency counts from `scheduled`, however late this is
        scheduled += rng.expovariate(rate)


def _run_timeline(timeline: Iterable[TimelineEvent], t0: float, stop: threading.Event, events: list[dict]) -> None:
    """Each event's action at its time into the run; what it did, and when, goes to ``events``."""
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


def _sample(fs, probe: ClientProbe, t0: float, stop: threading.Event, bucket_s: float,
            lags: list[tuple[float, float]]) -> None:
    """Every bucket: the probe's sample, and how late the client's event loop runs a callback."""

    def loop_lag_sample() -> None:
        posted = time.monotonic()

        def ran() -> None:
            now = time.monotonic()
            lags.append((round(posted - t0, 2), round((now - posted) * 1000, 2)))

        try:
            fs.call_soon(ran)
        except RuntimeError:  # loop closed
            pass

    while not stop.wait(bucket_s):
        probe.sample()
        loop_lag_sample()


def measure_capacity(fs, path: str, *, threads: int = DEFAULT_THREADS, duration_s: float = 5.0,
                     read_size: int = DEFAULT_READ_SIZE, fanout: int = 1, seed: int = 1) -> float:
    """Pages per second ``threads`` closed-loop readers sustain: the healthy capacity that
    ``--rate auto`` halves."""
    run = run_read_bench(fs, path, threads=threads, duration_s=duration_s, read_size=read_size, fanout=fanout,
                         seed=seed)
    if run.errors or not run.reads:
        raise RuntimeError(f"measuring capacity: {run.errors} of {run.errors + run.reads} reads failed"
                           + (f"; first: {run.error_samples[0]}" if run.error_samples else ""))
    return run.reads / run.wall_s


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


def format_summary(summary: dict) -> str:
    """A few human lines for `hedgefs bench read` without --json."""
    s = summary
    load = s["load"]
    what = "pages" if load["fanout"] > 1 else "reads"
    how = (f"open loop at {load['rate']:.1f}/s" if load["mode"] == "open" else f"closed loop, {load['threads']} threads") \
        + (f", pages of {load['fanout']} reads" if load["fanout"] > 1 else "") \
        + (" (SATURATED: the generator had to wait)" if load["saturated"] else "")
    lines = [
        f"{what} {s['reads']}  ({s['reads_per_s']:.1f}/s; {how})",
        f"latency ms: p50 {s['p50_ms']:.1f}  p90 {s['p90_ms']:.1f}  p99 {s['p99_ms']:.1f}  "
        f"p99.9 {s['p999_ms']:.1f}  max {s['max_ms']:.1f}",
        f"hedges {s['hedges']} (wins {s['hedge_wins']}, refused {s['hedges_refused']}), reads avoided {s['avoided']}, "
        f"probes {s['probes']}, breaker trips {s['breaker_trips']}, decodes on failure {s['decodes']}, "
        f"extra cell reads {s['extra_unit_reads_pct']:.3f} % (worst second {s['max_extra_pct_1s']} %)",
    ]
    for dn, row in s["per_datanode"].items():
        lines.append(f"  {dn:>6}: unit_reads {row['unit_reads']:<7} p50 {row['p50_ms']:7.1f} ms  p99 {row['p99_ms']:7.1f} ms"
                     f"  avoided {row['avoided']}")
    return "\n".join(lines)
