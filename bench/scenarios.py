"""The tail-latency suite: open-loop reads through fault scenarios, every p99.9 a ratio to healthy.

    python -m hedgefs.bench.scenarios [--quick] [--out DIR] [--only NAME[,NAME...]]
    hedgefs bench suite [--quick] [--out DIR] [--only NAME[,NAME...]]     # the same
    make bench

One fresh local cluster (NameNode + 10 DataNodes, real processes, in a temp dir) and one file:
192 MiB written with RS-6-3-1024k and 2 MiB internal blocks (16 block groups of 2 stripes, so data
cells land on every DataNode). First the healthy capacity: 8 closed-loop readers for 5 s; every
run then reads **open loop** at a third of it (``bench.read``: Poisson arrivals, latency from the
scheduled start; a third, not `bench read --rate auto`'s half: see LOAD_SHARE), random 64 KiB reads (one cell, one DataNode each), 30 s per run, a new client
per run (so its latency model and breaker start cold, as a new process's would). Healthy runs
come first; every run's p99.9 is reported as a ratio to the healthy p99.9 (adaptive threshold,
the default) of the same suite. Faults go to the DataNode(s) holding the most data cells.

Runs, each with the default (adaptive) settings and again with HubSpot's fixed 250 ms threshold
(``static``, the baseline row): healthy; healthy with a CPU hog per core (at a third of the capacity
measured with the hogs running: at the healthy rate it would only show an overload); one DataNode +500 ms
on every read (and once with hedging off); one DataNode 1 % of reads +2 s; one DataNode frozen
(SIGSTOP) for 10 s; four DataNodes +300 ms (broad slowdown: the breaker's case); pages of 20
reads (``fanout``), healthy and with one DataNode +500 ms, at the same read rate. Then late
binding on whole-stripe reads (``--read-extra`` 0 vs 1, healthy and with the 1 % +2 s tail), and
puts of 256 MiB, healthy and with one DataNode frozen, then the time to fsck HEALTHY.

Writes to ``--out``: ``<date>-adaptive.json`` (every run: summary, counters, percentile curve,
100 ms time series, breaker and model events, unit reads per 100 ms; the targets), PNG plots,
and ``<date>-adaptive-summary.md`` (the table of ratios, every target met or missed, the load
average). Targets are evaluated and reported, never asserted: a missed target is a result.

Here: the scenarios, one run, the puts and the suite. The cluster and its fault verbs are
bench/cluster.py (shared with bench/replication.py), the targets bench/targets.py, the summary's
markdown bench/report.py.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import logging
import os
import pathlib
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

from hedgefs.bench.cluster import BLOCK_SIZE, BenchCluster, CpuHog, RandomSource
from hedgefs.bench.read import DEFAULT_READ_SIZE, TimelineEvent, measure_capacity, run_read_bench
from hedgefs.bench.report import summary_markdown
from hedgefs.bench.targets import evaluate_targets
from hedgefs.client.config import HedgeConfig
from hedgefs.proto import hedgefs_pb2 as pb

log = logging.getLogger("hedgefs.bench")

RESULTS_DIR = pathlib.Path(__file__).resolve().parent / "results"
PATH = "/bench/data.bin"
FILE_BYTES = 192 << 20
THREADS = 8             # closed-loop readers that measure capacity
DURATION_S = 30.0
CAPACITY_S = 5.0
# Open-loop rate as a share of the healthy capacity. A fault adds work: reading around one
# DataNode costs ~60 % more unit reads, hedges more, and everything shares the host's 2 cores.
# At half of capacity (two suite runs, 2026-11-30) the faulty runs of *both* modes saturated
# (queues of seconds, the client behind its schedule): they measured the host, not the read path.
LOAD_SHARE = 1 / 3
WARMUP_S = 10.0         # an open-loop run before the measured ones, not counted
PUT_BYTES = 256 << 20
PUTS = 3                # each kind, alternating; the median counts
FANOUT = 20
QUICK = {"file_bytes": 96 << 20, "duration_s": 12.0, "put_bytes": 64 << 20, "puts": 1}

MODES = {
    "adaptive": HedgeConfig(),                      # the default
    "static": HedgeConfig(threshold_ms=250.0),      # hedgefs before the latency model
    "off": HedgeConfig(enabled=False),
}


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    kind: str = "healthy"         # healthy | hog | delay | freeze
    modes: tuple[str, ...] = ("adaptive", "static")
    victims: int = 0
    delay_ms: int = 0
    probability: float = 1.0
    start: float = 0.1            # fault window, as fractions of the run
    end: float = 0.9
    fanout: int = 1
    read_extra: tuple[int, ...] = (0,)
    whole_stripes: bool = False   # reads of one stripe (6 MiB) instead of 64 KiB


SCENARIOS = (
    Scenario("healthy", "healthy"),
    Scenario("cpu-hog", "healthy, a CPU hog per core", "hog"),
    Scenario("slow-500ms", "one DataNode +500 ms on every read", "delay", ("adaptive", "static", "off"), 1, 500),
    Scenario("tail-1pct-2s", "one DataNode, 1 % of reads +2 s", "delay", victims=1, delay_ms=2000, probability=0.01),
    Scenario("frozen-10s", "one DataNode frozen (SIGSTOP) 10 s", "freeze", victims=1, start=1 / 3, end=2 / 3),
    Scenario("broad-4x300ms", "broad slowdown: four DataNodes +300 ms", "delay", victims=4, delay_ms=300),
    Scenario("fanout-healthy", f"pages of {FANOUT} reads, healthy", modes=("adaptive",), fanout=FANOUT),
    Scenario("fanout-slow-500ms", f"pages of {FANOUT} reads, one DataNode +500 ms", "delay", victims=1, delay_ms=500,
             fanout=FANOUT),
    Scenario("stripes-healthy", "whole-stripe reads, healthy: late binding", modes=("adaptive",), read_extra=(0, 1),
             whole_stripes=True),
    Scenario("stripes-tail-1pct-2s", "whole-stripe reads, one DataNode 1 % +2 s: late binding", "delay",
             ("adaptive",), 1, 2000, 0.01, read_extra=(0, 1), whole_stripes=True),
)
NAMES = [s.name for s in SCENARIOS] + ["put"]


# ---------------------------------------------------------------------------- one run

def _timeline(sc: Scenario, bc: BenchCluster, duration_s: float) -> tuple[list[TimelineEvent], list[str]]:
    if sc.kind not in ("delay", "freeze"):
        return [], []
    victims = bc.victims(sc.victims, PATH)
    start, end = round(sc.start * duration_s, 2), round(sc.end * duration_s, 2)
    return bc.fault_timeline(sc.kind, victims, start, end, sc.delay_ms, sc.probability), victims


def run_one(sc: Scenario, mode: str, read_extra: int, bc: BenchCluster, rate: float, duration_s: float,
            say: Callable[[str], None]) -> dict:
    hedge = dataclasses.replace(MODES[mode], read_extra=read_extra)
    read_size = bc.policies[PATH].stripe_data_size if sc.whole_stripes else DEFAULT_READ_SIZE
    timeline, victims = _timeline(sc, bc, duration_s)
    pages = rate / sc.fanout
    if sc.whole_stripes:
        pages = rate / (10 * bc.policies[PATH].k)   # a tenth of the unit reads of the 64 KiB runs
    bc.restore()
    try:
        with CpuHog() if sc.kind == "hog" else contextlib.nullcontext():
            if sc.kind == "hog":
                # The hogs take half the CPU: the healthy rate would only measure an overload.
                # The same share of what the cluster sustains with them running, instead.
                with bc.fs() as fs:
                    pages = measure_capacity(fs, PATH, threads=THREADS, duration_s=CAPACITY_S) * LOAD_SHARE
            with bc.fs(hedge) as fs:
                run = run_read_bench(fs, PATH, duration_s=duration_s, rate=round(pages, 2), fanout=sc.fanout,
                                     read_size=read_size, timeline=timeline)
    finally:
        bc.restore()
    result = run.to_dict()
    result.update({"scenario": sc.name, "mode": mode, "read_extra": read_extra, "victims": victims})
    s, h = result["summary"], result["host"]
    label = mode + (f", read-extra {read_extra}" if len(sc.read_extra) > 1 else "")
    say(f"   {label:<22} {s['reads']:>6} {'pages' if sc.fanout > 1 else 'reads'} ({s['reads_per_s']:.0f}/s)  "
        f"p50 {s['p50_ms']:.1f}  p99 {s['p99_ms']:.1f}  p99.9 {s['p999_ms']:.1f}  max {s['max_ms']:.1f} ms  "
        f"hedges {s['hedges']} ({s['hedge_wins']})  avoided {s['avoided']}  trips {s['breaker_trips']}  "
        f"extra {s['extra_unit_reads_pct']:.2f} % (worst 1 s {s['max_extra_pct_1s']})  errors {result['errors']}  "
        f"load {h['loadavg_start'][0]}->{h['loadavg_end'][0]}" + ("  SATURATED" if s["load"]["saturated"] else ""))
    return result


def run_puts(bc: BenchCluster, put_bytes: int, puts: int, say: Callable[[str], None]) -> dict:
    """Puts of ``put_bytes``, healthy and with one DataNode frozen (alternating), then the time until
    fsck is HEALTHY again (the NameNode repairs the units the writer dropped)."""
    frozen = bc.least_loaded(PATH)
    times: dict[str, list[float]] = {"healthy": [], "frozen": []}
    dropped = []
    with bc.fs() as fs:
        for i in range(puts):
            for kind in ("healthy", "frozen"):
                path = f"/bench/put-{kind}-{i}.bin"
                if kind == "frozen":
                    bc.cluster.freeze(frozen)
                try:
                    started = time.monotonic()
                    fs.write(path, RandomSource(put_bytes, 100 + i), overwrite=True)
                    times[kind].append(round(time.monotonic() - started, 3))
                finally:
                    if kind == "frozen":
                        bc.cluster.thaw(frozen)
                if kind == "frozen":
                    groups = fs.stat(path).groups
                    dropped.append(sum(1 for g in groups if frozen not in {u.datanode_id for u in g.units.values()}
                                       and len(g.units) < bc.policies[PATH].units))
                say(f"   put {put_bytes >> 20} MiB, {kind:<8}: {times[kind][-1]:.2f} s")
        started = time.monotonic()
        status = ""
        while time.monotonic() - started < 300:
            status = fs.rpc("Fsck", pb.PathRequest(path="/")).status
            if status == "HEALTHY":
                break
            time.sleep(0.5)
        healthy_after = round(time.monotonic() - started, 1)
        for i in range(puts):
            for kind in ("healthy", "frozen"):
                fs.delete(f"/bench/put-{kind}-{i}.bin")
    say(f"   fsck {status} {healthy_after} s after the last put (groups that dropped {frozen}: {dropped})")
    return {"frozen": frozen, "bytes": put_bytes, "seconds": times,
            "median_s": {k: statistics.median(v) for k, v in times.items()},
            "groups_without_frozen": dropped, "fsck": status, "fsck_healthy_after_s": healthy_after,
            "loadavg": [round(x, 2) for x in os.getloadavg()]}


# ---------------------------------------------------------------------------- the suite

def environment() -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=RESULTS_DIR.parent, timeout=5).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "client", "datanode", "namenode", "ec", "bench"],
                                    capture_output=True, text=True, cwd=RESULTS_DIR.parent, timeout=5).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "", False
    return {"cpus": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(), "platform": platform.platform(),
            "commit": commit + ("+dirty" if dirty else "")}


def run_suite(out: pathlib.Path = RESULTS_DIR, quick: bool = False, only: list[str] | None = None,
              command: str | None = None, say: Callable[[str], None] = print) -> dict:
    from hedgefs.bench import plots

    out.mkdir(parents=True, exist_ok=True)
    date = datetime.date.today().isoformat()
    command = command or ("python -m hedgefs.bench.scenarios " + shlex.join(sys.argv[1:])).strip()
    file_bytes = QUICK["file_bytes"] if quick else FILE_BYTES
    duration_s = QUICK["duration_s"] if quick else DURATION_S
    chosen = [s for s in SCENARIOS if not only or s.name in _with_baselines(only)]
    started = time.monotonic()
    doc = {"date": date, "command": command, "quick": quick, "environment": environment(), "runs": []}
    with tempfile.TemporaryDirectory(prefix="hedgefs-bench-") as tmp:
        t = time.monotonic()
        bc = BenchCluster(pathlib.Path(tmp) / "cluster", {PATH: None}, file_bytes)
        try:
            status = bc.status[PATH]
            doc["cluster"] = {"datanodes": 10, "policy": status.policy, "block_size": BLOCK_SIZE,
                              "file_bytes": file_bytes, "groups": len(status.groups),
                              "setup_s": round(time.monotonic() - t, 1), "write_s": round(bc.write_s[PATH], 2),
                              "data_cells_per_datanode": bc.data_cells_per_datanode(PATH)}
            say(f"== cluster up, {file_bytes >> 20} MiB written in {time.monotonic() - t:.1f} s; load average "
                f"{os.getloadavg()[0]:.1f}")
            with bc.fs() as fs:
                capacity = measure_capacity(fs, PATH, threads=THREADS, duration_s=CAPACITY_S)
            rate = round(capacity * LOAD_SHARE, 1)
            # One open-loop run thrown away: the first run after a cluster starts has a tail of its
            # own (measured: healthy p99.9 87 ms first, 12-41 ms in either mode after), and every
            # ratio below is to the healthy run.
            with bc.fs() as fs:
                run_read_bench(fs, PATH, duration_s=WARMUP_S, rate=rate)
            doc["load"] = {"capacity_reads_per_s": round(capacity, 1), "rate": rate, "duration_s": duration_s,
                           "capacity_threads": THREADS, "capacity_s": CAPACITY_S, "warmup_s": WARMUP_S}
            say(f"== healthy capacity {capacity:.0f} reads/s ({THREADS} closed-loop readers, {CAPACITY_S:g} s): "
                f"open loop at {rate:.0f}/s, {duration_s:g} s per run")
            for sc in chosen:
                say(f"== {sc.name}: {sc.title}")
                for mode in sc.modes:
                    for extra in sc.read_extra:
                        doc["runs"].append(run_one(sc, mode, extra, bc, rate, duration_s, say))
            if not only or "put" in only:
                say(f"== put: {(QUICK['put_bytes'] if quick else PUT_BYTES) >> 20} MiB, healthy vs one DataNode frozen")
                doc["puts"] = run_puts(bc, QUICK["put_bytes"] if quick else PUT_BYTES, QUICK["puts"] if quick else PUTS,
                                       say)
        finally:
            bc.down()
    doc["wall_s"] = round(time.monotonic() - started, 1)
    doc["environment"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    doc["targets"] = evaluate_targets(doc)
    for t in doc["targets"]:
        say(f"   target {t['scenario']}: {t['target']}: {t['measured']} -> {'met' if t['met'] else 'MISSED'}")
    base = out / f"{date}-adaptive"
    base.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    doc["plots"] = [p.name for p in plots.suite_plots(doc, out, base.name)]
    base.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    summary = out / f"{base.name}-summary.md"
    summary.write_text(summary_markdown(doc, SCENARIOS, FANOUT))
    say(f"== summary {summary} ({doc['wall_s'] / 60:.1f} min)")
    return doc


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="hedgefs tail-latency suite: open loop, adaptive vs static hedging")
    parser.add_argument("--quick", action="store_true", help="shorter runs, smaller file and puts")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS_DIR, help=f"results directory [{RESULTS_DIR}]")
    parser.add_argument("--only", help="comma-separated scenarios (healthy always runs): " + ", ".join(NAMES))
    parser.add_argument("-v", "--verbose", action="store_true", help="client logs (hedges, DataNodes judged slow)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        only = parse_only(args.only)
    except ValueError as err:
        parser.error(str(err))
    run_suite(args.out, quick=args.quick, only=only, say=lambda s: print(s, flush=True))


def _with_baselines(only: list[str]) -> set[str]:
    """The chosen scenarios and the baselines their ratios are to: healthy always, and the
    healthy fan-out and stripe runs for fan-out and stripe scenarios."""
    names = set(only) | {"healthy"}
    for family in ("fanout", "stripes"):
        if any(n.startswith(family + "-") for n in only):
            names.add(f"{family}-healthy")
    return names


def parse_only(text: str | None) -> list[str] | None:
    if not text:
        return None
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in NAMES]
    if bad:
        raise ValueError(f"no scenario {bad[0]!r}: choose from {', '.join(NAMES)}")
    return names


if __name__ == "__main__":
    main()
