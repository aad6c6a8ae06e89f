"""How long the purge of a detached tree takes on etcd, and what it costs other writers.

One NameNode on 3 local etcd members (cluster/etcd.py) and 3 DataNodes: a tree of ``--files``
one-byte REPLICATE-3 files (a group of 3 units each) in directories of 50.
Then a recursive delete, timed until the tree's last inode is gone from etcd, while one client
thread does Mkdirs one after another: their latency during the purge against the same thread's
before the delete (same run, same host), as a ratio beside the absolute figures.

    .venv/bin/python -m bench.purge --files 2000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time

import sys

from hedgefs.plumbing import read_port_file


def _start(root: str, name: str, args: list[str]) -> tuple[subprocess.Popen, str]:
    port_file = os.path.join(root, f"{name}.port")
    log = open(os.path.join(root, f"{name}.log"), "ab")
    proc = subprocess.Popen([sys.executable, "-m", "hedgefs", *args, "--port", "0", "--port-file", port_file,
                             "--data-dir", os.path.join(root, name)],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    deadline = time.monotonic() + 30
    while not os.path.exists(port_file):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not start: see {root}/{name}.log")
        time.sleep(0.05)
    return proc, f"127.0.0.1:{read_port_file(port_file)['rpc']}"


def _inodes(etcd, name: str) -> int:
    out = subprocess.run([etcd.etcdctl, "--endpoints", etcd.endpoints, "get", "--prefix", "--keys-only",
                          f"/{name}/t/inodes/"], capture_output=True, text=True, check=True, timeout=30,
                         env=dict(os.environ, ETCDCTL_API="3"))
    return sum(1 for line in out.stdout.splitlines() if line.strip())


def _mkdirs(stub, pb, prefix: str, stop: threading.Event, out: list[float]) -> None:
    i = 0
    while not stop.is_set():
        t = time.perf_counter()
        stub.Mkdir(pb.MkdirRequest(path=f"{prefix}/m{i}", parents=True), timeout=60)
        out.append(time.perf_counter() - t)
        i += 1


def _pct(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] * 1000


def run(files: int, per_dir: int = 50) -> dict:
    import grpc

    from hedgefs.client.fs import FileSystem
    from hedgefs.cluster.etcd import EtcdMembers
    from hedgefs.proto import hedgefs_pb2 as pb, hedgefs_pb2_grpc

    root = tempfile.mkdtemp(prefix="hedgefs-bench-purge-")
    etcd = EtcdMembers(root).start()
    procs = []
    try:
        nn, address = _start(root, "nn", ["namenode", "--meta", etcd.url("bench"), "--default-policy", "REPLICATE-3"])
        procs.append(nn)
        for i in range(3):
            procs.append(_start(root, f"dn{i}", ["datanode", "--id", f"dn{i}", "--namenode", address, "--data-port", "0",
                                                 "--heartbeat-interval-s", "0.5", "--no-fsync"])[0])
        stub = hedgefs_pb2_grpc.NameNodeStub(grpc.insecure_channel(address))
        deadline = time.monotonic() + 30
        while True:   # the election
            try:   # and 3 live DataNodes
                if sum(d.state == "live" for d in stub.Report(pb.Empty(), timeout=5).datanodes) == 3:
                    break
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"no active NameNode with 3 live DataNodes: see {root}")
            time.sleep(0.2)
        built = time.perf_counter()
        with FileSystem(address) as fs:
            for i in range(files):
                if i % per_dir == 0:
                    fs.mkdir(f"/big/d{i // per_dir:04d}", parents=True)
                fs.write_bytes(f"/big/d{i // per_dir:04d}/f{i:05d}", b"x")
        built = time.perf_counter() - built
        inodes = _inodes(etcd, "bench")

        base, during, stop = [], [], threading.Event()
        th = threading.Thread(target=_mkdirs, args=(stub, pb, "/base", stop, base))
        th.start()
        time.sleep(5)
        stop.set()
        th.join()

        stop = threading.Event()
        th = threading.Thread(target=_mkdirs, args=(stub, pb, "/during", stop, during))
        start = time.perf_counter()
        stub.Delete(pb.DeleteRequest(path="/big", recursive=True), timeout=60)
        deleted = time.perf_counter() - start
        th.start()
        gone = inodes - files - files // per_dir - 1   # the tree's inodes gone; the Mkdirs' own not counted
        while (_inodes(etcd, "bench") - len(base) - len(during) - 2 > gone + 1
               and time.perf_counter() - start < 1800):
            time.sleep(0.2)
        purge_s = time.perf_counter() - start
        stop.set()
        th.join()
        return {"files": files, "dirs": files // per_dir, "build_s": round(built, 1), "delete_rpc_s": round(deleted, 3),
                "purge_s": round(purge_s, 1), "load_avg": [round(x, 1) for x in os.getloadavg()],
                "mkdir_base": {"n": len(base), "p50_ms": round(_pct(base, .5), 1), "p99_ms": round(_pct(base, .99), 1),
                               "max_ms": round(max(base) * 1000, 1)},
                "mkdir_during_purge": {"n": len(during), "p50_ms": round(_pct(during, .5), 1),
                                       "p99_ms": round(_pct(during, .99), 1), "max_ms": round(max(during) * 1000, 1)},
                "p50_ratio": round(statistics.median(during) / statistics.median(base), 2),
                "p99_ratio": round(_pct(during, .99) / _pct(base, .99), 2)}
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(15)
        etcd.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=2000)
    args = ap.parse_args()
    print(json.dumps(run(args.files), indent=1))
