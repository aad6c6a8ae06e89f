"""`hedgefs bench failover --mode etcd-leader | cpu-hog`: the NameNodes on etcd when etcd, not a
NameNode, has the trouble (3 etcd members, 2 NameNodes on one prefix, real processes).

``etcd-leader``: the writers of bench/failover.py (8 threads of raw Mkdirs to whichever NameNode
answers) and one thread writing through the client library (``FileSystem.mkdir``, its own
failover and retries: any exception it raises is a client error beyond retries). Each repetition
finds etcd's leader member (``etcdctl endpoint status``), kills it with SIGKILL, measures the
longest gap between acknowledged writes from 1 s before the kill to ``WINDOW_S`` after it (the
stall) and, as the baseline of the same repetition, the longest gap in an equally long window
just before it, then starts the member again and waits until it is healthy.

``cpu-hog``: a light writer load (2 threads, a Mkdir every 50 ms each), one busy-loop process per
core (``os.cpu_count()``) for ``seconds``; every NameNode's role and epoch is polled every 0.5 s
and each change is a failover (there must be none past the first election). The NameNode logs
are searched for late renewals and depositions, etcd's for slow requests and leader changes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from hedgefs.bench.failover import _NameNode, _percentile, _role, _Writers

WINDOW_S = 6.0   # after the kill: the stall is measured in [kill - 1 s, kill + WINDOW_S]
NN_SIGNS = {"renewal_past_deadline": "past the serve deadline", "lease_expired": "expired in etcd",
            "stopped_being_active": "stops being the active", "deposed": "namenode deposed",
            "became_active": "namenode is the ACTIVE"}
LOG_NEEDLES = [*NN_SIGNS.values(), "revoke failed", "metadata store"]
ETCD_SIGNS = {"slow_requests": "took too long", "leader_elected": "elected leader", "lost_leader": "lost leader",
              "heartbeat_late": "failed to send out heartbeat on time"}


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest time without an acknowledgement in [start, end]: the largest distance between
    consecutive sorted ``times`` (and the window's edges) that overlaps the window; an ack after
    ``end`` closes the last gap, so a stall that outlasts the window is measured whole."""
    inside = sorted(t for t in times if start <= t <= end)
    before = max((t for t in times if t < start), default=start)
    after = min((t for t in times if t > end), default=end)
    points = [before, *inside, after]
    return max((b - a for a, b in zip(points, points[1:])), default=end - start)


def gaps(times: list[float], start: float, end: float) -> list[float]:
    """The distances between consecutive acknowledgements inside [start, end]."""
    inside = sorted(t for t in times if start <= t <= end)
    return [b - a for a, b in zip(inside, inside[1:])]


def _count_signs(path: str, signs: dict[str, str]) -> dict[str, int]:
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return {k: 0 for k in signs}
    return {k: text.count(v) for k, v in signs.items()}


def _lines_with(path: str, needles: list[str], most: int = 20) -> list[str]:
    try:
        with open(path, errors="replace") as f:
            found = [ln.rstrip()[:300] for ln in f if any(n in ln for n in needles)]
    except OSError:
        return []
    return found[:most]


def etcd_leader(etcd) -> str:
    """The name of etcd's leader member, from ``etcdctl endpoint status`` on every member."""
    r = subprocess.run([etcd.etcdctl, "--endpoints", etcd.endpoints, "--dial-timeout", "1s", "--command-timeout", "2s",
                        "endpoint", "status", "-w", "json"], capture_output=True, text=True, timeout=10,
                       env=dict(os.environ, ETCDCTL_API="3"))
    by_port = {str(port): name for name, port in etcd.client_ports.items()}
    for row in json.loads(r.stdout or "[]"):
        status = row.get("Status", {})
        if status.get("header", {}).get("member_id") == status.get("leader"):
            return by_port[row["Endpoint"].rsplit(":", 1)[-1]]
    raise RuntimeError(f"no etcd leader in `etcdctl endpoint status`: {r.stdout.strip()} {r.stderr.strip()}")


def _member_healthy(etcd, name: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        r = subprocess.run([etcd.etcdctl, "--endpoints", f"127.0.0.1:{etcd.client_ports[name]}", "--dial-timeout", "1s",
                            "--command-timeout", "2s", "endpoint", "health"], capture_output=True, text=True,
                           timeout=10, env=dict(os.environ, ETCDCTL_API="3"))
        if r.returncode == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"etcd member {name} not healthy {timeout_s:.0f} s after its restart")


class _LibraryWriter:
    """One thread of ``FileSystem.mkdir`` (the client library's failover and retries)."""

    def __init__(self, addresses: str, top: str):
        from hedgefs.client.fs import FileSystem

        self.fs = FileSystem(addresses, credentials=None)
        self.top, self.acked, self.errors = top, [], []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.fs.mkdir(f"{self.top}/{i:06d}", parents=True)
                self.acked.append(time.monotonic())
            except Exception as err:   # counted: the figure this writer exists for
                self.errors.append((time.monotonic(), f"{type(err).__name__}: {err}"[:300]))
            i += 1

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.fs.close()


def _cluster(root: str, ttl_s: int, extra: tuple[str, ...] = ()):
    from hedgefs.cluster.etcd import EtcdMembers

    etcd = EtcdMembers(root).start()
    nodes = [_NameNode(root, f"nn{i}", etcd.url("bench"), ttl_s, extra) for i in (1, 2)]
    for n in nodes:
        n.start()
    return etcd, nodes


def _epoch(stub, pb, nodes) -> int:
    """The active's epoch (0: none answers as the active)."""
    for n in nodes:
        try:
            r = stub[n.name].Report(pb.Empty(), timeout=2).namenode
        except Exception:   # down or unreachable: the other one is asked
            continue
        if r.role == "active":
            return r.epoch
    return 0


def _stubs(nodes):
    import grpc

    from hedgefs.proto import hedgefs_pb2 as pb, hedgefs_pb2_grpc

    return pb, {n.name: hedgefs_pb2_grpc.NameNodeStub(grpc.insecure_channel(n.address)) for n in nodes}


def run_etcd_leader(reps: int = 5, ttl_s: int = 3, command: str = "", say=print) -> dict:
    root = tempfile.mkdtemp(prefix="hedgefs-bench-etcdleader-")
    etcd, nodes, writers, lib = None, [], None, None
    try:
        etcd, nodes = _cluster(root, ttl_s)
        pb, stub = _stubs(nodes)
        writers = _Writers(nodes)
        for t in writers.threads:
            t.start()
        lib = _LibraryWriter(",".join(n.address for n in nodes), "/lib")
        lib.thread.start()
        rows = []
        for rep in range(reps):
            deadline = time.monotonic() + 60
            while not any(_role(stub[n.name], pb) == "active" for n in nodes):
                if time.monotonic() > deadline:
                    raise RuntimeError("no active NameNode")
                time.sleep(0.1)
            time.sleep(WINDOW_S + 2)   # writes flowing: the baseline window
            roles_before = {n.name: _role(stub[n.name], pb) for n in nodes}
            epoch_before = _epoch(stub, pb, nodes)
            leader = etcd_leader(etcd)
            t0 = time.monotonic()
            etcd.procs[leader].kill()
            etcd.procs[leader].wait(10)
            while time.monotonic() < t0 + WINDOW_S + 1:
                time.sleep(0.1)
            deadline = t0 + 60   # a stall longer than the window: wait for the ack that ends it
            while time.monotonic() < deadline and not (any(t > t0 + WINDOW_S for t, _, _ in list(writers.acked))
                                                       and any(t > t0 + WINDOW_S for t in list(lib.acked))):
                time.sleep(0.1)
            times = [t for t, _, _ in list(writers.acked)]
            base_start = t0 - 1 - (WINDOW_S + 1)
            row = {"etcd_leader_killed": leader,
                   "stall_s": round(longest_gap(times, t0 - 1, t0 + WINDOW_S), 3),
                   "baseline_longest_gap_s": round(longest_gap(times, base_start, t0 - 1), 3),
                   "baseline_median_gap_ms": round(1000 * statistics.median(gaps(times, base_start, t0 - 1) or [0]), 2),
                   "library_stall_s": round(longest_gap(lib.acked, t0 - 1, t0 + WINDOW_S), 3),
                   "any_writer_stall_s": round(longest_gap(times + lib.acked, t0 - 1, t0 + WINDOW_S), 3),
                   "roles_before": roles_before,
                   "roles_after": {n.name: _role(stub[n.name], pb) for n in nodes},
                   "epoch_before": epoch_before, "epoch_after": _epoch(stub, pb, nodes),
                   "namenode_exited": [n.name for n in nodes if n.proc.poll() is not None]}
            for n in nodes:   # a fail-stopped NameNode is noted and started again (as a standby)
                if n.proc.poll() is not None:
                    n.start()
                    writers.rebind(n)
                    stub[n.name] = _stubs([n])[1][n.name]
            etcd.start_member(leader, state="existing")
            _member_healthy(etcd, leader)
            row["new_etcd_leader"] = etcd_leader(etcd)
            rows.append(row)
            say(f"etcd leader {leader} killed {rep + 1}/{reps}: longest write stall {row['stall_s']:.2f} s "
                f"(baseline {row['baseline_longest_gap_s']:.3f} s, median gap {row['baseline_median_gap_ms']} ms), "
                f"library {row['library_stall_s']:.2f} s, any writer {row['any_writer_stall_s']:.2f} s, "
                f"NameNodes {row['roles_after']}, epoch {epoch_before} -> "
                f"{row['epoch_after']}")
        writers.stop.set()
        for t in writers.threads:
            t.join(10)
        lib.close()
        stalls = [r["stall_s"] for r in rows]
        base = [r["baseline_longest_gap_s"] for r in rows]
        return {"command": command, "mode": "etcd-leader", "reps": reps, "ttl_s": ttl_s, "window_s": WINDOW_S,
                "writer_threads": len(writers.threads), "rows": rows,
                "stall_p50_s": round(statistics.median(stalls), 3), "stall_max_s": max(stalls),
                "baseline_longest_gap_p50_s": round(statistics.median(base), 3),
                "baseline_longest_gap_max_s": max(base),
                "baseline_median_gap_ms": round(statistics.median(r["baseline_median_gap_ms"] for r in rows), 2),
                "library_stall_max_s": max(r["library_stall_s"] for r in rows),
                "any_writer_stall_p50_s": round(statistics.median(r["any_writer_stall_s"] for r in rows), 3),
                "any_writer_stall_max_s": max(r["any_writer_stall_s"] for r in rows),
                "writes_acked": len(writers.acked), "library_writes_acked": len(lib.acked),
                "retried_rpc_errors": dict(writers.errors),
                "client_errors_beyond_retries": len(lib.errors), "client_error_samples": lib.errors[:10],
                "namenode_failovers": sum(1 for r in rows if r["epoch_before"] != r["epoch_after"]),
                "namenode_logs": {n.name: _count_signs(os.path.join(root, f"{n.name}.log"), NN_SIGNS) for n in nodes},
                "namenode_log_lines": {n.name: _lines_with(os.path.join(root, f"{n.name}.log"), LOG_NEEDLES, 40)
                                       for n in nodes}}
    finally:
        _teardown(root, etcd, nodes, writers, lib)


def _teardown(root, etcd, nodes, writers, lib, hogs=()) -> None:
    for h in hogs:
        if h.poll() is None:
            h.kill()
            h.wait(10)
    if writers is not None:
        writers.stop.set()
    if lib is not None:
        lib.stop.set()
    for n in nodes:
        try:
            n.stop()
        except Exception:
            if n.proc is not None:
                n.proc.kill()
    if etcd is not None:
        etcd.stop()
    keep = os.environ.get("HEDGEFS_BENCH_KEEP")   # a directory: the logs are copied there
    if keep:
        shutil.copytree(root, keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("nn1", "nn2"))
    shutil.rmtree(root, ignore_errors=True)


def _ha_metrics(node) -> dict[str, float]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{node.ports['http']}/metrics", timeout=5) as r:
            text = r.read().decode()
    except Exception as err:
        return {"error": str(err)}
    out = {}
    for line in text.splitlines():
        m = re.match(r"(hedgefs_namenode_ha_\w+) ([0-9.e+-]+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def run_cpu_hog(seconds: float = 600.0, ttl_s: int = 3, command: str = "", say=print) -> dict:
    root = tempfile.mkdtemp(prefix="hedgefs-bench-cpuhog-")
    etcd, nodes, writers, hogs = None, [], None, []
    try:
        etcd, nodes = _cluster(root, ttl_s, ("--http-port", "0"))
        pb, stub = _stubs(nodes)
        writers = _Writers(nodes, threads=2, pause_s=0.05)
        for t in writers.threads:
            t.start()
        deadline = time.monotonic() + 60
        while not any(_role(stub[n.name], pb) == "active" for n in nodes) or not writers.acked:
            if time.monotonic() > deadline:
                raise RuntimeError("no active NameNode")
            time.sleep(0.1)
        # each hog ends itself after the run, should this process die first
        busy = f"import time\nend = time.monotonic() + {seconds + 30}\nwhile time.monotonic() < end: pass\n"
        hogs = [subprocess.Popen([sys.executable, "-c", busy], start_new_session=True)
                for _ in range(os.cpu_count() or 1)]
        say(f"{len(hogs)} CPU hogs (pids {[h.pid for h in hogs]}) for {seconds:.0f} s, lease TTL {ttl_s} s")
        changes, last, t0 = [], {}, time.monotonic()
        while time.monotonic() < t0 + seconds:
            for n in nodes:
                try:
                    r = stub[n.name].Report(pb.Empty(), timeout=2).namenode
                    now = (r.role, r.epoch)
                except Exception:   # a change of its own: a NameNode that does not answer
                    now = ("unanswered" if n.proc.poll() is None else f"exited {n.proc.returncode}", 0)
                if last.get(n.name) != now:
                    changes.append({"t_s": round(time.monotonic() - t0, 2), "namenode": n.name, "role": now[0],
                                    "epoch": now[1]})
                    last[n.name] = now
            time.sleep(0.5)
        for h in hogs:
            h.kill()
            h.wait(10)
        writers.stop.set()
        for t in writers.threads:
            t.join(10)
        times = [t for t, _, _ in list(writers.acked)]
        epochs = sorted({c["epoch"] for c in changes if c["epoch"]})
        metrics = {n.name: _ha_metrics(n) for n in nodes}
        promotions = sum(m.get("hedgefs_namenode_ha_promotions_total", 0) for m in metrics.values())
        nn_logs = {n.name: _count_signs(os.path.join(root, f"{n.name}.log"), NN_SIGNS) for n in nodes}
        return {"command": command, "mode": "cpu-hog", "seconds": seconds, "ttl_s": ttl_s, "hogs": len(hogs),
                "cpu_count": os.cpu_count(), "writer_threads": len(writers.threads), "writer_pause_s": 0.05,
                "writes_acked": len(times), "retried_rpc_errors": dict(writers.errors),
                "longest_write_gap_s": round(longest_gap(times, t0, t0 + seconds), 3),
                "write_gap_p99_ms": round(1000 * _percentile(gaps(times, t0, t0 + seconds) or [0], 99), 1),
                "role_changes": changes, "epochs_seen": epochs,
                "false_failovers": max(0, len(epochs) - 1) + sum(1 for n in nodes if n.proc.poll() is not None),
                "promotions_total": promotions, "ha_metrics": metrics, "namenode_logs": nn_logs,
                "namenode_log_lines": {n.name: _lines_with(os.path.join(root, f"{n.name}.log"), LOG_NEEDLES)
                                       for n in nodes},
                "etcd_logs": {m: _count_signs(os.path.join(root, f"{m}.log"), ETCD_SIGNS) for m in etcd.names}}
    finally:
        _teardown(root, etcd, nodes, writers, None, hogs)
