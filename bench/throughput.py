"""Whole-file put, get and cat through the CLI's own code path, beside the machine's limit.

One run measures, on the same machine at the same time:

- the socket probe (bench/transport.py): sendfile -> recv_into, 1 and k streams, both ways;
- ``hedgefs put`` from a file, ``hedgefs get`` to a file, ``hedgefs cat`` to /dev/null: MB/s,
  their ratio to the probe (k streams), and the client's CPU seconds per GiB; beside them, what
  copying the same bytes from one local file to another costs here (a get to a file pays that
  local write on top of the transfer);
- 64 KiB random reads, one thread, healthy cluster: p50 / p99;
- ``hedgefs cat`` of a 1-byte file: time from starting the process to its first byte;
- peak client RSS of a put and a get of ``rss_size`` bytes (1 GiB by default).

Each transfer runs in a fresh child process that imports the command's modules first and then
measures only the command (wall time, and CPU from getrusage, all threads); the child's peak
RSS is the client's memory for the transfer. The machine's load average is recorded beside.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

from hedgefs.bench.transport import run_socket_probe

_CHILD = """
import json, resource, sys, time
from hedgefs.cli import main
import hedgefs.cli.files, hedgefs.cli.bench, hedgefs.client.fs
from hedgefs.ec.codec import get_codec
get_codec(6, 3)
def used():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
cpu0, started = used(), time.perf_counter()
try:
    main(sys.argv[1:])
except SystemExit as e:
    if e.code:
        raise
elapsed, cpu = time.perf_counter() - started, used() - cpu0
rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": elapsed, "cpu_s": cpu, "peak_rss_mb": rss_mb}), file=sys.stderr)
"""

GiB = 1 << 30


def _env(namenode: str, credentials: str | None) -> dict:
    """A CLI child's environment: this cluster, with this credential (a secure one) or none."""
    env = dict(os.environ, HEDGEFS_NAMENODE=namenode)
    env.pop("HEDGEFS_CREDENTIALS", None)
    if credentials:
        env["HEDGEFS_CREDENTIALS"] = credentials
    return env


def timed_cli(*args: str, namenode: str, stdout=subprocess.DEVNULL, credentials: str | None = None) -> dict:
    env = _env(namenode, credentials)
    proc = subprocess.run([sys.executable, "-c", _CHILD, *args], stdout=stdout, stderr=subprocess.PIPE,
                          env=env, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"hedgefs {' '.join(args)} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stderr.strip().splitlines()[-1])


def write_random_file(path: str, size: int, block: int = 8 << 20) -> str:
    """Random bytes into path; returns their SHA-256."""
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left > 0:
            data = os.urandom(min(block, left))
            f.write(data)
            digest.update(data)
            left -= len(data)
    return digest.hexdigest()


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(8 << 20):
            digest.update(block)
    return digest.hexdigest()


def time_to_first_byte(namenode: str, remote: str, runs: int = 5, credentials: str | None = None) -> dict:
    """Seconds from starting ``hedgefs cat REMOTE`` to its first byte on stdout (median of runs),
    beside the same for a bare ``python -c pass`` (the interpreter's own start-up)."""
    env = _env(namenode, credentials)

    def once(argv) -> float:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env)
        proc.stdout.read(1)
        elapsed = time.perf_counter() - started
        proc.stdout.read()
        if proc.wait() != 0:
            raise RuntimeError(f"{' '.join(argv)} failed")
        return elapsed

    cat = sorted(once([sys.executable, "-m", "hedgefs", "cat", remote]) for _ in range(runs))
    bare = sorted(once([sys.executable, "-c", "import sys; sys.stdout.write('x')"]) for _ in range(runs))
    return {"cat_1_byte_s": round(cat[runs // 2], 3), "python_alone_s": round(bare[runs // 2], 3)}


def random_reads(namenode: str, remote: str, reads: int, credentials: str | None = None) -> dict:
    env = _env(namenode, credentials)
    proc = subprocess.run([sys.executable, "-m", "hedgefs", "bench", "read", remote, "--threads", "1",
                           "--reads", str(reads), "--json"], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"bench read failed: {proc.stderr.strip().splitlines()[-1:]}")
    doc = json.loads(proc.stdout)
    return {"reads": doc["reads"], "p50_ms": doc["p50_ms"], "p99_ms": doc["p99_ms"], "hedges": doc["hedges"]}


def local_copy(src: str, dst: str, block: int = 6 << 20) -> dict:
    """MB/s and CPU s/GiB of copying ``src`` (in the page cache) to a new file ``dst``."""
    buf = memoryview(bytearray(block))
    cpu0, t0 = os.times(), time.perf_counter()
    total = 0
    with open(src, "rb", buffering=0) as f, open(dst, "wb", buffering=0) as out:
        while n := f.readinto(buf):
            out.write(buf[:n])
            total += n
    wall, cpu1 = time.perf_counter() - t0, os.times()
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    os.unlink(dst)
    return {"mb_s": round(total / wall / 1e6, 1), "cpu_s_per_gib": round(cpu / (total / GiB), 3)}


def _rate(size: int, run: dict) -> dict:
    return {"mb_s": round(size / run["seconds"] / 1e6, 1), "cpu_s_per_gib": round(run["cpu_s"] / (size / GiB), 3),
            "seconds": round(run["seconds"], 3), "peak_rss_mb": round(run["peak_rss_mb"], 1)}


def run_throughput_bench(namenode: str, size: int = 256 << 20, rss_size: int = GiB, streams: int = 6,
                         reads: int = 2000, remote_dir: str = "/bench", workdir: str | None = None,
                         credentials: str | None = None) -> dict:
    """``credentials``: the file a secure cluster's client uses (None: an insecure cluster)."""
    load_before = os.getloadavg()
    cred = {"credentials": credentials}
    remote = f"{remote_dir}/throughput.bin"
    with tempfile.TemporaryDirectory(dir=workdir, prefix="hedgefs-throughput-") as tmp:
        src, dst = os.path.join(tmp, "src.bin"), os.path.join(tmp, "dst.bin")
        digest = write_random_file(src, size)
        probe = run_socket_probe(src, size, streams)
        timed_cli("mkdir", "-p", remote_dir, namenode=namenode, **cred)
        put = timed_cli("put", "-f", src, remote, namenode=namenode, **cred)
        cat = timed_cli("cat", remote, namenode=namenode, **cred)
        get = timed_cli("get", remote, dst, namenode=namenode, **cred)
        if _sha256(dst) != digest:
            raise RuntimeError("the file read back differs from the file put")
        os.unlink(dst)
        local = local_copy(src, dst)
        random = random_reads(namenode, remote, reads, **cred)
        with open(os.path.join(tmp, "one.bin"), "wb") as f:
            f.write(b"1")
        timed_cli("put", "-f", os.path.join(tmp, "one.bin"), f"{remote_dir}/one-byte", namenode=namenode, **cred)
        startup = time_to_first_byte(namenode, f"{remote_dir}/one-byte", **cred)
        timed_cli("rm", remote, namenode=namenode, **cred)
        rss = {}
        if rss_size:
            os.unlink(src)
            write_random_file(src, rss_size)
            big = f"{remote_dir}/rss.bin"
            rss_put = timed_cli("put", "-f", src, big, namenode=namenode, **cred)
            rss_get = timed_cli("get", big, "-", namenode=namenode, **cred)
            timed_cli("rm", big, namenode=namenode, **cred)
            rss = {"size": rss_size, "put_peak_rss_mb": round(rss_put["peak_rss_mb"], 1),
                   "get_peak_rss_mb": round(rss_get["peak_rss_mb"], 1),
                   "put_mb_s": round(rss_size / rss_put["seconds"] / 1e6, 1),
                   "get_mb_s": round(rss_size / rss_get["seconds"] / 1e6, 1)}
    k = probe["streams"][str(streams)]
    result = {
        "size": size,
        "probe": probe["streams"],
        "put": _rate(size, put),
        "get_to_file": _rate(size, get),
        "cat_to_null": _rate(size, cat),
        "local_file_copy": local,
        "random_64k_one_thread": random,
        "startup": startup,
        "rss": rss,
        "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]},
    }
    result["ratios"] = {
        "cat_to_probe_download": round(result["cat_to_null"]["mb_s"] / k["download_mb_s"], 3),
        "get_to_probe_download": round(result["get_to_file"]["mb_s"] / k["download_mb_s"], 3),
        "put_to_probe_upload": round(result["put"]["mb_s"] / k["upload_mb_s"], 3),
    }
    return result


def format_result(r: dict) -> str:
    k = max(r["probe"], key=int)
    p1, pk = r["probe"]["1"], r["probe"][k]
    lines = [
        f"socket probe: download {p1['download_mb_s']:.0f} MB/s (1 stream), {pk['download_mb_s']:.0f} MB/s ({k}); "
        f"upload {p1['upload_mb_s']:.0f} / {pk['upload_mb_s']:.0f} MB/s; client CPU {pk['download_cpu_s_per_gib']:.2f} s/GiB down",
        f"{'':<14}{'MB/s':>8} {'x probe':>8} {'CPU s/GiB':>10} {'peak RSS':>9}",
    ]
    for name, key, ratio in (("cat > null", "cat_to_null", "cat_to_probe_download"),
                             ("get > file", "get_to_file", "get_to_probe_download"),
                             ("put < file", "put", "put_to_probe_upload")):
        row = r[key]
        lines.append(f"{name:<14}{row['mb_s']:>8.0f} {r['ratios'][ratio]:>8.2f} {row['cpu_s_per_gib']:>10.2f} "
                     f"{row['peak_rss_mb']:>7.0f} MB")
    lc = r["local_file_copy"]
    lines.append(f"(a local file copy of the same bytes: {lc['mb_s']:.0f} MB/s, {lc['cpu_s_per_gib']:.2f} CPU s/GiB)")
    rr = r["random_64k_one_thread"]
    lines.append(f"64 KiB random reads, 1 thread: p50 {rr['p50_ms']:.2f} ms, p99 {rr['p99_ms']:.2f} ms ({rr['reads']} reads)")
    s = r["startup"]
    lines.append(f"cat of a 1-byte file, start to first byte: {s['cat_1_byte_s']:.3f} s (python alone {s['python_alone_s']:.3f} s)")
    if r["rss"]:
        x = r["rss"]
        lines.append(f"{x['size'] >> 20} MiB: put peak RSS {x['put_peak_rss_mb']:.0f} MB ({x['put_mb_s']:.0f} MB/s), "
                     f"get {x['get_peak_rss_mb']:.0f} MB ({x['get_mb_s']:.0f} MB/s)")
    la = r["load_average"]
    lines.append(f"load average before {la['before']}, after {la['after']}")
    return "\n".join(lines)
