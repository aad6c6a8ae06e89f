"""A healthy cluster under a closed loop of reader threads (issue 25's target: "healthy, 4
closed-loop reader threads, 5 runs: no DataNode marked slow in any run; extra unit reads <= 1 %").

    python -m hedgefs.bench.closed_loop_healthy [--runs 5] [--threads 4] [--duration-s 10]
                                                [--size-mib 64] [--json out.json]

One cluster (10 DataNodes, the default policy), one file; each run is a fresh `hedgefs -v bench
read --threads N --duration S --json --seed run` process (a new client: its latency model starts
from the cluster's view). Per run: reads, hedges, extra unit reads, reads avoided, and every
"is slow" verdict the client logged (a DataNode marked slow at any moment, not only at the end),
with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

from hedgefs.cluster.launcher import LocalCluster, Options
from hedgefs.client.fs import FileSystem

VERDICT = re.compile(r"(\S+) is slow(.*)")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run(runs: int, threads: int, duration_s: float, size_mib: int) -> dict:
    cluster = LocalCluster(tempfile.mkdtemp(prefix="hedgefs-closed-"))
    cluster.up(Options(datanodes=10, namenode_port=0, fsync=False))
    try:
        with FileSystem(cluster.namenode) as fs:
            fs.mkdir("/bench", parents=True)
            fs.write_bytes("/bench/file", os.urandom(size_mib << 20))
        env = dict(os.environ, HEDGEFS_NAMENODE=cluster.namenode)
        out = []
        for r in range(runs):
            before = _load()
            result = subprocess.run([sys.executable, "-m", "hedgefs", "-v", "bench", "read", "/bench/file",
                                     "--threads", str(threads), "--duration", str(duration_s), "--json",
                                     "--seed", str(r + 1)], capture_output=True, text=True, env=env)
            if result.returncode != 0:
                raise SystemExit(f"bench read failed: {result.stderr[-800:]}")
            summary = json.loads(result.stdout.strip().splitlines()[-1])
            verdicts = [m.group(0).strip() for m in VERDICT.finditer(result.stderr)]
            slow = sorted({m.group(1) for m in VERDICT.finditer(result.stderr)})
            by_view = sorted({m.group(1) for m in VERDICT.finditer(result.stderr) if "cluster's view" in m.group(2)})
            row = {"run": r + 1, "reads": summary["reads"], "hedges": summary["hedges"],
                   "extra_unit_reads_pct": summary["extra_unit_reads_pct"], "avoided": summary["avoided"],
                   "p99_ms": summary["p99_ms"], "marked_slow": slow, "marked_slow_by_view": by_view, "verdicts": verdicts,
                   "load_before": before, "load_after": _load()}
            print(f"run {r + 1}: {row['reads']} reads, hedges {row['hedges']}, extra unit reads "
                  f"{row['extra_unit_reads_pct']:.3f} %, avoided {row['avoided']}, p99 {row['p99_ms']} ms, "
                  f"marked slow: {', '.join(slow) or 'nobody'} (by the cluster's view: {', '.join(by_view) or 'nobody'}) (load {before} -> {row['load_after']})", flush=True)
            out.append(row)
        return {"threads": threads, "duration_s": duration_s, "size_mib": size_mib, "runs": out,
                "runs_with_a_datanode_marked_slow": sum(1 for o in out if o["marked_slow"]),
                "max_extra_unit_reads_pct": max(o["extra_unit_reads_pct"] for o in out)}
    finally:
        cluster.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--duration-s", type=float, default=10.0)
    parser.add_argument("--size-mib", type=int, default=64)
    parser.add_argument("--json", help="write the result here too")
    args = parser.parse_args()
    result = run(args.runs, args.threads, args.duration_s, args.size_mib)
    print(f"{args.threads} closed-loop threads, {args.runs} runs of {args.duration_s:.0f} s: a DataNode marked "
          f"slow in {result['runs_with_a_datanode_marked_slow']} of {args.runs} runs; extra unit reads at most "
          f"{result['max_extra_unit_reads_pct']:.3f} %")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
