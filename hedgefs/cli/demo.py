"""`hedgefs demo` / `make demo`: the point of hedgefs in two minutes, on a real local cluster.

1. start a NameNode and 10 DataNodes; write a file (RS-6-3-1024k) and read it back
2. slow one DataNode that holds a data unit by +2 s: read with hedging off, a fixed threshold, adaptive
3. freeze (SIGSTOP) a DataNode: TCP still connects, nothing answers; read again, hedged
4. the same bytes as LRC-6-2-2 (local groups of 3 data units): one-cell reads of a slow
   DataNode's cells cost 3 extra unit reads each, against RS-6-3's 7 (k + 1 sources)
5. kill 3 DataNodes holding units: the file still reads back exactly

``--ha`` tells another story (demo_ha.py): the namespace on 3 etcd members, two NameNodes, a
kill -9 of the active while a reader and a writer go on.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from typing import TYPE_CHECKING

import click

from hedgefs.cli.common import CONTEXT
from hedgefs.client.config import HedgeConfig
from hedgefs.client.errors import HedgefsError

if TYPE_CHECKING:   # the client, the launcher, gRPC: imported when the demo runs, not by `hedgefs --help`
    from hedgefs.cluster.launcher import LocalCluster

PATH = "/demo/data.bin"


@click.command(context_settings=CONTEXT)
@click.option("--dir", "root", type=click.Path(file_okay=False), help="Cluster directory (default: a temporary one).")
@click.option("--size-mib", type=click.IntRange(1, 4096), default=24, show_default=True, help="Size of the demo file.")
@click.option("--ha", is_flag=True, help="High availability instead: 3 etcd members, 2 NameNodes, a kill -9 of the "
                                         "active while a reader and a writer go on (needs etcd).")
def demo(root: str | None, size_mib: int, ha: bool) -> None:
    """The main job: a local cluster, faults, hedging off vs on, and a table of what happened.

    \b
    Examples:
      hedgefs demo
      hedgefs demo --size-mib 64 --dir ./demo-cluster
      hedgefs demo --ha                     # kill -9 the active NameNode mid-read, mid-write
    """
    if ha:
        from hedgefs.cli.demo_ha import run_demo_ha

        run_demo_ha(root, size_mib)
        return
    run_demo(root, size_mib)


def say(text: str) -> None:
    print(text, flush=True)


def run_demo(root: str | None, size_mib: int) -> None:
    from hedgefs.cluster.launcher import ClusterError, LocalCluster, Options

    with tempfile.TemporaryDirectory(prefix="hedgefs-demo-") as tmp:
        cluster = LocalCluster(root or os.path.join(tmp, "cluster"))
        say(f"== starting a local cluster in {cluster.root}: 1 NameNode + 10 DataNodes")
        try:
            cluster.up(Options(datanodes=10, namenode_port=0, fsync=False))
        except ClusterError as err:
            raise HedgefsError(f"demo: {err}") from None
        try:
            _story(cluster, size_mib)
        except ClusterError as err:
            raise HedgefsError(f"demo: {err}") from None
        finally:
            say("== stopping the cluster")
            cluster.down()


def _story(cluster: LocalCluster, size_mib: int) -> None:
    from hedgefs.client.fs import FileSystem
    from hedgefs.proto import hedgefs_pb2 as pb

    data = os.urandom(size_mib << 20)
    digest = hashlib.sha256(data).hexdigest()
    with FileSystem(cluster.namenode, credentials=cluster.credentials) as fs:
        fs.mkdir("/demo", parents=True)
        started = time.monotonic()
        fs.write_bytes(PATH, data, overwrite=True)
        say(f"== wrote {PATH}: {size_mib} MiB in {time.monotonic() - started:.2f} s (RS-6-3-1024k: 6 data + 3 parity units per stripe)")
        status = fs.stat(PATH)
        holders = [status.groups[0].units[i].datanode_id for i in range(9)]
        say(f"   units of group {status.groups[0].id}: " + " ".join(f"{i}@{dn}" for i, dn in enumerate(holders)))
        _check("healthy read", fs, data, digest)

    rows = []
    slow = holders[0]
    say(f"\n== slowing {slow} (data unit 0) by +2000 ms per read")
    _faults(cluster, slow, pb.FaultConfig(read_delay_ms=2000))
    rows.append(_timed_read(cluster, f"{slow} +2 s, hedging off", HedgeConfig(enabled=False), data, digest))
    rows.append(_timed_read(cluster, f"{slow} +2 s, fixed 250 ms", HedgeConfig(threshold_ms=250), data, digest))
    rows.append(_timed_read(cluster, f"{slow} +2 s, adaptive", HedgeConfig(), data, digest))
    _faults(cluster, slow, None)

    frozen = holders[1]
    say(f"\n== freezing {frozen} (data unit 1) with SIGSTOP: it accepts TCP, answers nothing")
    cluster.freeze(frozen)
    rows.append(_timed_read(cluster, f"{frozen} frozen, adaptive", HedgeConfig(), data, digest))
    cluster.thaw(frozen)

    say("\n   read                         time      hedges  wins  avoided  rebuilt-on-failure")
    for label, seconds, stats in rows:
        c = stats.counters
        say(f"   {label:<28} {seconds:7.2f} s  {c['hedges']:>6}  {c['hedge_wins']:>4}  {c['avoided']:>7}  "
            f"{c['rebuilt_on_failure']:>6}")

    _lrc_story(cluster, data, holders[0])

    gone = [holders[0], holders[3], holders[8]]
    say(f"\n== killing {', '.join(gone)} (SIGKILL): units 0, 3 and 8 are gone")
    for dn in gone:
        cluster.kill(dn)
    _timed_read(cluster, "3 DataNodes dead", HedgeConfig(), data, digest)


def _lrc_story(cluster: LocalCluster, data: bytes, rs_slow: str) -> None:
    """One-cell reads of every cell of data unit 0 in group 0, with its DataNode +2 s and a fixed
    250 ms threshold (each read hedged): RS-6-3 rebuilds a cell from k + 1 = 7 other units, LRC-6-2-2
    from the 3 others of its local group."""
    from hedgefs.client.fs import FileSystem
    from hedgefs.proto import hedgefs_pb2 as pb

    lrc_path = "/demo/lrc.bin"
    with FileSystem(cluster.namenode, credentials=cluster.credentials) as fs:
        fs.write_bytes(lrc_path, data, overwrite=True, policy="LRC-6-2-2-1024k")
        lrc_slow = fs.stat(lrc_path).groups[0].units[0].datanode_id
    say("\n== the same bytes as LRC-6-2-2-1024k (data units in local groups of 3, each with a local parity):"
        "\n   one-cell reads of data unit 0's cells, its DataNode +2 s, a fixed 250 ms threshold")
    cell, stripe = 1 << 20, 6 << 20
    for path, name, slow in ((PATH, "RS-6-3-1024k", rs_slow), (lrc_path, "LRC-6-2-2-1024k", lrc_slow)):
        _faults(cluster, slow, pb.FaultConfig(read_delay_ms=2000))
        with FileSystem(cluster.namenode, hedge=HedgeConfig(threshold_ms=250), credentials=cluster.credentials) as fs, \
                fs.open(path) as f:
            offsets = range(0, min(len(data), f.status.groups[0].length) - cell + 1, stripe)
            started = time.monotonic()
            for offset in offsets:
                if f.pread(offset, cell) != data[offset:offset + cell]:
                    raise SystemExit(f"demo: {name}: the bytes read differ from the bytes written")
            seconds = time.monotonic() - started
            c = fs.stats().counters
        _faults(cluster, slow, None)
        extra = c["unit_reads"] - c["unit_reads_needed"]
        say(f"   {name:<16} {len(offsets)} cell reads of {slow} in {seconds:.2f} s, exact; hedges {c['hedges']}, "
            f"extra unit reads {extra} ({extra / max(len(offsets), 1):.0f} per read)")


def _timed_read(cluster, label, config, data, digest):
    from hedgefs.client.fs import FileSystem

    with FileSystem(cluster.namenode, hedge=config, credentials=cluster.credentials) as fs:
        started = time.monotonic()
        _check(label, fs, data, digest, quiet=True)
        seconds = time.monotonic() - started
        stats = fs.stats()
    c = stats.counters
    say(f"   {label}: read {len(data) >> 20} MiB in {seconds:.2f} s, sha256 matches; "
        f"hedges {c['hedges']}, wins {c['hedge_wins']}, avoided {c['avoided']}, rebuilt after failure "
        f"{c['rebuilt_on_failure']}")
    return label, seconds, stats


def _check(label, fs, data, digest, quiet=False):
    got = bytearray()
    with fs.open(PATH) as f:
        for chunk in f.chunks():
            got += chunk
    if hashlib.sha256(got).hexdigest() != digest:
        raise SystemExit(f"demo: {label}: the bytes read differ from the bytes written")
    if not quiet:
        say(f"   {label}: {len(got) >> 20} MiB back, sha256 {digest[:16]}... matches")


def _faults(cluster, datanode_id, config):
    from hedgefs.proto import hedgefs_pb2 as pb

    if config is None:
        cluster.datanode_rpc(datanode_id, "ClearFaults", pb.FaultClearRequest())
    else:
        cluster.datanode_rpc(datanode_id, "SetFaults", config)
