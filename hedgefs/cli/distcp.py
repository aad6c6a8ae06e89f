"""`hedgefs distcp` (parallel copies between clusters, hedged segment copies) and `hedgefs checksum`."""

import json
import sys

import click

from hedgefs.cli.common import CONTEXT, hedge_config, hedge_options, namenode_option, open_fs, print_stats
from hedgefs.client.errors import HedgefsError, IsADirectory, NotFound, UsageError
from hedgefs.client.config import namenode_address


def _hedge_after(text: str) -> tuple[bool, float | None]:
    """--hedge-after-ms: (hedging on, fixed delay in seconds or None for auto)."""
    t = text.strip().lower()
    if t == "auto":
        return True, None
    if t == "off":
        return False, None
    try:
        ms = float(t)
    except ValueError:
        raise UsageError(f"--hedge-after-ms must be a number of milliseconds, auto or off (got {text!r})") from None
    if not ms > 0:
        raise UsageError("--hedge-after-ms must be > 0")
    return True, ms / 1000.0


@click.command(context_settings=CONTEXT)
@click.argument("paths", nargs=-1, required=True, metavar="SRC... DST")
@click.option("-update", "--update", "update", is_flag=True,
              help="Skip files whose destination has the same checksum (COMPOSITE-CRC32C); copy the others over.")
@click.option("-overwrite", "--overwrite", "overwrite", is_flag=True, help="Replace destination files that exist.")
@click.option("--policy", metavar="NAME", help="Policy of the destination files [the destination directory's].")
@click.option("--blocks-per-chunk", type=click.IntRange(1), default=1, show_default=True, metavar="N",
              help="Block groups of the destination per segment (a segment is copied as one part).")
@click.option("--list-threads", type=click.IntRange(1, 64), default=6, show_default=True, metavar="N",
              help="Threads listing the source tree and planning files.")
@click.option("--workers", type=click.IntRange(1, 256), metavar="N",
              help="Segments copied at once [4 x CPUs, at most 32].")
@click.option("--hedge-after-ms", "hedge_after", default="auto", show_default=True, metavar="N|auto|off",
              help="Start a second copy of a segment not done after N ms; auto: 1.5 x the p95 of this job's "
                   "segment times so far.")
@click.option("--max-hedged", type=click.FloatRange(0, 100), default=10.0, show_default=True, metavar="PCT",
              help="At most this per cent of the segments are hedged.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON report (per-segment times included) on stdout.")
@hedge_options
@namenode_option
def distcp(paths, update, overwrite, policy, blocks_per_chunk, list_threads, workers, hedge_after, max_hedged,
           as_json, namenode, stats, **hedge) -> None:
    """Copy SRC... to DST in parallel: between clusters, from or to local disk.

    Each path is hedgefs://HOST:PORT/path (a cluster; a bare /path is the default NameNode) or a
    local path (file:///path, ./dir). Directories are copied recursively. A file is cut into
    segments of whole destination block groups; each segment is read with hedged reads and written
    as a part of its own; a segment that is late gets a second copy that reads other units, and the
    first to finish wins. A file appears at its destination only when all its parts are in (one
    atomic concat at the NameNode). Killed and run again with the same arguments, distcp finishes
    the job without copying again what was done. With one SRC, DST is its new name unless DST is
    an existing directory (then SRC goes into it); with several, DST is a directory.

    Exit codes: 0 all copied; 1 some files failed (listed); 2 bad input (no such source,
    destination exists without -update/-overwrite, a directory into itself); 3 a NameNode is
    unreachable.

    \b
    Examples:
      hedgefs distcp hedgefs://nn1:8020/data hedgefs://nn2:8020/backup
      hedgefs distcp -update /data hedgefs://dr:8020/data       # again: copies only what changed
      hedgefs distcp --policy RS-3-2-1024k /logs /logs-rs32      # convert while copying
      hedgefs distcp ./local-dir /data/imported                  # local -> cluster
      hedgefs distcp --json --hedge-after-ms 2000 /big.bin hedgefs://nn2:8020/big.bin
    """
    from hedgefs.distcp.job import DistCp, Options
    from hedgefs.distcp.sides import ClusterSide, LocalSide, parse_location

    if len(paths) < 2:
        raise UsageError("distcp needs at least one SRC and a DST")
    if update and overwrite:
        raise UsageError("give -update or -overwrite, not both")
    if policy:
        from hedgefs.cli.common import check_policy

        check_policy(policy)
    hedging, after_s = _hedge_after(hedge_after)
    config = hedge_config(hedge)
    default = namenode_address(namenode)
    locations = [parse_location(p, default) for p in paths]
    sources, destination = locations[:-1], locations[-1]
    if policy and destination.is_local:
        raise UsageError("--policy applies to a hedgefs destination, not a local one")
    options = Options(update=update, overwrite=overwrite, policy=policy, blocks_per_chunk=blocks_per_chunk,
                      list_threads=list_threads, hedging=hedging and max_hedged > 0, hedge_after_s=after_s,
                      max_hedged_percent=max_hedged)
    if workers:
        options.workers = workers
    clusters = {}   # one client per NameNode, shared by the sides that use it

    def cluster(address):
        if address not in clusters:
            clusters[address] = open_fs(address, config)
        return clusters[address]

    local = LocalSide()
    try:
        src_sides = {s.namenode: (local if s.is_local else ClusterSide(cluster(s.namenode))) for s in sources}
        dst_fs = None if destination.is_local else cluster(destination.namenode)
        dst_side = local if destination.is_local else ClusterSide(dst_fs)
        job = DistCp(sources, destination, options, src_sides, dst_side, dst_fs)
        bar = _Bar() if sys.stderr.isatty() and not as_json else None
        try:
            report = job.run(bar.draw if bar else None)
        finally:
            if bar:
                bar.finish()
        if stats:
            for fs in clusters.values():
                print_stats(fs)
    finally:
        for fs in clusters.values():
            fs.close()
        local.close()
    if as_json:
        click.echo(json.dumps(report))
    else:
        click.echo(_summary(report), err=True)
    if report["failures"]:
        shown = "; ".join(report["failures"][:3]) + ("; ..." if len(report["failures"]) > 3 else "")
        raise HedgefsError(f"{report['files_failed']} {'file' if report['files_failed'] == 1 else 'files'} failed: {shown}")


def _summary(r: dict) -> str:
    from hedgefs.cli.humanize import plural

    resumed = f", {r['files_resumed']} resumed" if r.get("files_resumed") else ""
    return (f"distcp: {plural(r['files'], 'file')} copied{resumed}, {r['files_skipped']} skipped, "
            f"{r['files_failed']} failed; "
            f"{r['bytes'] / 1048576:.1f} MiB in {r['seconds']:.1f} s ({r['mb_per_s']:.1f} MB/s); "
            f"{plural(r['segments'], 'segment')}, {r['segments_resumed']} resumed, {r['segments_hedged']} hedged "
            f"({plural(r['hedge_wins'], 'hedge win')})")


class _Bar:
    """One line on stderr: files, bytes, rate, hedges; redrawn in place."""

    def __init__(self):
        self._drawn = False

    def draw(self, p: dict) -> None:
        total = p["bytes_planned"] - p["bytes_resumed"]
        frac = min(1.0, p["bytes"] / total) if total else 1.0
        bar = "#" * int(frac * 24)
        listing = "" if p["listing_done"] else "+"
        rate = p["bytes"] / max(p["seconds"], 1e-6) / 1048576
        sys.stderr.write(f"\rdistcp [{bar:<24}] files {p['files']}/{p['files_planned']}{listing} "
                         f"{p['bytes'] / 1048576:.1f}/{total / 1048576:.1f}{listing} MiB {rate:.1f} MiB/s "
                         f"hedged {p['segments_hedged']} ")
        sys.stderr.flush()
        self._drawn = True

    def finish(self) -> None:
        if self._drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()


@click.command(context_settings=CONTEXT)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per path.")
@namenode_option
def checksum(paths, as_json, namenode) -> None:
    """Print the COMPOSITE-CRC32C of each file: the CRC32C of its bytes, whatever the layout.

    An RS-6-3 file, an RS-3-2 file and a local file with the same bytes print the same value.
    For hedgefs files it is combined from the CRCs the DataNodes keep per 64 KiB chunk, without
    moving data (a group whose units cannot all answer is read instead). PATH is a hedgefs path
    (/path or hedgefs://HOST:PORT/path) or a local one (file:///path, ./file).

    \b
    Examples:
      hedgefs checksum /data/big.bin ./big.bin
      hedgefs checksum hedgefs://nn2:8020/data/big.bin
    """
    from hedgefs.client.checksum import local_file_checksum
    from hedgefs.distcp.sides import parse_location

    default = namenode_address(namenode)
    clusters = {}
    try:
        for text in paths:
            where = parse_location(text, default)
            if where.is_local:
                try:
                    value = local_file_checksum(where.path)
                except FileNotFoundError:
                    raise NotFound(f"no such local file: {text}") from None
                except IsADirectoryError:
                    raise IsADirectory(f"is a directory: {text}") from None
            else:
                if where.namenode not in clusters:
                    clusters[where.namenode] = open_fs(where.namenode)
                value = clusters[where.namenode].checksum(where.path)
            if as_json:
                click.echo(json.dumps({"path": text, "algorithm": value.algorithm, "crc32c": f"{value.crc:08x}",
                                       "length": value.length}))
            else:
                click.echo(f"{value.algorithm} {value.crc:08x} {value.length} {text}")
    finally:
        for fs in clusters.values():
            fs.close()
