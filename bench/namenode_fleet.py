"""`hedgefs bench namenode-fleet`: a simulated fleet of DataNodes against a real NameNode process.

One process (``python bench/namenode_fleet.py ADDRESS N INTERVAL SECONDS``) registers N DataNodes
through the real RegisterDataNode RPC and sends each one's Heartbeat every INTERVAL seconds, the
fleet spread evenly over the interval, from 32 threads: it reports heartbeats/s, how late each
was sent against its schedule and how long the NameNode took to answer. A heartbeat is *late* if
it was answered more than INTERVAL after it was due (the next one was due already).

The runner starts a NameNode server, measures a client's stat load (4 threads, through the client
library, bench/namenode.py) without the fleet and then with it running: client p99 with / without.
"""

from __future__ import annotations

import heapq
import json
import os
import pathlib
import sys
import threading
import time


def fleet(address: str, n: int, interval: float, seconds: float) -> dict:
    import grpc

    from hedgefs.proto import GRPC_OPTIONS, hedgefs_pb2 as pb, hedgefs_pb2_grpc

    channel = grpc.insecure_channel(address, options=GRPC_OPTIONS)
    stub = hedgefs_pb2_grpc.NameNodeStub(channel)
    ids = [f"fleet{i}" for i in range(n)]
    began = time.perf_counter()
    for i, dn in enumerate(ids):
        stub.RegisterDataNode(pb.RegisterRequest(datanode_id=dn, address=f"10.1.{i // 250}.{i % 250}:9867"), timeout=30)
    registered_s = time.perf_counter() - began
    start = time.monotonic() + 0.5
    due = [(start + interval * i / n, i) for i in range(n)]
    heapq.heapify(due)
    end = start + seconds
    lock = threading.Lock()
    lateness: list[float] = []
    answers: list[float] = []
    late = [0]

    def work() -> None:
        while True:
            with lock:
                when, i = heapq.heappop(due)
                if when >= end:
                    heapq.heappush(due, (when, i))
                    return
                heapq.heappush(due, (when + interval, i))
            wait = when - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            sent = time.monotonic()
            stub.Heartbeat(pb.HeartbeatRequest(datanode_id=ids[i], used_bytes=1 << 40, units=100_000), timeout=30)
            done = time.monotonic()
            with lock:
                lateness.append(sent - when)
                answers.append(done - sent)
                late[0] += done - when > interval

    threads = [threading.Thread(target=work, daemon=True) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    channel.close()

    def pct(values: list[float], p: float) -> float:
        values = sorted(values)
        return round(values[min(len(values) - 1, int(p * len(values)))] * 1000, 2) if values else 0.0

    return {"datanodes": n, "interval_s": interval, "seconds": seconds, "register_s": round(registered_s, 2),
            "heartbeats": len(answers), "heartbeats_per_s": round(len(answers) / seconds, 1), "late": late[0],
            "send_lateness_p50_ms": pct(lateness, 0.5), "send_lateness_p99_ms": pct(lateness, 0.99),
            "send_lateness_max_ms": pct(lateness, 1.0), "answer_p50_ms": pct(answers, 0.5),
            "answer_p99_ms": pct(answers, 0.99), "answer_max_ms": pct(answers, 1.0)}


def run(*, datanodes: int, interval: float, seconds: float, command: str, say=print) -> dict:
    import subprocess
    import tempfile

    from hedgefs.bench.namenode_run import _cpu_s, _server, _Worker

    doc: dict = {"command": command, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                 "cpus": os.cpu_count(), "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="hedgefs-nnfleet-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        env = dict(os.environ)
        server, address = _server(env, tmp, "fleet")
        worker = None
        try:
            worker = _Worker(["client", address, "2000"], env, tmp / "client.log")
            say("  client stats without the fleet")
            doc["stat_without"] = [worker.measure("stat", 4, server) for _ in range(3)]
            say(f"  client stats with {datanodes} DataNodes heartbeating every {interval:g} s")
            proc = subprocess.Popen([sys.executable, str(pathlib.Path(__file__).resolve()), address, str(datanodes),
                                     str(interval), str(seconds)], env=env, stdout=subprocess.PIPE, text=True)
            cpu0 = _cpu_s(server)
            doc["stat_with"] = []
            while proc.poll() is None and len(doc["stat_with"]) < 100:
                doc["stat_with"].append(worker.measure("stat", 4, server))
            out, _ = proc.communicate(timeout=seconds + 120)
            doc["fleet"] = json.loads(out.strip().splitlines()[-1])
            doc["server_cpu_s_during_fleet"] = round(_cpu_s(server) - cpu0, 1)
        finally:
            if worker is not None:
                worker.close()
            server.terminate()
            server.wait(timeout=30)
    # the first with-run overlaps the fleet's registrations: keep the runs while it heartbeats
    with_runs = doc["stat_with"][1:] or doc["stat_with"]
    doc["stat_p99_without_ms"] = sorted(r["p99_ms"] for r in doc["stat_without"])[1]
    doc["stat_p99_with_ms"] = sorted(r["p99_ms"] for r in with_runs)[len(with_runs) // 2]
    doc["p99_ratio"] = round(doc["stat_p99_with_ms"] / doc["stat_p99_without_ms"], 2) if doc["stat_p99_without_ms"] else None
    doc["load_after"] = os.getloadavg()
    return doc


if __name__ == "__main__":
    sys.path.pop(0)
    if len(sys.argv) != 5:
        sys.exit("usage: namenode_fleet.py ADDRESS DATANODES INTERVAL_S SECONDS")
    print(json.dumps(fleet(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))))
