"""`hedgefs chaos`: a seeded fault schedule against a fresh local cluster under load (chaos/)."""

import json
import os
import random
import sys

import click

from hedgefs.cli.common import CONTEXT, metrics_port_option, serving_client_metrics
from hedgefs.client.errors import HedgefsError


@click.command(context_settings=CONTEXT)
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), help="Seed of everything random [a new one, printed first].")
@click.option("--steps", type=click.IntRange(0), default=100, show_default=True, help="Fault steps to apply.")
@click.option("--datanodes", type=click.IntRange(9, 64), default=12, show_default=True,
              help="DataNodes in the cluster (RS-6-3 needs 9 live to write).")
@click.option("--writers", type=click.IntRange(0, 32), default=2, show_default=True, help="Concurrent writer threads.")
@click.option("--readers", type=click.IntRange(0, 32), default=2, show_default=True, help="Concurrent reader threads.")
@click.option("--json", "as_json", is_flag=True, help="End with one JSON line: the report's counters and the seed.")
@click.option("--dir", "root", type=click.Path(file_okay=False),
              help="Fresh directory for the cluster (default: a temporary one).")
@click.option("--keep", is_flag=True, help="Keep the cluster directory (data, logs) even when the run passes.")
@click.option("--dry-run", is_flag=True, help="Print the seed and the schedule; start nothing.")
@click.option("--secure", is_flag=True, help="Run the cluster secure: TLS, credentials, block tokens.")
@click.option("--ha", is_flag=True, help="3 etcd members and 2 NameNodes; kill and freeze the active, kill etcd members.")
@click.option("--hosts", type=click.IntRange(1, 64),
              help="Run the DataNodes on this many hosts (network namespaces, as `cluster up --hosts`; root) and "
                   "kill hosts, partition and slow racks too.")
@click.option("--racks", type=click.IntRange(1, 7), default=4, show_default=True,
              help="With --hosts: racks (at most m = 3 DataNodes a rack keeps a rack's loss within tolerance).")
@metrics_port_option
def chaos(seed, steps, datanodes, writers, readers, as_json, root, keep, dry_run, secure, ha, hosts, racks,
          metrics_port) -> None:
    """Kill, freeze, slow and corrupt DataNodes, rot units on their disks (and restart the NameNode)
    on a seeded schedule while writers and readers run; after every step, every stored file must
    read back identical.

    The schedule never loses more DataNodes (killed, frozen, stalled, erroring, corrupting reads on
    disk or on the wire, rotting) than
    the policy's m = 3, except in steps marked BEYOND TOLERANCE, where a block group short of 6
    reachable units may fail to read, but only cleanly. Wrong bytes always fail the run. At the
    end every fault is cleared, fsck must reach HEALTHY and every rotten unit must have been found
    (by the DataNodes' scrubbers or by reads), replaced and deleted, and every acknowledged put and
    delete must be reflected in the namespace (an UNAVAILABLE outcome may go either way).

    With --ha the cluster runs on 3 etcd members with 2 NameNodes (needs etcd), and about 3 steps
    in 10 kill -9 the active NameNode (a later step starts it again, as a standby), freeze it past
    its lease and thaw it, or kill and restart an etcd member; the writers put their files in
    directories of 4 and delete the oldest directory whole (a recursive delete: one journal
    record, its groups freed in the background, across failovers). Every NameNode's role and
    epoch is polled all along: no epoch may be claimed active by two NameNodes, and no NameNode may answer
    active with an epoch older than one already active.

    Exit 0 only if wrong bytes, lost namespace operations and dual actives are 0 and the invariant
    held at every step; on failure the step and a replay command are printed.
    The clients' receive buffers are poisoned when given back (HEDGEFS_POISON_BUFFERS=1), so
    a buffer used after its return shows up as wrong bytes.

    With --hosts N (as root) the DataNodes run on N hosts in --racks racks, each host a network
    namespace (as `cluster up --hosts`), and about 3 steps in 10 kill a whole host (and start it
    again), partition a rack from the rest (and heal it), or slow a rack as a whole (every DataNode
    in it the same read delay: correlated slowness) and clear it.

    \b
    Examples:
      hedgefs chaos --seed 1 --steps 200
      hedgefs chaos --seed 7 --steps 30 --json | tail -1
      hedgefs chaos --seed 7 --steps 30 --dry-run | grep '^step'   # the schedule alone
      hedgefs chaos --seed 7 --steps 17 --keep                      # replay, keep the logs
      hedgefs chaos --ha --seed 3 --steps 60                        # NameNode and etcd faults too
      hedgefs chaos --steps 500 --metrics-port 9101                 # hedges and breaker, live
      hedgefs chaos --hosts 12 --racks 4 --seed 5 --steps 200       # hosts and racks (as root)
    """
    # Receive buffers poisoned on return (client/transport.py): a use after return is wrong bytes.
    os.environ.setdefault("HEDGEFS_POISON_BUFFERS", "1")
    from hedgefs.chaos.runner import run_chaos
    from hedgefs.chaos.schedule import ChaosConfig, generate_schedule
    from hedgefs.cluster.launcher import ClusterError

    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    if hosts and not dry_run:
        from hedgefs.client.errors import NotAllowed, UsageError
        from hedgefs.cluster.network import HostsUnavailable, check_available, layout

        try:
            check_available(("ip", "iptables"))
            layout(hosts, racks)
        except HostsUnavailable as err:
            raise (NotAllowed if err.missing == "root" else UsageError)(f"chaos --hosts: {err}") from None
        except ValueError as err:
            raise UsageError(f"chaos: {err}") from None
    config = ChaosConfig(seed=seed, steps=steps, datanodes=datanodes, writers=writers, readers=readers, secure=secure,
                         ha=ha, hosts=hosts or 0, racks=racks)
    if dry_run:
        click.echo(f"chaos: seed {seed}")
        for step in generate_schedule(seed, steps, datanodes, ha=ha, hosts=hosts or 0, racks=racks):
            click.echo(step.line())
        return
    try:
        with serving_client_metrics(metrics_port):
            report = run_chaos(config, root=root, keep=keep, out=lambda line: click.echo(line))
    except ClusterError as err:
        raise HedgefsError(f"chaos: {err}") from None
    if as_json:
        click.echo(json.dumps(report.summary()))
    sys.exit(0 if report.ok else 1)
