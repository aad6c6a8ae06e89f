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

Repair traffic: the bytes the surviving DataNodes sent on their data ports between the kill and
HEALTHY (``hedgefs_datanode_read_bytes`` on each one's /metrics; nothing else reads meanwhile),
per byte rebuilt. Its floor is what the planned sources of each lost unit hold of its stripes
(``ec.sources.repair_traffic``: 6 units for RS-6-3; for LRC-6-2-2, 3 for a data or local parity
unit, 6 for a global parity); both are reported, and the lost units by kind. ``--compare A,B`` runs policy A, then B, on clusters of the
same size (the larger policy's units + 2 DataNodes) and reports B's traffic as a ratio of A's.

    python -m hedgefs.bench.repair_time [--size-mib 48] [--files 4] [--policy RS-6-3-1024k]
        [--block-size-mib 2] [--dead-interval-s 3] [--heartbeat-interval-s 0.3]
        [--repair-interval-s 0.3] [--datanodes N] [--compare A,B] [--no-fsync] [--json] [--dir D]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import re
import tempfile
import time
import urllib.request

import numpy as np

from hedgefs.client.fs import FileSystem
from hedgefs.cluster.launcher import LocalCluster, Options
from hedgefs.ec import sources
from hedgefs.ec.policy import parse_policy

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
        fsync: bool = True, root: str | None = None, datanodes: int = 10) -> dict:
    pol = parse_policy(policy)
    block_size = max(pol.cell_size, int(block_size_mib * 1024 * 1024) // pol.cell_size * pol.cell_size)
    own_root = root is None
    root = root or tempfile.mkdtemp(prefix="hedgefs-repair-bench-")
    cluster = LocalCluster(os.path.join(root, "cluster"))
    options = Options(datanodes=datanodes, namenode_port=0, policy=policy, block_size=block_size,
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
                return {d.id: d for d in fs.admin.report().datanodes}

            # Heartbeats carry used bytes: wait until they account for everything written.
            _wait(lambda: sum(d.used_bytes for d in report().values()) == stored, 30, "heartbeats to settle")
            before = report()
            victim = max(before.values(), key=lambda d: (d.used_bytes, d.id))
            held, units = victim.used_bytes, victim.units
            lost = [(pol, g.length, u.index) for i in range(files) for g in fs.stat(f"/bench/f{i}").groups
                    for u in g.units.values() if u.datanode_id == victim.id]
            survivors = [d for d in cluster.datanode_ids if d != victim.id]
            sent_before = _bytes_sent(cluster, survivors)

            killed = time.monotonic()
            cluster.kill(victim.id)
            dead = _wait(lambda: report()[victim.id].state == "dead", 10 * dead_interval_s + 30,
                         f"{victim.id} declared dead")
            healthy = _wait(lambda: fs.admin.fsck("/").status == "HEALTHY", 600,
                            "fsck HEALTHY")
            after = fs.admin.report()
            sent = _bytes_sent(cluster, survivors) - sent_before
        repair_s = healthy - dead
        floor = sum(sources.repair_traffic(p, glen, i) for p, glen, i in lost)
        kinds: dict[str, dict[str, int]] = {}   # per kind of lost unit: units, bytes, bytes the floor reads
        for p, glen, i in lost:
            kind = ("data" if i < p.k else "parity" if not p.local_groups else
                    "local parity" if i < p.k + p.local_groups else "global parity")
            row = kinds.setdefault(kind, {"units": 0, "bytes": 0, "floor_source_bytes": 0})
            row["units"] += 1
            row["bytes"] += _unit_length(p, glen, i)
            row["floor_source_bytes"] += sources.repair_traffic(p, glen, i)
        return {
            "policy": policy, "block_size": block_size, "data_bytes": per_file * files, "files": files,
            "fsync": fsync, "datanodes": datanodes, "heartbeat_interval_s": heartbeat_interval_s,
            "repair_interval_s": repair_interval_s, "dead_interval_s": dead_interval_s,
            "write_s": round(write_s, 3),
            "lost_datanode": victim.id, "lost_bytes": held, "lost_units": units,
            "kill_to_dead_s": round(dead - killed, 3),
            "dead_to_healthy_s": round(repair_s, 3),
            "kill_to_healthy_s": round(healthy - killed, 3),
            "repair_mib_s": round(held / (1024 * 1024) / repair_s, 1) if repair_s > 0 else None,
            "repairs_done": after.repairs_done,
            "lost_unit_kinds": kinds,
            "source_bytes": sent,
            "source_bytes_per_rebuilt_byte": round(sent / held, 3) if held else None,
            "floor_source_bytes_per_rebuilt_byte": round(floor / held, 3) if held else None,
        }
    finally:
        cluster.down()
        if own_root:
            shutil.rmtree(root, ignore_errors=True)


def _unit_length(pol, group_length: int, index: int) -> int:
    from hedgefs.ec.layout import unit_length

    return unit_length(pol, group_length, index)


_SENT = re.compile(r'^hedgefs_datanode_read_bytes_total\{[^}]*\} ([0-9.e+]+)$', re.M)


def _bytes_sent(cluster: LocalCluster, names: list[str]) -> int:
    """Bytes the DataNodes ``names`` have sent on their data ports (their /metrics)."""
    total = 0
    for name in names:
        port = cluster.state["datanodes"][name]["http_port"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            total += sum(int(float(v)) for v in _SENT.findall(r.read().decode()))
    return total


def compare(a: str, b: str, **kw) -> dict:
    """Policy ``a``, then ``b``, on clusters of one size; b's repair traffic as a ratio of a's."""
    datanodes = kw.pop("datanodes", None) or max(parse_policy(a).units, parse_policy(b).units) + 2
    ra, rb = run(policy=a, datanodes=datanodes, **kw), run(policy=b, datanodes=datanodes, **kw)
    ratio = rb["source_bytes_per_rebuilt_byte"] / ra["source_bytes_per_rebuilt_byte"]
    floor = rb["floor_source_bytes_per_rebuilt_byte"] / ra["floor_source_bytes_per_rebuilt_byte"]
    return {"runs": [ra, rb], "traffic_ratio": round(ratio, 3), "floor_ratio": round(floor, 3)}


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
    p.add_argument("--datanodes", type=int, default=None, help="cluster size [10; with --compare the larger "
                                                                "policy's units + 2]")
    p.add_argument("--compare", metavar="A,B", help="run policy A then B; report B's repair traffic / A's")
    p.add_argument("--no-fsync", action="store_true")
    p.add_argument("--dir", help="cluster directory (default: a temporary one, removed after)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    kw = dict(size_mib=a.size_mib, files=a.files, block_size_mib=a.block_size_mib, dead_interval_s=a.dead_interval_s,
              heartbeat_interval_s=a.heartbeat_interval_s, repair_interval_s=a.repair_interval_s,
              fsync=not a.no_fsync, root=a.dir)
    if a.compare:
        names = a.compare.split(",")
        if len(names) != 2:
            p.error("--compare takes two policies: A,B")
        for name in names:
            try:
                parse_policy(name)
            except ValueError as err:
                p.error(str(err))
        result = compare(*names, datanodes=a.datanodes, **kw)
        if a.json:
            print(json.dumps(result))
            return 0
        for r in result["runs"]:
            _print(r)
        print(f"repair traffic {names[1]} / {names[0]}: {result['traffic_ratio']:.3f}x "
              f"(floor {result['floor_ratio']:.3f}x)")
        return 0
    r = run(policy=a.policy, datanodes=a.datanodes or 10, **kw)
    if a.json:
        print(json.dumps(r))
        return 0
    _print(r)
    return 0


def _print(r: dict) -> None:
    mib = 1024 * 1024
    print(f"{r['policy']}, block size {r['block_size'] // 1024} KiB, {r['data_bytes'] / mib:.0f} MiB in "
          f"{r['files']} files, fsync {'on' if r['fsync'] else 'off'}, heartbeat {r['heartbeat_interval_s']} s, "
          f"repair interval {r['repair_interval_s']} s")
    print(f"lost {r['lost_datanode']}: N = {r['lost_bytes'] / mib:.1f} MiB in {r['lost_units']} units")
    print(f"  kill -> dead     {r['kill_to_dead_s']:7.2f} s   (dead interval {r['dead_interval_s']} s)")
    print(f"  dead -> HEALTHY  {r['dead_to_healthy_s']:7.2f} s   ({r['repair_mib_s']} MiB/s rebuilt)")
    print(f"  kill -> HEALTHY  {r['kill_to_healthy_s']:7.2f} s")
    print(f"  repair traffic   {r['source_bytes'] / mib:7.1f} MiB read from {r['datanodes'] - 1} DataNodes: "
          f"{r['source_bytes_per_rebuilt_byte']} bytes per byte rebuilt (floor "
          f"{r['floor_source_bytes_per_rebuilt_byte']})")
    for kind, row in r["lost_unit_kinds"].items():
        per = row["floor_source_bytes"] / row["bytes"] if row["bytes"] else 0
        print(f"    {row['units']:3d} {kind} units, {row['bytes'] / mib:6.1f} MiB: floor {per:.2f} bytes read per byte")


if __name__ == "__main__":
    raise SystemExit(main())
