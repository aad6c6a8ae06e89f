"""`hedgefs bench failover`: how long the namespace is unwritable when the active NameNode dies or
hands over, on real processes (3 etcd members, 2 NameNodes on one prefix).

Each repetition: a writer does Mkdir after Mkdir on the active (8 threads, each to whichever
NameNode answers, following the standby's ``hedgefs-active``); the active is ``kill -9``ed (or
asked to ``Failover``, the graceful handover); the figure is the time from the kill to the first
write acknowledged by the new active. The killed NameNode is started again and comes back as a
standby before the next repetition. Every write acknowledged is checked at the end (a List on the
last active): ``lost`` must be 0.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

THREADS = 8


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


class _NameNode:
    def __init__(self, root: str, name: str, meta: str, ttl_s: int, extra: tuple[str, ...] = ()):
        self.root, self.name, self.meta, self.ttl_s, self.extra = root, name, meta, ttl_s, list(extra)
        self.port, self.proc, self.ports = 0, None, {}

    def start(self) -> None:
        from hedgefs.plumbing import read_port_file

        port_file = os.path.join(self.root, f"{self.name}.port")
        if os.path.exists(port_file):
            os.remove(port_file)
        log = open(os.path.join(self.root, f"{self.name}.log"), "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "hedgefs", "namenode", "--port", str(self.port),
                                      "--data-dir", os.path.join(self.root, self.name), "--meta", self.meta,
                                      "--lease-ttl-s", str(self.ttl_s), "--port-file", port_file, *self.extra],
                                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + 30
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start: see {self.root}/{self.name}.log")
            time.sleep(0.05)
        self.ports = read_port_file(port_file)
        self.port = self.ports["rpc"]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(15)


class _Writers:
    """``threads`` threads of Mkdirs (``pause_s`` between a thread's writes); ``acked`` every path
    acknowledged, with its time; ``errors`` the RPC failures tried again, by status code (a standby's
    refusal included)."""

    def __init__(self, nodes, threads: int = THREADS, pause_s: float = 0.0, top: str = "/bench"):
        import grpc

        from hedgefs.proto import hedgefs_pb2 as pb, hedgefs_pb2_grpc

        self.pb, self.grpc = pb, grpc
        self.stubs = {n.name: (n, hedgefs_pb2_grpc.NameNodeStub(grpc.insecure_channel(n.address))) for n in nodes}
        self.acked: list[tuple[float, str, str]] = []   # (monotonic, path, NameNode)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.client = uuid.uuid4().hex[:8]
        self.pause_s, self.top = pause_s, top
        self.errors: dict[str, int] = {}
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)]

    def rebind(self, node) -> None:
        from hedgefs.proto import hedgefs_pb2_grpc

        self.stubs[node.name] = (node, hedgefs_pb2_grpc.NameNodeStub(self.grpc.insecure_channel(node.address)))

    def _run(self, t: int) -> None:
        i = 0
        while not self.stop.is_set():
            path, i = f"{self.top}/t{t}/{i:06d}", i + 1
            while not self.stop.is_set():
                done = False
                for node, stub in list(self.stubs.values()):
                    try:
                        stub.Mkdir(self.pb.MkdirRequest(path=path, parents=True), timeout=2,
                                   metadata=(("hedgefs-client-id", self.client), ("hedgefs-call-id", path)))
                    except self.grpc.RpcError as err:
                        with self.lock:
                            self.errors[err.code().name] = self.errors.get(err.code().name, 0) + 1
                        continue
                    with self.lock:
                        self.acked.append((time.monotonic(), path, node.name))
                    done = True
                    break
                if done:
                    break
                time.sleep(0.01)
            if self.pause_s:
                self.stop.wait(self.pause_s)

    def first_after(self, t0: float, name: str) -> float | None:
        with self.lock:
            times = [t for t, _, n in self.acked if t > t0 and n == name]
        return min(times) if times else None


def hand_over(old: _NameNode, new: _NameNode, writers: _Writers, stubs: dict, kill: bool,
              timeout_s: float = 60.0) -> float:
    """``kill -9`` of the active ``old`` (``kill``), else its graceful handover (``Failover``); the
    seconds from then to the first write ``new`` acknowledged. A killed NameNode is started again
    (it comes back as a standby) and the writers and ``stubs`` (name -> NameNodeStub) follow it to
    its new port."""
    import grpc

    from hedgefs.proto import hedgefs_pb2 as pb, hedgefs_pb2_grpc

    t0 = time.monotonic()
    if kill:
        old.proc.send_signal(signal.SIGKILL)
        old.proc.wait(10)
    else:
        stubs[old.name].Failover(pb.Empty(), timeout=10)
    while (t1 := writers.first_after(t0, new.name)) is None:
        if time.monotonic() - t0 > timeout_s:
            raise RuntimeError(f"no write on {new.name} within {timeout_s:.0f} s of the {'kill' if kill else 'handover'}")
        time.sleep(0.005)
    if kill:
        old.start()
        writers.rebind(old)
        stubs[old.name] = hedgefs_pb2_grpc.NameNodeStub(grpc.insecure_channel(old.address))
    return t1 - t0


def _role(stub, pb) -> str:
    try:
        return stub.Report(pb.Empty(), timeout=2).namenode.role
    except Exception:
        return "down"


def run(reps: int = 10, ttl_s: int = 3, graceful_reps: int = 5, command: str = "", say=print) -> dict:
    import grpc

    from hedgefs.cluster.etcd import EtcdMembers
    from hedgefs.proto import hedgefs_pb2 as pb, hedgefs_pb2_grpc

    root = tempfile.mkdtemp(prefix="hedgefs-bench-failover-")
    etcd = EtcdMembers(root).start()
    nodes = [_NameNode(root, f"nn{i}", etcd.url("bench"), ttl_s) for i in (1, 2)]
    writers = None
    try:
        for n in nodes:
            n.start()
        writers = _Writers(nodes)
        for t in writers.threads:
            t.start()
        stub = {n.name: hedgefs_pb2_grpc.NameNodeStub(grpc.insecure_channel(n.address)) for n in nodes}

        def active(timeout: float = 30.0):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                found = [n for n in nodes if _role(stub[n.name], pb) == "active"]
                if len(found) == 1 and len(writers.acked) > 0:
                    return found[0]
                time.sleep(0.05)
            raise RuntimeError("no active NameNode")

        def one(kind: str) -> float:
            old = active()
            new = next(n for n in nodes if n is not old)
            while _role(stub[new.name], pb) != "standby":
                time.sleep(0.05)
            time.sleep(1.0)   # writes flowing on the old active
            return hand_over(old, new, writers, stub, kill=kind == "kill")

        kill = []
        for i in range(reps):
            kill.append(one("kill"))
            say(f"kill -9 {i + 1}/{reps}: {kill[-1]:.2f} s to the first write on the new active")
        graceful = []
        for i in range(graceful_reps):
            graceful.append(one("failover"))
            say(f"failover {i + 1}/{graceful_reps}: {graceful[-1]:.2f} s")
        writers.stop.set()
        for t in writers.threads:
            t.join(10)
        last = active()
        listed = set()
        for t in range(THREADS):
            start_after = ""
            while True:
                page = stub[last.name].List(pb.ListRequest(path=f"/bench/t{t}", start_after=start_after), timeout=30)
                listed.update(e.path for e in page.entries)
                if not page.more or not page.entries:
                    break
                start_after = page.entries[-1].path
        acked = {p for _, p, _ in writers.acked}
        return {"command": command, "reps": reps, "ttl_s": ttl_s, "writer_threads": THREADS,
                "kill9_s": [round(x, 3) for x in kill],
                "kill9_p50_s": round(statistics.median(kill), 3), "kill9_p99_s": round(_percentile(kill, 99), 3),
                "failover_s": [round(x, 3) for x in graceful],
                "failover_p50_s": round(statistics.median(graceful), 3) if graceful else None,
                "failover_max_s": round(max(graceful), 3) if graceful else None,
                "writes_acked": len(acked), "lost": len(acked - listed)}
    finally:
        if writers is not None:
            writers.stop.set()
        for n in nodes:
            try:
                n.stop()
            except Exception:
                pass
        etcd.stop()
        shutil.rmtree(root, ignore_errors=True)
