"""`hedgefs bench ...`: the read load generator, the tail-latency suite and the data-path probes (bench/)."""

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
from hedgefs.bench.namenode import OPS as NAMENODE_OPS
from hedgefs.client.errors import HedgefsError, UsageError


@click.group(cls=Group, context_settings=CONTEXT)
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


@bench.command("read", context_settings=CONTEXT)
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


@bench.command("suite", context_settings=CONTEXT)
@click.option("--quick", is_flag=True, help="Shorter runs (12 s), a smaller file and puts.")
@click.option("--out", type=click.Path(file_okay=False), help="Results directory [bench/results].")
@click.option("--only", metavar="NAME[,NAME...]", help="Run only these scenarios (and healthy, the baseline).")
def bench_suite(quick, out, only) -> None:
    """The tail-latency suite: open-loop reads through fault scenarios, adaptive vs static hedging.

    One local cluster; healthy capacity measured first, then every run open loop at half of it,
    each scenario with the default (adaptive) settings and with a fixed 250 ms threshold. Every
    p99.9 is a ratio to the healthy one of the same suite. Writes <date>-adaptive.json, PNG plots
    and <date>-adaptive-summary.md (ratios, targets met or missed, load average) to --out.
    About 15 minutes on 2 quiet cores; --quick about 7.

    \b
    Scenarios: healthy, cpu-hog, slow-500ms, tail-1pct-2s, frozen-10s, broad-4x300ms,
    fanout-healthy, fanout-slow-500ms, stripes-healthy, stripes-tail-1pct-2s (late binding),
    put (256 MiB, one DataNode frozen).

    \b
    Examples:
      hedgefs bench suite
      hedgefs bench suite --quick --only slow-500ms,frozen-10s --out /tmp/bench
    """
    import sys

    from hedgefs.bench import scenarios

    try:
        names = scenarios.parse_only(only)
    except ValueError as err:
        raise UsageError(str(err)) from None
    command = "hedgefs " + " ".join(sys.argv[1:])
    scenarios.run_suite(pathlib.Path(out) if out else scenarios.RESULTS_DIR, quick=quick, only=names,
                        command=command, say=lambda s: click.echo(s))


@bench.command("replication", context_settings=CONTEXT)
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


@bench.command("distcp", context_settings=CONTEXT)
@click.option("--segments", type=click.IntRange(10), default=200, show_default=True,
              help="Segments of 5.25 MiB (200: a 1.03 GiB file).")
@click.option("--delay-ms", type=click.IntRange(0), default=30_000, show_default=True,
              help="Delay of the slow source DataNode's slowed reads.")
@click.option("--probability", type=click.FloatRange(0, 1), default=0.01, show_default=True,
              help="Share of that DataNode's reads slowed.")
@click.option("--workers", type=click.IntRange(1, 256), default=8, show_default=True, help="Segments copied at once.")
@click.option("--out", type=click.Path(file_okay=False), help="Results directory [bench/results].")
def bench_distcp(segments, delay_ms, probability, workers, out) -> None:
    """distcp between two local clusters with a straggler: healthy, hedging off, hedging on.

    One source DataNode answers --probability of its reads --delay-ms late (1 % +30 s by default).
    Writes <date>-distcp.json (every segment's copies) and <date>-distcp-gantt.png. ~3 minutes.

    \b
    Examples:
      hedgefs bench distcp
      hedgefs bench distcp --delay-ms 5000 --probability 0.05
    """
    import sys

    from hedgefs.bench import distcp as bench_distcp_module
    from hedgefs.bench.scenarios import RESULTS_DIR

    command = "hedgefs " + " ".join(sys.argv[1:])
    result = bench_distcp_module.run(pathlib.Path(out) if out else RESULTS_DIR, segments=segments, delay_ms=delay_ms,
                                     probability=probability, workers=workers, command=command,
                                     say=lambda s: click.echo(s))
    click.echo("ratio to healthy: " + ", ".join(f"{k} {v:.2f}" for k, v in result["ratio_to_healthy"].items()))


@bench.command("security", context_settings=CONTEXT)
@click.option("--size", type=click.IntRange(1 << 20), default=128 << 20, show_default=True, metavar="BYTES",
              help="File size for put, get and cat.")
@click.option("--read-seconds", type=click.FloatRange(min=1), default=15.0, show_default=True,
              help="Length of each bench read run.")
@click.option("--threads", type=click.IntRange(1, 1024), default=8, show_default=True, help="bench read threads.")
@click.option("--rounds", type=click.IntRange(1, 20), default=2, show_default=True,
              help="Rounds of insecure, secure, secure, insecure.")
@click.option("--out", type=click.Path(file_okay=False), help="Results directory [bench/results].")
def bench_security(size, read_seconds, threads, rounds, out) -> None:
    """bench throughput and bench read on a secure cluster beside an insecure one, in one run.

    Two local clusters side by side; runs alternate insecure, secure, secure, insecure (--rounds
    times); each figure is a mode's median and its ratio secure / insecure (TLS, checked calls,
    block tokens), beside a socket probe plain and in TLS. Writes <date>-security.json and .md.
    About 4 minutes.

    \b
    Examples:
      hedgefs bench security --rounds 1 --read-seconds 5
    """
    import sys

    from hedgefs.bench import security
    from hedgefs.bench.scenarios import RESULTS_DIR

    command = "hedgefs " + " ".join(sys.argv[1:])
    result = security.run(pathlib.Path(out) if out else RESULTS_DIR, size=size, read_s=read_seconds,
                          threads=threads, rounds=rounds, command=command, say=lambda s: click.echo(s))
    click.echo(security.markdown(result))


@bench.command("fsspec", context_settings=CONTEXT)
@click.option("--size", type=click.IntRange(1 << 20), default=256 << 20, show_default=True, metavar="BYTES",
              help="Parquet file size (20 float64 columns, 16 row groups).")
@click.option("--runs", type=click.IntRange(1, 20), default=3, show_default=True, help="Timed runs per measure.")
@click.option("--out", type=click.Path(file_okay=False), help="Results directory [bench/results].")
def bench_fsspec(size, runs, out) -> None:
    """pandas read_parquet through hedgefs:// vs local disk, a selective pyarrow read, a slow DataNode.

    One local cluster; the same parquet file on local disk and in hedgefs. Writes
    <date>-fsspec.json and .md (bench/pydata.py). About 2 minutes.

    \b
    Examples:
      hedgefs bench fsspec
      hedgefs bench fsspec --size 67108864 --runs 1 --out /tmp/fsspec-results
    """
    import sys

    from hedgefs.bench import pydata
    from hedgefs.bench.scenarios import RESULTS_DIR

    command = "hedgefs " + " ".join(sys.argv[1:])
    result = pydata.run(pathlib.Path(out) if out else RESULTS_DIR, size=size, runs=runs, command=command,
                        say=lambda s: click.echo(s))
    click.echo("ratios: " + ", ".join(f"{k} {v}" for k, v in result["ratios"].items()))


# ---------------------------------------------------------------------------- data path (bench/)

@bench.command("codec", context_settings=CONTEXT)
@click.option("--cell-size", type=click.IntRange(1), default=1 << 20, show_default=True, metavar="BYTES")
@click.option("--seconds", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="Per measurement.")
@click.option("--json", "as_json", is_flag=True, help="One JSON line per backend.")
def bench_codec(cell_size: int, seconds: float, as_json: bool) -> None:
    """Encode, decode-1 and decode-3 MB/s of RS(6,3) per codec backend, on one core.

    \b
    Examples:
      hedgefs bench codec --json
    """
    from hedgefs.bench.codec import run_codec_bench
    from hedgefs.ec.codec import default_backend

    rows = run_codec_bench(cell_size=cell_size, seconds=seconds)
    if as_json:
        for row in rows:
            click.echo(json.dumps({key: row[key] for key in ("backend", "encode_mb_s", "decode1_mb_s", "decode3_mb_s")}))
        return
    click.echo(f"RS(6,3), {cell_size} B cells, MB/s of data (10^6 B); in use: {default_backend()}")
    click.echo(f"{'backend':<8} {'encode':>10} {'decode-1':>10} {'decode-3':>10}")
    for row in rows:
        click.echo(f"{row['backend']:<8} {row['encode_mb_s']:>10.1f} {row['decode1_mb_s']:>10.1f} {row['decode3_mb_s']:>10.1f}")


@bench.command("transport", context_settings=CONTEXT)
@click.option("--size", type=click.IntRange(1 << 20), default=256 << 20, show_default=True, metavar="BYTES")
@click.option("--streams", type=click.IntRange(1, 64), default=6, show_default=True, help="Concurrent streams (a stripe reads 6).")
@click.option("--json", "as_json", is_flag=True, help="One JSON line.")
def bench_transport(size, streams, as_json) -> None:
    """The machine's limit: sendfile -> recv_into between two processes on loopback, no hedgefs code.

    \b
    Examples:
      hedgefs bench transport --size 268435456 --streams 6
    """
    import tempfile

    from hedgefs.bench.throughput import write_random_file
    from hedgefs.bench.transport import run_socket_probe

    with tempfile.TemporaryDirectory(prefix="hedgefs-probe-") as tmp:
        path = f"{tmp}/probe.bin"
        write_random_file(path, size)
        result = run_socket_probe(path, size, streams)
    if as_json:
        click.echo(json.dumps(result))
        return
    for n, row in result["streams"].items():
        click.echo(f"{n} stream(s): download {row['download_mb_s']:.0f} MB/s ({row['download_cpu_s_per_gib']:.2f} "
                   f"client CPU s/GiB), upload {row['upload_mb_s']:.0f} MB/s ({row['upload_cpu_s_per_gib']:.2f})")


@bench.command("throughput", context_settings=CONTEXT)
@click.option("--size", type=click.IntRange(1 << 20), default=256 << 20, show_default=True, metavar="BYTES",
              help="File size for put, get and cat.")
@click.option("--rss-size", type=click.IntRange(0), default=1 << 30, show_default=True, metavar="BYTES",
              help="File size for the peak-RSS put and get (0 skips them).")
@click.option("--streams", type=click.IntRange(1, 64), default=6, show_default=True, help="Streams of the socket probe.")
@click.option("--reads", type=click.IntRange(1), default=2000, show_default=True, help="64 KiB random reads (one thread).")
@click.option("--json", "as_json", is_flag=True, help="One JSON line.")
@namenode_option
def bench_throughput(size, rss_size, streams, reads, as_json, namenode) -> None:
    """put / get / cat through the CLI's code path beside the socket probe, in one run.

    Reports MB/s, the ratio to the probe, the client's CPU seconds per GiB, 64 KiB random-read
    p50/p99 (one thread), the start-up of `hedgefs cat` on a 1-byte file, peak client RSS of a
    1 GiB put and get, and the load average. Each transfer runs in a child process that times the
    command itself (not Python's start-up).

    \b
    Examples:
      hedgefs cluster up && hedgefs bench throughput
      hedgefs bench throughput --size 67108864 --rss-size 0 --json
    """
    from hedgefs.bench.throughput import format_result, run_throughput_bench
    from hedgefs.cli.common import client_credentials
    from hedgefs.client.fs import namenode_address

    credential = client_credentials()
    try:
        result = run_throughput_bench(namenode_address(namenode), size=size, rss_size=rss_size, streams=streams,
                                      reads=reads, credentials=credential.path if credential else None)
    except RuntimeError as err:
        raise HedgefsError(str(err)) from None
    click.echo(json.dumps(result) if as_json else format_result(result))


@bench.command("s3", context_settings=CONTEXT)
@click.option("--size", type=click.IntRange(8 << 20), default=256 << 20, show_default=True, metavar="BYTES",
              help="Object size for the GET and PUT.")
@click.option("--rss-size", type=click.IntRange(0), default=1 << 30, show_default=True, metavar="BYTES",
              help="Object size for the gateway's peak memory (0 skips it).")
@click.option("--clients", type=click.IntRange(1, 64), default=4, show_default=True, help="Ranged-GET clients.")
@click.option("--reads", type=click.IntRange(10), default=500, show_default=True, help="Ranged GETs per client per run.")
@click.option("--delay-ms", type=click.IntRange(1), default=500, show_default=True, help="The slow DataNode's delay.")
@click.option("--out", type=click.Path(file_okay=False), help="Results directory [bench/results].")
def bench_s3(size, rss_size, clients, reads, delay_ms, out) -> None:
    """The S3 gateway beside the library in one run: GET vs cat, PUT vs put, ranged GETs vs pread.

    Starts its own local cluster and gateway; writes <date>-s3.json and .md. A few minutes.

    \b
    Examples:
      hedgefs bench s3
      hedgefs bench s3 --size 67108864 --rss-size 0 --clients 2 --out /tmp/s3-results
    """
    import sys

    from hedgefs.bench import s3
    from hedgefs.bench.scenarios import RESULTS_DIR

    command = "hedgefs " + " ".join(sys.argv[1:])
    result = s3.run(pathlib.Path(out) if out else RESULTS_DIR, size=size, rss_size=rss_size, clients=clients,
                    reads=reads, delay_ms=delay_ms, command=command, say=lambda s: click.echo(s, err=True))
    click.echo(s3.markdown(result))
@bench.command("mount", context_settings=CONTEXT)
@click.option("--size", type=click.IntRange(1, 4096), default=256, show_default=True, metavar="MIB",
              help="The big file, read sequentially and at random.")
@click.option("--reads", type=click.IntRange(10), default=1000, show_default=True,
              help="64 KiB random reads per run (4 threads: half as many each).")
@click.option("--no-gluster", is_flag=True, help="Skip GlusterFS (compare with the hedgefs CLI only).")
@click.option("--out", type=click.Path(file_okay=False), help="Results directory [bench/results].")
def bench_mount(size, reads, no_gluster, out) -> None:
    """`hedgefs mount` beside a GlusterFS disperse 6+3 FUSE mount and the hedgefs CLI, one run.

    Starts a local cluster and mounts it; starts a 9-brick GlusterFS volume here (needs root and
    Debian's glusterfs-server; otherwise its rows say why not). cat of a 1-byte file, 64 KiB
    O_DIRECT random reads (1 and 4 threads), a sequential read with the page cache dropped, and
    reads with one server frozen. Writes <date>-mount.json and <date>-mount.md to --out.
    About 5 minutes (GlusterFS's frozen brick: up to 2 more).

    \b
    Examples:
      hedgefs bench mount
      hedgefs bench mount --size 64 --reads 300 --no-gluster --out /tmp/bench
    """
    from hedgefs.bench import mount as mount_bench

    result = mount_bench.run_mount_bench(size=size << 20, reads=reads, gluster=not no_gluster,
                                         log=lambda s: click.echo(s, err=True))
    result["command"] = "hedgefs bench mount" + (f" --size {size}" if size != 256 else "") + \
        (f" --reads {reads}" if reads != 1000 else "") + (" --no-gluster" if no_gluster else "")
    base = mount_bench.save(result, out or str(pathlib.Path(mount_bench.__file__).parent / "results"))
    click.echo(mount_bench.format_result(result))
    click.echo(f"wrote {base}.json and {base}.md", err=True)
@bench.command("namenode", context_settings=CONTEXT)
@click.option("--threads", default="1,4,16", show_default=True, metavar="N[,N...]", help="Client thread counts.")
@click.option("--ops", type=click.IntRange(1), default=1000, show_default=True,
              help="Operations per run of an (operation, thread count).")
@click.option("--reps", type=click.IntRange(1), default=3, show_default=True,
              help="Runs per build of each (operation, thread count), the builds alternating run by run.")
@click.option("--only", default=",".join(NAMENODE_OPS), show_default=True, metavar="OP[,OP...]", help="Operations to run.")
@click.option("--baseline", metavar="COMMIT", help="Also run this commit of the repository, checked out beside it "
              "(a git worktree), in the same run: every ratio is to it.")
@click.option("--modes", default="inprocess,rpc", show_default=True, metavar="MODE[,MODE]",
              help="inprocess (the namesystem, no RPC) and/or rpc (a server process, a client process).")
@click.option("--out", type=click.Path(file_okay=False, path_type=pathlib.Path), metavar="DIR",
              help="Write NAME.json, NAME.txt (the table) and NAME.png here.")
@click.option("--name", default="namenode", show_default=True, help="File name stem under --out.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document instead of the table.")
def bench_namenode(threads, ops, reps, only, baseline, modes, out, name, as_json) -> None:
    """The NameNode's throughput, after HDFS's NNThroughputBenchmark (bench/namenode.py).

    create0 (0-byte file), create1 (one block group), mkdirs, stat, list, rename, delete,
    blockReport and heartbeat of simulated DataNodes, and a no-op RPC (GetPolicy /), each with N
    closed-loop threads: in-process against the namesystem and over gRPC from a separate client
    process. ops/s, p50 and p99 per operation.

    \b
    Examples:
      hedgefs bench namenode --baseline 5461c2d --out bench/results --name 2026-12-01-namenode
      hedgefs bench namenode --only create0,stat,noop --threads 16 --modes rpc
    """
    import sys

    from hedgefs.bench.namenode_run import format_table, plot, run

    try:
        thread_counts = [int(t) for t in threads.split(",") if t]
    except ValueError:
        raise UsageError(f"--threads {threads!r}: expected numbers separated by commas") from None
    if not thread_counts or min(thread_counts) < 1 or max(thread_counts) > 256:
        raise UsageError(f"--threads {threads!r}: each count must be 1..256")
    ops_list = [o for o in only.split(",") if o]
    bad = [o for o in ops_list if o not in NAMENODE_OPS]
    if bad or not ops_list:
        raise UsageError(f"--only: unknown operation(s) {', '.join(bad) or '(none given)'}; "
                         f"expected some of {', '.join(NAMENODE_OPS)}")
    mode_list = [m for m in modes.split(",") if m]
    if not mode_list or any(m not in ("inprocess", "rpc") for m in mode_list):
        raise UsageError(f"--modes {modes!r}: expected inprocess and/or rpc")
    command = "hedgefs " + " ".join(sys.argv[1:])
    try:
        doc = run(threads=thread_counts, ops=ops, only=ops_list, baseline=baseline, modes=mode_list, reps=reps,
                  command=command, say=(lambda s: click.echo(s, err=True)))
    except RuntimeError as err:
        raise HedgefsError(str(err)) from None
    table = format_table(doc)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
        (out / f"{name}.txt").write_text(table + "\n")
        plot(doc, out / f"{name}.png")
    click.echo(json.dumps(doc) if as_json else table)


@bench.command("namenode-scale", context_settings=CONTEXT)
@click.option("--files", type=click.IntRange(1000), default=1_000_000, show_default=True,
              help="Files of one group (3 units) to generate.")
@click.option("--baseline", metavar="COMMIT", help="Also measure this commit, on a copy of the same namespace.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=pathlib.Path), metavar="FILE.json",
              help="Write the JSON document here.")
def bench_namenode_scale(files, baseline, out) -> None:
    """One NameNode holding a large namespace (bench/namenode_scale.py): start-up, memory per
    file, a full block report of FILES units and stat latency meanwhile, 1,000 DataNodes'
    heartbeats, a monitor pass, fsck, ls -R and the status page.

    \b
    Examples:
      hedgefs bench namenode-scale --files 1000000 --baseline 5461c2d --out bench/results/scale.json
    """
    import sys

    from hedgefs.bench.namenode_scale import run

    command = "hedgefs " + " ".join(sys.argv[1:])
    try:
        doc = run(files=files, baseline=baseline, command=command, say=lambda s: click.echo(s, err=True))
    except RuntimeError as err:
        raise HedgefsError(str(err)) from None
    if out is not None:
        out.write_text(json.dumps(doc, indent=1) + "\n")
    click.echo(json.dumps(doc))


@bench.command("namenode-fleet", context_settings=CONTEXT)
@click.option("--datanodes", type=click.IntRange(1, 100_000), default=1000, show_default=True)
@click.option("--interval", "interval_s", type=click.FloatRange(0.1), default=3.0, show_default=True,
              help="Heartbeat interval of each simulated DataNode, seconds.")
@click.option("--seconds", type=click.FloatRange(1), default=30.0, show_default=True, help="How long the fleet runs.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=pathlib.Path), metavar="FILE.json")
def bench_namenode_fleet(datanodes, interval_s, seconds, out) -> None:
    """A simulated fleet of DataNodes (real RegisterDataNode and Heartbeat RPCs, one process)
    against a NameNode process, and a client's stat p99 with and without it (bench/namenode_fleet.py).

    \b
    Examples:
      hedgefs bench namenode-fleet --datanodes 1000 --interval 3 --seconds 30
    """
    import sys

    from hedgefs.bench.namenode_fleet import run

    command = "hedgefs " + " ".join(sys.argv[1:])
    try:
        doc = run(datanodes=datanodes, interval=interval_s, seconds=seconds, command=command,
                  say=lambda s: click.echo(s, err=True))
    except RuntimeError as err:
        raise HedgefsError(str(err)) from None
    if out is not None:
        out.write_text(json.dumps(doc, indent=1) + "\n")
    click.echo(json.dumps({k: v for k, v in doc.items() if k not in ("stat_with", "stat_without")}))
