"""Where a gateway's CPU goes per large PUT: one local cluster (RS-6-3-1024k, 10 DataNodes), one
`hedgefs s3`, boto3 PUTting SIZE bytes the ways named, each REPS times: the gateway's CPU-s per
PUT (/proc, all its threads, those that ended too) and boto3's, then one more PUT sampled by
py-spy (``pip install py-spy``; skipped without it) into OUT/WAY.raw, summed by thread and by
leaf frame. Run it under the heavy lock:

    python -m hedgefs.bench.s3_profile defaults,unsigned,parts /tmp/s3-profile [--reps 3] [--size BYTES]

Ways: ``defaults`` (one PutObject, boto3's defaults: over HTTP a signed payload's SHA-256 and a
CRC32), ``unsigned`` (payload signing off), ``parts`` (upload_fileobj with boto3's TransferConfig:
8 MiB parts, copied into the object at Complete).
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from hedgefs.bench.s3 import MiB, _boto3_with, _Gateway
from hedgefs.bench.throughput import write_random_file
from hedgefs.cluster.launcher import LocalCluster, Options


def summary(raw: pathlib.Path, top: int = 15) -> list[str]:
    """py-spy's raw stacks (``thread;frame;...;frame count``) as shares by thread and by leaf."""
    threads, leaves, total = collections.Counter(), collections.Counter(), 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        total += int(n)
        threads[frames[0].split(":")[-1].strip()] += int(n)
        leaves[frames[-1]] += int(n)
    return ([f"{n / total:6.1%} thread {k}" for k, n in threads.most_common(top)]
            + [f"{n / total:6.1%} leaf {k}" for k, n in leaves.most_common(top)])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ways")
    parser.add_argument("out")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--size", type=int, default=256 * MiB)
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spy = shutil.which("py-spy") or str(pathlib.Path(sys.executable).with_name("py-spy"))
    spy = spy if os.path.exists(spy) else None
    with tempfile.TemporaryDirectory(prefix="hedgefs-s3-profile-") as tmp:
        root = pathlib.Path(tmp)
        cluster = LocalCluster(root / "cluster")
        cluster.up(Options(datanodes=10, namenode_port=0, fsync=False))
        gateway = _Gateway(cluster.namenode, root / "gateway")
        try:
            from boto3.s3.transfer import TransferConfig

            signed = gateway.client()
            signed.create_bucket(Bucket="bench")
            unsigned = _boto3_with(gateway.endpoint, gateway.access, gateway.secret, payload_signing_enabled=False)
            local = root / "big.bin"
            write_random_file(str(local), args.size)
            data = local.read_bytes()

            def parts():
                with open(local, "rb") as f:
                    signed.upload_fileobj(f, "bench", "big.bin", Config=TransferConfig())
            ways = {"defaults": lambda: signed.put_object(Bucket="bench", Key="big.bin", Body=data),
                    "unsigned": lambda: unsigned.put_object(Bucket="bench", Key="big.bin", Body=data),
                    "parts": parts}
            for way in args.ways.split(","):
                ways[way]()   # warm-up
                for rep in range(args.reps + (1 if spy else 0)):
                    sampler = None
                    if rep == args.reps:
                        sampler = subprocess.Popen([spy, "record", "-p", str(gateway.proc.pid), "-r", "250", "-f", "raw",
                                                    "--threads", "--nonblocking", "-o", str(out / f"{way}.raw")],
                                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                        time.sleep(1.5)   # attached
                    g0, c0, started = gateway.cpu_s(), time.process_time(), time.perf_counter()
                    ways[way]()
                    line = (f"{way}{' (sampled)' if sampler else ''}: {time.perf_counter() - started:.2f} s, gateway "
                            f"{gateway.cpu_s() - g0:.2f} CPU-s, boto3 {time.process_time() - c0:.2f} CPU-s")
                    if sampler is not None:
                        sampler.send_signal(2)
                        sampler.wait(30)
                    print(line, flush=True)
                if spy and (out / f"{way}.raw").exists():
                    print("\n".join(summary(out / f"{way}.raw")), flush=True)
        finally:
            gateway.stop()
            cluster.down()


if __name__ == "__main__":
    main()
