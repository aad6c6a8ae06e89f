"""A library workload of `hedgefs bench smallfiles`, run as a child process of one build (the
``hedgefs`` package on its PYTHONPATH: this build or the baseline's), printing one JSON document.

    --op put-rpcs       put ``--files`` files of 4 KiB one after the other (the parent counts the
                        NameNode's RPCs around it)
    --op creates-stats  create ``--files`` empty files from ``--threads`` threads, then stat each
                        of them from as many threads: creates/s, stats/s, and this process's CPU

Only the client API every build has (FileSystem, write_bytes, stat, mkdir) is used.
"""

import argparse
import concurrent.futures
import json
import os
import resource
import sys
import time


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _parallel(threads: int, fn, items) -> float:
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(fn, items):
            pass
    return time.perf_counter() - started


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--namenode", required=True)
    ap.add_argument("--op", choices=["put-rpcs", "creates-stats"], required=True)
    ap.add_argument("--files", type=int, default=3200)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--dir", required=True)
    args = ap.parse_args(argv)

    from hedgefs.client.fs import FileSystem

    out: dict = {}
    with FileSystem(args.namenode, credentials=None) as fs:
        fs.mkdir(args.dir, parents=True)
        if args.op == "put-rpcs":
            data = os.urandom(4096)
            for i in range(args.files):
                fs.write_bytes(f"{args.dir}/f{i}", data)
        else:
            paths = [f"{args.dir}/e{i:05d}" for i in range(args.files)]
            fs.stat(args.dir)   # connected before the clock starts
            cpu = _cpu()
            seconds = _parallel(args.threads, lambda p: fs.write_bytes(p, b""), paths)
            out["creates_per_s"] = round(len(paths) / seconds, 1)
            out["create_cpu_us"] = round((_cpu() - cpu) / len(paths) * 1e6, 1)
            cpu = _cpu()
            seconds = _parallel(args.threads, fs.stat, paths)
            out["stats_per_s"] = round(len(paths) / seconds, 1)
            out["stat_cpu_us"] = round((_cpu() - cpu) / len(paths) * 1e6, 1)
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
