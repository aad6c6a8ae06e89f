"""`hedgefs bench meta`: the namespace on etcd against SQLite, in the same run.

Two NameNode processes, one ``--meta sqlite`` (the default) and one ``--meta etcd://`` on 3 local
etcd members (cluster/etcd.py), each driven by 16 client threads over gRPC (raw stubs, no client
library in the way): mkdirs (one new inode each, a write through group commit: on etcd one
guarded Txn per batch) and stats (GetFileInfo, a read of the view). Rounds alternate between the
two backends so that a change in the host's load hits both; the ratio etcd / SQLite of each
round is reported beside the absolute rates.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

THREADS = 16


def _start(root: str, name: str, meta: str) -> tuple[subprocess.Popen, str]:
    from hedgefs.plumbing import read_port_file

    port_file = os.path.join(root, f"{name}.port")
    log = open(os.path.join(root, f"{name}.log"), "ab")
    args = [sys.executable, "-m", "hedgefs", "namenode", "--port", "0", "--data-dir", os.path.join(root, name),
            "--port-file", port_file] + (["--meta", meta] if meta else [])
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    deadline = time.monotonic() + 30
    while not os.path.exists(port_file):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not start: see {root}/{name}.log")
        time.sleep(0.05)
    return proc, f"127.0.0.1:{read_port_file(port_file)['rpc']}"


def _rate(address: str, op: str, ops: int, tag: str) -> float:
    """Operations per second of ``THREADS`` threads doing ``ops`` operations in all."""
    import grpc

    from hedgefs.proto import hedgefs_pb2 as pb, hedgefs_pb2_grpc

    stubs = [hedgefs_pb2_grpc.NameNodeStub(grpc.insecure_channel(address)) for _ in range(THREADS)]
    per = ops // THREADS
    for t, stub in enumerate(stubs):   # the directories the stats read, and warm channels
        stub.Mkdir(pb.MkdirRequest(path=f"/b/{tag}/t{t}/d0", parents=True), timeout=30)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        stub = stubs[t]
        try:
            for i in range(per):
                if op == "mkdir":
                    stub.Mkdir(pb.MkdirRequest(path=f"/b/{tag}/t{t}/m{i}"), timeout=30)
                else:
                    stub.GetFileInfo(pb.PathRequest(path=f"/b/{tag}/t{t}/d0"), timeout=30)
        except BaseException as err:   # counted: a benchmark that failed says so
            errors.append(err)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    start = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    seconds = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} {op} threads failed: {errors[0]}")
    return per * THREADS / seconds


def run(rounds: int = 3, mkdirs: int = 3200, stats: int = 16000, command: str = "", say=print) -> dict:
    from hedgefs.cluster.etcd import EtcdMembers

    root = tempfile.mkdtemp(prefix="hedgefs-bench-meta-")
    etcd = EtcdMembers(root).start()
    procs = []
    try:
        sqlite_proc, sqlite_addr = _start(root, "nn-sqlite", "")
        etcd_proc, etcd_addr = _start(root, "nn-etcd", etcd.url("bench"))
        procs = [sqlite_proc, etcd_proc]
        time.sleep(1.0)   # the etcd NameNode's election
        out: dict[str, list[float]] = {f"{b}_{op}": [] for b in ("sqlite", "etcd") for op in ("mkdir", "stat")}
        for r in range(rounds):
            order = [("sqlite", sqlite_addr), ("etcd", etcd_addr)]
            if r % 2:
                order.reverse()
            for backend, address in order:
                for op, ops in (("mkdir", mkdirs), ("stat", stats)):
                    out[f"{backend}_{op}"].append(_rate(address, op, ops, f"r{r}{backend}{op}"))
            say(f"round {r + 1}/{rounds}: " + ", ".join(f"{k} {v[-1]:.0f}/s" for k, v in out.items()))
        ratio = {op: [e / s for e, s in zip(out[f"etcd_{op}"], out[f"sqlite_{op}"])] for op in ("mkdir", "stat")}
        return {"command": command, "threads": THREADS, "rounds": rounds,
                **{k: [round(x) for x in v] for k, v in out.items()},
                **{f"median_{k}_per_s": round(statistics.median(v)) for k, v in out.items()},
                "etcd_over_sqlite_mkdir": round(statistics.median(ratio["mkdir"]), 2),
                "etcd_over_sqlite_stat": round(statistics.median(ratio["stat"]), 2)}
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(15)
        etcd.stop()
        shutil.rmtree(root, ignore_errors=True)
