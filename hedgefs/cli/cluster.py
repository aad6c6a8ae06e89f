"""`hedgefs cluster ...`: a local cluster of real processes (the launcher in cluster/).

The launcher (gRPC, protobuf, cryptography) is imported by the verbs that run, not by `hedgefs
--help`, which imports this module to list the group."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import click

from hedgefs.cli.common import CONTEXT, Group, check_policy
from hedgefs.client.errors import HedgefsError

if TYPE_CHECKING:
    from hedgefs.cluster.launcher import LocalCluster

DEFAULT_CLUSTER_DIR = ".hedgefs-cluster"

def cluster_dir_option(f):
    return click.option("--dir", "root", default=lambda: os.environ.get("HEDGEFS_CLUSTER_DIR", DEFAULT_CLUSTER_DIR),
                        show_default=f"$HEDGEFS_CLUSTER_DIR or {DEFAULT_CLUSTER_DIR}",
                        help="Directory holding the cluster's state, data and logs.")(f)


def _cluster(root: str, must_exist: bool = True) -> LocalCluster:
    from hedgefs.cluster.launcher import LocalCluster

    cluster = LocalCluster(root)
    if must_exist and not cluster.state:
        raise HedgefsError(f"no cluster in {os.path.abspath(root)} (one started elsewhere: --dir DIR or "
                           f"HEDGEFS_CLUSTER_DIR=DIR, as `cluster up` printed; a new one: hedgefs cluster up --dir {root})")
    return cluster


def _warn_if_elsewhere(c: LocalCluster) -> None:
    """Cluster verbs act on --dir's processes, client verbs on HEDGEFS_NAMENODE's: say when they differ."""
    address = os.environ.get("HEDGEFS_NAMENODE")
    if address and c.state and address != c.namenode:
        click.echo(f"hedgefs: note: this is the cluster in {c.root} (NameNode {c.namenode}); HEDGEFS_NAMENODE is "
                   f"{address}, another cluster", err=True)


def _fitting_policy(datanodes: int) -> tuple[str, str]:
    """The default policy for a local cluster of ``datanodes`` DataNodes, and why if not RS-6-3."""
    from hedgefs.ec.policy import DEFAULT_POLICY, parse_policy

    if datanodes >= parse_policy(DEFAULT_POLICY).units:
        return DEFAULT_POLICY, ""
    for name in ("RS-3-2-1024k", "REPLICATE-3", "REPLICATE-2", "REPLICATE-1"):
        if datanodes >= parse_policy(name).units:
            return name, f"{DEFAULT_POLICY} needs {parse_policy(DEFAULT_POLICY).units} DataNodes"
    return "REPLICATE-1", ""


@click.group(cls=Group, context_settings=CONTEXT)
def cluster() -> None:
    """A local cluster of real processes: one NameNode and N DataNodes (dn1..dnN).

    \b
    Examples:
      hedgefs cluster up --datanodes 10
      hedgefs cluster up --secure          # TLS everywhere, credentials, block tokens, permissions
      export HEDGEFS_NAMENODE=127.0.0.1:8020
      hedgefs cluster freeze dn3 && hedgefs cat /f > /dev/null && hedgefs cluster thaw dn3
      hedgefs cluster down
      hedgefs cluster up --hosts 12 --racks 3   # as root: a network namespace per host
      hedgefs cluster kill host3 && hedgefs cluster partition rack2 && hedgefs cluster heal
    """


@cluster.command("up", context_settings=CONTEXT)
@cluster_dir_option
@click.option("--datanodes", type=click.IntRange(1, 64), help="DataNodes [10; with --hosts, one a host].")
@click.option("--namenode-port", type=int, default=8020, show_default=True, help="0 picks a free port.")
@click.option("--http-port", type=int, default=9870, show_default=True,
              help="The NameNode's status page and /metrics (0 picks a free port).")
@click.option("--policy", help="Cluster default policy [RS-6-3-1024k].")
@click.option("--block-size", type=int, help="Bytes per internal block in a full group [128 MiB].")
@click.option("--dead-interval-s", type=float, default=30.0, show_default=True)
@click.option("--heartbeat-interval-s", type=float, default=1.0, show_default=True)
@click.option("--no-fsync", is_flag=True, help="Skip fsync on the DataNodes (faster, less durable).")
@click.option("--secure", is_flag=True,
              help="Make (once, in DIR/security/) a CA, a credential per server and an admin credential, and run "
                   "every process with TLS, checked calls, block tokens and file permissions.")
@click.option("--ha", is_flag=True,
              help="High availability: 3 etcd members (etcd on PATH) hold the namespace and 2 NameNodes (namenode, "
                   "namenode-2) share it, one active, one standby; clients and DataNodes get both addresses.")
@click.option("--hosts", type=click.IntRange(1, 64),
              help="Run the DataNodes on this many hosts (host1..hostN), each a network namespace with its own "
                   "address (198.18.0.0/15) on a bridge; the NameNode listens on the bridge. Needs root and `ip`.")
@click.option("--racks", type=click.IntRange(1, 7), default=1, show_default=True,
              help="With --hosts: racks (rack1..rackR), each a contiguous run of hosts.")
def cluster_up(root, datanodes, namenode_port, http_port, policy, block_size, dead_interval_s, heartbeat_interval_s,
               no_fsync, secure, ha, hosts, racks) -> None:
    """Start the cluster; returns once every DataNode has registered. Prints the status page's URL
    and the export lines that point this shell's client and cluster verbs at it (with --secure,
    the admin's credential too). With fewer DataNodes than RS-6-3 needs, the default policy is
    one that fits (said so).

    \b
    Examples:
      hedgefs cluster up
      hedgefs cluster up --dir ./c2 --namenode-port 0 --http-port 0 --datanodes 5
      hedgefs cluster up --secure --no-fsync
      hedgefs cluster up --ha --datanodes 5      # then: hedgefs cluster kill namenode
      hedgefs cluster up --hosts 12 --racks 3    # as root; then: hedgefs cluster kill host3
    """
    from hedgefs.client.errors import NotAllowed, UsageError
    from hedgefs.cluster.etcd import EtcdMissing
    from hedgefs.cluster.launcher import ClusterError, Options
    from hedgefs.cluster.network import HostsUnavailable, NetworkError, check_available, layout
    from hedgefs.ec.policy import parse_policy

    if racks > 1 and not hosts:
        raise UsageError("--racks needs --hosts")
    if hosts:   # before anything is said or made
        try:
            check_available()
            layout(hosts, racks)
        except HostsUnavailable as err:
            raise (NotAllowed if err.missing == "root" else UsageError)(f"cluster up --hosts: {err}") from None
        except ValueError as err:
            raise UsageError(f"cluster up: {err}") from None
    datanodes = datanodes or hosts or 10

    if policy:
        check_policy(policy)
        if parse_policy(policy).units > datanodes:
            raise UsageError(f"policy {policy} needs {parse_policy(policy).units} DataNodes; --datanodes is {datanodes}")
    else:
        policy, why = _fitting_policy(datanodes)
        if why:
            click.echo(f"default policy {policy} ({why}; --policy to choose)", err=True)
    c = _cluster(root, must_exist=False)
    options = Options(datanodes=datanodes, namenode_port=namenode_port, namenode_http_port=http_port,
                      policy=policy, block_size=block_size,
                      dead_interval_s=dead_interval_s, heartbeat_interval_s=heartbeat_interval_s, fsync=not no_fsync,
                      secure=secure, ha=ha, hosts=hosts or 0, racks=racks)
    try:
        c.up(options)
    except EtcdMissing as err:
        raise UsageError(f"cluster up --ha: {err}") from None
    except (ClusterError, NetworkError, RuntimeError) as err:
        raise HedgefsError(str(err)) from None
    if ha:
        click.echo(f"etcd: {', '.join(c.etcd_names)} at {c.etcd_endpoints}; namespace at {c.meta}")
    click.echo(f"cluster up in {c.root}: namenode {c.namenode}, {datanodes} DataNodes (dn1..dn{datanodes})"
               + (f" on {hosts} hosts in {racks} rack{'s' if racks > 1 else ''}" if hosts else "")
               + (", secure" if secure else ""))
    click.echo(f"status page: {c.http_url}" + (" (an admin's client certificate: admin.pem)" if secure else ""))
    click.echo(f"export HEDGEFS_NAMENODE={c.namenode}")
    click.echo(f"export HEDGEFS_CLUSTER_DIR={c.root.resolve()}")
    if secure:
        click.echo(f"export HEDGEFS_CREDENTIALS={c.credentials}")


@cluster.command("status", context_settings=CONTEXT)
@cluster_dir_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def cluster_status(root, as_json) -> None:
    """Show each process: pid, RPC and HTTP ports, running / frozen / stopped.

    \b
    Examples:
      hedgefs cluster status
      hedgefs cluster status --json | jq -r '.servers[] | select(.name=="dn3") | .http_port'
    """
    c = _cluster(root)
    servers = []
    for name in [*c.etcd_names, *c.namenode_names, *c.datanode_ids]:
        entry = c._entry(name)
        role = "etcd" if name in c.etcd_names else "namenode" if name in c.namenode_names else "datanode"
        server = {"name": name, "role": role, "pid": entry.get("pid") or None,
                  "rpc_port": entry.get("client_port") if role == "etcd" else entry.get("port"),
                  "http_port": entry.get("http_port") or None, "state": c.process_state(name)}
        host = c.datanode_host(name) if role == "datanode" else None
        if host:
            server |= {"host": host, "rack": c.network.host(host)["rack"], "address": c.network.host(host)["address"],
                       "partitioned": c.network.partitioned().get(host)}
        servers.append(server)
    if as_json:
        click.echo(json.dumps({"dir": str(c.root), "namenode": c.namenode, "status_page": c.http_url,
                               "servers": servers} | ({"hosts": c.network.state["hosts"]} if c.network else {})))
        return
    for s in servers:
        where = f"  {s['host']}/{s['rack']} {s['address']}" if s.get("host") else ""
        cut = f" (partitioned: {s['partitioned']})" if s.get("partitioned") else ""
        click.echo(f"{s['name']:<10} pid {s['pid'] or '-':>7}  rpc {s['rpc_port']:<5}  http {s['http_port'] or '-':<5}  "
                   f"{s['state']}{where}{cut}")
    click.echo(f"status page: {c.http_url}")


@cluster.command("down", context_settings=CONTEXT)
@cluster_dir_option
def cluster_down(root) -> None:
    """Stop every process of the cluster (data stays in --dir).

    \b
    Examples:
      hedgefs cluster down
      hedgefs cluster down --dir ./c2
    """
    from hedgefs.cluster.network import NetworkError

    try:
        _cluster(root).down()
    except NetworkError as err:
        raise HedgefsError(f"cluster down: {err}") from None


def _process_verb(name: str, doc: str, action: str):
    @cluster.command(name, context_settings=CONTEXT, help=doc)
    @click.argument("process", metavar="DN_ID|namenode|namenode-2|etcd-N|hostN|rackN")
    @cluster_dir_option
    def command(process: str, root: str) -> None:
        from hedgefs.cluster.launcher import ClusterError

        c = _cluster(root)
        _warn_if_elsewhere(c)
        try:
            members = c.members(process)
            for name in members:
                if action == "restart" or c.is_running(name) or members == [process]:
                    getattr(c, action)(name)
        except ClusterError as err:
            raise HedgefsError(str(err)) from None
        if members != [process]:
            click.echo(f"{action} {process}: {' '.join(members)}")

    return command


def _doc(text: str, verb: str) -> str:
    return (f"{text} A host or a rack of a --hosts cluster: every DataNode on it.\n\n\b\nExamples:\n"
            f"  hedgefs cluster {verb} dn3\n  hedgefs cluster {verb} namenode --dir ./c2\n  hedgefs cluster {verb} host3")


_process_verb("kill", _doc("SIGKILL a DataNode (or a NameNode, or an etcd member of an --ha cluster): a crash.", "kill"),
              "kill")
_process_verb("freeze", _doc("SIGSTOP a process: TCP still connects, nothing answers.", "freeze"), "freeze")
_process_verb("thaw", _doc("SIGCONT a frozen process.", "thaw"), "thaw")
_process_verb("restart", _doc("Start a process again with its data dir (killing it first if running).", "restart"),
              "restart")


@cluster.command("partition", context_settings=CONTEXT)
@click.argument("target", metavar="hostN|rackN")
@cluster_dir_option
def cluster_partition(target: str, root: str) -> None:
    """Cut a host or a whole rack off from everything outside it (iptables inside its hosts'
    namespaces: packets dropped, not refused); a rack's own hosts still reach each other. Its
    DataNodes keep running: the NameNode sees them go silent, readers hedge around them.

    \b
    Examples:
      hedgefs cluster partition rack2
      hedgefs cluster partition host3
      hedgefs cluster heal
    """
    from hedgefs.cluster.launcher import ClusterError
    from hedgefs.cluster.network import HostsUnavailable, NetworkError

    c = _cluster(root)
    try:
        hosts = c.partition(target)
    except (ClusterError, NetworkError) as err:
        raise HedgefsError(str(err)) from None
    except HostsUnavailable as err:
        from hedgefs.client.errors import UsageError
        raise UsageError(str(err)) from None
    click.echo(f"partitioned {target}: {' '.join(hosts)}")


@cluster.command("heal", context_settings=CONTEXT)
@click.argument("target", metavar="[hostN|rackN]", required=False)
@cluster_dir_option
def cluster_heal(target: str | None, root: str) -> None:
    """Undo partitions: of one host or rack, or (no argument) of every host.

    \b
    Examples:
      hedgefs cluster heal
      hedgefs cluster heal rack2
    """
    from hedgefs.cluster.launcher import ClusterError
    from hedgefs.cluster.network import NetworkError

    c = _cluster(root)
    try:
        healed = c.heal(target)
    except (ClusterError, NetworkError) as err:
        raise HedgefsError(str(err)) from None
    click.echo(f"healed: {' '.join(healed) or 'nothing was partitioned'}")
