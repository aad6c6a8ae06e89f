"""Small PutObjects through the S3 gateway: objects/s of 4 KiB PUTs (boto3, 8 threads), this
tree's gateway vs another's (``--base-python``: e.g. main's virtualenv), both on one cluster, in
alternating rounds so that both share the machine's load of the moment.

    python -m hedgefs.bench.s3_small --base-python /work/wt/BASE/.venv/bin/python [--rounds 3]
        [--puts 400] [--threads 8] [--size 4096] [--out bench/results/DATE-s3-small.json]

Each round: THREADS threads PUT PUTS objects of SIZE bytes (distinct keys, then the same keys
again: overwrites), then HEAD and GET them all once, and list them (1000-key pages); per
gateway the median of the rounds' rates, and the gateway's CPU seconds per PUT.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from hedgefs.bench.s3 import _Gateway
from hedgefs.cluster.launcher import LocalCluster, Options


def _rate(calls, threads: int) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda c: c(), calls))
    return len(calls) / (time.perf_counter() - start)


def _round(gateway: _Gateway, bucket: str, puts: int, threads: int, size: int, seed: int) -> dict:
    s3 = gateway.client()
    body = os.urandom(size)
    keys = [f"small/{seed}/{i:05d}" for i in range(puts)]
    cpu0 = gateway.cpu_s()
    new = _rate([lambda k=k: s3.put_object(Bucket=bucket, Key=k, Body=body, ContentType="text/x-small",
                                           Metadata={"n": k}) for k in keys], threads)
    again = _rate([lambda k=k: s3.put_object(Bucket=bucket, Key=k, Body=body) for k in keys], threads)
    cpu_put = (gateway.cpu_s() - cpu0) / (2 * puts)
    head = _rate([lambda k=k: s3.head_object(Bucket=bucket, Key=k) for k in keys], threads)
    get = _rate([lambda k=k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys], threads)
    start = time.perf_counter()
    listed = sum(page.get("KeyCount", 0) for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=f"small/{seed}/"))
    list_s = time.perf_counter() - start
    assert listed == puts, (listed, puts)
    return {"put_new_per_s": new, "put_over_per_s": again, "head_per_s": head, "get_per_s": get,
            "list_keys_per_s": puts / list_s, "gateway_cpu_ms_per_put": cpu_put * 1000}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-python", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--puts", type=int, default=400)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    load = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="hedgefs-bench-s3small-") as tmp:
        root = pathlib.Path(tmp)
        cluster = LocalCluster(root / "cluster")
        cluster.up(Options(datanodes=10, namenode_port=0, fsync=False))
        gateways = {}
        try:
            for name in ("this", "base"):
                (root / name).mkdir()
            gateways["this"] = _Gateway(cluster.namenode, root / "this")
            gateways["base"] = _Gateway(cluster.namenode, root / "base", python=args.base_python)
            gateways["this"].client().create_bucket(Bucket="this")
            gateways["base"].client().create_bucket(Bucket="base")
            rounds: dict[str, list[dict]] = {"this": [], "base": []}
            for r in range(args.rounds):
                for name in (("this", "base") if r % 2 == 0 else ("base", "this")):
                    rounds[name].append(_round(gateways[name], name, args.puts, args.threads, args.size, r))
                    print(name, r, {k: round(v, 1) for k, v in rounds[name][-1].items()}, flush=True)
        finally:
            for g in gateways.values():
                g.stop()
            cluster.down()
    medians = {name: {k: round(statistics.median(x[k] for x in rs), 1) for k in rs[0]} for name, rs in rounds.items()}
    ratios = {k: round(medians["this"][k] / medians["base"][k], 2) for k in medians["this"]}
    result = {"command": "python -m hedgefs.bench.s3_small " + " ".join(sys.argv[1:] if argv is None else argv),
              "load_before": load, "load_after": [round(x, 2) for x in os.getloadavg()],
              "medians": medians, "ratio_this_to_base": ratios, "rounds": rounds}
    print(json.dumps({k: result[k] for k in ("medians", "ratio_this_to_base", "load_before", "load_after")}, indent=1))
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
