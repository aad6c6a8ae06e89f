"""The client's CPU per read, two builds alternating on one cluster: is a change to the read path cheaper?

    python -m hedgefs.bench.cpu_per_read --other /work/main/.venv/bin/python [--rounds 5]
                                         [--threads 4] [--duration-s 8] [--policies RS-6-3-1024k,...]

One local cluster (this tree's servers, 10 DataNodes, fsync off), one 64 MiB file per policy;
the servers pinned to one CPU and the clients to the other (as ``hedgefs bench tail`` pins them),
so the servers' own work lands on the clients' CPU less.
Each round runs, per policy, a closed loop of ``--threads`` readers of random 64 KiB reads (one
cell each, healthy) for ``--duration-s`` seconds in a fresh client process of each build, in
alternating order (this build first in even rounds, the other in odd ones), so a slow spell of a
shared host falls on both. A client process warms up for 2 s first (connections, the latency
model), then measures its own CPU (``time.process_time``: every thread of the client) per read.
Prints each run and, per policy and build, the median and range of the rounds, and the ratio
of the medians; ``--json`` writes them.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

from hedgefs.bench.cluster import BenchCluster, path_of
from hedgefs.bench.tail import cpu_plan, pin_process

# What each client process runs: its own build's client and load generator.
DRIVER = """
import json, sys
from hedgefs.bench.read import run_read_bench
from hedgefs.client.fs import FileSystem
namenode, path, threads, duration = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
with FileSystem(namenode) as fs:
    run_read_bench(fs, path, threads=threads, duration_s=2.0, seed=99)
    run = run_read_bench(fs, path, threads=threads, duration_s=duration, seed=1)
    host = run.to_dict()["host"]
    print(json.dumps({"reads": run.reads, "errors": run.errors, "cpu_s": host["client_cpu_s"], "wall_s": run.wall_s,
                      "extra_pct": run.summary()["extra_unit_reads_pct"]}))
"""


def one(python: str, namenode: str, path: str, threads: int, duration_s: float, cpus: set[int] | None) -> dict:
    command = [python, "-c", DRIVER, namenode, path, str(threads), str(duration_s)]
    if cpus:
        command = ["taskset", "-c", ",".join(map(str, sorted(cpus)))] + command
    result = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    if result.returncode != 0:
        raise SystemExit(f"{python}: the client failed: {result.stderr[-800:]}")
    row = json.loads(result.stdout.strip().splitlines()[-1])
    row["us_per_read"] = round(1e6 * row["cpu_s"] / row["reads"], 1) if row["reads"] else None
    row["reads_per_s"] = round(row["reads"] / row["wall_s"], 1) if row["wall_s"] else None
    return row


def run(other: str, rounds: int, threads: int, duration_s: float, policies: list[str]) -> dict:
    builds = {"this": sys.executable, "other": other}
    with tempfile.TemporaryDirectory(prefix="hedgefs-cpu-") as tmp:
        bc = BenchCluster(pathlib.Path(tmp), {path_of(p): p for p in policies}, 64 << 20)
        plan = cpu_plan()
        if plan:
            for name in [*bc.cluster.namenode_names, *bc.cluster.datanode_ids]:
                pin_process(bc.cluster.pid(name), plan[1])
        try:
            runs = []
            for r in range(rounds):
                order = ["this", "other"] if r % 2 == 0 else ["other", "this"]
                for policy in policies:
                    for build in order:
                        row = one(builds[build], bc.namenode, path_of(policy), threads, duration_s,
                                  plan[0] if plan else None)
                        row.update(round=r, build=build, policy=policy, load=round(os.getloadavg()[0], 2))
                        runs.append(row)
                        print(f"round {r + 1} {policy:<16} {build:<5} {row['reads']:>6} reads  "
                              f"{row['reads_per_s']:>7} reads/s  {row['us_per_read']:>6} us CPU per read  "
                              f"extra {row['extra_pct']:.2f} %  errors {row['errors']}  load {row['load']}", flush=True)
        finally:
            bc.down()
    summary = {}
    for policy in policies:
        per = {}
        for build in builds:
            us = [x["us_per_read"] for x in runs if x["policy"] == policy and x["build"] == build]
            rate = [x["reads_per_s"] for x in runs if x["policy"] == policy and x["build"] == build]
            per[build] = {"us_per_read": {"median": statistics.median(us), "min": min(us), "max": max(us)},
                          "reads_per_s": {"median": statistics.median(rate), "min": min(rate), "max": max(rate)}}
        per["ratio_this_over_other"] = round(per["this"]["us_per_read"]["median"] / per["other"]["us_per_read"]["median"], 3)
        summary[policy] = per
        print(f"{policy}: this {per['this']['us_per_read']['median']} us "
              f"({per['this']['us_per_read']['min']}-{per['this']['us_per_read']['max']}), other "
              f"{per['other']['us_per_read']['median']} us ({per['other']['us_per_read']['min']}-"
              f"{per['other']['us_per_read']['max']}): {per['ratio_this_over_other']} x", flush=True)
    return {"builds": builds, "rounds": rounds, "threads": threads, "duration_s": duration_s, "runs": runs,
            "summary": summary}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", required=True, help="the other build's python (its venv's bin/python)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--duration-s", type=float, default=8.0)
    parser.add_argument("--policies", default="RS-6-3-1024k,REPLICATE-3,LRC-6-2-2-1024k")
    parser.add_argument("--json", help="write the runs and the summary here")
    args = parser.parse_args(argv)
    result = run(args.other, args.rounds, args.threads, args.duration_s, args.policies.split(","))
    result["command"] = "python -m hedgefs.bench.cpu_per_read " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
