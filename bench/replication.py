"""EC vs replication, side by side: the trade HubSpot made, measured on one cluster.

    hedgefs bench replication [--quick] [--rate R|auto] [--out DIR]
    python -m hedgefs.bench.replication [...]                     # the same
    make bench-replication

One local cluster (NameNode + 10 DataNodes, fsync off, 2 MiB internal blocks as in the scenario
suite, DataNodes declared dead only after 120 s so that nothing is repaired mid-run) holds the
same 192 MiB of seeded random bytes twice: as RS-6-3-1024k (16 block groups of 9 units) and as
REPLICATE-3 (96 blocks of 3 replicas); both cover all ten DataNodes. Then the scenario suite's
faults (healthy; one DataNode +500 ms on every read; one DataNode, 1 % of its reads +2 s; one
DataNode frozen 10 s; one killed) each run four times: each file, hedging off and on (the
client's defaults: the adaptive threshold, the breaker, the budget), a fresh client every time,
open loop at R reads per second of 64 KiB at random offsets (latency from each read's scheduled
start: a stall is measured, not skipped). ``--rate auto`` (the default): a third of the healthy capacity
of the slower file (8 closed-loop readers for 5 s on each), as in the scenario suite
(``LOAD_SHARE``: at half, faulty runs saturate a 2-core host), so both files see the same load;
then a warm-up run of each file, not counted. The faulted DataNode is the same for both files: the one with the largest
share of both files' data.

Reported per run: reads, p50 / p99 / p99.9 / max (ms), p99.9 as a multiple of the same file's and
mode's healthy p99.9, extra unit reads (% of those the reads needed: hedges, rebuild sources,
failovers, probes), hedges and wins. Per file: disk bytes per file byte, counted on the
DataNodes' disks (block files and their CRC sidecars). Written to ``--out``:
``<date>-ec-vs-replication.json`` (everything, with each run's 100 ms time series), ``.md`` (the table, the command, load averages)
and ``-overview.png`` (p99, p99.9 and max per scenario and run).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import pathlib
import shlex
import sys
import tempfile
import time
from typing import Callable

from hedgefs.bench.cluster import BLOCK_SIZE, DATANODES, BenchCluster
from hedgefs.bench.read import TimelineEvent, measure_capacity, run_read_bench
from hedgefs.bench.scenarios import LOAD_SHARE, RESULTS_DIR, WARMUP_S, environment
from hedgefs.client.config import HedgeConfig
from hedgefs.client.fs import FileSystem

FILE_BYTES = 192 << 20
QUICK_FILE_BYTES = 96 << 20
LAG_DISTURBED_MS = 20.0   # client event-loop lag (p99) above which a run was starved by the machine
CAPACITY_S = 5.0      # closed-loop seconds per file that measure the healthy capacity (--rate auto)
FILES = {"RS-6-3-1024k": "/bench/rs-6-3.bin", "REPLICATE-3": "/bench/replicate-3.bin"}
MODES = {"off": HedgeConfig(enabled=False), "on": HedgeConfig()}


@dataclasses.dataclass(frozen=True)
class Fault:
    slug: str
    title: str
    short: str                     # a plot's label
    kind: str                      # healthy | delay | freeze | kill
    duration_s: float
    start_s: float | None = None
    end_s: float | None = None     # None: to the end of the run
    delay_ms: int = 0
    probability: float = 1.0

    def scaled(self, factor: float) -> "Fault":
        def s(v):
            return None if v is None else round(v * factor, 2)
        return dataclasses.replace(self, duration_s=s(self.duration_s), start_s=s(self.start_s), end_s=s(self.end_s))


# The scenario suite's faults (bench/scenarios.py), less the broad slowdown (a test of the breaker).
FAULTS = (
    Fault("healthy", "healthy", "healthy", "healthy", 30),
    Fault("slow-node-500ms", "one DataNode +500 ms on every read", "one slow\n+500 ms", "delay", 30, 3, 27, delay_ms=500),
    Fault("long-tail-1pct-2s", "one DataNode, 1 % of its reads +2 s", "one: 1 %\n+2 s", "delay", 30, 3, 27,
          delay_ms=2000, probability=0.01),
    Fault("frozen-node-10s", "one DataNode frozen (SIGSTOP) 10 s", "one frozen\n10 s", "freeze", 30, 10, 20),
    Fault("killed-node", "one DataNode killed (SIGKILL) mid-run", "one killed", "kill", 30, 10),
)


def run_comparison(out: pathlib.Path = RESULTS_DIR, quick: bool = False, rate: float | None = None, seed: int = 0,
                   command: str | None = None, say: Callable[[str], None] = print) -> dict:
    """Run the comparison (``rate`` None: auto) and write its results to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    date = datetime.date.today().isoformat()
    command = command or ("python -m hedgefs.bench.replication " + shlex.join(sys.argv[1:])).strip()
    file_bytes = QUICK_FILE_BYTES if quick else FILE_BYTES
    faults = [f.scaled(1 / 3) for f in FAULTS] if quick else list(FAULTS)
    started = time.monotonic()
    env_start = environment()
    say(f"== EC vs replication: {file_bytes >> 20} MiB as {' and '.join(FILES)}, {DATANODES} DataNodes; "
        f"load average {env_start['loadavg']}")
    capacity: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="hedgefs-bench-replication-") as tmp:
        c = BenchCluster(pathlib.Path(tmp) / "cluster", {path: policy for policy, path in FILES.items()}, file_bytes,
                         seed)
        try:
            write_s = _by_policy({path: round(s, 2) for path, s in c.write_s.items()})
            disk = _by_policy(c.disk_bytes())
            victim = c.victim()
            shares = {dn: _by_policy(share) for dn, share in c.data_share().items()}
            say(f"   written in {write_s} s; disk bytes per file byte: "
                + ", ".join(f"{p} {disk[p] / file_bytes:.3f}" for p in FILES)
                + f"; faults go to {victim} (" + ", ".join(f"{p} {shares[victim][p]:.0%}" for p in FILES)
                + " of the data)")
            if rate is None:
                for policy, path in FILES.items():
                    with FileSystem(c.namenode) as fs:
                        capacity[policy] = round(measure_capacity(fs, path, duration_s=CAPACITY_S, seed=seed + 1), 1)
                rate = round(min(capacity.values()) * LOAD_SHARE, 1)
                say(f"   healthy capacity (8 closed-loop readers, reads/s): {capacity}; open loop at "
                    f"{LOAD_SHARE:.0%} of the lower: {rate:g} reads/s")
            for policy, path in FILES.items():   # warm-up: connections, caches, the first reads' costs
                with FileSystem(c.namenode) as fs:
                    run_read_bench(fs, path, rate=rate, duration_s=WARMUP_S / (3 if quick else 1), seed=seed + 2)
            runs = []
            for fault in faults:
                say(f"== {fault.title} ({fault.duration_s:g} s per run)")
                for mode, hedge in MODES.items():   # the two files back to back: the same moment's load
                    for policy, path in FILES.items():
                        with FileSystem(c.namenode, hedge=hedge) as fs:
                            run = run_read_bench(fs, path, rate=rate, duration_s=fault.duration_s, seed=seed,
                                                 timeline=_timeline(c, fault, victim))
                        doc = run.to_dict()
                        c.restore([victim])
                        runs.append({"fault": fault.slug, "title": fault.title, "policy": policy, "hedging": mode,
                                     "summary": doc["summary"], "counters": doc.get("counters"),
                                     "percentile_curve": doc.get("percentile_curve"), "events": doc.get("events"),
                                     "errors": doc.get("errors"), "host": doc.get("host"),
                                     "breaker": doc.get("breaker"), "series": doc.get("series"),
                                     "config": doc.get("config")})
                        s = doc["summary"]
                        say(f"   {policy:<13} hedging {mode:<3}: {s['reads']} reads  p50 {s['p50_ms']:.1f}  "
                            f"p99 {s['p99_ms']:.1f}  p99.9 {s['p999_ms']:.1f}  max {s['max_ms']:.1f} ms  "
                            f"extra {s['extra_unit_reads_pct']:.2f} %  hedges {s['hedges']} (wins {s['hedge_wins']})  "
                            f"errors {doc.get('errors')}")
        finally:
            c.down()
    result = {
        "date": date, "command": command, "seconds": round(time.monotonic() - started, 1),
        "environment_start": env_start, "environment_end": environment(),
        "cluster": {"datanodes": DATANODES, "block_size": BLOCK_SIZE, "file_bytes": file_bytes,
                    "write_s": write_s, "disk_bytes": disk,
                    "disk_bytes_per_file_byte": {p: round(disk[p] / file_bytes, 4) for p in FILES},
                    "victim": victim, "victim_share": shares[victim]},
        "rate": rate, "capacity": capacity, "faults": [dataclasses.asdict(f) for f in faults], "runs": runs,
    }
    stem = f"{date}-ec-vs-replication" + ("-quick" if quick else "")
    (out / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / f"{stem}.md").write_text(summary_markdown(result))
    try:
        overview_plot(result, out / f"{stem}-overview.png")
    except RuntimeError as err:   # no matplotlib: the numbers still stand
        say(f"   no plot: {err}")
    say(f"== done in {result['seconds']:.0f} s: {out / stem}.{{json,md}}, {stem}-overview.png")
    return result


def _by_policy(per_path: dict) -> dict:
    """A per-file dict of the cluster's (by path) keyed by the files' policies, as reported."""
    return {policy: per_path[path] for policy, path in FILES.items()}


def _timeline(c: BenchCluster, fault: Fault, victim: str) -> list[TimelineEvent]:
    return c.fault_timeline(fault.kind, [victim], fault.start_s, fault.end_s, fault.delay_ms, fault.probability)


def _lag(run: dict) -> str:
    lag = (run.get("host") or {}).get("loop_lag_p99_ms")
    return "-" if lag is None else f"{lag:.1f}" + (" !" if lag > LAG_DISTURBED_MS else "")


def _healthy(result: dict, policy: str, mode: str) -> dict | None:
    return next((r["summary"] for r in result["runs"]
                 if r["fault"] == "healthy" and r["policy"] == policy and r["hedging"] == mode), None)


def summary_markdown(result: dict) -> str:
    c = result["cluster"]
    start, end = result["environment_start"], result["environment_end"]
    lines = [
        f"# EC vs replication, {result['date']}",
        "",
        f"Command: `{result['command']}` ({result['seconds']:.0f} s). Commit {start.get('commit', '')}, "
        f"{start.get('cpus')} CPUs; load average {start['loadavg']} at the start, {end['loadavg']} at the end.",
        "",
        f"One cluster of {c['datanodes']} DataNodes; the same {c['file_bytes'] >> 20} MiB as "
        + " and as ".join(f"{p} ({c['write_s'][p]} s to write)" for p in c["disk_bytes"])
        + f", {c['block_size'] >> 20} MiB internal blocks; {result['rate']:g} random 64 KiB reads per second"
        + (f" ({LOAD_SHARE:.0%} of the healthy capacity of the slower file: " + ", ".join(
            f"{p} {v:g}" for p, v in result["capacity"].items()) + " reads/s closed loop)" if result.get("capacity")
           else "")
        + ", open loop, latency from each read's scheduled start, after a warm-up run of each file; a fresh "
        "client per run. Faults on "
        f"{c['victim']}, which holds " + ", ".join(f"{v:.0%} of the {p} data" for p, v in c["victim_share"].items())
        + ".",
        "",
        "Disk bytes per file byte (block files and CRC sidecars on the DataNodes' disks): "
        + ", ".join(f"**{p} {v:.3f}**" for p, v in c["disk_bytes_per_file_byte"].items()) + ".",
        "",
        "| scenario | file | hedging | p50 ms | p99 ms | p99.9 ms | max ms | p99.9 / healthy | extra reads | hedges (wins) "
        "| client lag p99 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["runs"]:
        s = r["summary"]
        base = _healthy(result, r["policy"], r["hedging"])
        ratio = f"{s['p999_ms'] / base['p999_ms']:.1f} x" if base and base["p999_ms"] else "-"
        lines.append(f"| {r['title']} | {r['policy']} | {r['hedging']} | {s['p50_ms']:.1f} | {s['p99_ms']:.1f} | "
                     f"{s['p999_ms']:.1f} | {s['max_ms']:.1f} | {ratio} | {s['extra_unit_reads_pct']:.2f} % | "
                     f"{s['hedges']} ({s['hedge_wins']}) | {_lag(r)} |")
    errors = [(r["title"], r["policy"], r["hedging"], r["errors"]) for r in result["runs"] if r.get("errors")]
    lines += ["", "Client lag: the p99 of how late the client's event loop ran a 100 ms timer during the run. "
              f"Over {LAG_DISTURBED_MS:g} ms (marked !) the client was short of CPU (its own work, or the machine's: "
              "see the load average) and every read in flight waited for it.",
              "", "Read errors: " + ("none" if not errors else "; ".join(f"{t} {p} {m}: {e}" for t, p, m, e in errors)),
              "", f"![p99, p99.9 and max per scenario]({pathlib.Path(result['date'] + '-ec-vs-replication').name}"
              "-overview.png)", ""]
    return "\n".join(lines)


COLORS = {("RS-6-3-1024k", "off"): "#e59866", ("RS-6-3-1024k", "on"): "#c0392b",
          ("REPLICATE-3", "off"): "#85c1e9", ("REPLICATE-3", "on"): "#1f5fa8"}


def overview_plot(result: dict, path: pathlib.Path) -> pathlib.Path:
    from hedgefs.bench.plots import _plt

    plt = _plt()
    faults = [f["slug"] for f in result["faults"]]
    labels = {f["slug"]: f["short"] for f in result["faults"]}
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    width = 0.2
    for ax, key, label in ((axes[0], "p99_ms", "p99 (ms)"), (axes[1], "p999_ms", "p99.9 (ms)"),
                           (axes[2], "max_ms", "max (ms)")):
        for j, (series, color) in enumerate(COLORS.items()):
            values = []
            for slug in faults:
                run = next((r for r in result["runs"] if r["fault"] == slug and (r["policy"], r["hedging"]) == series), None)
                values.append(run["summary"][key] if run else 0)
            xs = [i + (j - 1.5) * width for i in range(len(faults))]
            ax.bar(xs, values, width, color=color, label=f"{series[0]}, hedging {series[1]}")
        ax.set_yscale("log")
        ax.set_ylabel(label)
        ax.set_xticks(range(len(faults)))
        ax.set_xticklabels([labels[s] for s in faults], fontsize=8)
        ax.grid(axis="y", which="both", alpha=0.3)
    disk = result["cluster"]["disk_bytes_per_file_byte"]
    axes[0].legend(fontsize=8)
    fig.suptitle(f"EC vs replication, one cluster, {result['rate']:g} reads/s open loop; disk per byte: "
                 + ", ".join(f"{p} {v:.2f}" for p, v in disk.items()), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m hedgefs.bench.replication", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a third of the time and half the file")
    parser.add_argument("--rate", default="auto", help="reads per second, open loop, or auto: a third of the "
                                                       "healthy capacity of the slower file [auto]")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    run_comparison(args.out, args.quick, None if args.rate == "auto" else float(args.rate))


if __name__ == "__main__":
    main()
