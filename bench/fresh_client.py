"""A new client and a DataNode frozen before it starts (issue 25): fresh `hedgefs cat` of a file,
healthy vs one DataNode frozen, interleaved in one run on one cluster.

    python -m hedgefs.bench.fresh_client [--size-mib 24] [--rounds 5] [--freeze sigstop|stall]
                                         [--frozen-for-s 12] [--json out.json]

Each round: a fresh `hedgefs cat --stats` process of the file with every DataNode healthy; then
the DataNode holding data unit 0 of the file's first group is frozen (``sigstop``: the process is
stopped, like `hedgefs cluster freeze`; ``stall``: its fault knob holds every read), and after
``--frozen-for-s`` (so the cluster's view has had the time to show it) another fresh cat; then it
is thawed and its heartbeats seen again before the next round. Each frozen window also has a
cat with the cluster's view off (``HEDGEFS_HEDGE_CLUSTER_VIEW=false``: the client before it,
overtaken rule only), right after the one with it. Beside the cats, new clients in this process (a fresh FileSystem
each) read the whole file 3 times per window, timed from open to last byte: the read without
the interpreter's start-up. A cat's time is wall clock from
process start to exit (Python start-up included, as a user sees it); its `--stats` lines say
what it did (hedges, reads avoided around the frozen DataNode, probes). Reported: the median
frozen / healthy ratio over the rounds, its range, both medians, the load average before and
after. Every cat's bytes are compared with what was written.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from hedgefs.cluster.launcher import LocalCluster, Options
from hedgefs.client.config import HedgeConfig
from hedgefs.client.fs import FileSystem
from hedgefs.proto import hedgefs_pb2 as pb

STAT = re.compile(r"(\w+)=([\d.]+)")


def _cat(namenode: str, remote: str, expected: bytes, victim: str, view: bool = True) -> dict:
    env = dict(os.environ, HEDGEFS_NAMENODE=namenode, HEDGEFS_HEDGE_CLUSTER_VIEW=str(view).lower())
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "hedgefs", "cat", "--stats", remote], capture_output=True, env=env)
    seconds = time.perf_counter() - start
    if result.returncode != 0 or result.stdout != expected:
        raise SystemExit(f"cat failed or returned wrong bytes: {result.stderr.decode()[-500:]}")
    lines = result.stderr.decode().splitlines()
    totals = dict(STAT.findall(next((ln for ln in lines if ln.strip().startswith("reads=")), "")))
    row = next((ln.strip() for ln in lines if ln.strip().startswith(f"{victim}:")), "")
    return {"seconds": round(seconds, 4), "hedges": int(totals.get("hedges", 0)),
            "unit_reads": int(totals.get("unit_reads", 0)), "avoided": int(totals.get("avoided", 0)),
            "victim": row}


def _inproc(namenode: str, remote: str, expected: bytes, view: bool = True, reads: int = 3) -> list[float]:
    """Seconds of a whole-file read by a new client (a fresh FileSystem: a latency model of its
    own, the cluster's view or not) in this process, from open to last byte: no interpreter
    start-up, which on a loaded host is most of a cat's time and most of its noise."""
    times = []
    for _ in range(reads):
        with FileSystem(namenode, hedge=HedgeConfig(cluster_view=view)) as fs:
            start = time.perf_counter()
            got = fs.read_bytes(remote)
            times.append(round(time.perf_counter() - start, 4))
        if got != expected:
            raise SystemExit("an in-process read returned wrong bytes")
    return times


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run(size_mib: int, rounds: int, freeze: str, frozen_for_s: float) -> dict:
    root = tempfile.mkdtemp(prefix="hedgefs-fresh-")
    cluster = LocalCluster(root)
    # dead after 10 min, not 30 s: on a loaded host a frozen window (with two cats) outlasts 30 s,
    # and a DataNode declared dead has its units repaired elsewhere (the next rounds would not read it)
    cluster.up(Options(datanodes=10, namenode_port=0, fsync=False, dead_interval_s=600.0))
    load_before = _load()
    try:
        data = os.urandom(size_mib << 20)
        with FileSystem(cluster.namenode) as fs:
            fs.mkdir("/bench", parents=True)
            fs.write_bytes("/bench/file", data)
            status = fs.stat("/bench/file")
        victim = status.groups[0].units[0].datanode_id
        _cat(cluster.namenode, "/bench/file", data, victim)   # warm-up (page cache, imports)
        out = []
        for r in range(rounds):
            healthy = _cat(cluster.namenode, "/bench/file", data, victim)
            healthy_in = _inproc(cluster.namenode, "/bench/file", data)
            if freeze == "sigstop":
                cluster.freeze(victim)
            else:
                cluster.datanode_rpc(victim, "SetFaults", pb.FaultConfig(stall=True))
            time.sleep(frozen_for_s)   # frozen *before* the client starts (the scenario, not a wait for a result)
            frozen = _cat(cluster.namenode, "/bench/file", data, victim)
            blind = _cat(cluster.namenode, "/bench/file", data, victim, view=False)   # before: the view unused
            frozen_in = _inproc(cluster.namenode, "/bench/file", data)
            blind_in = _inproc(cluster.namenode, "/bench/file", data, view=False)
            if freeze == "sigstop":
                cluster.thaw(victim)
            else:
                cluster.datanode_rpc(victim, "ClearFaults", pb.FaultClearRequest())
            _wait_heard(cluster, victim)
            ratio, blind_ratio = frozen["seconds"] / healthy["seconds"], blind["seconds"] / healthy["seconds"]
            print(f"round {r + 1}: healthy {healthy['seconds']:.3f} s, {victim} frozen {frozen['seconds']:.3f} s "
                  f"({ratio:.2f} x; without the view {blind['seconds']:.3f} s, {blind_ratio:.2f} x)\n"
                  f"  frozen cat: hedges={frozen['hedges']} avoided={frozen['avoided']} [{frozen['victim']}]\n"
                  f"  without the view: hedges={blind['hedges']} avoided={blind['avoided']} [{blind['victim']}]\n"
                  f"  in process, new clients, whole-file read: healthy {healthy_in} s, frozen {frozen_in} s, "
                  f"frozen without the view {blind_in} s", flush=True)
            out.append({"healthy": healthy, "frozen": frozen, "frozen_without_view": blind, "ratio": round(ratio, 3),
                        "ratio_without_view": round(blind_ratio, 3), "inproc_healthy_s": healthy_in,
                        "inproc_frozen_s": frozen_in, "inproc_frozen_without_view_s": blind_in})
        ratios = [o["ratio"] for o in out]
        blind_ratios = [o["ratio_without_view"] for o in out]
        return {"size_mib": size_mib, "policy": status.policy, "freeze": freeze, "frozen_for_s": frozen_for_s,
                "victim": victim, "rounds": out, "median_ratio": statistics.median(ratios),
                "min_ratio": min(ratios), "max_ratio": max(ratios),
                "median_ratio_without_view": statistics.median(blind_ratios),
                "min_ratio_without_view": min(blind_ratios), "max_ratio_without_view": max(blind_ratios),
                "healthy_median_s": statistics.median(o["healthy"]["seconds"] for o in out),
                "inproc_healthy_median_s": statistics.median(t for o in out for t in o["inproc_healthy_s"]),
                "inproc_frozen_median_s": statistics.median(t for o in out for t in o["inproc_frozen_s"]),
                "inproc_frozen_without_view_median_s": statistics.median(
                    t for o in out for t in o["inproc_frozen_without_view_s"]),
                "frozen_median_s": statistics.median(o["frozen"]["seconds"] for o in out),
                "load_before": load_before, "load_after": _load()}
    finally:
        for dn in cluster.datanode_ids:
            if cluster.process_state(dn) == "frozen":
                cluster.thaw(dn)
        cluster.down()


def _wait_heard(cluster: LocalCluster, victim: str, timeout_s: float = 60.0) -> None:
    """Until the NameNode has heard the thawed DataNode again (its report shows it live)."""
    deadline = time.monotonic() + timeout_s
    with FileSystem(cluster.namenode) as fs:
        while time.monotonic() < deadline:
            report = fs.admin.report()
            if any(d.id == victim and d.state != "dead" and d.last_heartbeat_age_ms < 1500 for d in report.datanodes):
                return
            time.sleep(0.2)
    raise SystemExit(f"{victim} not heard again within {timeout_s:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--freeze", choices=("sigstop", "stall"), default="sigstop")
    parser.add_argument("--frozen-for-s", type=float, default=12.0)
    parser.add_argument("--json", help="write the result here too")
    args = parser.parse_args()
    result = run(args.size_mib, args.rounds, args.freeze, args.frozen_for_s)
    print(f"{args.size_mib} MiB fresh cat, {result['victim']} frozen ({args.freeze}) {args.frozen_for_s:.0f} s "
          f"before: median {result['median_ratio']:.2f} x healthy (range {result['min_ratio']:.2f}-"
          f"{result['max_ratio']:.2f}; medians {result['frozen_median_s']:.3f} s vs {result['healthy_median_s']:.3f} s); "
          f"without the view {result['median_ratio_without_view']:.2f} x (range {result['min_ratio_without_view']:.2f}-"
          f"{result['max_ratio_without_view']:.2f}); in process: frozen "
          f"{result['inproc_frozen_median_s'] / result['inproc_healthy_median_s']:.2f} x healthy, without the view "
          f"{result['inproc_frozen_without_view_median_s'] / result['inproc_healthy_median_s']:.2f} x "
          f"({result['inproc_frozen_median_s']:.3f} / {result['inproc_frozen_without_view_median_s']:.3f} / "
          f"{result['inproc_healthy_median_s']:.3f} s), "
          f"load {result['load_before']} -> {result['load_after']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
