"""Many concurrent multi-cell preads on a misbehaving cluster, every byte checked.

    python -m hedgefs.bench.flaky [--reads N] [--threads T] [--seed S] [--secure] [--out DIR]

More DataNodes misbehave than the code's m = 3, none is dead, and every unit is intact somewhere:
three DataNodes are slow at random (250-400 ms on 30-60 % of their reads) and a fourth has a
flaky link (30 % of its reads have a byte flipped on the wire, so they fail their checksum).
Slow or flaky is not lost: every read must return the stored bytes, none may fail. The same
reads run first on the healthy cluster, so latencies are reported as ratios to that baseline
of the same run. One fresh local cluster (12 DataNodes, RS-6-3-64k), one 48 MiB file; each
read is a random range of 1 to 12 cells at a random offset, from T threads on one client.
Writes ``<date>-flaky.json`` and ``.md`` to ``--out`` (default bench/results/).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import pathlib
import random
import sys
import tempfile
import threading
import time

from hedgefs.client.config import HedgeConfig
from hedgefs.client.errors import HedgefsError
from hedgefs.client.fs import FileSystem
from hedgefs.cluster.launcher import LocalCluster, Options
from hedgefs.proto import hedgefs_pb2 as pb

POLICY = "RS-6-3-64k"
CELL = 64 * 1024
FILE_BYTES = 48 << 20
PATH = "/bench/flaky.bin"


def _faults(victims: list[str], rng: random.Random) -> dict[str, pb.FaultConfig]:
    slow = {dn: pb.FaultConfig(read_delay_ms=rng.randrange(250, 401), probability=rng.uniform(0.3, 0.6),
                               jitter_ms=50) for dn in victims[:3]}
    slow[victims[3]] = pb.FaultConfig(wire_corrupt_probability=0.3)
    return slow


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q / 100 * len(values)))]


def _run(fs: FileSystem, data: bytes, reads: int, threads: int, seed: int) -> dict:
    rng = random.Random(seed)
    ranges = []
    for _ in range(reads):
        length = rng.randrange(1, 13) * CELL - rng.randrange(CELL // 2)
        ranges.append((rng.randrange(0, len(data) - length), length))
    latencies: list[float] = []
    failed: list[str] = []
    wrong = [0]
    lock = threading.Lock()
    f = fs.open(PATH)

    def one(r):
        offset, length = r
        began = time.monotonic()
        try:
            got = f.pread(offset, length)
        except HedgefsError as err:
            with lock:
                failed.append(str(err))
            return
        took = time.monotonic() - began
        bad = sum(1 for a, b in zip(got, data[offset:offset + length]) if a != b) if got != data[offset:offset + length] else 0
        with lock:
            latencies.append(took)
            wrong[0] += bad + abs(len(got) - length)

    before = fs.stats().counters
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, ranges))
    elapsed = time.monotonic() - started
    after = fs.stats().counters
    delta = {k: after[k] - before.get(k, 0) for k in after}
    return {"reads": reads, "failed": len(failed), "first_failure": failed[0] if failed else None,
            "wrong_bytes": wrong[0], "seconds": round(elapsed, 2),
            "p50_ms": round(_percentile(latencies, 50) * 1000, 1), "p99_ms": round(_percentile(latencies, 99) * 1000, 1),
            "max_ms": round(max(latencies, default=0) * 1000, 1), "counters": delta}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=13_000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--secure", action="store_true")
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parent / "results"))
    args = parser.parse_args(argv)
    os.environ.setdefault("HEDGEFS_POISON_BUFFERS", "1")   # a buffer used after its return: wrong bytes
    rng = random.Random(args.seed)
    data = rng.randbytes(FILE_BYTES)
    with tempfile.TemporaryDirectory(prefix="hedgefs-flaky-") as root:
        cluster = LocalCluster(pathlib.Path(root))
        cluster.up(Options(datanodes=12, namenode_port=0, block_size=4 << 20, fsync=False, dead_interval_s=600.0,
                           policy=POLICY, secure=args.secure))
        try:
            with FileSystem(cluster.namenode, credentials=cluster.credentials, hedge=HedgeConfig()) as fs:
                fs.mkdir("/bench", parents=True)
                fs.write_bytes(PATH, data, overwrite=True)
                holders = fs.stat(PATH).groups
                counts: dict[str, int] = {}
                for g in holders:
                    for i, loc in g.units.items():
                        if i < 6:
                            counts[loc.datanode_id] = counts.get(loc.datanode_id, 0) + 1
                victims = sorted(counts, key=lambda dn: -counts[dn])[:4]
                healthy = _run(fs, data, args.reads // 4, args.threads, args.seed)
            faults = _faults(victims, rng)
            for dn, config in faults.items():
                cluster.datanode_rpc(dn, "SetFaults", config)
            with FileSystem(cluster.namenode, credentials=cluster.credentials, hedge=HedgeConfig()) as fs:
                faulty = _run(fs, data, args.reads, args.threads, args.seed + 1)
        finally:
            cluster.down()
    load = os.getloadavg()
    result = {"command": "python -m hedgefs.bench.flaky " + " ".join(argv if argv is not None else sys.argv[1:]),
              "date": datetime.date.today().isoformat(), "load_average": [round(x, 2) for x in load],
              "faults": {dn: str(c).replace("\n", " ") for dn, c in faults.items()},
              "healthy": healthy, "faulty": faulty,
              "p99_ratio": round(faulty["p99_ms"] / max(healthy["p99_ms"], 0.001), 2)}
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"{result['date']}-flaky{'-secure' if args.secure else ''}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [f"# Concurrent preads on a misbehaving cluster ({result['date']})", "",
             f"Command: `{result['command']}`; load average {result['load_average']}.", "",
             "Faults: " + "; ".join(f"{dn}: {c}" for dn, c in result["faults"].items()), "",
             "| run | reads | failed | wrong bytes | p50 ms | p99 ms | max ms | hedges | checksum failures |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in ("healthy", "faulty"):
        r = result[name]
        lines.append(f"| {name} | {r['reads']} | {r['failed']} | {r['wrong_bytes']} | {r['p50_ms']} | {r['p99_ms']} | "
                     f"{r['max_ms']} | {r['counters'].get('hedges', 0)} | {r['counters'].get('checksum_failures', 0)} |")
    lines += ["", f"p99 faulty / healthy: {result['p99_ratio']} x (same run)."]
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if faulty["failed"] == 0 and faulty["wrong_bytes"] == 0 and healthy["wrong_bytes"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
