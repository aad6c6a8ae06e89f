"""The tail-latency suite (issue 5): six fault scenarios, hedging off vs on, on real local clusters.

    python -m hedgefs.bench.scenarios [--quick] [--out DIR] [--only N[,N...]]
    hedgefs bench suite [--quick] [--out DIR] [--only N[,N...]]     # the same
    make bench

Each scenario gets a fresh local cluster (NameNode + 10 DataNodes, real processes, in a temp
dir) and one file: 192 MiB written with the default policy RS-6-3-1024k and 2 MiB internal
blocks, i.e. 16 block groups of 2 stripes, so the data cells land on all 10 DataNodes (placement
is least-loaded first). The same load then runs with hedging off, then on (a new client each
time, so breaker and counters start afresh): 8 reader threads, random 64 KiB positional reads
aligned to 64 KiB (one cell, one DataNode per read), for a fixed time, with the fault applied and
removed at fixed times into the run. Faults go to the DataNode(s) holding the most data cells.

Writes, per scenario: `<out>/<date>-<slug>.json` (both runs: summary, counters, percentile curve,
100 ms time series, breaker events, targets), `<date>-<slug>-percentiles.png`,
`<date>-<slug>-timeline.png` (and `<date>-broad-slowdown-hedges.png` for scenario 5); then
`<date>-summary.md` and `<date>-overview.png` for the whole suite.

The targets (issue 5) are evaluated here and reported, never asserted: a missed target is a
result, and the table says by how much.
"""

from __future__ import annotations

import argparse
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
import threading
import time
from typing import Callable

import numpy as np

from hedgefs.bench.read import DEFAULT_READ_SIZE, TimelineEvent, run_read_bench
from hedgefs.client.config import HedgeConfig
from hedgefs.client.fs import FileSystem
from hedgefs.cluster.launcher import LocalCluster, Options
from hedgefs.ec.policy import parse_policy
from hedgefs.proto import hedgefs_pb2 as pb

log = logging.getLogger("hedgefs.bench")

RESULTS_DIR = pathlib.Path(__file__).resolve().parent / "results"
PATH = "/bench/data.bin"
FILE_BYTES = 192 << 20
BLOCK_SIZE = 2 << 20
THREADS = 8
QUICK_FILE_BYTES = 96 << 20


@dataclasses.dataclass(frozen=True)
class Scenario:
    number: int
    slug: str
    title: str
    kind: str  # healthy | delay | freeze | kill
    duration_s: float
    fault_start_s: float | None = None
    fault_end_s: float | None = None  # None: the fault lasts to the end of the run
    victims: int = 1
    delay_ms: int = 0
    probability: float = 1.0

    def scaled(self, factor: float) -> "Scenario":
        def s(v):
            return None if v is None else round(v * factor, 2)
        return dataclasses.replace(self, duration_s=s(self.duration_s), fault_start_s=s(self.fault_start_s),
                                   fault_end_s=s(self.fault_end_s))


SCENARIOS = (
    Scenario(1, "healthy", "healthy cluster", "healthy", 30),
    Scenario(2, "slow-node-500ms", "one DataNode +500 ms on every read", "delay", 30, 3, 27, delay_ms=500),
    Scenario(3, "long-tail-1pct-2s", "one DataNode: 1 % of reads +2 s", "delay", 30, 3, 27, delay_ms=2000,
             probability=0.01),
    Scenario(4, "frozen-node-10s", "one DataNode frozen (SIGSTOP) 10 s, then thawed", "freeze", 30, 10, 20),
    # 40 s: the breaker trips at ~5 s, its 30 s cooldown ends at ~35 s while the fault is still on.
    Scenario(5, "broad-slowdown", "broad slowdown: 4 DataNodes +300 ms", "delay", 40, 4, 38, victims=4,
             delay_ms=300),
    Scenario(6, "killed-node", "one DataNode killed (SIGKILL) mid-run", "kill", 30, 10),
)

QUICK = {  # --quick: same shape, about a third of the time (the freeze is 4 s, not 10 s)
    1: SCENARIOS[0].scaled(1 / 3), 2: SCENARIOS[1].scaled(1 / 3), 3: SCENARIOS[2].scaled(1 / 3),
    4: dataclasses.replace(SCENARIOS[3], duration_s=12, fault_start_s=4, fault_end_s=8),
    5: dataclasses.replace(SCENARIOS[4], duration_s=12, fault_start_s=2, fault_end_s=11),
    6: SCENARIOS[5].scaled(1 / 3),
}

# Scenario 5's third run: the breaker's node count out of the way (it never trips with 10
# DataNodes) and a low hedge cap, so the rate cap is what limits hedging, and can be checked.
CAP_CHECK_PER_SECOND = 10


# ---------------------------------------------------------------------------- the cluster side

class _RandomSource:
    """A file-like source of seeded random bytes (the file is never all in memory)."""

    def __init__(self, size: int, seed: int):
        self._left = size
        self._rng = np.random.default_rng(seed)

    def read(self, n: int = -1) -> bytes:
        n = self._left if n < 0 else min(n, self._left)
        self._left -= n
        return self._rng.bytes(n) if n else b""


class BenchCluster:
    """A fresh LocalCluster with the bench file on it, and the fault verbs the scenarios use."""

    def __init__(self, root: pathlib.Path, file_bytes: int, seed: int = 0):
        self.cluster = LocalCluster(root)
        # No repair during a run: a DataNode is declared dead only after 120 s, longer than any run.
        self.cluster.up(Options(datanodes=10, namenode_port=0, block_size=BLOCK_SIZE, fsync=False,
                                dead_interval_s=120.0))
        with FileSystem(self.cluster.namenode, credentials=self.cluster.credentials) as fs:
            fs.mkdir(os.path.dirname(PATH), parents=True)
            started = time.monotonic()
            fs.write(PATH, _RandomSource(file_bytes, seed), overwrite=True)
            self.write_s = time.monotonic() - started
            self.status = fs.stat(PATH)
        self.policy = parse_policy(self.status.policy)

    @property
    def namenode(self) -> str:
        return self.cluster.namenode

    def data_cells_per_datanode(self) -> dict[str, int]:
        """Data cells of the file per DataNode (reads are spread by data cell)."""
        from hedgefs.ec import layout

        counts = dict.fromkeys(self.cluster.datanode_ids, 0)
        for g in self.status.groups:
            stripes = layout.num_stripes(self.policy, g.length)
            for index in range(self.policy.k):
                loc = g.units.get(index)
                if loc is None:
                    continue
                cells = sum(1 for s in range(stripes) if layout.cell_length(self.policy, g.length, s, index) > 0)
                counts[loc.datanode_id] = counts.get(loc.datanode_id, 0) + cells
        return counts

    def victims(self, n: int) -> list[str]:
        counts = self.data_cells_per_datanode()
        return [dn for dn, _ in sorted(counts.items(), key=lambda kv: (-kv[1], _natural(kv[0])))[:n]]

    def cell_offsets_on(self, datanode: str, limit: int = 16) -> list[int]:
        """File offsets of data cells held by `datanode` (for reads that must touch it)."""
        from hedgefs.ec import layout

        offsets = []
        group_data = layout.group_data_size(self.policy, self.status.block_size)
        for gi, g in enumerate(self.status.groups):
            for index in range(self.policy.k):
                loc = g.units.get(index)
                if loc is None or loc.datanode_id != datanode:
                    continue
                for stripe in range(layout.num_stripes(self.policy, g.length)):
                    offsets.append(gi * group_data + stripe * self.policy.stripe_data_size + index * self.policy.cell_size)
        return offsets[:limit]

    def set_faults(self, datanode: str, config: pb.FaultConfig | None) -> None:
        if config is None:
            self.cluster.datanode_rpc(datanode, "ClearFaults", pb.FaultClearRequest())
        else:
            self.cluster.datanode_rpc(datanode, "SetFaults", config)

    def restore(self, names: list[str]) -> None:
        """Back to healthy between runs: thaw, restart what was killed, clear faults."""
        for name in names:
            state = self.cluster.process_state(name)
            if state == "frozen":
                self.cluster.thaw(name)
            elif state == "stopped":
                self.cluster.restart(name)
            self.set_faults(name, None)
        if names:
            self.cluster.wait_live(self.cluster.datanode_ids, 60)

    def down(self) -> None:
        self.cluster.down()


class FreshClientProbe:
    """Scenario 4: right after the freeze, a brand-new client (no channel to the frozen
    DataNode yet: its first read has to connect) reads cells that live on the frozen node.
    Runs on its own thread so the run's timeline is never held up."""

    def __init__(self, namenode: str, hedge: HedgeConfig, offsets: list[int], read_size: int):
        self.namenode, self.hedge, self.offsets, self.read_size = namenode, hedge, offsets, read_size
        self.latencies_ms: list[float] = []
        self.errors: list[str] = []
        self.started_t: float | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="bench-fresh-client", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            with FileSystem(self.namenode, hedge=self.hedge, credentials=None) as fs:   # an insecure bench cluster
                f = fs.open(PATH)
                for offset in self.offsets:
                    began = time.monotonic()
                    try:
                        f.pread(offset, self.read_size)
                        self.latencies_ms.append(round((time.monotonic() - began) * 1000, 2))
                    except Exception as err:  # noqa: BLE001
                        self.errors.append(f"{type(err).__name__}: {err}")
        except Exception as err:  # noqa: BLE001
            self.errors.append(f"{type(err).__name__}: {err}")

    def join(self, timeout: float) -> None:
        if self._thread:
            self._thread.join(timeout)

    def to_dict(self) -> dict:
        return {"reads": len(self.latencies_ms), "latencies_ms": self.latencies_ms,
                "first_ms": self.latencies_ms[0] if self.latencies_ms else None,
                "max_ms": max(self.latencies_ms) if self.latencies_ms else None, "errors": self.errors}


# ---------------------------------------------------------------------------- one scenario

def _timeline(sc: Scenario, bc: BenchCluster, victims: list[str], extras: dict) -> list[TimelineEvent]:
    if sc.kind == "healthy":
        return []
    names = ", ".join(victims)
    events = []
    if sc.kind == "delay":
        what = f"+{sc.delay_ms} ms" + (f" on {sc.probability:.0%} of reads" if sc.probability < 1 else "")
        config = pb.FaultConfig(read_delay_ms=sc.delay_ms, probability=sc.probability)
        events.append(TimelineEvent(sc.fault_start_s, f"{names}: {what}",
                                    lambda: [bc.set_faults(v, config) for v in victims], "fault-start"))
        if sc.fault_end_s is not None:
            events.append(TimelineEvent(sc.fault_end_s, f"{names}: faults cleared",
                                        lambda: [bc.set_faults(v, None) for v in victims], "fault-end"))
    elif sc.kind == "freeze":
        events.append(TimelineEvent(sc.fault_start_s, f"{names}: SIGSTOP",
                                    lambda: [bc.cluster.freeze(v) for v in victims], "fault-start"))
        probe = extras.get("fresh_client")
        if probe is not None:
            events.append(TimelineEvent(sc.fault_start_s + 0.5, "a new client reads cells on the frozen node",
                                        probe.start, "other"))
        events.append(TimelineEvent(sc.fault_end_s, f"{names}: SIGCONT",
                                    lambda: [bc.cluster.thaw(v) for v in victims], "fault-end"))
    elif sc.kind == "kill":
        events.append(TimelineEvent(sc.fault_start_s, f"{names}: SIGKILL",
                                    lambda: [bc.cluster.kill(v) for v in victims], "fault-start"))
    return events


def run_scenario(sc: Scenario, out: pathlib.Path, date: str, file_bytes: int, command: str,
                 threads: int = THREADS, seed: int = 0, say: Callable[[str], None] = print) -> dict:
    say(f"== scenario {sc.number}: {sc.title} ({sc.duration_s:g} s per run)")
    with tempfile.TemporaryDirectory(prefix=f"hedgefs-bench-{sc.slug}-") as tmp:
        started = time.monotonic()
        bc = BenchCluster(pathlib.Path(tmp) / "cluster", file_bytes, seed)
        setup_s = time.monotonic() - started
        try:
            victims = bc.victims(sc.victims) if sc.kind != "healthy" else []
            cells = bc.data_cells_per_datanode()
            say(f"   cluster up + {file_bytes >> 20} MiB written in {setup_s:.1f} s (write {bc.write_s:.1f} s); "
                f"fault on: {', '.join(victims) or '-'}")
            modes = [("off", HedgeConfig(enabled=False)), ("on", HedgeConfig())]
            if sc.number == 5:
                modes.append(("on_cap", HedgeConfig(max_impaired_nodes=len(cells), max_per_second=CAP_CHECK_PER_SECOND)))
            runs = {}
            for i, (mode, hedge) in enumerate(modes):
                if i:
                    bc.restore(victims)
                extras = {}
                if sc.kind == "freeze":
                    extras["fresh_client"] = FreshClientProbe(bc.namenode, hedge, bc.cell_offsets_on(victims[0], 8),
                                                              DEFAULT_READ_SIZE)
                with FileSystem(bc.namenode, hedge=hedge, credentials=bc.cluster.credentials) as fs:
                    run = run_read_bench(fs, PATH, threads=threads, duration_s=sc.duration_s, seed=seed,
                                         timeline=_timeline(sc, bc, victims, extras))
                result = run.to_dict()
                if "fresh_client" in extras:
                    extras["fresh_client"].join(60)
                    result["fresh_client"] = extras["fresh_client"].to_dict()
                runs[mode] = result
                s = result["summary"]
                say(f"   hedging {mode:<6}: {s['reads']} reads ({s['reads_per_s']:.0f}/s)  p50 {s['p50_ms']:.1f}  "
                    f"p99 {s['p99_ms']:.1f}  p99.9 {s['p999_ms']:.1f}  max {s['max_ms']:.1f} ms  hedges {s['hedges']} "
                    f"(wins {s['hedge_wins']}, refused {s['hedges_refused']})  trips {s['breaker_trips']}  "
                    f"decodes {s['decodes']}  errors {result['errors']}")
                h = result["host"]
                say(f"                   client CPU {h['client_cpu_pct_of_one_core']:.0f} % of a core, event-loop lag "
                    f"p99 {h['loop_lag_p99_ms']} ms max {h['loop_lag_max_ms']} ms, load average "
                    f"{h['loadavg_start'][0]} -> {h['loadavg_end'][0]}")
        finally:
            bc.down()
    doc = {
        "scenario": sc.number,
        "slug": sc.slug,
        "title": sc.title,
        "date": date,
        "command": command,
        "spec": dataclasses.asdict(sc),
        "victims": victims,
        "data_cells_per_datanode": cells,
        "cluster": {"datanodes": 10, "policy": bc.status.policy, "block_size": BLOCK_SIZE, "file_bytes": file_bytes,
                    "groups": len(bc.status.groups), "setup_s": round(setup_s, 2), "write_s": round(bc.write_s, 2)},
        "environment": environment(),
        "runs": runs,
    }
    doc["targets"] = evaluate_targets(doc)
    for t in doc["targets"]:
        say(f"   target {t['target']}: {t['measured']} -> {'met' if t['met'] else 'MISSED'} ({t['margin']})")
    path = out / f"{date}-{sc.slug}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


# ---------------------------------------------------------------------------- targets

def _target(name: str, measured: str, met: bool | None, margin: str) -> dict:
    return {"target": name, "measured": measured, "met": met, "margin": margin}


def evaluate_targets(doc: dict) -> list[dict]:
    """The issue's targets for this scenario, met or not, and by how much."""
    n = doc["scenario"]
    runs = doc["runs"]
    on, off = runs["on"]["summary"], runs["off"]["summary"]
    threshold = runs["on"]["config"]["hedge"]["threshold_ms"]
    spec = doc["spec"]
    out = []
    errors = runs["on"]["errors"] + runs["off"]["errors"]
    if errors:
        out.append(_target("every read succeeds", f"{runs['off']['errors']} failed (off), {runs['on']['errors']} (on)",
                           False, f"{errors} failed reads; e.g. {(runs['on']['error_samples'] or runs['off']['error_samples'])[:1]}"))
    if n == 1:
        pct = on["extra_cell_reads_pct"]
        out.append(_target("extra cell reads <= 0.1 % (hedging on, default threshold)",
                           f"{pct:.4f} % ({on['hedges']} hedges in {on['reads']} reads)", pct <= 0.1,
                           f"{0.1 - pct:+.4f} points under the bound" if pct <= 0.1 else f"{pct - 0.1:.4f} points over"))
    if n in (2, 3):
        bound = threshold + 50
        out.append(_target(f"hedged p99.9 <= threshold + 50 ms = {bound:g} ms", f"{on['p999_ms']:.1f} ms",
                           on["p999_ms"] <= bound, _ms_margin(bound, on["p999_ms"])))
        bound = 2 * threshold
        out.append(_target(f"hedged max <= 2 x threshold = {bound:g} ms", f"{on['max_ms']:.1f} ms",
                           on["max_ms"] <= bound, _ms_margin(bound, on["max_ms"])))
        delay = spec["delay_ms"]
        shows = off["max_ms"] >= delay
        out.append(_target(f"unhedged shows the full delay (max >= {delay} ms)",
                           f"max {off['max_ms']:.1f} ms, p99.9 {off['p999_ms']:.1f} ms, p99 {off['p99_ms']:.1f} ms",
                           shows, f"unhedged max / hedged max = {off['max_ms'] / max(on['max_ms'], 1e-9):.1f}x"))
    if n == 4:
        bound = threshold + 500
        out.append(_target(f"no hedged read > threshold + 500 ms = {bound:g} ms", f"max {on['max_ms']:.1f} ms",
                           on["max_ms"] <= bound, _ms_margin(bound, on["max_ms"])))
        fresh = runs["on"].get("fresh_client") or {}
        if fresh.get("reads"):
            out.append(_target(f"first reads of a new client (connects to the frozen node) <= {bound:g} ms",
                               f"first {fresh['first_ms']:.1f} ms, max of {fresh['reads']} {fresh['max_ms']:.1f} ms",
                               fresh["max_ms"] <= bound, _ms_margin(bound, fresh["max_ms"])))
        elif fresh:
            out.append(_target("first reads of a new client (connects to the frozen node)", "no read completed",
                               False, "; ".join(fresh.get("errors", []))[:200]))
        freeze_ms = (spec["fault_end_s"] - spec["fault_start_s"]) * 1000
        out.append(_target(f"unhedged shows the freeze (max >= 80 % of {freeze_ms:.0f} ms)", f"max {off['max_ms']:.1f} ms",
                           off["max_ms"] >= 0.8 * freeze_ms,
                           f"unhedged max / hedged max = {off['max_ms'] / max(on['max_ms'], 1e-9):.1f}x"))
    if n == 5:
        breaker = runs["on"]["breaker"]
        start = spec["fault_start_s"]
        slow_after = sorted(t for t in breaker["first_slow_s"].values())
        trips = breaker["trips"]
        if len(slow_after) >= 3 and trips:
            third = slow_after[2]
            delta = trips[0]["t"] - third
            out.append(_target("breaker trips within 1 s of the third impaired DataNode",
                               f"3rd impaired at {third:.3f} s, trip at {trips[0]['t']:.3f} s "
                               f"(fault at {start:g} s): {delta * 1000:.0f} ms",
                               delta <= 1.0, f"{(1.0 - delta) * 1000:.0f} ms to spare"))
        else:
            out.append(_target("breaker trips within 1 s of the third impaired DataNode",
                               f"{len(slow_after)} impaired DataNodes seen, {len(trips)} trips", False, "breaker did not trip"))
        for mode in ("on", "on_cap"):
            if mode not in runs:
                continue
            cap = runs[mode]["config"]["hedge"]["max_per_second"]
            peak = runs[mode]["breaker"]["max_hedges_in_any_1s"]
            out.append(_target(f"hedges per second never above max-per-second = {cap} ({mode})",
                               f"peak {peak} hedges in any 1 s window", peak <= cap, f"{cap - peak} under the cap"))
    if n == 6:
        out.append(_target("(no target in the issue) reads survive the kill",
                           f"off: max {off['max_ms']:.1f} ms, {off['decodes']} decodes; on: max {on['max_ms']:.1f} ms, "
                           f"{on['decodes']} decodes", errors == 0, f"{errors} failed reads"))
    return out


def _ms_margin(bound: float, value: float) -> str:
    return f"{bound - value:.1f} ms under" if value <= bound else f"{value - bound:.1f} ms over"


# ---------------------------------------------------------------------------- the suite

def environment() -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=RESULTS_DIR.parent, timeout=5).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "client", "datanode", "namenode", "ec"],
                                    capture_output=True, text=True, cwd=RESULTS_DIR.parent, timeout=5).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "", False
    return {"cpus": os.cpu_count(), "loadavg": [round(x, 2) for x in os.getloadavg()],
            "python": platform.python_version(), "platform": platform.platform(),
            "commit": commit + ("+dirty" if dirty else "")}


def run_suite(out: pathlib.Path = RESULTS_DIR, quick: bool = False, only: list[int] | None = None,
              threads: int = THREADS, command: str | None = None, say: Callable[[str], None] = print) -> list[dict]:
    from hedgefs.bench import plots

    out.mkdir(parents=True, exist_ok=True)
    date = datetime.date.today().isoformat()
    command = command or ("python -m hedgefs.bench.scenarios " + shlex.join(sys.argv[1:])).strip()
    file_bytes = QUICK_FILE_BYTES if quick else FILE_BYTES
    chosen = [QUICK[s.number] if quick else s for s in SCENARIOS if not only or s.number in only]
    started = time.monotonic()
    docs = []
    for sc in chosen:
        t = time.monotonic()
        doc = run_scenario(sc, out, date, file_bytes, command, threads=threads, say=say)
        doc["scenario_wall_s"] = round(time.monotonic() - t, 1)
        doc["plots"] = [png.name for png in plots.scenario_plots(doc, out)]
        for name in doc["plots"]:
            say(f"   plot {out / name}")
        (out / f"{date}-{sc.slug}.json").write_text(json.dumps(doc, indent=1) + "\n")
        docs.append(doc)
    wall = time.monotonic() - started
    write_summary(out, date, quick, docs, say)
    say(f"== suite done in {wall:.0f} s")
    return docs


def write_summary(out: pathlib.Path, date: str, quick: bool = False, docs: list[dict] = (),
                  say: Callable[[str], None] = print) -> pathlib.Path:
    """`<date>-summary.md` and `<date>-overview.png` over every scenario with results of that date
    in `out` (`docs` take precedence), so `--only 4` after a full run refreshes scenario 4's rows
    instead of dropping the others."""
    from hedgefs.bench import plots

    fresh = {d["scenario"] for d in docs}
    every = list(docs) + [d for d in _load_results(out, date) if d["scenario"] not in fresh]
    every.sort(key=lambda d: d["scenario"])
    if not every:
        raise ValueError(f"no results of {date} in {out}")
    quick = quick or any("--quick" in d.get("command", "") for d in every)
    summary = out / f"{date}-summary.md"
    summary.write_text(summary_markdown(every, quick))
    say(f"== summary {summary}")
    if len(every) > 1:
        say(f"   plot {plots.overview_plot(every, out / f'{date}-overview.png')}")
    return summary


def _load_results(out: pathlib.Path, date: str) -> list[dict]:
    docs = []
    for path in sorted(out.glob(f"{date}-*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and "runs" in doc and "scenario" in doc:
            docs.append(doc)
    return docs


def summary_markdown(docs: list[dict], quick: bool) -> str:
    env = docs[0]["environment"] if docs else environment()
    first = docs[0] if docs else {}
    cluster = first.get("cluster", {})
    commands = sorted({d["command"] for d in docs})
    wall_s = sum(d.get("scenario_wall_s", 0) for d in docs)
    lines = [
        f"# Tail latency: hedged striped reads ({docs[0]['date'] if docs else ''}{', quick' if quick else ''})",
        "",
        "Command: " + ", ".join(f"`{c}`" for c in commands) + f" — {wall_s / 60:.1f} min of scenario wall "
        f"time on {env['cpus']} CPUs, commit {env['commit'] or '?'}. The host is shared: see the load average "
        f"and the client's event-loop lag per run.",
        "",
        f"Each scenario: a fresh local cluster (NameNode + 10 DataNodes on one host), a "
        f"{cluster.get('file_bytes', 0) >> 20} MiB file in {cluster.get('policy', '?')} with "
        f"{cluster.get('block_size', 0) >> 20} MiB internal blocks ({cluster.get('groups', '?')} block groups), "
        f"{THREADS} reader threads in one client doing random 64 KiB reads (one cell each), hedging off then on "
        f"(default threshold 250 ms and breaker settings). Latency per read from an HDR-style histogram "
        f"(~2 % buckets).",
        "",
        "| # | scenario | hedging | reads/s | p50 ms | p99 ms | p99.9 ms | max ms | hedges (wins) | refused | "
        "breaker trips | decodes | extra cell reads % | client CPU % | loop lag max ms | load avg |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for doc in docs:
        for mode, run in doc["runs"].items():
            s, h = run["summary"], run["host"]
            label = {"off": "off", "on": "on", "on_cap": f"on, cap {run['config']['hedge']['max_per_second']}/s, "
                     f"no node limit"}[mode]
            lines.append(
                f"| {doc['scenario']} | {doc['title']} | {label} | {s['reads_per_s']:.0f} | {s['p50_ms']:.1f} | "
                f"{s['p99_ms']:.1f} | {s['p999_ms']:.1f} | {s['max_ms']:.1f} | {s['hedges']} ({s['hedge_wins']}) | "
                f"{s['hedges_refused']} | {s['breaker_trips']} | {s['decodes']} | {s['extra_cell_reads_pct']:.3f} | "
                f"{h['client_cpu_pct_of_one_core']:.0f} | {h['loop_lag_max_ms']} | {h['loadavg_start'][0]:.1f} |")
    lines += ["", "## Targets (issue 5)", "", "| # | target | measured | met? | margin |", "|---|---|---|---|---|"]
    for doc in docs:
        for t in doc["targets"]:
            verdict = "met" if t["met"] else "**missed**"
            lines.append(f"| {doc['scenario']} | {t['target']} | {t['measured']} | {verdict} | {t['margin']} |")
    lines += ["", "## Plots", ""]
    for doc in docs:
        pngs = ", ".join(f"[{name}]({name})" for name in doc.get("plots", []))
        lines.append(f"- {doc['scenario']} {doc['title']}: {pngs}")
    if len(docs) > 1:
        lines.append(f"- all scenarios: [{docs[0]['date']}-overview.png]({docs[0]['date']}-overview.png)")
    lines += [
        "",
        "## How to read these numbers",
        "",
        "- Fault DataNodes (the ones holding the most data cells of the file) and the share of reads that "
        "needed them: " + "; ".join(f"{d['scenario']}: {', '.join(d['victims']) or '-'}"
                                    + (f" ({_victim_share(d):.0%})" if d["victims"] else "") for d in docs) + ".",
        "- The load is closed-loop: each reader thread starts its next read when the last one returns. When "
        "every thread is waiting on a slow or frozen DataNode, no new reads start, so the *unhedged* "
        "percentiles understate the damage (coordinated omission): in the freeze scenario every reader "
        "waits out the whole freeze, yet few reads are slow. Read the max and the timelines there; "
        "reads/s shows the lost throughput.",
        "- Percentiles are the upper bounds of ~2 % wide histogram buckets (capped at the max), so a "
        "percentile may read up to 2 % high.",
        "- Everything (NameNode, 10 DataNodes, the client, and whatever else the host runs) shares the "
        "host's CPUs. The client's event-loop lag (how late its asyncio loop ran a callback posted every "
        "100 ms) and the load average are in the table and the timelines, to help tell the host's noise "
        "from the read path's own cost.",
        "",
    ]
    return "\n".join(lines)


def _victim_share(doc: dict) -> float:
    run = doc["runs"]["off"]
    expected = run.get("expected_cell_reads") or 0
    hit = sum(run["summary"]["per_datanode"].get(v, {}).get("cell_reads", 0) for v in doc["victims"])
    return hit / expected if expected else 0.0


def _natural(name: str) -> tuple:
    digits = "".join(ch for ch in name if ch.isdigit())
    return (name.rstrip("0123456789"), int(digits) if digits else 0)


def parse_only(text: str | None) -> list[int] | None:
    if not text:
        return None
    numbers = [int(x) for x in text.replace(" ", "").split(",") if x]
    bad = [x for x in numbers if x not in {s.number for s in SCENARIOS}]
    if bad:
        raise ValueError(f"no scenario {bad[0]}: choose from 1-{len(SCENARIOS)}")
    return numbers


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="hedged-read tail-latency suite (issue 5)")
    parser.add_argument("--quick", action="store_true", help="shorter runs (~1/3 of the time), smaller file")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS_DIR, help=f"results directory [{RESULTS_DIR}]")
    parser.add_argument("--only", help="comma-separated scenario numbers, e.g. 2,4")
    parser.add_argument("--threads", type=int, default=THREADS)
    parser.add_argument("-v", "--verbose", action="store_true", help="client debug logs (hedges, rebuilds)")
    parser.add_argument("--summary-only", metavar="DATE", nargs="?", const=datetime.date.today().isoformat(),
                        help="only redo <DATE>-summary.md and the overview plot from the JSON in --out")
    args = parser.parse_args(argv)
    if args.summary_only:
        write_summary(args.out, args.summary_only, quick=False)
        return
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        only = parse_only(args.only)
    except ValueError as err:
        parser.error(str(err))
    run_suite(args.out, quick=args.quick, only=only, threads=args.threads, say=lambda s: print(s, flush=True))


if __name__ == "__main__":
    main()
