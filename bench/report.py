"""The suite's summary (``<date>-suite-summary.md``): the rows of ratios (median and range of the
rounds) with their oracle, window, stall-free and floor figures, the slow reads' breakdown, the
checks, issue 25's targets row by row, and notes computed from the runs.
"""

from __future__ import annotations

from hedgefs.bench.rounds import fmt_range


def main(argv: list[str] | None = None) -> None:
    """Re-evaluate a saved suite JSON's rows and targets and rewrite it and its summary (the
    runs are not touched): ``python -m hedgefs.bench.report bench/results/<date>-suite.json``."""
    import json
    import pathlib
    import sys

    from hedgefs.bench.targets import aggregate, evaluate_targets

    for f in [pathlib.Path(a) for a in (sys.argv[1:] if argv is None else argv)]:
        doc = json.loads(f.read_text())
        doc["rows"] = aggregate(doc)
        doc["targets"] = evaluate_targets(doc)
        doc["reevaluated"] = f"python -m hedgefs.bench.report {f.name}"
        f.write_text(json.dumps(doc) + "\n")
        out = f.with_name(f"{f.stem}-summary.md")
        out.write_text(summary_markdown(doc))
        print(out)


def summary_markdown(doc: dict) -> str:
    env, cl, load = doc["environment"], doc["cluster"], doc["load"]
    rows = doc.get("rows", [])
    lines = [
        f"# Tail latency: RS vs LRC vs replication, interleaved rounds ({doc['date']}{', quick' if doc['quick'] else ''})",
        "",
        f"Command: `{doc['command']}`: {doc['wall_s'] / 60:.1f} min on {env['cpus']} CPUs, commit "
        f"{env['commit'] or '?'}, load average {env['loadavg'][0]} at the start and {env['loadavg_end'][0]} at the "
        f"end (the host is shared with other engineers' test runs: each row has its own load and canary verdict)."
        + (f" Rows and targets re-evaluated from the runs by `{doc['reevaluated']}`." if doc.get("reevaluated") else ""),
        "",
        f"One local cluster (NameNode + {cl['datanodes']} DataNodes), one {cl['file_bytes'] >> 20} MiB file per policy "
        f"({', '.join(p + ': ' + str(f['groups']) + ' groups' for p, f in cl['files'].items())}), "
        f"{cl['block_size'] >> 20} MiB internal blocks. Healthy capacity {load['capacity_reads_per_s']:.0f} reads/s "
        f"({load['capacity_threads']} closed-loop readers, {load['capacity_policy']}); every run is **open loop** at "
        f"{load['rate']:.0f} random 64 KiB reads/s (a third; Poisson arrivals, the same seed, latency from the "
        f"scheduled start), {load['duration_s']:g} s, a new client each"
        + (f"; the CPU-hog runs at {load['hog_rate']:.0f}/s (a third of the capacity measured with the hogs running)"
           if load.get("hog_rate") else "") + ".",
        "",
        f"**Rounds**: {doc['reps']}. In each, per policy and scenario: a healthy run, the fault run, and the **oracle** "
        "run (the same fault; the reads scheduled in the fault window leave the faulty DataNode out from their first "
        "read: the best any detection could do), on the same file one after the other; rounds interleave the "
        "policies. **ratio** = the fault run's p99.9 over the healthy run's just before it (pages: page p99), "
        "median of the rounds and (min-max). **window** = the p99.9 of the reads scheduled in the fault window over "
        "the healthy run's p99.9; **stall-free** = both p99.9s without the 100 ms buckets a canary stall touched. "
        "**floor** = duty x share x (sources - 1), the extra unit reads no reader avoids (1 % faults: duty x share x "
        "p x sources; bench/rounds.py).",
        "",
        "| policy | scenario | healthy p99.9 ms | fault p99.9 ms | **ratio** | window | stall-free | **oracle** "
        "| oracle window | max ms | extra unit reads % | floor % | extra / floor | oracle extra % | hedges | trips "
        "| load avg | canary |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['policy']} | {r['title']} | {fmt_range(r['healthy'], 1)} | {fmt_range(r['fault'], 1)} | "
            f"**{fmt_range(r['ratio'])}** | {fmt_range(r['window_ratio'])} | {fmt_range(r['clean_ratio'])} | "
            f"**{fmt_range(r['oracle_ratio'])}** | {fmt_range(r['oracle_window_ratio'])} | {fmt_range(r['max_ms'], 1)} | "
            f"{fmt_range(r['extra_pct'], 1)} | {fmt_range(r['floor_pct'], 1)} | {fmt_range(r['extra_over_floor'])} | "
            f"{fmt_range(r['oracle_extra_pct'], 1)} | {fmt_range(r['hedges'], 0)} | {r['trips']} | {fmt_range(r['load'], 1)} | {r['canary']} |")
    lines += ["", "## Where the slow reads' time went", "",
              "The slowest 0.1 % of each fault run's reads (at least 5), by part: median over those reads, then the "
              "median (range) over the rounds, ms. dispatch = the load generator's lag, loop = waiting for the "
              "client's event loop, units = the range fetchers waiting on unit reads (decode taken out), decode, "
              "other = the rest of the read (its setup, assembling the bytes, and the event loop's wake-up once the "
              "fetch is done: on a loaded host mostly the latter); sent = unit reads per slow read (bench/trace.py).", "",
              "| policy | scenario | slow read ms | dispatch | loop | units | decode | other | sent |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        b = r["breakdown"]
        lines.append(f"| {r['policy']} | {r['scenario']} | {fmt_range(b['median_ms'], 1)} | {fmt_range(b['dispatch_ms'], 1)} | "
                     f"{fmt_range(b['loop_ms'], 1)} | {fmt_range(b['units_ms'], 1)} | {fmt_range(b['decode_ms'], 2)} | "
                     f"{fmt_range(b['other_ms'], 1)} | {fmt_range(b['sent'], 0)} |")
    lines += _checks(doc)
    lines += ["", "## Targets (issue 25)", "",
              "A latency target is **met** only if every round is within it, **missed** if none is, and "
              "*unresolved* if the rounds straddle it or the canary saw the host stall (>= 50 ms) in most of the "
              "row's runs: then this run cannot tell, and says so. Counts (extra reads, trips) are met or missed.", "",
              "| scenario | target | measured | met? | margin | load avg | canary |",
              "|---|---|---|---|---|---|---|"]
    for t in doc["targets"]:
        met = {"missed": "**missed**", "unresolved": "*unresolved*"}.get(t.get("status"), t.get("status", "n/a"))
        lines.append(f"| {t['scenario']} | {t['target']} | {t['measured']} | {met} | {t['margin']} | {t['load']} | "
                     f"{t['canary']} |")
    lines += ["", "## How to read these numbers", ""] + [f"- {note}" for note in notes(doc)]
    lines += _every_run(doc)
    lines += ["", "## Plots", ""] + [f"- [{name}]({name})" for name in doc.get("plots", [])] + [""]
    return "\n".join(lines)


def _every_run(doc: dict) -> list[str]:
    """One line per run, in the order they ran: which runs a stall touched."""
    out = ["", "## Every run, in order", "",
           "| round | policy | scenario | kind | p99.9 ms | window p99.9 | stall-free p99.9 | max ms | extra % "
           "| floor % | load avg | canary (stalls, worst ms, stalled buckets) | client GC (collections, worst ms) |",
           "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in doc["runs"]:
        s, m = r["summary"], r["measures"]
        c = m["canary"]
        out.append(f"| {r['rep'] + 1} | {r['policy']} | {r['scenario']} | {r['kind']} | {s['p999_ms']:.1f} | "
                   f"{m['window_p999_ms']:.1f} | {m['clean_p999_ms']:.1f} | {s['max_ms']:.1f} | "
                   f"{s['extra_unit_reads_pct']:.2f} | {m['floor_pct']:.2f} | {r['host']['loadavg_start'][0]:.1f} | "
                   f"{c['verdict']} ({c['stalls']}, {c['worst_ms']:.0f} ms, {m['stall_buckets']}) | {_gc(r['host'])} |")
    return out


def _gc(host: dict) -> str:
    gc = host.get("gc")   # runs before bench/gcwatch.py have none
    return f"{gc['collections']}, {gc['max_ms']:.0f} ms" if gc else "-"


def _checks(doc: dict) -> list[str]:
    out = []
    closed = doc.get("checks", {}).get("closed-loop")
    if closed:
        out += ["", f"## Healthy, {closed['threads']} closed-loop reader threads", "",
                "| policy | run | reads/s | p99.9 ms | hedges | extra % | trips | marked slow | load avg | canary |",
                "|---|---:|---:|---:|---:|---:|---:|---|---:|---|"]
        for r in closed["runs"]:
            out.append(f"| {r['policy']} | {r['run']} | {r['reads_per_s']:.0f} | {r['p999_ms']:.1f} | {r['hedges']} | "
                       f"{r['extra_unit_reads_pct']:.2f} | {r['trips']} | {', '.join(r['marked_slow']) or 'none'} | "
                       f"{r['loadavg']:.1f} | {r['canary']['verdict']} ({r['canary']['worst_ms']:.0f} ms) |")
    cat = doc.get("checks", {}).get("new-client")
    if cat:
        out += ["", f"## A new client reads {cat['bytes'] >> 20} MiB, one DataNode frozen before it starts", "",
                "| policy | frozen | healthy s | frozen s | ratio | canary |", "|---|---|---|---|---:|---|"]
        for policy, r in cat["policies"].items():
            out.append(f"| {policy} | {r['victim']} | {r['healthy_s']} | {r['frozen_s']} | {fmt_range(r['ratio'])} | "
                       f"{', '.join(r['canary'])} |")
    puts = doc.get("checks", {}).get("put")
    if puts:
        out += ["", f"Puts of {puts['bytes'] >> 20} MiB in {puts['policy']} (s): healthy {puts['seconds']['healthy']}, "
                    f"with {puts['frozen']} frozen {puts['seconds']['frozen']}; fsck {puts['fsck']} "
                    f"{puts['fsck_healthy_after_s']} s after the last put."]
    return out


def notes(doc: dict) -> list[str]:
    out = ["Open loop: a read's latency counts from when it was scheduled, so a read queued behind others (in the "
           "client, or on a DataNode) is measured with its wait. Percentiles are upper bounds of ~2 % histogram "
           "buckets. A p99.9 of one run rests on its ~0.1 % slowest reads (about "
           f"{doc['load']['rate'] * doc['load']['duration_s'] / 1000:.0f} of them; a fault window's on fewer): "
           "hence the rounds, and the range beside every median."]
    for r in doc.get("rows", []):
        if r["scenario"] == "slow-500ms" and r["floor_pct"]["median"]:
            out.append(f"{r['policy']}, one DataNode +500 ms: reading around it costs at least "
                       f"{fmt_range(r['floor_pct'], 1)} % extra unit reads (the floor; measured "
                       f"{fmt_range(r['extra_pct'], 1)} %).")
    out.append("The oracle separates detection from the code: fault ratio minus oracle ratio is what judging the "
               "DataNode slow (or waiting for it before it is judged) costs; the oracle's own ratio is the code's "
               "cost (the extra unit reads of a degraded read, on the host's shared cores).")
    out.append("Canary (a separate process sleeping 1 ms, bench/canary.py): quiet = no overshoot of 10 ms in the "
               "run; stalls = some, all under 50 ms; stalled = one of 50 ms or more. A ratio from a stalled run "
               "is the host's as much as the read path's: compare the stall-free column.")
    out.append("Everything (NameNode, 12 DataNodes, the client, and the other engineers' work) shares the host's "
               "2 cores: extra unit reads are CPU every read waits for.")
    return out


if __name__ == "__main__":
    main()
