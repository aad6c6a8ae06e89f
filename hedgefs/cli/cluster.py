"""`hedgefs cluster ...`: a local cluster of real processes (the launcher in cluster/)."""

import json
import os

import click

from hedgefs.cli.common import CONTEXT, Group, check_policy
from hedgefs.client.errors import HedgefsError
from hedgefs.cluster.etcd import EtcdMissing
from hedgefs.cluster.launcher import ClusterError, LocalCluster, Options

DEFAULT_CLUSTER_DIR = ".hedgefs-cluster"

def cluster_dir_option(f):
    return click.option("--dir", "root", default=lambda: os.environ.get("HEDGEFS_CLUSTER_DIR", DEFAULT_CLUSTER_DIR),
                        show_default=f"$HEDGEFS_CLUSTER_DIR or {DEFAULT_CLUSTER_DIR}",
                        help="Directory holding the cluster's state, data and logs.")(f)


def _cluster(root: str, must_exist: bool = True) -> LocalCluster:
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
    """


@cluster.command("up", context_settings=CONTEXT)
@cluster_dir_option
@click.option("--datanodes", type=click.IntRange(1, 64), default=10, show_default=True)
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
def cluster_up(root, datanodes, namenode_port, http_port, policy, block_size, dead_interval_s, heartbeat_interval_s,
               no_fsync, secure, ha) -> None:
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
    """
    from hedgefs.client.errors import UsageError
    from hedgefs.ec.policy import parse_policy

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
                      secure=secure, ha=ha)
    try:
        c.up(options)
    except EtcdMissing as err:
        raise UsageError(f"cluster up --ha: {err}") from None
    except (ClusterError, RuntimeError) as err:
        raise HedgefsError(str(err)) from None
    if ha:
        click.echo(f"etcd: {', '.join(c.etcd_names)} at {c.etcd_endpoints}; namespace at {c.meta}")
    click.echo(f"cluster up in {c.root}: namenode {c.namenode}, {datanodes} DataNodes (dn1..dn{datanodes})"
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
        servers.append({"name": name, "role": role, "pid": entry.get("pid") or None,
                        "rpc_port": entry.get("client_port") if role == "etcd" else entry.get("port"),
                        "http_port": entry.get("http_port") or None, "state": c.process_state(name)})
    if as_json:
        click.echo(json.dumps({"dir": str(c.root), "namenode": c.namenode, "status_page": c.http_url,
                               "servers": servers}))
        return
    for s in servers:
        click.echo(f"{s['name']:<10} pid {s['pid'] or '-':>7}  rpc {s['rpc_port']:<5}  http {s['http_port'] or '-':<5}  "
                   f"{s['state']}")
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
    _cluster(root).down()


def _process_verb(name: str, doc: str, action: str):
    @cluster.command(name, context_settings=CONTEXT, help=doc)
    @click.argument("process", metavar="DN_ID|namenode|namenode-2|etcd-N")
    @cluster_dir_option
    def command(process: str, root: str) -> None:
        c = _cluster(root)
        _warn_if_elsewhere(c)
        try:
            getattr(c, action)(process)
        except ClusterError as err:
            raise HedgefsError(str(err)) from None

    return command


def _doc(text: str, verb: str) -> str:
    return f"{text}\n\n\b\nExamples:\n  hedgefs cluster {verb} dn3\n  hedgefs cluster {verb} namenode --dir ./c2"


_process_verb("kill", _doc("SIGKILL a DataNode (or a NameNode, or an etcd member of an --ha cluster): a crash.", "kill"),
              "kill")
_process_verb("freeze", _doc("SIGSTOP a process: TCP still connects, nothing answers.", "freeze"), "freeze")
_process_verb("thaw", _doc("SIGCONT a frozen process.", "thaw"), "thaw")
_process_verb("restart", _doc("Start a process again with its data dir (killing it first if running).", "restart"),
              "restart")
