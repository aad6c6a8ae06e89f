"""The tail-latency suite's summary: the markdown table of ratios, the targets, and the notes
that say what the numbers owe to arithmetic and to the machine (``<date>-adaptive-summary.md``).
"""

from __future__ import annotations

from typing import Sequence

from hedgefs.bench.targets import find_run, ratio
from hedgefs.ec.policy import parse_policy


def summary_markdown(doc: dict, scenarios: Sequence, fanout: int) -> str:
    """The summary of a suite document; ``scenarios`` are the suite's ``Scenario``s (names,
    titles, kinds: bench/scenarios.py), ``fanout`` the reads per page of its fan-out runs."""
    env, cl, load = doc["environment"], doc["cluster"], doc["load"]
    healthy = find_run(doc, "healthy")
    hp = healthy["summary"]["p999_ms"] if healthy else float("nan")
    lines = [
        f"# Tail latency: adaptive hedging ({doc['date']}{', quick' if doc['quick'] else ''})",
        "",
        f"Command: `{doc['command']}`: {doc['wall_s'] / 60:.1f} min on {env['cpus']} CPUs, commit "
        f"{env['commit'] or '?'}, load average {env['loadavg'][0]} at the start and {env['loadavg_end'][0]} at the "
        f"end (the host is shared: each row has its own).",
        "",
        f"One local cluster (NameNode + 10 DataNodes), a {cl['file_bytes'] >> 20} MiB file in {cl['policy']} with "
        f"{cl['block_size'] >> 20} MiB internal blocks ({cl['groups']} block groups). Healthy capacity: "
        f"{load['capacity_reads_per_s']:.0f} reads/s with {load['capacity_threads']} closed-loop readers; every run "
        f"is **open loop** at {load['rate'] / load['capacity_reads_per_s']:.0%} of it, {load['rate']:.0f} random 64 KiB reads/s (Poisson arrivals, latency from "
        f"the scheduled start), {load['duration_s']:g} s, a new client each, after a {load.get('warmup_s', 0):g} s "
        f"warm-up run that is not counted. Pages: {fanout} reads each at "
        f"{load['rate'] / fanout:.1f} pages/s (the same read rate). Whole stripes: 6 MiB reads at "
        f"{load['rate'] / 60:.1f}/s. **ratio** = p99.9 / the healthy adaptive p99.9 ({hp:.1f} ms) (pages: page p99 / "
        f"healthy page p99). adaptive = the default (`--hedge-threshold-ms auto`); static = a fixed 250 ms "
        f"threshold (hedgefs before: the baseline); off = no hedging.",
        "",
        "| scenario | mode | reads/s | p50 ms | p99 ms | p99.9 ms | **ratio** | max ms | hedges (wins) | avoided "
        "| probes | trips | extra unit reads % | worst 1 s % | loop lag max ms | load avg |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    pages = find_run(doc, "fanout-healthy")
    for run in doc["runs"]:
        s, h = run["summary"], run["host"]
        sc = next(x for x in scenarios if x.name == run["scenario"])
        if sc.fanout > 1 and pages:
            r = f"{ratio(run, pages, 'p99_ms'):.2f} (p99)"
        elif sc.whole_stripes:
            base = find_run(doc, "stripes-healthy")
            r = f"{ratio(run, base):.2f} (vs stripes)" if base else ""
        else:
            r = f"{ratio(run, healthy):.2f}" if healthy else ""
        mode = run["mode"] + (f", read-extra {run['read_extra']}" if len(sc.read_extra) > 1 else "")
        lines.append(
            f"| {sc.title} | {mode} | {s['reads_per_s']:.0f} | {s['p50_ms']:.1f} | {s['p99_ms']:.1f} | "
            f"{s['p999_ms']:.1f} | **{r}** | {s['max_ms']:.1f} | {s['hedges']} ({s['hedge_wins']}) | {s['avoided']} | "
            f"{s['probes']} | {s['breaker_trips']} | {s['extra_unit_reads_pct']:.2f} | {s['max_extra_pct_1s']} | "
            f"{h['loop_lag_max_ms']} | {h['loadavg_start'][0]:.1f} |")
    puts = doc.get("puts")
    if puts:
        lines += ["", f"Puts of {puts['bytes'] >> 20} MiB (seconds; median of {len(puts['seconds']['healthy'])}): "
                      f"healthy {puts['seconds']['healthy']}, with {puts['frozen']} frozen {puts['seconds']['frozen']}; "
                      f"fsck {puts['fsck']} {puts['fsck_healthy_after_s']} s after the last put."]
    lines += ["", "## Targets", "", "| scenario | target | measured | met? | margin |", "|---|---|---|---|---|"]
    for t in doc["targets"]:
        lines.append(f"| {t['scenario']} | {t['target']} | {t['measured']} | {'met' if t['met'] else '**missed**'} | "
                     f"{t['margin']} |")
    lines += ["", "## How to read these numbers", ""] + [f"- {note}" for note in notes(doc)]
    lines += ["", "## Plots", ""] + [f"- [{name}]({name})" for name in doc.get("plots", [])] + [""]
    return "\n".join(lines)


def notes(doc: dict) -> list[str]:
    """What the table owes to arithmetic and to the machine, computed from the runs."""
    out = ["Open loop: a read's latency counts from when it was scheduled, so a read queued behind "
           "others (in the client, or on a DataNode) is measured with its wait; a closed loop would "
           "stop issuing reads exactly then. Percentiles are upper bounds of ~2 % histogram buckets."]
    off = find_run(doc, "slow-500ms", "off")
    if off and off["victims"]:
        k = parse_policy(doc["cluster"]["policy"]).k
        victim = off["victims"][0]
        share = off["summary"]["per_datanode"].get(victim, {}).get("unit_reads", 0) / max(off["expected_unit_reads"], 1)
        out.append(f"Reading around one DataNode costs k - 1 = {k - 1} extra unit reads per 64 KiB read that needs "
                   f"it (its cell is rebuilt from {k} others). {victim} holds the cells of {share:.1%} of the reads "
                   f"(hedging off), so any scheme that never waits for it reads at least {share * (k - 1):.0%} more "
                   f"unit reads than the reads need: a 5 % target for that scenario cannot be met by a read of one "
                   f"cell, only by whole-stripe reads (where parity replaces the slow unit at no extra cost).")
    out.append("Everything (NameNode, 10 DataNodes, the client, and whatever else the host runs) shares the "
               "host's 2 cores: extra unit reads are CPU every read waits for, and a run at a third of the healthy "
               "capacity that reads 60 % more unit reads runs at ~55 % of it (at half, ~80 %: queues grow). The load "
               "average per row and the client's event-loop lag tell the host's noise from the read path's own "
               "cost.")
    return out
