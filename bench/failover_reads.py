"""`hedgefs bench failover --mode reads`: reads of already-open files while the active NameNode is
killed, against windows of the same run without a failover.

A local HA cluster of real processes (cluster/launcher.py: 3 etcd members, 2 NameNodes, DataNodes;
lease TTL 3 s, the default), ``files`` files written first. ``threads`` reader threads share one
client (``FileSystem``), each opens every file once and then preads ``read_kib`` at random offsets
of random files, checking every byte against what was written, for the whole run. Each repetition
is a window without failover (``calm``), then an equally long window that starts with a kill -9 of
the active (``failover``), then the killed NameNode is started again and waited for as a standby
(``restart``: reads go on and count as failures if they fail, but their latencies are not in either
condition). Reads are put in the window in which they started; ``takeover`` is the part of the
failover window from the kill to 1 s after the new active first answers as the active.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import tempfile
import threading
import time

from hedgefs.bench.failover import _percentile
from hedgefs.bench.smallfiles import process_cpu_seconds


class _Readers:
    """``threads`` threads of random ``read_kib`` preads of ``expected``'s files, each checked, each
    recorded by ``_record`` with the tag ``_tag`` gave just before it began."""

    def __init__(self, fs, expected: dict[str, bytes], threads: int, read_kib: int):
        self.fs, self.expected, self.size = fs, expected, read_kib * 1024
        self.phase, self.rep = "warmup", 0
        self.samples: list[tuple[str, int, float, float]] = []   # (phase, rep, monotonic start, seconds)
        self.failures: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)]

    def _run(self, i: int) -> None:
        rng = random.Random(i)
        readers = {path: self.fs.open(path) for path in self.expected}   # opened once, before any kill
        paths = sorted(readers)
        while not self.stop.is_set():
            path = rng.choice(paths)
            data = self.expected[path]
            offset = rng.randrange(0, len(data) - self.size)
            tag, began, start = self._tag(), time.monotonic(), time.perf_counter()
            try:
                got = readers[path].pread(offset, self.size)
                error = None if got == data[offset:offset + self.size] else f"wrong bytes at {path}:{offset}"
            except Exception as err:   # counted: the figure this benchmark exists for
                error = f"{type(err).__name__}: {err}"[:300]
            seconds = time.perf_counter() - start
            with self.lock:
                self._record(tag, began, seconds, error)

    def _tag(self):
        return self.phase, self.rep

    def _record(self, tag, began: float, seconds: float, error: str | None) -> None:
        """Under the lock."""
        if error:
            self.failures.append((tag[0], error))
        else:
            self.samples.append((*tag, began, seconds))

    def latencies(self, phase: str, rep: int | None = None, between: list[tuple[float, float]] | None = None):
        with self.lock:
            return [s for p, r, t, s in self.samples if p == phase and (rep is None or r == rep)
                    and (between is None or any(a <= t <= b for a, b in between))]


def _cpu(cluster) -> dict[str, tuple[int, float]]:
    """{process name: (pid, CPU seconds used so far)} of every process of the cluster."""
    out = {}
    for name in [*cluster.namenode_names, *cluster.datanode_ids, *cluster.etcd_names]:
        pid = cluster.pid(name)
        if pid is None:
            continue
        try:
            out[name] = (pid, process_cpu_seconds(pid))
        except OSError:   # gone meanwhile
            continue
    return out


def _cpu_used(before: dict, after: dict) -> float:
    """CPU seconds the cluster's processes used between two ``_cpu`` snapshots (a process killed or
    started meanwhile counts for neither end)."""
    return round(sum(a[1] - before[n][1] for n, a in after.items() if n in before and before[n][0] == a[0]), 2)


def _summary(values: list[float]) -> dict:
    if not values:
        return {"reads": 0}
    return {"reads": len(values), "p50_ms": round(1000 * statistics.median(values), 2),
            "p99_ms": round(1000 * _percentile(values, 99), 2), "p99_9_ms": round(1000 * _percentile(values, 99.9), 2),
            "max_ms": round(1000 * max(values), 2)}


def run(reps: int = 5, window_s: float = 10.0, files: int = 8, file_kib: int = 2048, threads: int = 4,
        read_kib: int = 64, command: str = "", say=print) -> dict:
    from hedgefs.client.fs import FileSystem
    from hedgefs.cluster.launcher import LocalCluster, Options
    from hedgefs.proto import hedgefs_pb2 as pb

    root = tempfile.mkdtemp(prefix="hedgefs-bench-failreads-")
    cluster = LocalCluster(root)
    readers, fs = None, None
    try:
        cluster.up(Options(datanodes=5, namenode_port=0, policy="RS-3-2-64k", fsync=False, ha=True,
                           heartbeat_interval_s=0.5, dead_interval_s=10.0))

        def role(name: str) -> str:
            try:
                return cluster.namenode_rpc(name, "Report", pb.Empty(), timeout=2).namenode.role
            except Exception:   # down or not answering yet
                return "down"

        def wait_role(name: str, want: str, timeout_s: float = 60.0) -> float:
            start = time.monotonic()
            while role(name) != want:
                if time.monotonic() - start > timeout_s:
                    raise RuntimeError(f"{name} not {want} within {timeout_s:.0f} s")
                time.sleep(0.05)
            return time.monotonic() - start

        fs = FileSystem(cluster.namenode, credentials=None)
        rng = random.Random(7)
        expected = {f"/reads/f{i}": rng.randbytes(file_kib * 1024) for i in range(files)}
        fs.mkdir("/reads", parents=True)
        for path, data in expected.items():
            fs.write_bytes(path, data)
        readers = _Readers(fs, expected, threads, read_kib)
        for t in readers.threads:
            t.start()
        time.sleep(2.0)   # files opened, channels warm
        takeovers, spans, cpu = [], [], []   # spans: (kill, the new active answering + 1 s), the takeover proper
        for rep in range(reps):
            readers.rep, readers.phase = rep, "calm"
            calm_cpu = _cpu(cluster)
            time.sleep(window_s)
            failover_cpu = _cpu(cluster)
            active = next(n for n in cluster.namenode_names if role(n) == "active")
            other = next(n for n in cluster.namenode_names if n != active)
            readers.phase = "failover"
            t0 = time.monotonic()
            cluster.kill(active)
            wait_role(other, "active")
            takeovers.append(round(time.monotonic() - t0, 3))
            spans.append((t0, time.monotonic() + 1.0))
            time.sleep(max(0.0, t0 + window_s - time.monotonic()))
            readers.phase = "restart"
            end_cpu = _cpu(cluster)
            cpu.append({"calm": _cpu_used(calm_cpu, failover_cpu), "failover": _cpu_used(failover_cpu, end_cpu)})
            cluster.start(active)
            wait_role(active, "standby")
            cluster.wait_live(cluster.datanode_ids)
            say(f"rep {rep + 1}/{reps}: {active} killed, {other} active after {takeovers[-1]:.2f} s; reads so far "
                + ", ".join(f"{k} {len(readers.latencies(k))}" for k in ("calm", "failover", "restart"))
                + f", failures {len(readers.failures)}")
        readers.stop.set()
        for t in readers.threads:
            t.join(30)
        calm, failover = _summary(readers.latencies("calm")), _summary(readers.latencies("failover"))
        takeover = _summary(readers.latencies("failover", between=spans))

        def ratio(of: dict) -> dict:
            return {k: round(of[k] / calm[k], 3) for k in ("p50_ms", "p99_ms", "p99_9_ms") if calm.get(k) and of.get(k)}

        return {"command": command, "mode": "reads", "reps": reps, "window_s": window_s, "datanodes": 5,
                "policy": "RS-3-2-64k", "files": files, "file_kib": file_kib, "reader_threads": threads,
                "read_kib": read_kib, "lease_ttl_s": 3, "takeover_s": takeovers,
                "calm": calm, "failover": failover, "takeover": takeover,
                "restart": _summary(readers.latencies("restart")),
                "failover_over_calm": ratio(failover), "takeover_over_calm": ratio(takeover),
                "per_rep": [{p: _summary(readers.latencies(p, r)) for p in ("calm", "failover")} for r in range(reps)],
                # CPU seconds used by the cluster's processes (the killed NameNode not counted) per window
                "cluster_cpu_s": cpu,
                "failures": len(readers.failures),
                "failures_by_phase": {p: sum(1 for q, _ in readers.failures if q == p) for p, _ in readers.failures},
                "failure_samples": readers.failures[:10]}
    finally:
        if readers is not None:
            readers.stop.set()
        if fs is not None:
            fs.close()
        cluster.down()
        keep = os.environ.get("HEDGEFS_BENCH_KEEP")   # a directory: the processes' logs are copied there
        if keep:
            shutil.copytree(os.path.join(root, "logs"), keep, dirs_exist_ok=True)
        shutil.rmtree(root, ignore_errors=True)
