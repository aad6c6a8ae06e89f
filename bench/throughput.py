"""Whole-file put and get through the CLI's own code path, next to the raw transport ceiling.

Each transfer runs `hedgefs put|get` in a fresh child process that imports everything first and
then times only the command itself, so the figure is the data path, not Python's start-up; the
child's peak RSS is the client's memory for the transfer (streaming, not whole-file buffers).
"""

import hashlib
import json
import os
import subprocess
import sys
import tempfile

from hedgefs.bench.transport import run_transport_bench

_CHILD = """
import json, resource, sys, time
from hedgefs.cli import main
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
    proc = subprocess.run([sys.executable, "-c", _CHILD, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
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


def _remote_sha256(namenode: str, remote: str) -> str:
    from hedgefs.client.fs import FileSystem

    digest = hashlib.sha256()
    with FileSystem(namenode) as fs, fs.open(remote) as f:
        for chunk in f.chunks():
            digest.update(chunk)
    return digest.hexdigest()


def run_throughput_bench(namenode: str, datanode_address: str, size: int = 256 << 20,
                         remote: str = "/bench/throughput.bin", workdir: str | None = None) -> dict:
    with tempfile.TemporaryDirectory(dir=workdir, prefix="hedgefs-throughput-") as tmp:
        src = os.path.join(tmp, "src.bin")
        digest = write_random_file(src, size)
        timed_cli("mkdir", "-p", os.path.dirname(remote), namenode=namenode)
        put = timed_cli("put", "-f", src, remote, namenode=namenode)
        # To stdout (/dev/null): the data path, not the local disk's write speed.
        get = timed_cli("get", remote, "-", namenode=namenode)
        if _remote_sha256(namenode, remote) != digest:
            raise RuntimeError("the file read back differs from the file put")
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
