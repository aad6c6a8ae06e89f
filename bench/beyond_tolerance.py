"""Chaos 4242041's step 207 as a standing scenario: whole-file reads with four DataNodes lost.

    python -m hedgefs.bench.beyond_tolerance [--rounds N] [--dir DIR]

A fresh local cluster (12 DataNodes, RS-6-3-64k, 256 KiB blocks, chaos's heartbeat and repair
timing), 24 files of up to 3.4 MiB (odd ones REPLICATE-4), read once while healthy. Then the
step's state: dn1 frozen, dn2 killed, dn6 erroring 70 % of its reads, dn8 stalled (four lost,
one more than RS-6-3 tolerates); dn3 and dn5 capped at 1 MiB/s and 512 KiB/s, dn4, dn7, dn9 and
dn10 delayed (1000 +-200 ms; 300 ms on 60 %; 300 +-200 ms; 1500 ms on 30 %); dn11 and dn12
healthy. Four threads read every file whole (chaos's checker, with its hedge settings) while
two more read random ranges, for ``--rounds`` rounds. Each file is *short* if some group of
it has fewer than k units on DataNodes not lost (it may fail, cleanly), else *must* (it must
read). Prints per round: the slowest must and short reads, the must reads that failed, and
what the short reads did; every byte read is checked.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from hedgefs.client.config import HedgeConfig
from hedgefs.client.fs import FileSystem
from hedgefs.cluster.launcher import LocalCluster, Options
from hedgefs.proto import hedgefs_pb2 as pb

LOST = {"dn1", "dn2", "dn6", "dn8"}
FAULTS = {"dn6": pb.FaultConfig(error_probability=0.7), "dn8": pb.FaultConfig(stall=True),
          "dn3": pb.FaultConfig(bandwidth_bps=1 << 20), "dn5": pb.FaultConfig(bandwidth_bps=512 << 10),
          "dn4": pb.FaultConfig(read_delay_ms=1000, probability=1.0, jitter_ms=200),
          "dn7": pb.FaultConfig(read_delay_ms=300, probability=0.6),
          "dn9": pb.FaultConfig(read_delay_ms=300, probability=1.0, jitter_ms=200),
          "dn10": pb.FaultConfig(read_delay_ms=1500, probability=0.3)}
CHECKER = HedgeConfig(max_impaired_nodes=1000, max_per_second=100_000, budget_pct=1000)   # chaos's


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="hedgefs-beyond-")
    cluster = LocalCluster(f"{root}/cluster")
    cluster.up(Options(datanodes=12, namenode_port=0, policy="RS-6-3-64k", block_size=256 * 1024,
                       heartbeat_interval_s=0.3, dead_interval_s=3.0, repair_interval_s=0.3, fsync=False))
    try:
        run(cluster, args.rounds)
    finally:
        if cluster.process_state("dn1") == "frozen":
            cluster.thaw("dn1")
        cluster.down()
        shutil.rmtree(root, ignore_errors=True)


def run(cluster: LocalCluster, rounds: int) -> None:
    with FileSystem(cluster.namenode) as wfs, FileSystem(cluster.namenode, hedge=CHECKER) as vfs:
        rng = random.Random(1)
        files = {}
        for i in range(24):
            data = np.random.default_rng(i).integers(0, 256, rng.randrange(1, 13 * 256 * 1024 + 1), np.uint8).tobytes()
            wfs.write_bytes(f"/f{i:03d}", data, policy="REPLICATE-4" if i % 2 else None)
            files[f"/f{i:03d}"] = data
        for path in files:
            vfs.read_bytes(path)   # the latency model learns the healthy cluster
        for dn, config in FAULTS.items():
            cluster.datanode_rpc(dn, "SetFaults", config, timeout=5)
        cluster.kill("dn2")
        cluster.freeze("dn1")
        short = {}
        for path in files:
            status = vfs.stat(path)
            k = 1 if status.policy.startswith("REPLICATE") else 6
            short[path] = any(sum(u.datanode_id not in LOST for u in g.units.values()) < k for g in status.groups)
        stop = threading.Event()

        def reader(seed: int) -> None:
            r = random.Random(seed)
            while not stop.is_set():
                path = r.choice(sorted(files))
                offset = r.randrange(len(files[path]) + 1)
                try:
                    with vfs.open(path) as handle:
                        handle.pread(offset, r.randrange(min(len(files[path]) - offset, 384 * 1024) + 1))
                except Exception:   # noqa: BLE001 - load only; the whole-file reads are the measure
                    pass
        readers = [threading.Thread(target=reader, args=(s,), daemon=True) for s in range(2)]
        for t in readers:
            t.start()
        print(f"faults set; {sum(short.values())} of {len(files)} files short of k units (may fail)", flush=True)
        for n in range(rounds):
            outcome = {}

            def whole(path: str) -> None:
                began = time.monotonic()
                try:
                    ok = "ok" if bytes(vfs.read_bytes(path)) == files[path] else "WRONG BYTES"
                except Exception as err:   # noqa: BLE001 - reported
                    ok = f"{type(err).__name__}"
                outcome[path] = (time.monotonic() - began, ok)
            began = time.monotonic()
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(whole, sorted(files)))
            must = [outcome[p] for p in files if not short[p]]
            shorts = [outcome[p] for p in files if short[p]]
            print(f"round {n}: {time.monotonic() - began:.1f} s; must-read files: {len(must)}, slowest "
                  f"{max(t for t, _ in must):.1f} s, not ok: {[ok for _, ok in must if ok != 'ok']}; short files: "
                  f"{len(shorts)}, slowest {max((t for t, _ in shorts), default=0):.1f} s, outcomes "
                  f"{sorted(ok for _, ok in shorts)}", flush=True)
        stop.set()


if __name__ == "__main__":
    main()
