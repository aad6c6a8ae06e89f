"""`hedgefs bench` verbs of the services: the ways in beside the library (fsspec and pandas, the
S3 gateway, the FUSE mount) and the NameNode's operations and scale (bench/). Registered in
cli/bench.py.
"""

import json
import pathlib

import click

from hedgefs.bench.namenode import OPS as NAMENODE_OPS
from hedgefs.cli.common import CONTEXT
from hedgefs.client.errors import HedgefsError, UsageError


@click.command("fsspec", context_settings=CONTEXT)
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


@click.command("s3", context_settings=CONTEXT)
@click.option("--size", type=click.IntRange(8 << 20), default=256 << 20, show_default=True, metavar="BYTES",
              help="Object size for the GET and PUT.")
@click.option("--rss-size", type=click.IntRange(0), default=1 << 30, show_default=True, metavar="BYTES",
              help="Object size for the gateway's peak memory (0 skips it).")
@click.option("--clients", type=click.IntRange(1, 64), default=4, show_default=True, help="Ranged-GET clients.")
@click.option("--reads", type=click.IntRange(10), default=500, show_default=True, help="Ranged GETs per client per run.")
@click.option("--delay-ms", type=click.IntRange(1), default=500, show_default=True, help="The slow DataNode's delay.")
@click.option("--rounds", type=click.IntRange(1), default=3, show_default=True,
              help="Rounds of whole PUTs and GETs (medians).")
@click.option("--baseline", default="", metavar="COMMIT",
              help="Run that commit's gateway beside this one's on the same cluster, A B then B A round by round.")
@click.option("--transfers-only", is_flag=True, help="Whole PUTs and GETs only: no frozen DataNode, ranged GETs, memory.")
@click.option("--out", type=click.Path(file_okay=False), help="Results directory [bench/results].")
def bench_s3(size, rss_size, clients, reads, delay_ms, rounds, baseline, transfers_only, out) -> None:
    """The S3 gateway beside the library in one run: GET vs cat, PUT vs put, ranged GETs vs pread.

    Starts its own local cluster and gateway; writes <date>-s3.json and .md. A few minutes.

    \b
    Examples:
      hedgefs bench s3
      hedgefs bench s3 --size 67108864 --rss-size 0 --clients 2 --out /tmp/s3-results
      flock /work/heavy.lock hedgefs bench s3 --baseline main --rounds 4 --transfers-only
    """
    import sys

    from hedgefs.bench import s3
    from hedgefs.bench.scenarios import RESULTS_DIR

    command = "hedgefs " + " ".join(sys.argv[1:])
    result = s3.run(pathlib.Path(out) if out else RESULTS_DIR, size=size, rss_size=rss_size, clients=clients,
                    reads=reads, delay_ms=delay_ms, rounds=rounds, baseline=baseline or None,
                    transfers_only=transfers_only, command=command, say=lambda s: click.echo(s, err=True))
    click.echo(s3.markdown(result))


@click.command("mount", context_settings=CONTEXT)
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


@click.command("smallfiles", context_settings=CONTEXT)
@click.option("--files", type=click.IntRange(20), default=3200, show_default=True, help="Files in the tree.")
@click.option("--baseline", default="main", show_default=True, metavar="COMMIT",
              help="The build to compare with, checked out beside this one (a git worktree); '' for none.")
@click.option("--threads", type=click.IntRange(1, 256), default=16, show_default=True,
              help="Threads of the library rows and of put -r.")
@click.option("--no-gluster", is_flag=True, help="Skip GlusterFS.")
@click.option("--no-s3", is_flag=True, help="Skip aws s3 sync to the gateways.")
@click.option("--rows", default=",".join(("library", "put", "s3", "mount")), show_default=True, metavar="ROW[,ROW]",
              help="Which rows: library (creates, stats, RPCs per put), put (put -r, also in REPLICATE-3), "
                   "s3 (aws s3 sync), mount (tar x, ls -lR, grep -r, rm -rf).")
@click.option("--out", type=click.Path(file_okay=False), help="Results directory [bench/results].")
def bench_smallfiles(files, baseline, threads, no_gluster, no_s3, rows, out) -> None:
    """Many small files (issue 44): a tree of a source tree's size mix, every measure beside its
    baselines in one run, A B B A.

    This build's cluster and mount, the baseline commit's (its own cluster and mount), a GlusterFS
    disperse 6+3 FUSE mount (needs root and Debian's glusterfs-server; else its column says why
    not) and the local disk: `tar x` of the tree into each, `grep -r` over it, `rm -rf` of it;
    `hedgefs put -r` and `aws s3 sync` (to each build's S3 gateway) of the tree; creates of empty
    files and stats through the library with --threads threads; NameNode RPCs per one-group put.
    Writes <date>-smallfiles.json and .md to --out. About 15 minutes with the defaults.

    \b
    Examples:
      flock /work/heavy.lock hedgefs bench smallfiles
      hedgefs bench smallfiles --files 300 --baseline '' --no-gluster --no-s3 --out /tmp/sf
    """
    import sys

    from hedgefs.bench import smallfiles

    chosen = tuple(r.strip() for r in rows.split(",") if r.strip())
    unknown = [r for r in chosen if r not in smallfiles.ROWS]
    if unknown or not chosen:
        raise click.UsageError(f"--rows: {', '.join(unknown) or 'none given'}; choose from {', '.join(smallfiles.ROWS)}")
    result = smallfiles.run(files=files, baseline=baseline or None, gluster=not no_gluster, s3=not no_s3,
                            threads=threads, rows=chosen, log=lambda s: click.echo(s, err=True))
    result["command"] = "hedgefs " + " ".join(sys.argv[1:])
    base = smallfiles.save(result, out or str(pathlib.Path(smallfiles.__file__).parent / "results"))
    click.echo(smallfiles.markdown(result))
    click.echo(f"wrote {base}.json and {base}.md", err=True)


@click.command("namenode", context_settings=CONTEXT)
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


@click.command("namenode-scale", context_settings=CONTEXT)
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


@click.command("promotion", context_settings=CONTEXT)
@click.option("--files", type=click.IntRange(1000), default=1_000_000, show_default=True,
              help="Files of one group in the namespace both NameNodes load.")
@click.option("--reps", type=click.IntRange(0), default=10, show_default=True, help="Handovers (Failover calls).")
@click.option("--kills", type=click.IntRange(0), default=3, show_default=True, help="kill -9s of the active.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=pathlib.Path), metavar="FILE.json",
              help="Write the JSON document here.")
def bench_promotion(files, reps, kills, out) -> None:
    """How long a hot standby takes to serve writes once it has won the lease, with FILES files
    (bench/promotion.py): 3 etcd members, 2 NameNodes on one prefix, 8 writer threads; per
    handover the new active's promotion (lease won to first change durable, from its log) and
    the writers' unwritable time (Failover call or kill to the first acknowledged write).

    \b
    Examples:
      hedgefs bench promotion --files 1000000 --reps 10 --kills 3 --out bench/results/promotion.json
    """
    import sys

    from hedgefs.bench.promotion import run

    command = "hedgefs " + " ".join(sys.argv[1:])
    try:
        doc = run(files=files, reps=reps, kills=kills, command=command, say=lambda s: click.echo(s, err=True))
    except RuntimeError as err:
        raise HedgefsError(str(err)) from None
    if out is not None:
        out.write_text(json.dumps(doc, indent=1) + "\n")
    click.echo(json.dumps(doc))


@click.command("namenode-fleet", context_settings=CONTEXT)
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


@click.command("failover", context_settings=CONTEXT)
@click.option("--mode", type=click.Choice(["namenode-kill", "etcd-leader", "reads", "cpu-hog", "timeline"]), default="namenode-kill",
              show_default=True, help="namenode-kill: kill -9 of the active and graceful handovers (bench/failover.py); "
              "etcd-leader: kill -9 of etcd's leader member, the longest write stall; cpu-hog: false failovers "
              "with a busy loop per core (bench/failover_faults.py); reads: reads of open files during kill -9s "
              "of the active against windows without (bench/failover_reads.py); timeline: writes/s and read latency "
              "per 100 ms around each kill -9, JSON and a PNG (bench/failover_timeline.py).")
@click.option("--reps", type=click.IntRange(1, 1000), default=None,
              help="Kills per run  [default: 10 namenode-kill, 5 etcd-leader and reads, 3 timeline].")
@click.option("--graceful-reps", type=click.IntRange(0, 1000), default=5, show_default=True,
              help="hedgefs admin failover repetitions (namenode-kill).")
@click.option("--lease-ttl-s", type=click.IntRange(2, 60), default=3, show_default=True)
@click.option("--seconds", type=click.FloatRange(1, 7200), default=600, show_default=True,
              help="How long the CPU hogs run (cpu-hog).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=pathlib.Path), metavar="FILE.json")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=pathlib.Path), metavar="FILE.png",
              help="The timeline's PNG (timeline) [default: beside --out, .png].")
def bench_failover(mode, reps, graceful_reps, lease_ttl_s, seconds, out, plot) -> None:
    """NameNode failover on 3 etcd members and 2 NameNodes (real processes). Default: kill -9 of
    the active NameNode (and graceful handovers) under a write load, the time to the first write
    acknowledged by the new active, and that no acknowledged write is lost. Needs etcd on PATH.

    \b
    Examples:
      hedgefs bench failover --reps 10 --out bench/results/failover.json
      hedgefs bench failover --mode etcd-leader --reps 5
      hedgefs bench failover --mode reads --reps 5
      hedgefs bench failover --mode cpu-hog --seconds 600
      hedgefs bench failover --mode timeline --reps 3 --out bench/results/failover-timeline.json
    """
    import sys

    from hedgefs.cluster.etcd import EtcdMissing

    if plot is not None and mode != "timeline":
        raise UsageError(f"--plot is for --mode timeline, not {mode}")
    if mode == "timeline" and plot is None and out is not None:
        plot = out.with_suffix(".png")
    command = "hedgefs " + " ".join(sys.argv[1:])
    say = lambda s: click.echo(s, err=True)
    try:
        if mode == "namenode-kill":
            from hedgefs.bench.failover import run

            doc = run(reps=reps or 10, ttl_s=lease_ttl_s, graceful_reps=graceful_reps, command=command, say=say)
        elif mode == "etcd-leader":
            from hedgefs.bench.failover_faults import run_etcd_leader

            doc = run_etcd_leader(reps=reps or 5, ttl_s=lease_ttl_s, command=command, say=say)
        elif mode == "reads":
            from hedgefs.bench.failover_reads import run as run_reads

            doc = run_reads(reps=reps or 5, command=command, say=say)
        elif mode == "timeline":
            from hedgefs.bench.failover_timeline import run as run_timeline

            doc = run_timeline(reps=reps or 3, command=command, say=say)
        else:
            from hedgefs.bench.failover_faults import run_cpu_hog

            doc = run_cpu_hog(seconds=seconds, ttl_s=lease_ttl_s, command=command, say=say)
    except EtcdMissing as err:
        raise UsageError(str(err)) from None
    except RuntimeError as err:
        raise HedgefsError(str(err)) from None
    if out is not None:
        out.write_text(json.dumps(doc, indent=1) + "\n")
    if plot is not None:
        from hedgefs.bench.failover_timeline import plot as draw

        try:
            say(f"plot: {draw(doc, plot)}")
        except RuntimeError as err:   # no matplotlib: the JSON is written, the plot can be redrawn from it
            raise HedgefsError(f"{err} (redraw: python -m hedgefs.bench.failover_timeline {out or 'RESULT.json'})") from None
    # the timeline's buckets are for the file: with --out, stdout has the figures only
    click.echo(json.dumps({k: v for k, v in doc.items() if k != "per_rep"} if mode == "timeline" and out else doc))


@click.command("meta", context_settings=CONTEXT)
@click.option("--rounds", type=click.IntRange(1, 100), default=3, show_default=True)
@click.option("--mkdirs", type=click.IntRange(16), default=3200, show_default=True, help="Mkdirs per round and backend.")
@click.option("--stats", type=click.IntRange(16), default=16000, show_default=True, help="Stats per round and backend.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=pathlib.Path), metavar="FILE.json")
def bench_meta(rounds, mkdirs, stats, out) -> None:
    """The namespace on etcd against SQLite in the same run: mkdirs/s and stats/s of 16 client
    threads on a NameNode of each (bench/meta.py), rounds alternating. Needs etcd on PATH.

    \b
    Examples:
      hedgefs bench meta --rounds 3 --out bench/results/meta.json
    """
    import sys

    from hedgefs.bench.meta import run
    from hedgefs.cluster.etcd import EtcdMissing

    command = "hedgefs " + " ".join(sys.argv[1:])
    try:
        doc = run(rounds=rounds, mkdirs=mkdirs, stats=stats, command=command, say=lambda s: click.echo(s, err=True))
    except EtcdMissing as err:
        raise UsageError(str(err)) from None
    except RuntimeError as err:
        raise HedgefsError(str(err)) from None
    if out is not None:
        out.write_text(json.dumps(doc, indent=1) + "\n")
    click.echo(json.dumps(doc))
