"""Service-time traces for the replay tier (tests/replay/): what real DataNodes did, recorded.

    python -m hedgefs.bench.traces [--out tests/replay/traces] [--seconds 3]

One local cluster (12 DataNodes, pinned apart from this process as ``hedgefs bench tail`` pins
them), one file per EC policy (RS-6-3-1024k, LRC-6-2-2-1024k). A client with hedging **off** reads
each file open loop (a third of the healthy capacity, random 64 KiB reads, one cell each) for
``--seconds`` per scenario, so every read goes to its own DataNode and waits for it: the trace is
what the DataNodes (and this host) did, not what a policy chose. Scenarios: healthy; one DataNode
+500 ms; one frozen (SIGSTOP) for the whole scenario; one with 1 % of reads +2 s; a host-wide
stall (every DataNode SIGSTOPped for 150 ms, at a third and at two thirds of the scenario). The
faulty DataNode is the one holding most of the file's data cells. (Busy processes pinned beside
the servers made every read a second late: a host in that state says nothing of a policy; this
host's own load gives the traces p99s of several ms, the "noisy host" the overtaken rule is about.)

Each trace (``<policy>-<scenario>.json.gz``): the file's placement (per group, unit -> DataNode),
the reads (seconds into the scenario, group, unit) and every unit read's service time as the
client saw it (seconds into the scenario it was sent, seconds it took), by DataNode. The replay
(tests/replay.py) issues the same reads at the same times through the real policy, fetcher and
latency model on a virtual clock, and answers a read of a DataNode sent at t with the time its
recorded read sent nearest to t took.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pathlib
import random
import sys
import tempfile
import time

from hedgefs.bench.cluster import BenchCluster, path_of
from hedgefs.bench.read import measure_capacity
from hedgefs.bench.tail import READ_SIZE, Arm, Settings, cpu_plan, pin_process, run_arm, warm_up
from hedgefs.client.config import HedgeConfig
from hedgefs.proto import hedgefs_pb2 as pb

POLICIES = ("RS-6-3-1024k", "LRC-6-2-2-1024k")
SCENARIOS = ("healthy", "slow-500ms", "frozen", "tail-1pct-2s", "stall")
STALL_S = 0.150
DEFAULT_OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "replay" / "traces"


def record(out: pathlib.Path, seconds: float, file_bytes: int = 64 << 20, say=print) -> list[pathlib.Path]:
    out.mkdir(parents=True, exist_ok=True)
    plan = cpu_plan()
    if plan:
        pin_process(os.getpid(), plan[0])
    written = []
    with tempfile.TemporaryDirectory(prefix="hedgefs-traces-") as tmp:
        bc = BenchCluster(pathlib.Path(tmp), {path_of(p): p for p in POLICIES}, file_bytes, datanodes=12)
        try:
            if plan:
                for name in [*bc.cluster.namenode_names, *bc.cluster.datanode_ids]:
                    pin_process(bc.cluster.pid(name), plan[1])
            with bc.fs(HedgeConfig(enabled=False)) as fs:
                readers = {p: fs.open(path_of(p)) for p in POLICIES}
                rate = round(measure_capacity(fs, path_of(POLICIES[0]), threads=8, duration_s=3.0) / 3, 1)
                warm_up({(p,): r for p, r in readers.items()}, rate)
                say(f"open loop at {rate:.0f} reads/s, {seconds:g} s per scenario")
                for policy in POLICIES:
                    for scenario in SCENARIOS:
                        trace = one(bc, fs, readers[policy], policy, scenario, rate, seconds)
                        path = out / f"{policy.lower()}-{scenario}.json.gz"
                        with gzip.open(path, "wt") as f:
                            json.dump(trace, f, separators=(",", ":"))
                        written.append(path)
                        lat = sorted(x[1] for rows in trace["service"].values() for x in rows)
                        say(f"{path.name}: {len(trace['reads'])} reads, unit reads p50 "
                            f"{1000 * lat[len(lat) // 2]:.2f} ms, p99 {1000 * lat[int(len(lat) * 0.99)]:.2f} ms, "
                            f"max {1000 * lat[-1]:.0f} ms ({path.stat().st_size // 1024} KiB)")
        finally:
            bc.down()
    return written


def one(bc: BenchCluster, fs, reader, policy: str, scenario: str, rate: float, seconds: float) -> dict:
    status = bc.status[path_of(policy)]
    group_index = {g.id: i for i, g in enumerate(status.groups)}
    victim = bc.victims(1, path_of(policy))[0]
    reads, service = [], {}
    t0 = time.monotonic()

    def fetched(report) -> None:
        timing = report.units[0] if report.units else None
        if timing is None or report.group_id not in group_index:
            return
        reads.append((round(report.began - t0, 6), group_index[report.group_id], timing.index))
        for u in report.units:
            if u.ended_at is not None and u.datanode:
                service.setdefault(u.datanode, []).append((round(u.sent_at - t0, 6), round(u.ended_at - u.sent_at, 6)))

    stop = fs.observe_reads(fetched)
    arm, futures = Arm(scenario, policy, None, 0), []
    slots = max(1, (reader.length - READ_SIZE) // READ_SIZE + 1)
    try:
        if scenario == "slow-500ms":
            bc.set_faults(victim, pb.FaultConfig(read_delay_ms=500))
        elif scenario == "tail-1pct-2s":
            bc.set_faults(victim, pb.FaultConfig(read_delay_ms=2000, probability=0.01))
        elif scenario == "frozen":
            bc.cluster.freeze(victim)
        t0 = time.monotonic()
        if scenario == "stall":
            third = Settings(arm_s=seconds / 3, warmup_s=0.0)
            for _ in range(2):
                run_arm(arm, reader, rate, third, frozenset(), random.Random(len(reads)), slots, futures)
                for dn in bc.cluster.datanode_ids:
                    bc.cluster.freeze(dn)
                time.sleep(STALL_S)
                for dn in bc.cluster.datanode_ids:
                    bc.cluster.thaw(dn)
            run_arm(arm, reader, rate, third, frozenset(), random.Random(1), slots, futures)
        else:
            run_arm(arm, reader, rate, Settings(arm_s=seconds, warmup_s=0.0), frozenset(), random.Random(7), slots,
                    futures)
    finally:
        if scenario in ("slow-500ms", "tail-1pct-2s"):
            bc.set_faults(victim, None)
        elif scenario == "frozen":
            bc.cluster.thaw(victim)
    for future in futures:
        try:
            future.result(30)
        except Exception:   # noqa: BLE001 - a failed read is simply not in the trace
            pass
    stop()
    return {"policy": policy, "scenario": scenario, "victim": victim if scenario in ("slow-500ms", "frozen", "tail-1pct-2s") else None,
            "seconds": seconds, "rate": rate, "recorded": time.strftime("%Y-%m-%d"),
            "groups": [{str(i): loc.datanode_id for i, loc in g.units.items()} for g in status.groups],
            "reads": sorted(reads), "service": {dn: sorted(rows) for dn, rows in sorted(service.items())}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    record(args.out, args.seconds, say=lambda s: print(s, flush=True))
    print("command: python -m hedgefs.bench.traces " + " ".join(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
