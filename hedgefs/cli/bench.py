"""`hedgefs bench ...`: the read load generator, the tail-latency suite and the data-path probes (bench/).

The group and the read-path verbs (read, suite, replication) live here; the data-path probes
(distcp, security, codec, transport, throughput) in bench_data.py, and the services (fsspec,
s3, mount: the ways in beside the library; namenode, namenode-scale, namenode-fleet, promotion, failover, meta) in bench_services.py. VERBS registers them all,
explicitly, in the order `hedgefs bench --help` lists them; a module is imported only when one
of its verbs runs (or help lists them all).
"""

import importlib
import json
import pathlib

import click

from hedgefs.cli.common import (
    CONTEXT,
    Group,
    hedge_config,
    hedge_options,
    metrics_port_option,
    namenode_option,
    open_fs,
    print_stats,
    serving_client_metrics,
)
from hedgefs.client.errors import HedgefsError, UsageError

# Each verb's "module:attribute" under hedgefs.cli, in help order.
VERBS = {
    "read": "bench:bench_read",
    "suite": "bench:bench_suite",
    "tail": "bench:bench_tail",
    "replication": "bench:bench_replication",
    "distcp": "bench_data:bench_distcp",
    "security": "bench_data:bench_security",
    "fsspec": "bench_services:bench_fsspec",
    "codec": "bench_data:bench_codec",
    "transport": "bench_data:bench_transport",
    "throughput": "bench_data:bench_throughput",
    "s3": "bench_services:bench_s3",
    "mount": "bench_services:bench_mount",
    "smallfiles": "bench_services:bench_smallfiles",
    "namenode": "bench_services:bench_namenode",
    "namenode-scale": "bench_services:bench_namenode_scale",
    "namenode-fleet": "bench_services:bench_namenode_fleet",
    "promotion": "bench_services:bench_promotion",
    "failover": "bench_services:bench_failover",
    "meta": "bench_services:bench_meta",
}


class _Verbs(Group):
    """The verbs of VERBS, each imported from its module on first use (as hedgefs.cli's RootGroup)."""

    def list_commands(self, ctx):
        return list(VERBS)

    def get_command(self, ctx, name):
        target = VERBS.get(name)
        if target is None:
            return None
        module, attribute = target.split(":")
        return getattr(importlib.import_module(f"hedgefs.cli.{module}"), attribute)


@click.group(cls=_Verbs, context_settings=CONTEXT)
def bench() -> None:
    """Benchmarks: read tail latency under load, and the fault-scenario suite.

    \b
    Examples:
      hedgefs bench read /data/big.bin --rate auto --duration 30
      hedgefs bench read /data/big.bin --reads 10000 --no-hedge --json
      hedgefs bench suite --quick
      hedgefs bench replication       # EC vs replication under the suite's faults
      hedgefs bench security          # what TLS, credentials and block tokens cost
    """


class _Rate(click.ParamType):
    name = "R|auto"

    def convert(self, value, param, ctx):
        if value is None or value == "auto" or isinstance(value, float):
            return value
        try:
            rate = float(value)
        except ValueError:
            rate = 0.0
        if rate <= 0:
            self.fail(f"{value!r}: expected auto or a rate > 0 (reads or pages per second)", param, ctx)
        return rate


@click.command("read", context_settings=CONTEXT)
@click.argument("path")
@click.option("--rate", type=_Rate(), metavar="R|auto",
              help="Open loop: start R reads (pages) per second on a Poisson schedule, whatever is still "
                   "running; latency counts from the scheduled start. auto: half the healthy capacity, "
                   "measured first for 5 s with --threads closed-loop readers. Without it: closed loop.")
@click.option("--threads", type=click.IntRange(1, 1024), default=8, show_default=True,
              help="Closed-loop readers (and, with --rate auto, the readers that measure capacity).")
@click.option("--fanout", type=click.IntRange(1, 1000), default=1, show_default=True, metavar="N",
              help="Pages of N random reads issued together; a page takes as long as its slowest read.")
@click.option("--duration", "duration_s", type=click.FloatRange(min=0, min_open=True), metavar="S",
              help="Run this many seconds [10 unless --reads].")
@click.option("--reads", type=click.IntRange(1), metavar="N", help="Stop after N reads or pages (instead of --duration).")
@click.option("--read-size", type=click.IntRange(1), default=64 * 1024, show_default=True, metavar="BYTES",
              help="Bytes per read; offsets are random multiples of it.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the offsets (and the schedule).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON line (reads, percentiles, hedges, per DataNode).")
@click.option("--plot", type=click.Path(dir_okay=False), metavar="FILE.png",
              help="Also draw the percentile curve and latency over time (needs matplotlib).")
@metrics_port_option
@hedge_options
@namenode_option
def bench_read(path, rate, threads, fanout, duration_s, reads, read_size, seed, as_json, plot, namenode, stats,
               metrics_port, **hedge) -> None:
    """Random positional reads of PATH: latency percentiles, hedges, reads avoided, per DataNode.

    Open loop (--rate) is the honest measure of tail latency: a read queued behind a slow one is
    timed from when it should have started. Latencies go into an HDR-style histogram (~2 %
    buckets), so percentiles are bucket upper bounds. Reads against the cluster
    HEDGEFS_NAMENODE (or --namenode) names, with the client's hedge settings (flags or
    HEDGEFS_HEDGE_*).

    \b
    Examples:
      hedgefs bench read /bench/data.bin --rate auto --duration 30 --plot read.png
      hedgefs bench read /bench/data.bin --rate 400 --hedge-threshold-ms 250 --json   # the old fixed threshold
      hedgefs bench read /bench/data.bin --rate 20 --fanout 20 --duration 30          # 20-read pages
      hedgefs bench read /bench/data.bin --read-size 6291456 --rate 10 --read-extra 1  # late binding
      hedgefs bench read /bench/data.bin --threads 8 --reads 5000                      # closed loop
      hedgefs bench read /bench/data.bin --duration 600 --metrics-port 9101   # scrape hedges live
    """
    from hedgefs.bench.read import format_summary, measure_capacity, run_read_bench

    if duration_s is not None and reads is not None:
        raise UsageError("give --duration or --reads, not both")
    if duration_s is None and reads is None:
        duration_s = 10.0
    config = hedge_config(hedge)
    with serving_client_metrics(metrics_port):
        if rate == "auto":
            with open_fs(namenode, config) as fs:
                try:
                    capacity = measure_capacity(fs, path, threads=threads, read_size=read_size, fanout=fanout)
                except RuntimeError as err:
                    raise HedgefsError(str(err)) from None
            rate = round(capacity / 2, 1)
            click.echo(f"capacity {capacity:.1f}/s with {threads} closed-loop readers: running at {rate:.1f}/s", err=True)
        with open_fs(namenode, config) as fs:
            run = run_read_bench(fs, path, threads=threads, duration_s=duration_s, reads=reads, read_size=read_size,
                                 seed=seed, rate=rate, fanout=fanout)
            if stats:
                print_stats(fs)
    summary = run.summary()
    if as_json:
        click.echo(json.dumps(summary))
    else:
        click.echo(format_summary(summary))
    if plot:
        from hedgefs.bench.plots import run_plot

        try:
            run_plot(run.to_dict(), pathlib.Path(plot), f"hedgefs bench read {path}")
        except RuntimeError as err:
            raise HedgefsError(str(err)) from None
        if not as_json:
            click.echo(f"plot: {plot}")
    if run.errors:
        raise HedgefsError(f"{run.errors} of {run.errors + run.reads} reads failed; first: {run.error_samples[0]}")


@click.command("suite", context_settings=CONTEXT)
@click.option("--quick", is_flag=True, help="Shorter runs (5 s), smaller files, one round: a few minutes.")
@click.option("--reps", type=click.IntRange(min=1), help="Rounds of healthy / fault / oracle runs [3; --quick 1].")
@click.option("--policies", metavar="P[,P...]", help="Only these of RS-6-3-1024k, LRC-6-2-2-1024k, REPLICATE-3.")
@click.option("--out", type=click.Path(file_okay=False), help="Results directory [bench/results].")
@click.option("--name", default="suite", show_default=True, help="Results file stem after the date.")
@click.option("--only", metavar="NAME[,NAME...]", help="Run only these scenarios and checks.")
def bench_suite(quick, reps, policies, out, name, only) -> None:
    """The tail-latency suite: RS vs LRC vs replication, each fault beside healthy and oracle runs.

    One local cluster of 12 DataNodes, one file per policy. Healthy capacity measured first,
    then every run open loop at a third of it. Each round runs, per policy and scenario, a
    healthy run, the fault run and an oracle run (the faulty DataNode left out from the first
    read of the fault window: the best any detection could do); rounds repeat (3) and every
    ratio is the median of the rounds with its range. A canary process flags host stalls per
    run; the slowest reads are broken down into queue wait, unit reads and decode; each fault
    row's extra unit reads stand beside their arithmetic floor. Writes <date>-<name>.json, PNG
    plots and <date>-<name>-summary.md (rows, issue 25's targets met or missed, load average and
    canary verdict per row) to --out. About 35 minutes; --quick about 5.

    \b
    Scenarios: slow-500ms, tail-1pct-2s, frozen-10s, cpu-hog, fanout-slow-500ms (EC policies),
    broad-4x300ms (only with --only). Checks: closed-loop (4 reader threads, healthy),
    new-client (24 MiB, one DataNode frozen before the client starts), put (only with --only).

    \b
    Examples:
      hedgefs bench suite
      hedgefs bench suite --quick --only slow-500ms,frozen-10s --policies LRC-6-2-2-1024k --out /tmp/bench
    """
    import sys

    from hedgefs.bench import scenarios

    try:
        names = scenarios.parse_only(only)
        chosen = scenarios.parse_policies(policies)
    except ValueError as err:
        raise UsageError(str(err)) from None
    command = "hedgefs " + " ".join(sys.argv[1:])
    scenarios.run_suite(pathlib.Path(out) if out else scenarios.RESULTS_DIR, quick=quick, only=names, policies=chosen,
                        reps=reps, name=name, command=command, say=lambda s: click.echo(s))


@click.command("tail", context_settings=CONTEXT)
@click.option("--quick", is_flag=True, help="4 rounds of 1.25 s arms, 32 MiB files: about 5 minutes.")
@click.option("--rounds", type=click.IntRange(min=2), help="Rounds [20; --quick 4].")
@click.option("--policies", metavar="P[,P...]", help="Only these of RS-6-3-1024k, LRC-6-2-2-1024k, REPLICATE-3.")
@click.option("--faults", metavar="F[,F...]", help="Only these of slow-500ms, frozen, tail-1pct-2s.")
@click.option("--out", type=click.Path(file_okay=False), help="Results directory [bench/results].")
@click.option("--name", default="tail", show_default=True, help="Results file stem after the date.")
def bench_tail(quick, rounds, policies, faults, out, name) -> None:
    """Tail claims this host can decide: hedged reads against the oracle, with intervals.

    Five arms in one cluster, switched without restarts: healthy without hedging (H0) and with
    (H); one DataNode faulty without hedging (S0), with (S), and the oracle (O: the faulty
    DataNode left out from every read's first try). Faults: +500 ms, frozen, 1 % +2 s; policies
    RS-6-3, LRC-6-2-2, REPLICATE-3. This process (load and clients) on one CPU, the servers on
    the other; hiccup meters in both; 20 rounds, blocks and arms in a new order each round,
    open loop. Prints every row with its 95 % block-bootstrap interval and verdict (met,
    missed, unresolved); writes <date>-<name>.json.gz and <date>-<name>-summary.md to --out.
    About 38 minutes; --quick about 5.

    \b
    Examples:
      hedgefs bench tail
      hedgefs bench tail --quick --policies LRC-6-2-2-1024k --faults slow-500ms --out /tmp/bench
    """
    import dataclasses
    import sys

    from hedgefs.bench import tail

    try:
        chosen = tail.parse_names(policies, list(tail.POLICIES), "policy")
        fault_names = tail.parse_names(faults, [f.name for f in tail.FAULTS], "fault")
    except ValueError as err:
        raise UsageError(str(err)) from None
    settings = tail.QUICK if quick else tail.FULL
    if rounds:
        settings = dataclasses.replace(settings, rounds=rounds)
    command = "hedgefs " + " ".join(sys.argv[1:])
    tail.run_tail(pathlib.Path(out) if out else tail.RESULTS_DIR, settings, chosen,
                  [f for f in tail.FAULTS if fault_names is None or f.name in fault_names], name, command=command,
                  say=lambda s: click.echo(s))


@click.command("replication", context_settings=CONTEXT)
@click.option("--quick", is_flag=True, help="Runs of 10 s and a 96 MiB file (about 8 minutes).")
@click.option("--rate", type=_Rate(), default="auto", show_default=True, metavar="R|auto",
              help="Open-loop reads per second; auto: a third of the healthy capacity of the slower file.")
@click.option("--out", type=click.Path(file_okay=False), help="Results directory [bench/results].")
def bench_replication(quick, rate, out) -> None:
    """EC vs replication on one cluster: REPLICATE-3 beside RS-6-3-1024k under the suite's faults.

    The same 192 MiB as both files on 10 DataNodes; healthy, one DataNode +500 ms, one DataNode
    1 % +2 s, one frozen 10 s, one killed; each file with hedging off and on (the defaults), open
    loop, 30 s per run. Reports p50/p99/p99.9/max, extra reads, hedges and wins, and disk bytes
    per file byte. Writes <date>-ec-vs-replication.json, .md and -overview.png to --out. About
    15 minutes on 2 quiet cores.

    \b
    Examples:
      hedgefs bench replication
      hedgefs bench replication --quick --rate 200 --out /tmp/bench
    """
    import sys

    from hedgefs.bench import replication
    from hedgefs.bench.scenarios import RESULTS_DIR

    command = "hedgefs " + " ".join(sys.argv[1:])
    replication.run_comparison(pathlib.Path(out) if out else RESULTS_DIR, quick=quick,
                               rate=None if rate == "auto" else rate, command=command, say=lambda s: click.echo(s))
