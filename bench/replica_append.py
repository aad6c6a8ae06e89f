"""The DataNode side of an hsync on a replicated open tail (issue 45 item 1): APPEND of a 4 KiB
record to each of the tail's 3 replicas in parallel, against the copy-on-write alternative of
writing the tail again as new units of the same length, in one run on the same DataNodes.

    .venv/bin/python -m hedgefs.bench.replica_append [--records 300] [--rounds 2] [--out DIR]

3 DataNodes (real processes, fsync on; their NameNode address is a closed port: no NameNode is
involved, so this is the floor of the DataNode part of an hsync, not the whole call). Rounds of
A B B A: A = RECORDS appends of 4 KiB to a replicated unit that grows from 0 (each one acknowledged
by all 3 replicas); B = RECORDS writes of the unit again, whole, as a new unit on all 3 (its length
growing by 4 KiB each time, as copy-on-write of the tail would). Latency p50/p99 of each, and the
ratio. Results: OUT/<date>-replica-append.json with the command and the commit.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from hedgefs.plumbing import read_port_file
from hedgefs.proto import datatransfer as dt

RECORD = 4096
REPLICAS = 3


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(root: pathlib.Path, name: str):
    port_file = root / f"{name}.port"
    proc = subprocess.Popen([sys.executable, "-m", "hedgefs", "datanode", "--id", name, "--port", "0",
                             "--data-dir", str(root / name), "--namenode", f"127.0.0.1:{_closed_port()}",
                             "--port-file", str(port_file)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 30
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"datanode {name} did not start")
        time.sleep(0.05)
    return proc, read_port_file(port_file)["data"]


def _write(sock, g: int, data: bytes) -> None:
    sock.sendall(dt.pack_request(dt.OP_WRITE, g, 0, 0, len(data), generation=1))
    dt.recv_response(sock, "dn")
    sock.sendall(dt.PACKET.pack(dt.PACKET_DATA, len(data)) + data + dt.PACKET.pack(dt.PACKET_END, len(data)))
    dt.recv_response(sock, "dn")
    dt.recv_exactly(sock, memoryview(bytearray(dt.STORED.size)))


def _rounds(socks, pool, records: int, kind: str, base: int) -> list[float]:
    record = os.urandom(RECORD)
    times = []
    if kind == "append":   # the replica made by an APPEND at 0, as an open tail's is
        list(pool.map(lambda s: dt.append(s, base, 0, 0, b"", generation=1), socks))
    for n in range(records):
        began = time.monotonic()
        if kind == "append":
            list(pool.map(lambda s: dt.append(s, base, 0, n * RECORD, record, generation=1), socks))
        else:
            tail = record * (n + 1)
            list(pool.map(lambda s: _write(s, base + 1 + n, tail), socks))
        times.append(time.monotonic() - began)
    return times


def _pct(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hedgefs.bench.replica_append")
    ap.add_argument("--records", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="bench/results")
    args = ap.parse_args(argv)
    root = pathlib.Path(tempfile.mkdtemp(prefix="hedgefs-replica-append-"))
    nodes = [_launch(root, f"dn{i}") for i in range(REPLICAS)]
    results = {"append": [], "rewrite": []}
    try:
        socks = [dt.connect(f"127.0.0.1:{port}", 30.0) for _proc, port in nodes]
        with ThreadPoolExecutor(REPLICAS) as pool:
            base = 1000
            for _ in range(args.rounds):
                for kind in ("append", "rewrite", "rewrite", "append"):
                    results[kind] += _rounds(socks, pool, args.records, kind, base)
                    base += args.records + 1
        for s in socks:
            s.close()
    finally:
        for proc, _port in nodes:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        subprocess.run(["rm", "-rf", str(root)], check=False)
    summary = {kind: {"p50_ms": round(_pct(t, 0.50), 2), "p99_ms": round(_pct(t, 0.99), 2),
                      "mean_ms": round(statistics.fmean(t) * 1000, 2), "n": len(t)} for kind, t in results.items()}
    summary["append/rewrite p50"] = round(summary["append"]["p50_ms"] / summary["rewrite"]["p50_ms"], 3)
    summary["append/rewrite p99"] = round(summary["append"]["p99_ms"] / summary["rewrite"]["p99_ms"], 3)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    report = {"command": " ".join(["python -m hedgefs.bench.replica_append", *(argv or sys.argv[1:])]),
              "commit": commit, "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "load": os.getloadavg(), "record_bytes": RECORD, "replicas": REPLICAS, **summary}
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{datetime.date.today().isoformat()}-replica-append.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
