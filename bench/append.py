"""Append and hsync against put, in one run on one fresh cluster (issue 45's targets: large
appends at >= 0.7x a put's throughput; 4 KiB records with hsync each, p99 <= 15 ms).

    .venv/bin/python -m hedgefs.bench.append [--mib 64] [--records 200] [--rounds 2] [--out bench/results]

A NameNode and 10 DataNodes (real processes, fsync on, 2 MiB internal blocks: RS-6-3-1024k groups
of 12 MiB), then rounds of A B B A: A = a put of MIB MiB as a new file, B = an append of MIB MiB to
a file of 3 MiB + 1 byte (its partial last group rewritten, copy-on-write); the ratio of their
throughputs, with the absolute figures. Then RECORDS appends of 4 KiB to a new file, each followed
by hsync, their latencies: the first two are Syncs (a commit and an append, the last group written
again; the second places the open tail), the rest APPENDs to the tail's 4 replicas and one
SyncLength each (on a build without the open tail, every one is a Sync).
The results go to OUT/<date>-append.json with the command and the commit.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from hedgefs.bench.cluster import RandomSource
from hedgefs.client.fs import FileSystem
from hedgefs.cluster.launcher import LocalCluster, Options

BLOCK_SIZE = 2 << 20


def _put(fs: FileSystem, path: str, size: int, seed: int) -> float:
    began = time.monotonic()
    fs.write(path, RandomSource(size, seed), overwrite=True)
    return time.monotonic() - began


def _append(fs: FileSystem, path: str, size: int, seed: int) -> float:
    fs.write(path, RandomSource(3 * (1 << 20) + 1, seed + 1), overwrite=True)
    source = RandomSource(size, seed)
    began = time.monotonic()
    with fs.append(path) as w:
        while chunk := source.read(1 << 20):
            w.write(chunk)
    return time.monotonic() - began


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="hedgefs.bench.append")
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--records", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="bench/results")
    args = ap.parse_args(argv)
    size = args.mib << 20
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    root = pathlib.Path(tempfile.mkdtemp(prefix="hedgefs-bench-append-"))
    cluster = LocalCluster(root)
    cluster.up(Options(datanodes=10, namenode_port=0, block_size=BLOCK_SIZE, fsync=True, dead_interval_s=120.0))
    try:
        with FileSystem(cluster.namenode) as fs:
            fs.mkdir("/bench", parents=True)
            puts, appends = [], []
            for r in range(args.rounds):   # A B B A
                puts.append(_put(fs, "/bench/put.bin", size, r))
                appends.append(_append(fs, "/bench/append.bin", size, r))
                appends.append(_append(fs, "/bench/append.bin", size, r + 100))
                puts.append(_put(fs, "/bench/put.bin", size, r + 100))
            put_mib_s = [args.mib / s for s in puts]
            append_mib_s = [args.mib / s for s in appends]
            latencies = []
            with fs.create("/bench/records.log", overwrite=True) as w:
                record = b"r" * 4095 + b"\n"
                for _ in range(args.records):
                    began = time.monotonic()
                    w.write(record)
                    w.hsync()
                    latencies.append((time.monotonic() - began) * 1000)
            latencies.sort()
            result = {
                "command": "python -m hedgefs.bench.append " + " ".join(argv if argv is not None else sys.argv[1:]),
                "commit": commit, "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "load_average": os.getloadavg(),
                "put_mib_s": put_mib_s, "append_mib_s": append_mib_s,
                "append_over_put": statistics.median(append_mib_s) / statistics.median(put_mib_s),
                "hsync_records": args.records,
                "hsync_ms": {"p50": latencies[len(latencies) // 2], "p99": latencies[int(len(latencies) * 0.99) - 1],
                             "max": latencies[-1]},
            }
    finally:
        cluster.down()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = out / f"{datetime.date.today().isoformat()}-append.json"
    name.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
    print(f"written: {name}")


if __name__ == "__main__":
    main()
