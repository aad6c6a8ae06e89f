"""`hedgefs bench namenode`'s workloads: HDFS's NNThroughputBenchmark, for this NameNode.

Each operation is run by N closed-loop threads against a *target*, and timed per call:

  create0     a file of 0 bytes: Create + Complete (2 client calls)
  create1     a file of one block group: Create + AddBlockGroup + Complete (3 client calls), and
              between them the DataNode's receipt (UnitStored) as a DataNode sends it
              (REPLICATE-1, so one receipt)
  mkdirs      Mkdir -p of a new directory
  stat        GetFileInfo of a file of one group (its locations: what an open costs)
  list        List of a directory of 100 files (one page)
  rename      Rename of a file to a new name in its directory
  delete      Delete of a file
  blockReport a simulated DataNode's full report of the units the map puts on it (about 100,
              NNThroughputBenchmark's default blocksPerReport)
  heartbeat   a simulated DataNode's heartbeat
  noop        GetPolicy of / (no write, no file): what the path to the NameNode costs

Two targets: ``InProcess`` calls a ``Namesystem`` in this process (the metadata engine's own
ceiling, no RPC), ``OverRpc`` calls a NameNode server through the client library (``NameNodes.call``,
what every client does). This file imports the client and the namenode lazily and nothing of
``hedgefs.bench``, so ``python bench/namenode.py client ...`` runs it as a separate client process
against another build of hedgefs (``bench/namenode_run.py`` puts that build first on the path).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

OPS = ("create0", "create1", "mkdirs", "stat", "list", "rename", "delete", "blockReport", "heartbeat", "noop")
POOL_FILES = 300         # one-group REPLICATE-3 files: stat's targets, the block reports' units
LIST_FILES = 100
DATANODES = 9
CALLS = {"create0": 2, "create1": 4}     # calls timed as one operation (create1: 3 + the receipt)


def journal_build() -> bool:
    """Whether the hedgefs imported is a build with the journal (namenode/journal/), judged by its
    files: an import would not tell, as the installed (editable) build answers for any module a
    baseline build on PYTHONPATH lacks."""
    import hedgefs.namenode

    return os.path.isdir(os.path.join(hedgefs.namenode.__path__[0], "journal"))


class InProcess:
    """The namesystem itself: no RPC, no protobuf."""

    def __init__(self, data_dir: str):
        if journal_build():
            from hedgefs.namenode.blocks.blockmap import GroupCommit
        else:   # a baseline build of before the journal
            from hedgefs.namenode.blockmap import GroupCommit
        from hedgefs.namenode.namesystem import Namesystem

        self._commit = GroupCommit
        self.nn = Namesystem(data_dir, dead_interval_s=3600.0, receipt_wait_s=5.0)

    def close(self) -> None:
        self.nn.close()

    def register(self, dn: str) -> None:
        self.nn.register(dn, f"127.0.0.1:{1000 + int(dn[2:])}", f"127.0.0.1:{2000 + int(dn[2:])}")
        self.nn.heartbeat(dn, used_bytes=0, units=0)

    def mkdir(self, path: str) -> None:
        self.nn.mkdir(path, parents=True)

    def create(self, path: str, policy: str = "") -> int:
        return self.nn.create(path, policy=policy).file_id

    def add_group(self, file_id: int) -> tuple[int, int, list[str]]:
        g = self.nn.add_block_group(file_id)
        return g.id, g.generation, [u.datanode_id for u in g.units]

    def stored(self, dn: str, units: list[tuple[int, int, int]]) -> None:
        self.nn.units_stored(dn, units)

    def complete(self, file_id: int, length: int, groups: list[tuple[int, int, tuple[int, ...]]]) -> None:
        self.nn.complete(file_id, length, [self._commit(*g) for g in groups])

    def stat(self, path: str) -> None:
        self.nn.file_info(path)

    def list(self, path: str) -> None:
        self.nn.list_page(path)

    def rename(self, src: str, dst: str) -> None:
        self.nn.rename(src, dst)

    def delete(self, path: str) -> None:
        self.nn.delete(path)

    def report(self, dn: str, units: list[tuple[int, int, int]]) -> None:
        self.nn.block_report(dn, units)

    def heartbeat(self, dn: str) -> None:
        self.nn.heartbeat(dn, used_bytes=1 << 30, units=100)

    def noop(self) -> None:
        self.nn.get_policy("/")


class OverRpc:
    """A NameNode server over its wire protocol, DataNode calls included, through the client
    library's channel layer (namenodes.py: one blocking channel, failover and retry ids as any
    client call): what is measured is the protocol, so it is spoken here, not the public API."""

    def __init__(self, namenode: str):
        from hedgefs.client.namenodes import NameNodes
        from hedgefs.proto import hedgefs_pb2 as pb

        self.pb = pb
        self.namenodes = NameNodes(namenode)
        self.call = self.namenodes.call

    def close(self) -> None:
        self.namenodes.close()

    def register(self, dn: str) -> None:
        n = int(dn[2:])
        self.call("RegisterDataNode", self.pb.RegisterRequest(datanode_id=dn, address=f"127.0.0.1:{1000 + n}",
                                                             data_address=f"127.0.0.1:{2000 + n}"))
        self.heartbeat(dn)

    def mkdir(self, path: str) -> None:
        self.call("Mkdir", self.pb.MkdirRequest(path=path, parents=True))

    def create(self, path: str, policy: str = "") -> int:
        return self.call("Create", self.pb.CreateRequest(path=path, policy=policy, client_name="bench")).file_id

    def add_group(self, file_id: int) -> tuple[int, int, list[str]]:
        g = self.call("AddBlockGroup", self.pb.AddBlockGroupRequest(file_id=file_id))
        return g.id, g.generation, [u.datanode_id for u in g.units]

    def stored(self, dn: str, units: list[tuple[int, int, int]]) -> None:
        self.call("UnitStored", self.pb.UnitStoredRequest(
            datanode_id=dn, units=[self.pb.StoredUnit(group_id=g, index=i, generation=gen) for g, i, gen in units]))

    def complete(self, file_id: int, length: int, groups: list[tuple[int, int, tuple[int, ...]]]) -> None:
        self.call("Complete", self.pb.CompleteRequest(file_id=file_id, length=length, groups=[
            self.pb.GroupCommit(group_id=g, length=n, stored_units=list(s)) for g, n, s in groups]))

    def stat(self, path: str) -> None:
        self.call("GetFileInfo", self.pb.PathRequest(path=path))

    def list(self, path: str) -> None:
        self.call("List", self.pb.ListRequest(path=path))

    def rename(self, src: str, dst: str) -> None:
        self.call("Rename", self.pb.RenameRequest(src=src, dst=dst))

    def delete(self, path: str) -> None:
        self.call("Delete", self.pb.DeleteRequest(path=path))

    def report(self, dn: str, units: list[tuple[int, int, int]]) -> None:
        self.call("BlockReport", self.pb.BlockReportRequest(
            datanode_id=dn, units=[self.pb.StoredUnit(group_id=g, index=i, generation=gen) for g, i, gen in units]))

    def heartbeat(self, dn: str) -> None:
        self.call("Heartbeat", self.pb.HeartbeatRequest(datanode_id=dn, used_bytes=1 << 30, units=100))

    def noop(self) -> None:
        self.call("GetPolicy", self.pb.PathRequest(path="/"))


def write_file(target, path: str, policy: str) -> dict[str, list[tuple[int, int, int]]]:
    """A file of one group (create1's three calls and the receipts); the units it put where."""
    file_id = target.create(path, policy)
    group_id, generation, holders = target.add_group(file_id)
    placed: dict[str, list[tuple[int, int, int]]] = {}
    for index, dn in enumerate(holders):
        placed.setdefault(dn, []).append((group_id, index, generation))
    for dn, units in placed.items():
        target.stored(dn, units)
    target.complete(file_id, 1, [(group_id, 1, tuple(range(len(holders))))])
    return placed


class Workload:
    """The namespace and simulated DataNodes the operations need, made once per target."""

    def __init__(self, target, say=lambda s: None):
        self.t = target
        self.runs = 0
        self.datanodes = [f"dn{i + 1}" for i in range(DATANODES)]
        for dn in self.datanodes:
            target.register(dn)
        target.mkdir("/bench/pool")
        target.mkdir("/bench/list")
        self.units: dict[str, list[tuple[int, int, int]]] = {dn: [] for dn in self.datanodes}
        say(f"  preparing {POOL_FILES} one-group files and a directory of {LIST_FILES}")
        for i in range(POOL_FILES):
            for dn, units in write_file(target, f"/bench/pool/f{i}", "REPLICATE-3").items():
                self.units[dn].extend(units)
        for i in range(LIST_FILES):
            fid = target.create(f"/bench/list/f{i}")
            target.complete(fid, 0, [])

    def prepare(self, op: str, threads: int, per_thread: int) -> tuple[str, list]:
        """A fresh directory per thread, and the files rename and delete consume."""
        self.runs += 1
        base = f"/bench/r{self.runs}-{op}-{threads}"
        for t in range(threads):
            self.t.mkdir(f"{base}/t{t}")
            if op in ("rename", "delete"):
                for i in range(per_thread):
                    self.t.complete(self.t.create(f"{base}/t{t}/f{i}"), 0, [])
        return base, []

    def step(self, op: str, base: str, t: int, i: int) -> None:
        tgt = self.t
        if op == "create0":
            tgt.complete(tgt.create(f"{base}/t{t}/f{i}"), 0, [])
        elif op == "create1":
            write_file(tgt, f"{base}/t{t}/f{i}", "REPLICATE-1")
        elif op == "mkdirs":
            tgt.mkdir(f"{base}/t{t}/d{i}")
        elif op == "stat":
            tgt.stat(f"/bench/pool/f{(t * 7919 + i) % POOL_FILES}")
        elif op == "list":
            tgt.list("/bench/list")
        elif op == "rename":
            tgt.rename(f"{base}/t{t}/f{i}", f"{base}/t{t}/g{i}")
        elif op == "delete":
            tgt.delete(f"{base}/t{t}/f{i}")
        elif op == "blockReport":
            dn = self.datanodes[(t + i) % len(self.datanodes)]
            tgt.report(dn, self.units[dn])
        elif op == "heartbeat":
            tgt.heartbeat(self.datanodes[(t + i) % len(self.datanodes)])
        elif op == "noop":
            tgt.noop()
        else:
            raise ValueError(f"unknown operation {op!r}")


def _percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(p * len(sorted_values)))]


def measure(work: Workload, op: str, threads: int, ops: int, min_seconds: float = 1.0) -> dict:
    """``ops`` operations by ``threads`` closed-loop threads, and for operations that consume no
    prepared files as many more as fit in ``min_seconds``: ops/s, latency percentiles, and this
    process's CPU per operation (on a shared host CPU per operation moves less than ops/s)."""
    per_thread = max(1, ops // threads)
    timed = op not in ("rename", "delete")
    base, _ = work.prepare(op, threads, per_thread)
    latencies: list[list[float]] = [[] for _ in range(threads)]
    errors: list[str] = []
    start = threading.Barrier(threads + 1)
    deadline = [0.0]

    def run(t: int) -> None:
        mine = latencies[t]
        start.wait()
        i = 0
        try:
            while i < per_thread or (timed and time.perf_counter() < deadline[0]):
                began = time.perf_counter()
                work.step(op, base, t, i)
                mine.append(time.perf_counter() - began)
                i += 1
        except Exception as err:  # noqa: BLE001 - reported in the result, the run goes on
            errors.append(f"{type(err).__name__}: {err}")

    pool = [threading.Thread(target=run, args=(t,), daemon=True) for t in range(threads)]
    for th in pool:
        th.start()
    cpu = time.process_time()
    began = time.perf_counter()
    deadline[0] = began + min_seconds
    start.wait()
    for th in pool:
        th.join()
    seconds = time.perf_counter() - began
    cpu = time.process_time() - cpu
    done = sorted(x for lat in latencies for x in lat)
    return {"op": op, "threads": threads, "ops": len(done), "seconds": round(seconds, 3),
            "ops_per_s": round(len(done) / seconds, 1) if seconds else 0.0,
            "p50_ms": round(_percentile(done, 0.50) * 1000, 3), "p99_ms": round(_percentile(done, 0.99) * 1000, 3),
            "cpu_us_per_op": round(cpu / len(done) * 1e6, 1) if done else 0.0,
            "calls_per_op": CALLS.get(op, 1), "errors": errors[:3]}


def main(argv: list[str]) -> None:
    """``namenode.py client ADDRESS OPS`` (over RPC) or ``namenode.py inprocess DATA_DIR OPS``: make
    the workload, say ``ready``, then for each line ``OP THREADS`` on stdin measure it and answer
    one JSON line (the runner interleaves builds this way, run by run)."""
    import logging

    logging.basicConfig(level=logging.WARNING)
    mode, where, ops = argv[0], argv[1], int(argv[2])
    target = OverRpc(where) if mode == "client" else InProcess(where)
    try:
        work = Workload(target)
        print("ready", flush=True)
        for line in sys.stdin:
            op, threads = line.split()
            print(json.dumps(measure(work, op, int(threads), ops)), flush=True)
    finally:
        target.close()


if __name__ == "__main__":
    sys.path.pop(0)      # this file's directory: the hedgefs to measure comes from the path given
    if len(sys.argv) != 4 or sys.argv[1] not in ("client", "inprocess"):
        sys.exit("usage: namenode.py client|inprocess ADDRESS|DATA_DIR OPS")
    main(sys.argv[1:])
