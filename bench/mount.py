"""`hedgefs bench mount`: the hedgefs FUSE mount beside a GlusterFS disperse 6+3 FUSE mount (where
one can be started here) and beside hedgefs's own CLI and library, in one run on one machine.

A local cluster of ten DataNodes (RS-6-3-1024k) is started and mounted (`hedgefs mount -f`, its
own process); GlusterFS is a 9-brick disperse 6+3 volume on this machine (bench/gluster.py).
The same bytes go to both. Measured, each side the same way:

    cat_1_byte        `cat` of a 1-byte file, a new process each time (p50 / p90 of ``cat_runs``);
                      `hedgefs cat` of it beside (the CLI: Python start-up + a NameNode round trip)
    random_1_thread   64 KiB reads at random 64 KiB-aligned offsets with O_DIRECT (no page cache):
                      p50 / p99 / max, reads/s; beside, the library's pread (no FUSE) on the same file
    random_4_threads  the same from 4 threads: reads/s, p50 / p99
    sequential        `cat FILE > /dev/null` of the whole file with its page cache dropped first
                      (posix_fadvise DONTNEED): MB/s; beside, `hedgefs cat` of it
    frozen            one server SIGSTOPped (the DataNode holding a data unit of the file; a brick):
                      64 KiB O_DIRECT reads, one thread, for a while: max / p99 / p50, and for
                      GlusterFS a cap on how long one read is waited for

The sides take turns, A B B A, for every measure (``abba``): a change of the machine's load weighs
on both alike. Targets (issue 29) are ratios in the same run; the load average is recorded beside.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import mmap
import os
import pathlib
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from hedgefs.bench.gluster import GlusterUnavailable, GlusterVolume
from hedgefs.bench.throughput import write_random_file
from hedgefs.client.fs import FileSystem
from hedgefs.cluster.launcher import LocalCluster, Options

READ = 64 * 1024


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _summary(latencies_s: list[float], elapsed_s: float) -> dict:
    ms = [x * 1000 for x in latencies_s]
    return {"reads": len(ms), "reads_per_s": round(len(ms) / elapsed_s, 1) if elapsed_s else 0,
            "p50_ms": round(_pct(ms, 0.5), 2), "p99_ms": round(_pct(ms, 0.99), 2), "max_ms": round(max(ms), 1)}


def _merged(runs: list[dict]) -> dict:
    """Runs of direct_reads as one: all their reads, all their time."""
    out = _summary([x for r in runs for x in r["_latencies"]], sum(r["_elapsed"] for r in runs))
    out["rounds"] = len(runs)
    return out


def abba(measures: dict, merge) -> dict:
    """Each side's measure run twice, in the order A B B A (A B C C B A ...): a change of the
    machine's load during the run weighs on every side alike. ``merge`` makes one of two runs."""
    names = list(measures)
    runs: dict[str, list] = {n: [] for n in names}
    for name in names + names[::-1]:
        runs[name].append(measures[name]())
    return {n: merge(r) for n, r in runs.items()}


def cat_small(path: str, runs: int) -> dict:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - started)
    return {"p50_ms": round(_pct(times, 0.5) * 1000, 2), "p90_ms": round(_pct(times, 0.9) * 1000, 2), "runs": runs}


def cli_cat(namenode: str, remote: str, runs: int) -> dict:
    env = dict(os.environ, HEDGEFS_NAMENODE=namenode)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "hedgefs", "cat", remote], stdout=subprocess.DEVNULL, env=env, check=True)
        times.append(time.perf_counter() - started)
    return {"p50_ms": round(_pct(times, 0.5) * 1000, 2), "seconds": times, "runs": runs}


def direct_reads(path: str, size: int, reads: int, threads: int = 1, seconds: float | None = None,
                 seed: int = 1, wait_cap_s: float | None = None, start=None) -> dict:
    """64 KiB O_DIRECT reads at random aligned offsets from ``threads`` threads: ``reads`` each, or
    for ``seconds``. The files are opened first, then ``start()`` runs (a freeze), then the reads.
    ``wait_cap_s``: a read still blocked that long after the run's end ends the wait for it."""
    slots = size // READ
    fds = [os.open(path, os.O_RDONLY | os.O_DIRECT) for _ in range(threads)]
    if start is not None:
        start()
    deadline = time.monotonic() + seconds if seconds else None
    latencies: list[float] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        rng = random.Random(seed * 1000 + n)
        buf = mmap.mmap(-1, READ)   # page-aligned, as O_DIRECT wants
        try:
            for _ in range(reads):
                if deadline and time.monotonic() > deadline:
                    return
                offset = rng.randrange(slots) * READ
                started = time.perf_counter()
                got = os.preadv(fds[n], [buf], offset)
                elapsed = time.perf_counter() - started
                if got != READ:
                    raise RuntimeError(f"short read at {offset}: {got}")
                with lock:
                    latencies.append(elapsed)
        finally:
            os.close(fds[n])
            buf.close()

    started = time.perf_counter()
    pool = concurrent.futures.ThreadPoolExecutor(threads)
    futures = [pool.submit(worker, n) for n in range(threads)]
    done, pending = concurrent.futures.wait(futures, timeout=None if wait_cap_s is None else
                                            (seconds or 0) + wait_cap_s)
    for f in done:
        f.result()
    elapsed = time.perf_counter() - started
    pool.shutdown(wait=False)
    out = _summary(latencies, elapsed) if latencies else {"reads": 0, "max_ms": 0.0, "p99_ms": 0.0, "p50_ms": 0.0}
    out["_latencies"], out["_elapsed"] = latencies, elapsed
    if pending:   # a read still blocked: at least the cap
        out["blocked_read_s"] = f">= {wait_cap_s:.0f}"
        out["max_ms"] = max(out["max_ms"], wait_cap_s * 1000)
    return out


def library_reads(fs: FileSystem, remote: str, size: int, reads: int, seed: int = 3) -> dict:
    """The same reads through the client library in this process (what the mount adds: FUSE)."""
    rng = random.Random(seed)
    latencies = []
    started = time.perf_counter()
    with fs.open(remote) as f:
        for _ in range(reads):
            offset = rng.randrange(size // READ) * READ
            t0 = time.perf_counter()
            f.pread(offset, READ)
            latencies.append(time.perf_counter() - t0)
    out = _summary(latencies, time.perf_counter() - started)
    out["_latencies"], out["_elapsed"] = latencies, time.perf_counter() - started
    return out


def sequential(path: str, size: int) -> dict:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)   # its page cache: gone
    finally:
        os.close(fd)
    started = time.perf_counter()
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
    elapsed = time.perf_counter() - started
    return {"seconds": round(elapsed, 3), "mb_s": round(size / elapsed / 1e6, 1)}


def _hedges(url: str) -> float:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    found = re.search(r"^hedgefs_client_hedges_total (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def _start_mount(namenode: str, mountpoint: pathlib.Path, log: pathlib.Path) -> tuple[subprocess.Popen, str]:
    mountpoint.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "hedgefs", "mount", "-f", "--metrics-port", "127.0.0.1:0",
                             str(mountpoint)], stdout=subprocess.DEVNULL, stderr=open(log, "ab"),
                            env=dict(os.environ, HEDGEFS_NAMENODE=namenode))
    deadline = time.monotonic() + 60
    while not (os.path.ismount(mountpoint) and "metrics:" in log.read_text()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"hedgefs mount did not start: {log.read_text()[-500:]}")
        time.sleep(0.1)
    return proc, re.search(r"metrics: (\S+)", log.read_text()).group(1)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_mount_bench(size: int = 256 << 20, reads: int = 1000, cat_runs: int = 50, frozen_s: float = 10.0,
                    gluster: bool = True, gluster_cap_s: float = 120.0, log=print) -> dict:
    root = pathlib.Path(tempfile.mkdtemp(prefix="hedgefs-bench-mount-"))
    result: dict = {"date": datetime.date.today().isoformat(), "size": size, "load_before": _load(),
                    "command": f"hedgefs bench mount --size {size >> 20} --reads {reads}"}
    cluster = LocalCluster(root / "cluster")
    volume = None
    mount_proc = None
    try:
        log("starting a local cluster (10 DataNodes, RS-6-3-1024k) ...")
        cluster.up(Options(namenode_port=0, fsync=False))
        local = root / "big.bin"
        write_random_file(str(local), size)
        (root / "one").write_bytes(b"x")
        with FileSystem(cluster.namenode, credentials=None) as fs:
            fs.mkdir("/bench", parents=True)
            with open(local, "rb") as f:
                fs.write("/bench/big.bin", f)
            fs.write_bytes("/bench/one", b"x")
            status = fs.stat("/bench/big.bin")
            victim = status.groups[0].units[0].datanode_id
            mnt = root / "hedgefs"
            mount_proc, metrics = _start_mount(cluster.namenode, mnt, root / "mount.log")
            sides = {"hedgefs": mnt / "bench"}
            if not gluster:
                result["glusterfs_unavailable"] = "not asked for (--no-gluster)"
            else:
                try:
                    log("starting GlusterFS (disperse 6+3, 9 local bricks) ...")
                    volume = GlusterVolume(root / "gluster").start()
                    subprocess.run(["cp", str(local), str(volume.mountpoint / "big.bin")], check=True)
                    (volume.mountpoint / "one").write_bytes(b"x")
                    sides["glusterfs"] = volume.mountpoint
                except (GlusterUnavailable, subprocess.SubprocessError, OSError) as err:
                    result["glusterfs_unavailable"] = str(err)
                    log(f"GlusterFS not measured: {err}")
                    volume = None

            log(f"{', '.join(sides)}, in the order A B B A: cat of a 1-byte file, random reads, sequential read ...")
            for name, where in sides.items():
                result.setdefault(name, {})
                direct_reads(str(where / "big.bin"), size, 50, seed=2)   # warm: connections, caches of metadata

            def each(measure):
                return {name: (lambda where=where: measure(where)) for name, where in sides.items()}

            def merge_cats(runs):
                return {"p50_ms": statistics.median([r["p50_ms"] for r in runs]),
                        "p90_ms": statistics.median([r["p90_ms"] for r in runs]), "runs": sum(r["runs"] for r in runs)}

            def cli_seq():
                seconds = cli_cat(cluster.namenode, "/bench/big.bin", 1)["seconds"][0]
                return {"seconds": round(seconds, 3), "mb_s": round(size / seconds / 1e6, 1)}

            cli = result.setdefault("hedgefs_cli", {})
            for key, measure, merge, extra in [
                ("cat_1_byte", lambda w: cat_small(str(w / "one"), cat_runs // 2), merge_cats, {}),
                ("random_1_thread", lambda w: direct_reads(str(w / "big.bin"), size, reads // 2, seed=3), _merged,
                 {"hedgefs_cli": lambda: library_reads(fs, "/bench/big.bin", size, reads // 2)}),
                ("random_4_threads", lambda w: direct_reads(str(w / "big.bin"), size, reads // 4, threads=4, seed=4),
                 _merged, {}),
                ("sequential", lambda w: sequential(str(w / "big.bin"), size), list, {"hedgefs_cli": cli_seq}),
            ]:
                for name, value in abba({**each(measure), **extra}, merge).items():
                    result[name][key] = value
            cli["library_random_1_thread"] = cli.pop("random_1_thread")
            cli["cat_1_byte"] = cli_cat(cluster.namenode, "/bench/one", 5)

            log(f"hedgefs: {victim} frozen, reads for {frozen_s:.0f} s ...")
            hedges = _hedges(metrics)
            try:
                frozen = direct_reads(str(mnt / "bench" / "big.bin"), size, 10**6, seconds=frozen_s, seed=7,
                                      start=lambda: cluster.freeze(victim))
            finally:
                cluster.thaw(victim)
            frozen["hedges"] = _hedges(metrics) - hedges
            frozen["frozen"] = victim
            result["hedgefs"]["frozen"] = frozen
            if volume is not None:
                pid = volume.brick_pids()[0]
                log(f"glusterfs: brick 1 (pid {pid}) frozen, reads for {frozen_s:.0f} s "
                    f"(a read waited for at most {gluster_cap_s:.0f} s) ...")
                try:
                    frozen = direct_reads(str(volume.mountpoint / "big.bin"), size, 10**6, seconds=frozen_s,
                                          seed=7, wait_cap_s=gluster_cap_s, start=lambda: volume.freeze_brick(pid))
                finally:
                    volume.thaw_brick(pid)
                frozen["frozen"] = "brick 1"
                result["glusterfs"]["frozen"] = frozen
    finally:
        _strip(result)
        if mount_proc is not None:
            subprocess.run(["fusermount3", "-u", str(root / "hedgefs")], capture_output=True)
            try:
                mount_proc.wait(30)
            except subprocess.TimeoutExpired:
                mount_proc.kill()
        if volume is not None:
            volume.stop()
        cluster.down()
        shutil.rmtree(root, ignore_errors=True)
    result["load_after"] = _load()
    return result


def _strip(doc) -> None:
    """Drop the raw latencies (keys starting with _) before the result is saved."""
    if isinstance(doc, dict):
        for key in [k for k in doc if k.startswith("_")]:
            del doc[key]
        for value in doc.values():
            _strip(value)
    elif isinstance(doc, list):
        for value in doc:
            _strip(value)


def _seq(rows: list[dict]) -> float:
    return statistics.median(r["mb_s"] for r in rows)


def format_result(r: dict) -> str:
    """The targets table of issue 29, filled in (markdown)."""
    h, g, cli = r["hedgefs"], r.get("glusterfs"), r["hedgefs_cli"]

    def gv(fn, fmt="{:.2f}"):
        return fmt.format(fn(g)) if g else "-"

    lines = [
        f"`{r['command']}` on {r['date']}; load average before {r['load_before']}, after {r['load_after']}.",
        "" if g else f"GlusterFS not run: {r.get('glusterfs_unavailable', '?')}",
        "",
        "| measure | hedgefs mount | GlusterFS mount | hedgefs CLI / library | ratio |",
        "|---|---|---|---|---|",
        f"| `cat` of a 1-byte file, p50 | {h['cat_1_byte']['p50_ms']:.2f} ms | "
        f"{gv(lambda x: x['cat_1_byte']['p50_ms'])} ms | `hedgefs cat` {cli['cat_1_byte']['p50_ms']:.0f} ms | "
        f"{cli['cat_1_byte']['p50_ms'] / h['cat_1_byte']['p50_ms']:.0f}x faster than the CLI |",
        f"| 64 KiB random reads, 1 thread, p50 / p99 | {h['random_1_thread']['p50_ms']:.2f} / "
        f"{h['random_1_thread']['p99_ms']:.2f} ms | {gv(lambda x: x['random_1_thread']['p50_ms'])} / "
        f"{gv(lambda x: x['random_1_thread']['p99_ms'])} ms | library pread "
        f"{cli['library_random_1_thread']['p50_ms']:.2f} / {cli['library_random_1_thread']['p99_ms']:.2f} ms | "
        + (f"p50 {h['random_1_thread']['p50_ms'] / g['random_1_thread']['p50_ms']:.2f}x GlusterFS's |" if g else "|"),
        f"| same, 4 threads: reads/s, p99 | {h['random_4_threads']['reads_per_s']:.0f}/s, "
        f"{h['random_4_threads']['p99_ms']:.2f} ms | {gv(lambda x: x['random_4_threads']['reads_per_s'], '{:.0f}')}/s, "
        f"{gv(lambda x: x['random_4_threads']['p99_ms'])} ms | | "
        + (f"{h['random_4_threads']['reads_per_s'] / g['random_4_threads']['reads_per_s']:.2f}x GlusterFS's reads/s |"
           if g else "|"),
        f"| sequential read of {r['size'] >> 20} MiB (page cache dropped), median of 2 | {_seq(h['sequential']):.0f} MB/s | "
        f"{gv(lambda x: _seq(x['sequential']), '{:.0f}')} MB/s | `hedgefs cat` {_seq(cli['sequential']):.0f} MB/s | "
        f"{_seq(h['sequential']) / _seq(cli['sequential']):.2f}x `hedgefs cat` |",
        f"| a server frozen: 64 KiB reads, max (p99, p50) | {h['frozen']['max_ms']:.0f} ms "
        f"({h['frozen']['p99_ms']:.1f}, {h['frozen']['p50_ms']:.2f}; {h['frozen']['hedges']:.0f} hedges) | "
        + (f"{g['frozen']['max_ms'] / 1000:.1f} s ({g['frozen'].get('reads', 0)} reads"
           + (f"; one blocked {g['frozen']['blocked_read_s']} s" if "blocked_read_s" in g['frozen'] else "") + ")"
           if g else "not run")
        + " | | |",
    ]
    return "\n".join(lines)


def save(result: dict, out_dir: str) -> str:
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, f"{result['date']}-mount")
    with open(base + ".json", "w") as f:
        json.dump(result, f, indent=1)
    with open(base + ".md", "w") as f:
        f.write("# hedgefs mount vs GlusterFS (disperse 6+3, FUSE) vs the hedgefs CLI\n\n" + format_result(result) + "\n")
    return base
