"""`hedgefs bench` verbs of the data path: distcp with a straggler, the cost of security, the
codec, the socket transport and the client's throughput (bench/). Registered in cli/bench.py.
"""

import json
import pathlib

import click

from hedgefs.cli.common import CONTEXT, namenode_option
from hedgefs.client.errors import HedgefsError


@click.command("distcp", context_settings=CONTEXT)
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


@click.command("security", context_settings=CONTEXT)
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


@click.command("codec", context_settings=CONTEXT)
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


@click.command("transport", context_settings=CONTEXT)
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


@click.command("throughput", context_settings=CONTEXT)
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
