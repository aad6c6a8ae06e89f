"""`hedgefs bench failover --mode timeline`: writes/s and read latency second by second around a
kill -9 of the active NameNode, as a JSON of 100 ms buckets and a PNG.

    python -m hedgefs.bench.failover_timeline RESULT.json [PLOT.png]   # redraw from saved results

The HA cluster of ``--mode reads`` (cluster/launcher.py: 3 etcd members, 2 NameNodes, 5 DataNodes,
RS-3-2-64k, lease TTL 3 s), ``files`` files written first. For the whole run: the reader threads
of bench/failover_reads.py (one shared ``FileSystem``, every file opened once before any kill,
``read_kib`` preads at random offsets, every byte checked), each read kept as (start, seconds,
ok); and ``writers`` writer threads, each with its own ``FileSystem`` (the client library's
failover and retries), Mkdir after Mkdir, each acknowledgement kept with the NameNode that gave it
(``fs.namenodes.active`` after the call). Each repetition: ``lead_in_s`` of calm, kill -9 of the
active, ``after_s`` more, then the killed NameNode is started again and waited for as a standby
(outside the window). Events are placed by their start (a read) or their acknowledgement (a
write), in seconds from the kill.
"""

from __future__ import annotations

import json
import math
import pathlib
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time

from hedgefs.bench.failover import _percentile
from hedgefs.bench.failover_faults import longest_gap
from hedgefs.bench.failover_reads import _Readers as _ReadersOf

STEP_S = 0.1


class _Readers(_ReadersOf):
    """The reads of failover_reads.py, failures included as samples: (monotonic start, seconds, ok)."""

    def __init__(self, fs, expected: dict[str, bytes], threads: int, read_kib: int):
        super().__init__(fs, expected, threads, read_kib)
        self.samples: list[tuple[float, float, bool]] = []
        self.errors: list[str] = []

    def _tag(self):
        return None

    def _record(self, tag, began: float, seconds: float, error: str | None) -> None:
        self.samples.append((began, seconds, error is None))
        if error:
            self.errors.append(error)


class _Writers:
    """``threads`` threads of ``FileSystem.mkdir``, one client each: ``acked`` (monotonic, address of
    the NameNode that answered), ``errors`` (monotonic, message) of calls that failed beyond the
    client's retries."""

    def __init__(self, addresses: str, threads: int, top: str = "/timeline"):
        from hedgefs.client.fs import FileSystem

        self.clients = [FileSystem(addresses, credentials=None) for _ in range(threads)]
        self.top = top
        self.acked: list[tuple[float, str]] = []
        self.errors: list[tuple[float, str]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)]

    def _run(self, t: int) -> None:
        fs, i = self.clients[t], 0
        while not self.stop.is_set():
            try:
                fs.mkdir(f"{self.top}/t{t}/{i:06d}", parents=True)
                with self.lock:
                    self.acked.append((time.monotonic(), fs.namenodes.active))
            except Exception as err:   # counted: a write failed beyond the client's retries
                with self.lock:
                    self.errors.append((time.monotonic(), f"{type(err).__name__}: {err}"[:300]))
            i += 1

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)
        for fs in self.clients:
            fs.close()


def buckets(reads: list[tuple[float, float, bool]], writes: list[float], write_errors: list[float],
            start: float, end: float, step: float = STEP_S) -> list[dict]:
    """Per ``step`` of [start, end) (times in seconds from the kill): ``t`` the bucket's left edge,
    ``writes`` acknowledged, ``write_errors``, ``reads`` that succeeded with their ``p50_ms``,
    ``p99_ms`` and ``max_ms`` (None without one), ``read_failures``. ``reads`` are (start, seconds,
    ok); events outside the window are left out."""
    n = max(0, math.ceil(round((end - start) / step, 9)))
    rows = [{"t": round(start + k * step, 6), "writes": 0, "write_errors": 0, "reads": 0, "p50_ms": None,
             "p99_ms": None, "max_ms": None, "read_failures": 0} for k in range(n)]
    lat: list[list[float]] = [[] for _ in range(n)]

    def at(t: float) -> int | None:
        k = math.floor(round((t - start) / step, 9))
        return k if 0 <= k < n else None

    for t in writes:
        if (k := at(t)) is not None:
            rows[k]["writes"] += 1
    for t in write_errors:
        if (k := at(t)) is not None:
            rows[k]["write_errors"] += 1
    for t, seconds, ok in reads:
        if (k := at(t)) is None:
            continue
        if ok:
            lat[k].append(seconds)
        else:
            rows[k]["read_failures"] += 1
    for row, values in zip(rows, lat):
        if values:
            row.update(reads=len(values), p50_ms=round(1000 * statistics.median(values), 3),
                       p99_ms=round(1000 * _percentile(values, 99), 3), max_ms=round(1000 * max(values), 3))
    return rows


def rep_figures(reads: list[tuple[float, float, bool]], writes: list[float], first_new_ack: float | None,
                lead_in_s: float, after_s: float) -> dict:
    """One repetition's figures, times in seconds from the kill: ``write_gap_s`` up to the new
    active's first acknowledged write, the longest write gap of the window (bench/failover_faults.py's
    ``longest_gap`` over [-1 s, after_s - 1 s]: a later stall shows), and the reads that started from
    the kill to the new active's first acknowledged write (``during_gap``), against the lead-in."""
    def summary(values):
        if not values:
            return {"reads": 0}
        return {"reads": len(values), "p50_ms": round(1000 * statistics.median(values), 2),
                "p99_ms": round(1000 * _percentile(values, 99), 2), "max_ms": round(1000 * max(values), 2)}

    gap_end = first_new_ack if first_new_ack is not None else after_s
    last_old = max((t for t in writes if t < gap_end), default=None)
    return {"first_new_active_ack_s": None if first_new_ack is None else round(first_new_ack, 3),
            # from the last acknowledgement before the new active's first to that one
            "write_gap_s": None if first_new_ack is None or last_old is None else round(first_new_ack - last_old, 3),
            "longest_write_gap_s": round(longest_gap(writes, -1.0, after_s - 1.0), 3),
            "lead_in": summary([s for t, s, ok in reads if ok and -lead_in_s <= t < 0]),
            "during_gap": summary([s for t, s, ok in reads if ok and 0 <= t < gap_end]),
            "read_failures": sum(1 for t, _, ok in reads if not ok and -lead_in_s <= t < after_s)}


def run(reps: int = 3, lead_in_s: float = 10.0, after_s: float = 15.0, files: int = 8, file_kib: int = 2048,
        readers_n: int = 4, writers_n: int = 4, read_kib: int = 64, command: str = "", say=print) -> dict:
    from hedgefs.client.fs import FileSystem
    from hedgefs.cluster.launcher import LocalCluster, Options
    from hedgefs.proto import hedgefs_pb2 as pb

    root = tempfile.mkdtemp(prefix="hedgefs-bench-timeline-")
    cluster = LocalCluster(root)
    readers = writers = fs = None
    try:
        cluster.up(Options(datanodes=5, namenode_port=0, policy="RS-3-2-64k", fsync=False, ha=True,
                           heartbeat_interval_s=0.5, dead_interval_s=10.0))

        def role(name: str) -> str:
            try:
                return cluster.namenode_rpc(name, "Report", pb.Empty(), timeout=2).namenode.role
            except Exception:   # down or not answering yet
                return "down"

        def wait_role(name: str, want: str, timeout_s: float = 60.0) -> None:
            deadline = time.monotonic() + timeout_s
            while role(name) != want:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} not {want} within {timeout_s:.0f} s")
                time.sleep(0.05)

        fs = FileSystem(cluster.namenode, credentials=None)
        rng = random.Random(7)
        expected = {f"/reads/f{i}": rng.randbytes(file_kib * 1024) for i in range(files)}
        fs.mkdir("/reads", parents=True)
        for path, data in expected.items():
            fs.write_bytes(path, data)
        readers = _Readers(fs, expected, readers_n, read_kib)
        writers = _Writers(cluster.namenode, writers_n)
        for t in [*readers.threads, *writers.threads]:
            t.start()
        time.sleep(2.0)   # files opened, channels warm
        out = []
        for rep in range(reps):
            time.sleep(lead_in_s)
            active = next(n for n in cluster.namenode_names if role(n) == "active")
            other = next(n for n in cluster.namenode_names if n != active)
            new_port = str(cluster.state[other]["port"])
            t0 = time.monotonic()
            cluster.kill(active)
            answers = None   # when the other NameNode first answers Report as the active
            while time.monotonic() < t0 + after_s:
                if answers is None and role(other) == "active":
                    answers = round(time.monotonic() - t0, 3)
                time.sleep(0.05 if answers is None else max(0.0, t0 + after_s - time.monotonic()))
            with readers.lock:
                reads = [(t - t0, s, ok) for t, s, ok in readers.samples if t0 - lead_in_s <= t < t0 + after_s]
            with writers.lock:
                acked = [(t - t0, a) for t, a in writers.acked if t0 - lead_in_s <= t < t0 + after_s]
                werrs = [t - t0 for t, _ in writers.errors if t0 - lead_in_s <= t < t0 + after_s]
            writes = [t for t, _ in acked]
            first_new = min((t for t, a in acked if t > 0 and a.rsplit(":", 1)[-1] == new_port), default=None)
            figures = rep_figures(reads, writes, first_new, lead_in_s, after_s)
            out.append({"killed": active, "new_active": other, "new_active_answers_s": answers, **figures,
                        "write_errors": len(werrs),
                        "buckets": buckets(reads, writes, werrs, -lead_in_s, after_s),
                        # raw: every acknowledgement (ms from the kill); reads (start ms, latency us)
                        # from 1 s before the kill to 1 s after the new active's first write
                        "raw": {"write_acks_ms": [round(1000 * t) for t in writes],
                                "reads_near_kill": [[round(1000 * t), round(1e6 * s), int(ok)] for t, s, ok in reads
                                                    if -1.0 <= t < (first_new if first_new is not None else after_s) + 1.0]}})
            cluster.start(active)
            wait_role(active, "standby")
            cluster.wait_live(cluster.datanode_ids)
            say(f"rep {rep + 1}/{reps}: {active} killed, {other} answers as the active after {answers} s, first write on it after "
                f"{figures['first_new_active_ack_s']} s, write gap {figures['write_gap_s']} s, "
                f"reads during the gap {figures['during_gap'].get('reads', 0)} (p99 "
                f"{figures['during_gap'].get('p99_ms')} ms), read failures {figures['read_failures']}")
        firsts = [r["first_new_active_ack_s"] for r in out if r["first_new_active_ack_s"] is not None]
        answered = [r["new_active_answers_s"] for r in out if r["new_active_answers_s"] is not None]
        return {"command": command, "mode": "timeline", "reps": reps, "lead_in_s": lead_in_s, "after_s": after_s,
                "bucket_s": STEP_S, "datanodes": 5, "policy": "RS-3-2-64k", "files": files, "file_kib": file_kib,
                "reader_threads": readers_n, "read_kib": read_kib, "writer_threads": writers_n, "lease_ttl_s": 3,
                "first_new_active_ack_s": firsts, "first_new_active_ack_p50_s": round(statistics.median(firsts), 3)
                if firsts else None, "new_active_answers_s": answered,
                "read_failures": sum(r["read_failures"] for r in out),
                "write_errors": sum(r["write_errors"] for r in out),
                "read_error_samples": readers.errors[:10], "write_error_samples": [e for _, e in writers.errors[:10]],
                "per_rep": out}
    finally:
        if readers is not None:
            readers.stop.set()
            for t in readers.threads:
                t.join(30)
        if writers is not None:
            writers.close()
        if fs is not None:
            fs.close()
        cluster.down()
        shutil.rmtree(root, ignore_errors=True)


def across(reps: list[dict]) -> list[tuple[list[float], str, float, str]]:
    """The bottom panel's lines, bucket by bucket across the repetitions: the median of the p50s,
    the median of the p99s, the max of the maxima (NaN where no repetition read)."""
    def per_bucket(key, pick):
        out = []
        for rows in zip(*(r["buckets"] for r in reps)):
            values = [row[key] for row in rows if row[key] is not None]
            out.append(pick(values) if values else float("nan"))
        return out

    n = len(reps)
    return [(per_bucket("max_ms", max), "#c0392b", 0.7, f"max (of {n} reps)"),
            (per_bucket("p99_ms", statistics.median), "#1f5fa8", 1.2, f"p99 (median of {n} reps)"),
            (per_bucket("p50_ms", statistics.median), "black", 1.0, f"p50 (median of {n} reps)")]


def plot(doc: dict, path: pathlib.Path) -> pathlib.Path:
    """Top: writes/s per bucket, one line per repetition; bottom: read latency per bucket across the
    repetitions (``across``, log y); vertical lines at the kill (0), at each repetition's first write
    acknowledged by the new active (dashed) and when it first answered as the active (dotted, top);
    read failures as red crosses."""
    from hedgefs.bench.plots import _plt

    plt = _plt()
    step = doc["bucket_s"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6.4), sharex=True, gridspec_kw={"height_ratios": [1, 1.4]})
    for i, rep in enumerate(doc["per_rep"]):
        color = f"C{i % 10}"
        rows = rep["buckets"]
        ts = [r["t"] + step / 2 for r in rows]
        top.plot(ts, [r["writes"] / step for r in rows], color=color, linewidth=0.9,
                 label=f"rep {i + 1}: {rep['killed']} killed")
        fails = [r["t"] + step / 2 for r in rows if r["read_failures"]]
        if fails:
            bottom.plot(fails, [1.0] * len(fails), "x", color="red", transform=bottom.get_xaxis_transform(),
                        label="read failed" if i == 0 else None)
        first = rep["first_new_active_ack_s"]
        if first is not None:
            for ax in (top, bottom):
                ax.axvline(first, color=color, linestyle="--", linewidth=1)
            top.text(first, 0.97 - 0.06 * i, f" {first:.2f} s", color=color, fontsize=7, va="top",
                     transform=top.get_xaxis_transform())
        if rep.get("new_active_answers_s") is not None:
            top.axvline(rep["new_active_answers_s"], color=color, linestyle=":", linewidth=1)
    ts = [r["t"] + step / 2 for r in doc["per_rep"][0]["buckets"]] if doc["per_rep"] else []
    for ys, color, width, label in across(doc["per_rep"]):
        bottom.plot(ts, ys, color=color, linewidth=width, label=label)
    for ax in (top, bottom):
        ax.axvline(0, color="black", linewidth=1.2)
        ax.grid(True, alpha=0.3)
    top.text(0, 0.97, "kill -9 ", ha="right", va="top", fontsize=7, transform=top.get_xaxis_transform())
    top.set_ylabel(f"writes acked / s ({int(step * 1000)} ms buckets)")
    top.set_ylim(bottom=0)
    top.legend(loc="lower left", fontsize=7)
    bottom.set_yscale("log")
    bottom.set_ylabel(f"{doc['read_kib']} KiB pread latency, ms (log)")
    bottom.set_xlabel("seconds from the kill -9 of the active NameNode (dashed: the new active's first acked write; "
                      "dotted: it answers as the active)")
    bottom.legend(loc="upper left", fontsize=7, ncol=3)
    fig.suptitle(f"NameNode failover timeline: {doc['reps']} kills, {doc['writer_threads']} writers "
                 f"(client-library Mkdir), {doc['reader_threads']} readers of open files; "
                 f"{doc['read_failures']} reads failed", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        raise SystemExit("usage: python -m hedgefs.bench.failover_timeline RESULT.json [PLOT.png]")
    src = pathlib.Path(args[0])
    print(plot(json.loads(src.read_text()), pathlib.Path(args[1]) if len(args) > 1 else src.with_suffix(".png")))


if __name__ == "__main__":
    main()
