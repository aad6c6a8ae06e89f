"""`hedgefs bench ...`: the read load generator and the tail-latency suite (bench/)."""

import json
import pathlib

import click

from hedgefs.client.cli import CONTEXT, _Group, cli, hedge_config, hedge_options, namenode_option, open_fs, print_stats
from hedgefs.client.errors import HedgefsError, UsageError


@cli.group(cls=_Group, context_settings=CONTEXT)
def bench() -> None:
    """Benchmarks: read tail latency under load, and the fault-scenario suite.

    \b
    Examples:
      hedgefs bench read /data/big.bin --threads 8 --duration 30
      hedgefs bench read /data/big.bin --reads 10000 --no-hedge --json
      hedgefs bench suite --quick
    """


@bench.command("read", context_settings=CONTEXT)
@click.argument("path")
@click.option("--threads", type=click.IntRange(1, 1024), default=8, show_default=True, help="Concurrent readers.")
@click.option("--duration", "duration_s", type=click.FloatRange(min=0, min_open=True), metavar="S",
              help="Run this many seconds [10 unless --reads].")
@click.option("--reads", type=click.IntRange(1), metavar="N", help="Stop after N reads (instead of --duration).")
@click.option("--read-size", type=click.IntRange(1), default=64 * 1024, show_default=True, metavar="BYTES",
              help="Bytes per read; offsets are random multiples of it.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the readers' offsets.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON line (reads, percentiles, hedges, per DataNode).")
@click.option("--plot", type=click.Path(dir_okay=False), metavar="FILE.png",
              help="Also draw the percentile curve and latency over time (needs matplotlib).")
@hedge_options
@namenode_option
def bench_read(path, threads, duration_s, reads, read_size, seed, as_json, plot, namenode, stats, **hedge) -> None:
    """Random positional reads of PATH from N threads; latency percentiles and hedging counters.

    Latencies go into an HDR-style histogram (~2 % buckets), so percentiles are bucket upper
    bounds. Reads against the cluster HEDGEFS_NAMENODE (or --namenode) names, with the client's
    hedge settings (flags or HEDGEFS_HEDGE_*).

    \b
    Examples:
      hedgefs bench read /bench/data.bin --duration 30 --plot read.png
      hedgefs bench read /bench/data.bin --reads 5000 --hedge-threshold-ms 100 --json
    """
    from hedgefs.bench.read import format_summary, run_read_bench

    if duration_s is not None and reads is not None:
        raise UsageError("give --duration or --reads, not both")
    if duration_s is None and reads is None:
        duration_s = 10.0
    config = hedge_config(hedge)
    with open_fs(namenode, config) as fs:
        run = run_read_bench(fs, path, threads=threads, duration_s=duration_s, reads=reads, read_size=read_size,
                             seed=seed)
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


@bench.command("suite", context_settings=CONTEXT)
@click.option("--quick", is_flag=True, help="Shorter runs (about a third of the time) and a smaller file.")
@click.option("--out", type=click.Path(file_okay=False), help="Results directory [bench/results].")
@click.option("--only", metavar="N[,N...]", help="Run only these scenarios (1-6).")
@click.option("--threads", type=click.IntRange(1, 1024), default=8, show_default=True)
def bench_suite(quick, out, only, threads) -> None:
    """The six fault scenarios of issue 5, hedging off vs on, each on a fresh local cluster.

    Writes <date>-<scenario>.json, PNG plots and <date>-summary.md (the table, targets met or
    missed) to --out. Full suite: ~8 minutes on 2 cores; --quick: ~3.

    \b
    Scenarios: 1 healthy; 2 one DataNode +500 ms; 3 one DataNode 1 % of reads +2 s; 4 one DataNode
    frozen 10 s; 5 four DataNodes +300 ms (breaker); 6 one DataNode killed.
    """
    import sys

    from hedgefs.bench import scenarios

    try:
        numbers = scenarios.parse_only(only)
    except ValueError as err:
        raise UsageError(str(err)) from None
    command = "hedgefs " + " ".join(sys.argv[1:])
    scenarios.run_suite(pathlib.Path(out) if out else scenarios.RESULTS_DIR, quick=quick, only=numbers,
                        threads=threads, command=command, say=lambda s: click.echo(s))
