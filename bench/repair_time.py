"""Repair time for one lost DataNode: kill it, time until fsck is HEALTHY again.

A local cluster of real processes (10 DataNodes), some files written with the library, then the
DataNode holding the most bytes is SIGKILLed. Three moments are timed (monotonic clock, fsck
and the report polled every 20 ms):

    kill -> dead      the NameNode's dead interval (silence before it believes the DataNode gone)
    dead -> healthy   the repair itself: plan, hand commands out in heartbeats, DataNodes read k
                      units each, decode, write, report UnitStored
    kill -> healthy   the total a user sees

N is what the dead DataNode held (its used bytes in the last report). The rebuilt bytes go to
the spares (with 10 DataNodes and RS-6-3, each group has exactly one DataNode holding none of
its units). Run with the cluster's own fsync setting (on unless --no-fsync).

    python -m hedgefs.bench.repair_time [--size-mib 48] [--files 4] [--policy RS-6-3-1024k]
        [--block-size-mib 2] [--dead-interval-s 3] [--heartbeat-interval-s 0.3]
        [--repair-interval-s 0.3] [--no-fsync] [--json] [--dir D]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

import numpy as np

from hedgefs.client.fs import FileSystem
from hedgefs.cluster.launcher import LocalCluster, Options
from hedgefs.ec.policy import parse_policy
from hedgefs.proto import hedgefs_pb2 as pb

POLL_S = 0.02


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(POLL_S)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def run(size_mib: float = 48, files: int = 4, policy: str = "RS-6-3-1024k", block_size_mib: float = 2,
        dead_interval_s: float = 3.0, heartbeat_interval_s: float = 0.3, repair_interval_s: float = 0.3,
        fsync: bool = True, root: str | None = None) -> dict:
    pol = parse_policy(policy)
    block_size = int(block_size_mib * 1024 * 1024) // pol.cell_size * pol.cell_size
    own_root = root is None
    root = root or tempfile.mkdtemp(prefix="hedgefs-repair-bench-")
    cluster = LocalCluster(os.path.join(root, "cluster"))
    options = Options(datanodes=10, namenode_port=0, policy=policy, block_size=block_size,
                      heartbeat_interval_s=heartbeat_interval_s, dead_interval_s=dead_interval_s,
                      repair_interval_s=repair_interval_s, fsync=fsync)
    try:
        cluster.up(options)
        with FileSystem(cluster.namenode, credentials=cluster.credentials) as fs:
            fs.mkdir("/bench", parents=True)
            rng = np.random.default_rng(0)
            per_file = int(size_mib * 1024 * 1024) // files
            t0 = time.monotonic()
            for i in range(files):
                fs.write_bytes(f"/bench/f{i}", rng.integers(0, 256, per_file, dtype=np.uint8).tobytes())
            write_s = time.monotonic() - t0
            stored = sum(u_len for i in range(files) for u_len in _unit_lengths(fs, f"/bench/f{i}", pol))

            def report():
                return {d.id: d for d in fs.rpc("Report", pb.Empty()).datanodes}

            # Heartbeats carry used bytes: wait until they account for everything written.
            _wait(lambda: sum(d.used_bytes for d in report().values()) == stored, 30, "heartbeats to settle")
            before = report()
            victim = max(before.values(), key=lambda d: (d.used_bytes, d.id))
            held, units = victim.used_bytes, victim.units

            killed = time.monotonic()
            cluster.kill(victim.id)
            dead = _wait(lambda: report()[victim.id].state == "dead", 10 * dead_interval_s + 30,
                         f"{victim.id} declared dead")
            healthy = _wait(lambda: fs.rpc("Fsck", pb.PathRequest(path="/")).status == "HEALTHY", 600,
                            "fsck HEALTHY")
            after = fs.rpc("Report", pb.Empty())
        repair_s = healthy - dead
        return {
            "policy": policy, "block_size": block_size, "data_bytes": per_file * files, "files": files,
            "fsync": fsync, "datanodes": 10, "heartbeat_interval_s": heartbeat_interval_s,
            "repair_interval_s": repair_interval_s, "dead_interval_s": dead_interval_s,
            "write_s": round(write_s, 3),
            "lost_datanode": victim.id, "lost_bytes": held, "lost_units": units,
            "kill_to_dead_s": round(dead - killed, 3),
            "dead_to_healthy_s": round(repair_s, 3),
            "kill_to_healthy_s": round(healthy - killed, 3),
            "repair_mib_s": round(held / (1024 * 1024) / repair_s, 1) if repair_s > 0 else None,
            "repairs_done": after.repairs_done,
        }
    finally:
        cluster.down()
        if own_root:
            shutil.rmtree(root, ignore_errors=True)


def _unit_lengths(fs: FileSystem, path: str, pol) -> list[int]:
    from hedgefs.ec.layout import unit_length

    return [unit_length(pol, g.length, i) for g in fs.stat(path).groups for i in g.units]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hedgefs.bench.repair_time", description=__doc__.split("\n")[0])
    p.add_argument("--size-mib", type=float, default=48, help="data written, in MiB [48]")
    p.add_argument("--files", type=int, default=4, help="split over this many files [4]")
    p.add_argument("--policy", default="RS-6-3-1024k")
    p.add_argument("--block-size-mib", type=float, default=2,
                   help="internal block size: a group holds k times this [2, so 12 MiB groups]")
    p.add_argument("--dead-interval-s", type=float, default=3.0)
    p.add_argument("--heartbeat-interval-s", type=float, default=0.3)
    p.add_argument("--repair-interval-s", type=float, default=0.3)
    p.add_argument("--no-fsync", action="store_true")
    p.add_argument("--dir", help="cluster directory (default: a temporary one, removed after)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    r = run(a.size_mib, a.files, a.policy, a.block_size_mib, a.dead_interval_s, a.heartbeat_interval_s,
            a.repair_interval_s, not a.no_fsync, a.dir)
    if a.json:
        print(json.dumps(r))
        return 0
    mib = 1024 * 1024
    print(f"{r['policy']}, block size {r['block_size'] // 1024} KiB, {r['data_bytes'] / mib:.0f} MiB in "
          f"{r['files']} files, fsync {'on' if r['fsync'] else 'off'}, heartbeat {r['heartbeat_interval_s']} s, "
          f"repair interval {r['repair_interval_s']} s")
    print(f"lost {r['lost_datanode']}: N = {r['lost_bytes'] / mib:.1f} MiB in {r['lost_units']} units")
    print(f"  kill -> dead     {r['kill_to_dead_s']:7.2f} s   (dead interval {r['dead_interval_s']} s)")
    print(f"  dead -> HEALTHY  {r['dead_to_healthy_s']:7.2f} s   ({r['repair_mib_s']} MiB/s rebuilt)")
    print(f"  kill -> HEALTHY  {r['kill_to_healthy_s']:7.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
