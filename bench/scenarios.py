"""The tail-latency suite: RS vs LRC vs replication through fault scenarios, each fault run
beside a healthy run of the same cluster and file, repeated, so that 1.2 x can be told from 1.4 x.

    python -m hedgefs.bench.scenarios [--quick] [--reps N] [--policies P,...] [--only NAME,...] [--out DIR]
    hedgefs bench suite ...      # the same
    make bench

One fresh local cluster (NameNode + 12 DataNodes: the 10 units of an LRC-6-2-2 group and 2
spares, real processes in a temp dir) and one 192 MiB file per policy, RS-6-3-1024k,
LRC-6-2-2-1024k and REPLICATE-3, 2 MiB internal blocks. The healthy capacity is measured once
(8 closed-loop readers on the RS file) and every run reads **open loop** at a third of it
(``bench.read``: Poisson arrivals, latency from the scheduled start, the same seed in every run),
random 64 KiB reads (one cell, one DataNode each), a new client per run.

**Rounds.** Each round runs, per policy, each fault scenario as a triple on the same file:
healthy, fault, **oracle** (the same fault, with the reads scheduled in the fault window leaving
the faulty DataNode out from their first read: the best any detection could do; EC policies
only, since reading another replica instead costs nothing). Rounds repeat
``--reps`` times (3; ``--quick`` 1), interleaved across policies, so a slow spell of the shared
host lands on all of them. Every ratio is a fault run's p99.9 over its own preceding healthy
run's, reported as the median of the rounds with its range (min-max). Beside the whole run's
p99.9: the fault window's own, and the p99.9 without the 100 ms buckets a host stall touched.

**Canary** (bench/canary.py): a process outside the client, sleeping 1 ms and recording its
overshoot for the whole suite; every run gets its verdict (quiet, stalls, stalled). **Breakdown**
(bench/trace.py): the slowest reads of every run split into dispatch and loop wait, unit reads
and decode. **Floors** (bench/rounds.py): each fault row's extra unit reads beside
duty x share x (sources - 1). The targets (bench/targets.py) are issue 25's, evaluated row by
row and never asserted; the summary's markdown is bench/report.py; the checks beside the rounds
(closed-loop readers, a new client's 24 MiB read, puts) bench/checks.py.

Writes ``<date>-suite.json`` (every run: summary, window and canary figures, breakdown, series,
events), ``<date>-suite-summary.md`` and PNG plots to ``--out`` (``--name`` changes the stem).
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
import subprocess
import sys
import tempfile
import time
from typing import Callable

from hedgefs.bench import canary as canary_mod
from hedgefs.bench import checks
from hedgefs.bench.cluster import BLOCK_SIZE, BenchCluster, CpuHog, path_of
from hedgefs.bench.read import measure_capacity, run_read_bench
from hedgefs.bench.report import summary_markdown
from hedgefs.bench.rounds import duty, floor_pct, rescue_sources
from hedgefs.bench.targets import aggregate, evaluate_targets
from hedgefs.bench.timeseries import ms
from hedgefs.bench.trace import ReadTracer, breakdown, installed
from hedgefs.client.config import HedgeConfig

log = logging.getLogger("hedgefs.bench")

RESULTS_DIR = pathlib.Path(__file__).resolve().parent / "results"
DATANODES = 12
POLICIES = ("RS-6-3-1024k", "LRC-6-2-2-1024k", "REPLICATE-3")
FILE_BYTES = 192 << 20
THREADS = 8             # closed-loop readers that measure capacity
DURATION_S = 16.0
REPS = 3
CAPACITY_S = 5.0
# Open-loop rate as a share of the healthy capacity: at half (two suite runs, 2026-11-30) the
# faulty runs saturated, measuring the host rather than the read path.
LOAD_SHARE = 1 / 3
WARMUP_S = 8.0          # an open-loop run per file before the measured ones, not counted
FANOUT = 20
SLOWEST = 12            # reads kept, broken down, per run
QUICK = {"file_bytes": 48 << 20, "duration_s": 5.0, "reps": 1, "warmup_s": 2.0}   # a few minutes
ADAPTIVE = HedgeConfig()


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    kind: str = "delay"            # delay | freeze | hog
    victims: int = 1
    delay_ms: int = 0
    probability: float = 1.0
    start: float = 0.1             # fault window, as fractions of the run
    end: float = 0.9
    fanout: int = 1
    policies: tuple[str, ...] = POLICIES
    oracle: bool = True
    default: bool = True           # in the suite without --only


SCENARIOS = (
    Scenario("slow-500ms", "one DataNode +500 ms on every read", delay_ms=500),
    Scenario("tail-1pct-2s", "one DataNode, 1 % of reads +2 s", delay_ms=2000, probability=0.01),
    # 10 s of a 16 s run (quick: 3 of 5)
    Scenario("frozen-10s", "one DataNode frozen (SIGSTOP) 10 s", "freeze", start=0.1875, end=0.8125),
    Scenario("cpu-hog", "healthy, a CPU hog per core", "hog", victims=0, policies=POLICIES, oracle=False),
    Scenario("fanout-slow-500ms", f"pages of {FANOUT} reads, one DataNode +500 ms", delay_ms=500, fanout=FANOUT,
             policies=POLICIES[:2], oracle=False),
    Scenario("broad-4x300ms", "broad slowdown: four DataNodes +300 ms", victims=4, delay_ms=300,
             policies=POLICIES[:2], oracle=False, default=False),
)
STEPS = ("closed-loop", "new-client", "put")   # checks beside the rounds (bench/checks.py)
DEFAULT_STEPS = ("closed-loop", "new-client")
NAMES = [s.name for s in SCENARIOS] + list(STEPS)


# ---------------------------------------------------------------------------- one run

@dataclasses.dataclass
class Ctx:
    bc: BenchCluster
    rate: float
    duration_s: float
    canary: canary_mod.Canary
    say: Callable[[str], None]
    victims: dict = dataclasses.field(default_factory=dict)   # policy -> DataNodes by healthy reads, most first
    hog_rate: float | None = None


def run_one(ctx: Ctx, sc: Scenario, policy: str, kind: str, rep: int, base: dict | None = None) -> dict:
    """One run of ``sc`` on ``policy``'s file: ``kind`` healthy (its page shape, no fault), fault,
    or oracle (the fault, and the window's reads leave the victims out)."""
    bc, path, dur = ctx.bc, path_of(policy), ctx.duration_s
    rate = ctx.rate / sc.fanout
    start, end = round(sc.start * dur, 2), round(sc.end * dur, 2)
    victims = ctx.victims.get(policy, [])[:sc.victims] if kind != "healthy" else []
    timeline = bc.fault_timeline(sc.kind, victims, start, end, sc.delay_ms, sc.probability) \
        if kind != "healthy" and sc.kind in ("delay", "freeze") else []
    exclude = (start, end, frozenset(victims)) if kind == "oracle" else None
    tracer = ReadTracer()
    bc.restore()
    try:
        with CpuHog() if kind == "fault" and sc.kind == "hog" else contextlib.nullcontext():
            if kind == "fault" and sc.kind == "hog":
                if ctx.hog_rate is None:   # the hogs take half the CPU: a third of what is left, measured once
                    with bc.fs() as fs:
                        ctx.hog_rate = round(measure_capacity(fs, path, threads=THREADS, duration_s=CAPACITY_S)
                                             * LOAD_SHARE, 1)
                rate = ctx.hog_rate
            with bc.fs(ADAPTIVE) as fs, installed(fs):
                run = run_read_bench(fs, path, duration_s=dur, rate=round(rate, 2), fanout=sc.fanout,
                                     timeline=timeline, tracer=tracer, exclude=exclude)
    finally:
        bc.restore()
    result = run.to_dict()
    result["host"].pop("loop_lag", None)
    result.update({"scenario": sc.name, "policy": policy, "kind": kind, "rep": rep, "victims": victims,
                   "fanout": sc.fanout, "window_s": [start, end] if sc.kind in ("delay", "freeze") else [0.0, dur]})
    _measures(result, run, tracer, ctx, sc, policy, kind, base)
    s, h, m = result["summary"], result["host"], result["measures"]
    ctx.say(f"   r{rep} {policy:<16} {kind:<7} {s['reads']:>6} {'pages' if sc.fanout > 1 else 'reads'}  "
            f"p99.9 {s['p999_ms']:.1f} (window {m['window_p999_ms']:.1f})  max {s['max_ms']:.1f} ms  "
            f"extra {s['extra_unit_reads_pct']:.2f} % (floor {m['floor_pct']:.1f})  hedges {s['hedges']} "
            f"(overtaken {result['counters']['hedges_overtaken']}, cold {result['counters']['hedges_cold']})  "
            f"trips {s['breaker_trips']}  errors {result['errors']}  load {h['loadavg_start'][0]}  "
            f"canary {m['canary']['verdict']} {m['canary']['worst_ms']} ms  gc max {h['gc']['max_ms']} ms"
            + ("  SATURATED" if s["load"]["saturated"] else ""))
    return result


def _measures(result: dict, run, tracer: ReadTracer, ctx: Ctx, sc: Scenario, policy: str, kind: str,
              base: dict | None) -> None:
    """The window's p99.9, the canary's word, the floor and the slow reads' breakdown."""
    start, end = result["window_s"]
    t0 = run.t0
    verdict = canary_mod.verdict(ctx.canary.samples(), t0, t0 + run.wall_s)
    skip = canary_mod.touched_buckets(verdict["windows"], run.series.bucket_s)
    clean = run.series.window(0.0, run.wall_s + 1.0, skip)
    win = run.series.window(start, end)
    done = sorted(r[7] - r[0] for r in tracer.records if r[7] is not None)
    cut = done[-max(5, len(done) // 1000)] if done else 0.0
    share, sources = 0.0, rescue_sources(ctx.bc.policies[path_of(policy)])
    victims = result["victims"]
    if base is not None and victims:
        per = base["summary"]["per_datanode"]
        total = sum(row["unit_reads"] for row in per.values())
        share = sum(per.get(v, {}).get("unit_reads", 0) for v in victims) / total if total else 0.0
    d = duty(result["series"], start, end) if victims else 0.0
    # The oracle reads around the DataNode for the whole window, whatever share of its reads is slow.
    floor = floor_pct(d, share, sources, 1.0 if kind == "oracle" else sc.probability) \
        if kind != "healthy" and sc.kind in ("delay", "freeze") else 0.0
    result["measures"] = {
        "window_p999_ms": ms(win.percentile(99.9)), "window_max_ms": ms(win.max_s), "window_reads": win.count,
        "clean_p999_ms": ms(clean.percentile(99.9)), "clean_reads": clean.count, "stall_buckets": len(skip),
        "canary": verdict, "duty": round(d, 4), "share": round(share, 4), "sources": sources,
        "floor_pct": round(floor, 3), "breakdown": breakdown(tracer.records, cut),
        "slowest": tracer.slowest(SLOWEST, t0),
        "marked_slow": sorted(result["breaker"]["first_slow_s"]),
    }


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
              policies: list[str] | None = None, reps: int | None = None, name: str = "suite",
              command: str | None = None, say: Callable[[str], None] = print) -> dict:
    from hedgefs.bench import plots

    out.mkdir(parents=True, exist_ok=True)
    date = datetime.date.today().isoformat()
    command = command or ("python -m hedgefs.bench.scenarios " + shlex.join(sys.argv[1:])).strip()
    file_bytes = QUICK["file_bytes"] if quick else FILE_BYTES
    duration_s = QUICK["duration_s"] if quick else DURATION_S
    reps = reps or (QUICK["reps"] if quick else REPS)
    policies = policies or list(POLICIES)
    chosen = [s for s in SCENARIOS if (s.name in only if only else s.default)]
    steps = [s for s in STEPS if (s in only if only else s in DEFAULT_STEPS)]
    base = out / f"{date}-{name}"
    started = time.monotonic()
    doc = {"date": date, "command": command, "quick": quick, "environment": environment(), "runs": [],
           "reps": reps, "policies": policies, "scenarios": [dataclasses.asdict(s) for s in chosen], "checks": {}}
    with tempfile.TemporaryDirectory(prefix="hedgefs-bench-") as tmp, \
            canary_mod.Canary(pathlib.Path(tmp) / "canary.txt") as canary:
        t = time.monotonic()
        bc = BenchCluster(pathlib.Path(tmp) / "cluster", {path_of(p): p for p in policies}, file_bytes,
                          datanodes=DATANODES)
        try:
            doc["cluster"] = {"datanodes": DATANODES, "block_size": BLOCK_SIZE, "file_bytes": file_bytes,
                              "files": {p: {"path": path_of(p), "groups": len(bc.status[path_of(p)].groups),
                                            "write_s": round(bc.write_s[path_of(p)], 2)} for p in policies},
                              "setup_s": round(time.monotonic() - t, 1)}
            say(f"== cluster up ({DATANODES} DataNodes), {len(policies)} files of {file_bytes >> 20} MiB in "
                f"{time.monotonic() - t:.1f} s; load average {os.getloadavg()[0]:.1f}")
            with bc.fs() as fs:
                capacity = measure_capacity(fs, path_of(policies[0]), threads=THREADS, duration_s=CAPACITY_S)
            rate = round(capacity * LOAD_SHARE, 1)
            warmup = QUICK["warmup_s"] if quick else WARMUP_S
            for p in policies:   # the first open-loop run after a start has a tail of its own
                with bc.fs() as fs:
                    run_read_bench(fs, path_of(p), duration_s=warmup, rate=rate)
            doc["load"] = {"capacity_reads_per_s": round(capacity, 1), "capacity_policy": policies[0], "rate": rate,
                           "duration_s": duration_s, "capacity_threads": THREADS, "capacity_s": CAPACITY_S,
                           "warmup_s": warmup}
            say(f"== healthy capacity {capacity:.0f} reads/s ({policies[0]}, {THREADS} closed-loop readers): "
                f"open loop at {rate:.0f}/s, {duration_s:g} s per run, {reps} round(s)")
            ctx = Ctx(bc, rate, duration_s, canary, say)
            for rep in range(reps):
                for policy in policies:
                    for sc in chosen:
                        if policy not in sc.policies:
                            continue
                        say(f"== round {rep + 1}/{reps} {policy} {sc.name}: {sc.title}")
                        healthy = dataclasses.replace(sc, kind="healthy")
                        h = run_one(ctx, healthy, policy, "healthy", rep)
                        doc["runs"].append(h)
                        if policy not in ctx.victims:
                            per = h["summary"]["per_datanode"]
                            ctx.victims[policy] = sorted(per, key=lambda dn: -per[dn]["unit_reads"])
                        doc["runs"].append(run_one(ctx, sc, policy, "fault", rep, h))
                        if sc.oracle and not bc.policies[path_of(policy)].replicated:   # a replica is no cost
                            doc["runs"].append(run_one(ctx, sc, policy, "oracle", rep, h))
                base.with_suffix(".json").write_text(json.dumps(doc) + "\n")   # a crash keeps the rounds so far
            doc["load"]["hog_rate"] = ctx.hog_rate
            for step in steps:
                say(f"== {step}")
                doc["checks"][step] = checks.STEPS[step](ctx, [p for p in policies if p != "REPLICATE-3"] or policies,
                                                         quick)
            doc["canary"] = {"alive_s": canary.alive_seconds(),
                             "suite": canary_mod.verdict(canary.samples(), 0.0, time.monotonic())}
        finally:
            bc.down()
    doc["wall_s"] = round(time.monotonic() - started, 1)
    doc["environment"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    doc["rows"] = aggregate(doc)
    doc["targets"] = evaluate_targets(doc)
    for t in doc["targets"]:
        say(f"   target {t['scenario']}: {t['target']}: {t['measured']} -> "
            f"{'met' if t['met'] else '-' if t['met'] is None else 'MISSED'}")
    doc["plots"] = [p.name for p in plots.suite_plots(doc, out, base.name)]
    base.with_suffix(".json").write_text(json.dumps(doc) + "\n")
    summary = out / f"{base.name}-summary.md"
    summary.write_text(summary_markdown(doc))
    say(f"== summary {summary} ({doc['wall_s'] / 60:.1f} min)")
    return doc


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="hedgefs tail-latency suite: RS vs LRC vs replication, "
                                                 "interleaved healthy / fault / oracle rounds")
    parser.add_argument("--quick", action="store_true", help="shorter runs, smaller files, one round")
    parser.add_argument("--reps", type=int, help=f"rounds [{REPS}; --quick {QUICK['reps']}]")
    parser.add_argument("--policies", help="comma-separated policies [" + ",".join(POLICIES) + "]")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS_DIR, help=f"results directory [{RESULTS_DIR}]")
    parser.add_argument("--name", default="suite", help="results file stem after the date [suite]")
    parser.add_argument("--only", help="comma-separated scenarios and checks: " + ", ".join(NAMES))
    parser.add_argument("-v", "--verbose", action="store_true", help="client logs (hedges, DataNodes judged slow)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        only, policies = parse_only(args.only), parse_policies(args.policies)
        if args.reps is not None and args.reps < 1:
            raise ValueError("--reps must be >= 1")
    except ValueError as err:
        parser.error(str(err))
    run_suite(args.out, quick=args.quick, only=only, policies=policies, reps=args.reps, name=args.name,
              say=lambda s: print(s, flush=True))


def parse_only(text: str | None) -> list[str] | None:
    if not text:
        return None
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in NAMES]
    if bad:
        raise ValueError(f"no scenario {bad[0]!r}: choose from {', '.join(NAMES)}")
    return names


def parse_policies(text: str | None) -> list[str] | None:
    if not text:
        return None
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in POLICIES]
    if bad or not names:
        raise ValueError(f"no policy {(bad or [text])[0]!r} in the suite: choose from {', '.join(POLICIES)}")
    return names


if __name__ == "__main__":
    main()
