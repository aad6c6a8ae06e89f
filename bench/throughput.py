"""Whole-file put and get through the CLI's own code path, next to the raw transport ceiling.

Each transfer runs `hedgefs put|get` in a fresh child process that imports everything first and
then times only the command itself, so the figure is the data path, not Python's start-up; the
child's peak RSS is the client's memory for the transfer (streaming, not whole-file buffers).
"""

import json
import os
import subprocess
import sys
import tempfile

from hedgefs.bench.transport import run_transport_bench

_CHILD = """
import json, resource, sys, time
from hedgefs.client.cli import main
started = time.perf_counter()
try:
    main(sys.argv[1:])
except SystemExit as e:
    if e.code:
        raise
elapsed = time.perf_counter() - started
rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": elapsed, "peak_rss_mb": rss_mb}), file=sys.stderr)
"""


def timed_cli(*args: str, namenode: str) -> dict:
    env = dict(os.environ, HEDGEFS_NAMENODE=namenode)
    proc = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, env=env, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"hedgefs {' '.join(args)} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stderr.strip().splitlines()[-1])


def write_random_file(path: str, size: int, block: int = 8 << 20) -> None:
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(block, left)
            f.write(os.urandom(n))
            left -= n


def run_throughput_bench(namenode: str, datanode_address: str, size: int = 256 << 20,
                         remote: str = "/bench/throughput.bin", workdir: str | None = None) -> dict:
    with tempfile.TemporaryDirectory(dir=workdir, prefix="hedgefs-throughput-") as tmp:
        src, dst = os.path.join(tmp, "src.bin"), os.path.join(tmp, "dst.bin")
        write_random_file(src, size)
        timed_cli("mkdir", "-p", os.path.dirname(remote), namenode=namenode)
        put = timed_cli("put", "-f", src, remote, namenode=namenode)
        get = timed_cli("get", remote, dst, namenode=namenode)
        if os.path.getsize(dst) != size or not _same_file(src, dst):
            raise RuntimeError("get returned different bytes than put stored")
        timed_cli("rm", remote, namenode=namenode)
    transport = run_transport_bench(datanode_address, total_bytes=min(size, 256 << 20))
    put_mb_s, get_mb_s = size / put["seconds"] / 1e6, size / get["seconds"] / 1e6
    return {
        "size": size,
        "put_mb_s": round(put_mb_s, 1),
        "get_mb_s": round(get_mb_s, 1),
        "transport_mb_s": {"download": round(transport["download_mb_s"], 1), "upload": round(transport["upload_mb_s"], 1)},
        "put_ratio": round(put_mb_s / transport["upload_mb_s"], 3),
        "get_ratio": round(get_mb_s / transport["download_mb_s"], 3),
        "peak_rss_mb": round(max(put["peak_rss_mb"], get["peak_rss_mb"]), 1),
    }


def _same_file(a: str, b: str, block: int = 8 << 20) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(block), fb.read(block)
            if x != y:
                return False
            if not x:
                return True
