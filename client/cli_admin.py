"""Operator verbs: the local cluster, fault injection, fsck, admin report, demo, benchmarks."""

import json
import os
import sys

import click
import grpc

from hedgefs.client.cli import CONTEXT, _Group, cli, namenode_option, open_fs
from hedgefs.client.errors import HedgefsError, UsageError
from hedgefs.client.metrics import natural_key
from hedgefs.cluster.launcher import ClusterError, LocalCluster, Options
from hedgefs.proto import GRPC_OPTIONS
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc

DEFAULT_CLUSTER_DIR = ".hedgefs-cluster"


def cluster_dir_option(f):
    return click.option("--dir", "root", default=lambda: os.environ.get("HEDGEFS_CLUSTER_DIR", DEFAULT_CLUSTER_DIR),
                        show_default=f"$HEDGEFS_CLUSTER_DIR or {DEFAULT_CLUSTER_DIR}",
                        help="Directory holding the cluster's state, data and logs.")(f)


def _cluster(root: str, must_exist: bool = True) -> LocalCluster:
    cluster = LocalCluster(root)
    if must_exist and not cluster.state:
        raise HedgefsError(f"no cluster in {os.path.abspath(root)} (start one with: hedgefs cluster up --dir {root})")
    return cluster


# ---------------------------------------------------------------------------- cluster

@cli.group(cls=_Group, context_settings=CONTEXT)
def cluster() -> None:
    """A local cluster of real processes: one NameNode and N DataNodes (dn1..dnN).

    \b
    Examples:
      hedgefs cluster up --datanodes 10
      export HEDGEFS_NAMENODE=127.0.0.1:8020
      hedgefs cluster freeze dn3 && hedgefs cat /f > /dev/null && hedgefs cluster thaw dn3
      hedgefs cluster down
    """


@cluster.command("up", context_settings=CONTEXT)
@cluster_dir_option
@click.option("--datanodes", type=click.IntRange(1, 64), default=10, show_default=True)
@click.option("--namenode-port", type=int, default=8020, show_default=True, help="0 picks a free port.")
@click.option("--policy", help="Cluster default policy [RS-6-3-1024k].")
@click.option("--block-size", type=int, help="Bytes per internal block in a full group [128 MiB].")
@click.option("--dead-interval-s", type=float, default=30.0, show_default=True)
@click.option("--heartbeat-interval-s", type=float, default=1.0, show_default=True)
@click.option("--no-fsync", is_flag=True, help="Skip fsync on the DataNodes (faster, less durable).")
def cluster_up(root, datanodes, namenode_port, policy, block_size, dead_interval_s, heartbeat_interval_s, no_fsync) -> None:
    """Start the cluster; returns once every DataNode has registered."""
    if policy:
        from hedgefs.client.cli import _check_policy
        _check_policy(policy)
    c = _cluster(root, must_exist=False)
    options = Options(datanodes=datanodes, namenode_port=namenode_port, policy=policy, block_size=block_size,
                      dead_interval_s=dead_interval_s, heartbeat_interval_s=heartbeat_interval_s, fsync=not no_fsync)
    try:
        c.up(options)
    except ClusterError as err:
        raise HedgefsError(str(err)) from None
    click.echo(f"cluster up in {c.root}: namenode {c.namenode}, {datanodes} DataNodes (dn1..dn{datanodes})")
    click.echo(f"export HEDGEFS_NAMENODE={c.namenode}")


@cluster.command("status", context_settings=CONTEXT)
@cluster_dir_option
def cluster_status(root) -> None:
    """Show each process: pid, port, running / frozen / stopped."""
    c = _cluster(root)
    for name in ["namenode", *c.datanode_ids]:
        entry = c.state["namenode"] if name == "namenode" else c.state["datanodes"][name]
        click.echo(f"{name:<9} pid {entry.get('pid') or '-':>7}  port {entry.get('port')}  {c.process_state(name)}")


@cluster.command("down", context_settings=CONTEXT)
@cluster_dir_option
def cluster_down(root) -> None:
    """Stop every process of the cluster (data stays in --dir)."""
    _cluster(root).down()


def _process_verb(name: str, doc: str, action: str):
    @cluster.command(name, context_settings=CONTEXT, help=doc)
    @click.argument("process", metavar="DN_ID|namenode")
    @cluster_dir_option
    def command(process: str, root: str) -> None:
        c = _cluster(root)
        try:
            getattr(c, action)(process)
        except ClusterError as err:
            raise HedgefsError(str(err)) from None

    return command


_process_verb("kill", "SIGKILL a DataNode (or the NameNode): a crash.", "kill")
_process_verb("freeze", "SIGSTOP a process: TCP still connects, nothing answers.", "freeze")
_process_verb("thaw", "SIGCONT a frozen process.", "thaw")
_process_verb("restart", "Start a process again with its data dir (killing it first if running).", "restart")


# ---------------------------------------------------------------------------- faults

def _datanode_stub(namenode: str | None, datanode_id: str):
    with open_fs(namenode) as fs:
        report = fs.rpc("Report", pb.Empty())
    for dn in report.datanodes:
        if dn.id == datanode_id:
            channel = grpc.insecure_channel(dn.address, options=GRPC_OPTIONS)
            return channel, hedgefs_pb2_grpc.DataNodeStub(channel)
    known = ", ".join(d.id for d in report.datanodes) or "none"
    raise UsageError(f"no DataNode {datanode_id!r} (known: {known})")


def _fault_rpc(namenode: str | None, datanode_id: str, method: str, request) -> pb.FaultState:
    channel, stub = _datanode_stub(namenode, datanode_id)
    with channel:
        try:
            return getattr(stub, method)(request, timeout=5)
        except grpc.RpcError as err:
            raise HedgefsError(f"{datanode_id}: {err.details() or err.code().name}") from None


def _fault_line(datanode_id: str, s: pb.FaultState) -> str:
    if not s.enabled:
        return f"{datanode_id}: fault injection disabled"
    parts = []
    if s.read_delay_ms:
        parts.append(f"read-delay {s.read_delay_ms} ms (p={s.probability:g}, jitter {s.jitter_ms} ms)")
    if s.stall:
        parts.append(f"STALL ({s.stalled_reads} reads held)")
    if s.error_probability:
        parts.append(f"errors p={s.error_probability:g}")
    if s.corrupt_probability:
        parts.append(f"corrupt p={s.corrupt_probability:g}")
    if s.bandwidth_bps:
        parts.append(f"bandwidth {s.bandwidth_bps} B/s")
    calls = ", ".join(f"{k}={v}" for k, v in sorted(s.calls.items()))
    return f"{datanode_id}: {'; '.join(parts) or 'no faults'} | calls: {calls or '-'} | cancelled reads: {s.cancelled_reads}"


@cli.group(cls=_Group, context_settings=CONTEXT)
def fault() -> None:
    """Inject faults into running DataNodes (they must run with --enable-faults).

    \b
    Examples:
      hedgefs fault set dn3 --read-delay-ms 2000            # every read +2 s
      hedgefs fault set dn4 --read-delay-ms 2000 --probability 0.01
      hedgefs fault set dn5 --stall                         # accept reads, never answer
      hedgefs fault clear dn3
      hedgefs fault show
    """


@fault.command("set", context_settings=CONTEXT)
@click.argument("datanode_id", metavar="DN_ID")
@click.option("--read-delay-ms", type=click.IntRange(0), help="Added delay before a read's first byte.")
@click.option("--probability", type=click.FloatRange(0, 1), help="Chance the delay applies to a read [1].")
@click.option("--jitter-ms", type=click.IntRange(0), help="Uniform +/- jitter on the delay.")
@click.option("--stall/--no-stall", default=None, help="Hold every read unanswered until cleared.")
@click.option("--error-probability", type=click.FloatRange(0, 1), help="Chance a read fails (UNAVAILABLE).")
@click.option("--corrupt-probability", type=click.FloatRange(0, 1), help="Chance a read's bytes fail their checksum.")
@click.option("--bandwidth", type=click.IntRange(0), help="Cap on read bytes per second (0 = none).")
@namenode_option
def fault_set(datanode_id, namenode, **knobs) -> None:
    """Change fault knobs on DN_ID (only the knobs given change)."""
    fields = {"read_delay_ms": knobs["read_delay_ms"], "probability": knobs["probability"],
              "jitter_ms": knobs["jitter_ms"], "stall": knobs["stall"],
              "error_probability": knobs["error_probability"], "corrupt_probability": knobs["corrupt_probability"],
              "bandwidth_bps": knobs["bandwidth"]}
    request = pb.FaultConfig(token=os.environ.get("HEDGEFS_TOKEN", ""), **{k: v for k, v in fields.items() if v is not None})
    click.echo(_fault_line(datanode_id, _fault_rpc(namenode, datanode_id, "SetFaults", request)))


@fault.command("clear", context_settings=CONTEXT)
@click.argument("datanode_id", metavar="DN_ID")
@namenode_option
def fault_clear(datanode_id, namenode) -> None:
    """Remove every fault from DN_ID (stalled reads are released)."""
    request = pb.FaultClearRequest(token=os.environ.get("HEDGEFS_TOKEN", ""))
    click.echo(_fault_line(datanode_id, _fault_rpc(namenode, datanode_id, "ClearFaults", request)))


@fault.command("show", context_settings=CONTEXT)
@click.argument("datanode_id", metavar="[DN_ID]", required=False)
@namenode_option
def fault_show(datanode_id, namenode) -> None:
    """Show fault knobs and call counters of one or every live DataNode."""
    with open_fs(namenode) as fs:
        report = fs.rpc("Report", pb.Empty())
    ids = [datanode_id] if datanode_id else sorted((d.id for d in report.datanodes if d.state == "live"), key=natural_key)
    request = pb.FaultClearRequest(token=os.environ.get("HEDGEFS_TOKEN", ""))
    failed = False
    for dn in ids:
        try:
            click.echo(_fault_line(dn, _fault_rpc(namenode, dn, "GetFaults", request)))
        except HedgefsError as err:
            if datanode_id:
                raise
            failed = True
            click.echo(f"{dn}: unreachable ({str(err).split(': ', 1)[-1][:80]})")
    if failed:
        sys.exit(1)


# ---------------------------------------------------------------------------- health

@cli.command(context_settings=CONTEXT)
@click.argument("path", default="/")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@namenode_option
def fsck(path: str, as_json: bool, namenode: str | None) -> None:
    """Check block groups under PATH: healthy / degraded / missing. Exit 1 if any file is unreadable."""
    with open_fs(namenode) as fs:
        r = fs.rpc("Fsck", pb.PathRequest(path=path))
    if as_json:
        click.echo(json.dumps({
            "path": path, "files": r.files, "groups": r.groups, "healthy": r.healthy, "degraded": r.degraded,
            "missing": r.missing, "corrupt_files": r.corrupt_files, "status": r.status,
            "problems": [{"path": p.path, "group": p.group_id, "live_units": p.live_units,
                          "needed_units": p.needed_units, "status": p.status} for p in r.problems],
        }))
    else:
        for p in r.problems:
            click.echo(f"{p.status:<9} {p.path} group {p.group_id}: {p.live_units} live units ({p.needed_units} needed)")
        click.echo(f"files {r.files}, groups {r.groups}: healthy {r.healthy}, degraded {r.degraded}, missing {r.missing}")
        click.echo(f"status: {r.status}")
    if r.status == "CORRUPT":
        sys.exit(1)


@cli.group(cls=_Group, context_settings=CONTEXT)
def admin() -> None:
    """Cluster administration."""


@admin.command("report", context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@namenode_option
def admin_report(as_json: bool, namenode: str | None) -> None:
    """One row per DataNode: state, heartbeat age, used bytes, units, pending repairs."""
    with open_fs(namenode) as fs:
        r = fs.rpc("Report", pb.Empty())
    rows = [{"id": d.id, "address": d.address, "state": d.state, "last_heartbeat_age_s": round(d.last_heartbeat_age_ms / 1000, 1),
             "used_bytes": d.used_bytes, "units": d.units, "pending_repairs": d.pending_repairs,
             "pending_deletes": d.pending_deletes} for d in sorted(r.datanodes, key=lambda d: natural_key(d.id))]
    if as_json:
        click.echo(json.dumps({"datanodes": rows, "groups_waiting_repair": r.groups_waiting_repair,
                               "repairs_done": r.repairs_done}))
        return
    click.echo(f"{'id':<6} {'address':<22} {'state':<5} {'heartbeat':>9} {'used':>12} {'units':>6} {'repairs':>7}")
    for row in rows:
        click.echo(f"{row['id']:<6} {row['address']:<22} {row['state']:<5} {row['last_heartbeat_age_s']:>8.1f}s "
                   f"{row['used_bytes']:>12} {row['units']:>6} {row['pending_repairs']:>7}")
    click.echo(f"groups waiting for repair: {r.groups_waiting_repair}; repairs done: {r.repairs_done}")


# ---------------------------------------------------------------------------- demo

@cli.command(context_settings=CONTEXT)
@click.option("--dir", "root", type=click.Path(file_okay=False), help="Cluster directory (default: a temporary one).")
@click.option("--size-mib", type=click.IntRange(1, 4096), default=24, show_default=True, help="Size of the demo file.")
def demo(root: str | None, size_mib: int) -> None:
    """The main job: a local cluster, faults, hedging off vs on, and a table of what happened."""
    from hedgefs.client.demo import run_demo

    run_demo(root, size_mib)
