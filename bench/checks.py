"""The suite's checks beside its rounds (bench/scenarios.py): each ``STEPS[name](ctx, policies,
quick)`` runs on the suite's cluster and returns a dict for the JSON and the targets.

- ``closed-loop``: a healthy cluster under 4 closed-loop reader threads, 5 runs per policy
  (interleaved): which DataNodes the client marked slow (CPU contention must not read as a slow
  DataNode) and the extra unit reads.
- ``new-client``: a new client reads a 24 MiB file, healthy and with the DataNode holding most of
  its data units frozen before the client starts (interleaved, 3 times): the first stripes of a
  client with no latency history.
- ``put``: puts of 256 MiB, healthy and with one DataNode frozen, then the time until fsck is
  HEALTHY again (the NameNode repairs what the writer dropped).
"""

from __future__ import annotations

import collections
import statistics
import time

from hedgefs.bench import canary as canary_mod
from hedgefs.bench.cluster import RandomSource, path_of
from hedgefs.bench.read import run_read_bench
from hedgefs.bench.rounds import median_range
from hedgefs.ec.policy import parse_policy

CLOSED_THREADS = 4
CLOSED_RUNS = 5
CLOSED_S = 5.0
CAT_BYTES = 24 << 20
CAT_REPS = 3
PUT_BYTES = 256 << 20
PUTS = 3


def _verdict(ctx, started: float) -> dict:
    return canary_mod.verdict(ctx.canary.samples(), started, time.monotonic())


def closed_loop(ctx, policies: list[str], quick: bool) -> dict:
    runs = []
    for i in range(2 if quick else CLOSED_RUNS):
        for policy in policies:
            ctx.bc.restore()
            started = time.monotonic()
            with ctx.bc.fs() as fs:
                run = run_read_bench(fs, path_of(policy), threads=CLOSED_THREADS, duration_s=2.0 if quick else CLOSED_S,
                                     seed=10 + i)
            s, c = run.summary(), run.stats.counters
            row = {"policy": policy, "run": i, "reads": s["reads"], "reads_per_s": s["reads_per_s"],
                   "p999_ms": s["p999_ms"], "hedges": s["hedges"], "hedges_overtaken": c["hedges_overtaken"],
                   "hedges_cold": c["hedges_cold"], "hedges_refused": s["hedges_refused"],
                   "unit_reads": c["unit_reads"], "unit_reads_needed": c["unit_reads_needed"],
                   "extra_unit_reads_pct": s["extra_unit_reads_pct"],
                   "trips": s["breaker_trips"], "marked_slow": sorted(run.probe.first_slow),
                   "loadavg": run.host["loadavg_start"][0], "canary": _verdict(ctx, started)}
            runs.append(row)
            ctx.say(f"   {policy:<16} run {i}: {row['reads_per_s']:.0f} reads/s, extra {row['extra_unit_reads_pct']:.2f} %, "
                    f"hedges {row['hedges']} (overtaken {row['hedges_overtaken']}, cold {row['hedges_cold']}), "
                    f"marked slow {row['marked_slow'] or 'none'}, load {row['loadavg']}, "
                    f"canary {row['canary']['verdict']}")
    return {"threads": CLOSED_THREADS, "runs": runs}


def _data_victim(fs, path: str) -> str:
    status = fs.stat(path)
    k = parse_policy(status.policy).k
    counts = collections.Counter(loc.datanode_id for g in status.groups for i, loc in g.units.items() if i < k)
    return max(sorted(counts), key=lambda dn: counts[dn])


def _cat(ctx, path: str) -> float:
    with ctx.bc.fs() as fs:
        started = time.monotonic()
        n = 0
        with fs.open(path) as f, f.chunks(reuse=True) as chunks:
            for chunk in chunks:
                n += len(chunk)
        took = time.monotonic() - started
    if n != CAT_BYTES:
        raise RuntimeError(f"read {n} bytes of {path}, not {CAT_BYTES}")
    return took


def new_client(ctx, policies: list[str], quick: bool) -> dict:
    out = {"bytes": CAT_BYTES, "policies": {}}
    with ctx.bc.fs() as fs:
        for policy in policies:
            path = f"/bench/cat-{policy.lower()}.bin"
            fs.write(path, RandomSource(CAT_BYTES, 7), overwrite=True, policy=policy)
            out["policies"][policy] = {"path": path, "victim": _data_victim(fs, path), "healthy_s": [], "frozen_s": [],
                                       "ratios": [], "canary": []}
    for _ in range(1 if quick else CAT_REPS):
        for policy in policies:
            row = out["policies"][policy]
            ctx.bc.restore()
            started = time.monotonic()
            row["healthy_s"].append(round(_cat(ctx, row["path"]), 3))
            ctx.bc.cluster.freeze(row["victim"])
            try:
                row["frozen_s"].append(round(_cat(ctx, row["path"]), 3))
            finally:
                ctx.bc.cluster.thaw(row["victim"])
            row["ratios"].append(round(row["frozen_s"][-1] / max(row["healthy_s"][-1], 1e-9), 3))
            row["canary"].append(_verdict(ctx, started)["verdict"])
            ctx.say(f"   {policy:<16} 24 MiB by a new client: healthy {row['healthy_s'][-1]:.2f} s, {row['victim']} "
                    f"frozen {row['frozen_s'][-1]:.2f} s ({row['ratios'][-1]:.2f} x), canary {row['canary'][-1]}")
    for row in out["policies"].values():
        row["ratio"] = median_range(row["ratios"])
    with ctx.bc.fs() as fs:
        for row in out["policies"].values():
            fs.delete(row["path"])
    return out


def puts(ctx, policies: list[str], quick: bool) -> dict:
    """Puts (in ``policies[0]``), healthy and with one DataNode frozen (alternating), then the
    time until fsck is HEALTHY again."""
    bc, put_bytes, n = ctx.bc, (64 << 20) if quick else PUT_BYTES, 1 if quick else PUTS
    policy = policies[0]
    frozen = bc.least_loaded(path_of(policy))
    units = parse_policy(policy).units
    times: dict[str, list[float]] = {"healthy": [], "frozen": []}
    dropped = []
    with bc.fs() as fs:
        for i in range(n):
            for kind in ("healthy", "frozen"):
                path = f"/bench/put-{kind}-{i}.bin"
                if kind == "frozen":
                    bc.cluster.freeze(frozen)
                try:
                    started = time.monotonic()
                    fs.write(path, RandomSource(put_bytes, 100 + i), overwrite=True, policy=policy)
                    times[kind].append(round(time.monotonic() - started, 3))
                finally:
                    if kind == "frozen":
                        bc.cluster.thaw(frozen)
                if kind == "frozen":
                    groups = fs.stat(path).groups
                    dropped.append(sum(1 for g in groups if frozen not in {u.datanode_id for u in g.units.values()}
                                       and len(g.units) < units))
                ctx.say(f"   put {put_bytes >> 20} MiB {policy}, {kind:<8}: {times[kind][-1]:.2f} s")
        started = time.monotonic()
        status = ""
        while time.monotonic() - started < 300:
            status = fs.admin.fsck("/").status
            if status == "HEALTHY":
                break
            time.sleep(0.5)
        healthy_after = round(time.monotonic() - started, 1)
        for i in range(n):
            for kind in ("healthy", "frozen"):
                fs.delete(f"/bench/put-{kind}-{i}.bin")
    ctx.say(f"   fsck {status} {healthy_after} s after the last put (groups that dropped {frozen}: {dropped})")
    return {"policy": policy, "frozen": frozen, "bytes": put_bytes, "seconds": times,
            "median_s": {k: statistics.median(v) for k, v in times.items()},
            "groups_without_frozen": dropped, "fsck": status, "fsck_healthy_after_s": healthy_after}


STEPS = {"closed-loop": closed_loop, "new-client": new_client, "put": puts}
