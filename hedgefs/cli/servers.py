"""The two servers: `hedgefs namenode` and `hedgefs datanode`, the one way to start each.

The launcher, the tests and docker-compose all run these commands; every server flag is here.
A server given ``--credentials`` (its own credential file) runs secure: TLS on every port, every
call checked; the material comes from `hedgefs cluster up --secure`, `hedgefs admin init-security`
or `hedgefs admin credential --datanode`.
"""

import logging
import os

import click

from hedgefs.cli.common import CONTEXT, check_policy, load_credential_or_exit, namenode_address_option, setup_logging
from hedgefs.client.errors import HedgefsError, NotAllowed, Unavailable, UsageError
from hedgefs.security.identity import Refused


def server_credentials_option(f):
    # Not HEDGEFS_CREDENTIALS: that is a client's (an admin's, often), set in the shell that may
    # start a server too.
    return click.option("--credentials", "credentials", metavar="FILE", envvar="HEDGEFS_SERVER_CREDENTIALS",
                        help="This server's credential file (a secure cluster: TLS on every port, every call "
                             "checked; default: $HEDGEFS_SERVER_CREDENTIALS). Without it the server is insecure: "
                             "anyone who reaches it may do anything.")(f)


def _etcd_tls_beside(credentials: str | None) -> str:
    """DIR/etcd/ of the material directory that holds the NameNode's credential (DIR/namenode.pem,
    or DIR/namenode/namenode.pem when init-security split it); "" if there is none."""
    if not credentials:
        return ""
    here = os.path.dirname(os.path.abspath(credentials))
    for candidate in (os.path.join(here, "etcd"), os.path.join(os.path.dirname(here), "etcd")):
        if os.path.isdir(candidate):
            return candidate
    return ""


@click.command(context_settings=CONTEXT)
@click.option("--port", type=int, default=8020, show_default=True, help="Port (0 picks a free one).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False),
              help="Where the journal and checkpoint images live (namenode.db; on etcd: nothing but the lock).")
@click.option("--meta", "meta", metavar="URL", default="", envvar="HEDGEFS_META",
              help="Where the namespace's journal lives: sqlite:///PATH (default: namenode.db in the data dir; no "
                   "HA) or etcd://HOST:PORT[,HOST:PORT...]/PREFIX (HA: run several NameNodes on one prefix; one is "
                   "the active, the others hot standbys that take over); etcds://... the same over TLS (--etcd-tls).")
@click.option("--etcd-tls", "etcd_tls", metavar="DIR", default="", envvar="HEDGEFS_ETCD_TLS",
              help="With --meta etcds://: the directory with ca.pem, client.pem and client-key.pem (what "
                   "`hedgefs admin init-security` writes in DIR/etcd/; default: the etcd/ directory beside "
                   "--credentials, or one level up).")
@click.option("--lease-ttl-s", type=click.IntRange(2, 60), default=3, show_default=True,
              help="HA: the active's etcd lease. It serves only while surely holding it (TTL - 1 s after its "
                   "last renewal); a standby takes over within about the TTL of the active's death.")
@click.option("--etcd-max-txn-ops", type=click.IntRange(16), default=1024, show_default=True,
              help="HA: the etcd servers' --max-txn-ops (etcd's own default is 128: run etcd with 1024). A group "
                   "commit that needs more keys goes in several Txns.")
@click.option("--safe-mode-share", type=click.FloatRange(0, 1), default=0.9, show_default=True,
              help="Safe mode: a NameNode restarted on existing groups (or HA's new active) deletes and repairs "
                   "nothing, and (but for a new active) refuses namespace changes, until this share of the block "
                   "groups is readable (at least k units) from DataNodes that have block-reported to it, as HDFS.")
@click.option("--safe-mode-deadline-s", type=click.FloatRange(0), default=60.0, show_default=True,
              help="A restarted NameNode leaves safe mode after this long even if the share has not reported "
                   "(0: only once it has, or an admin's `hedgefs admin safemode leave`).")
@click.option("--checkpoint-every", type=click.IntRange(1), default=200_000, show_default=True, metavar="RECORDS",
              help="Write a checkpoint image of the namespace (and drop the journal before it) every this many "
                   "journal records (or every eighth of the namespace's inodes, if more), and at a clean "
                   "shutdown: a start-up loads the image and replays the rest.")
@click.option("--http-port", type=int, help="Serve the status pages at http://HOST:PORT/ (JSON under /api/), "
                                            "Prometheus metrics at /metrics and a probe at /health (0 picks a free port).")
@click.option("--dead-interval-s", type=float, default=30.0, show_default=True, help="Silence after which a DataNode is dead.")
@click.option("--repair-interval-s", type=float, default=1.0, show_default=True, help="How often the repair monitor runs.")
@click.option("--lease-timeout-s", type=float, default=600.0, show_default=True,
              help="A write silent this long is abandoned (its client died) and its units deleted.")
@click.option("--block-size", type=int, default=128 * 1024 * 1024, show_default=True, help="Bytes per internal block in a full group.")
@click.option("--default-policy", default="RS-6-3-1024k", show_default=True, help="Policy where no directory sets one.")
@click.option("--min-replicas", type=click.IntRange(1, None), default=2, show_default=True,
              help="Replicas of a REPLICATE-n block that must be stored for a write to succeed (at most n; "
                   "the NameNode re-replicates the rest).")
@click.option("--port-file", type=click.Path(dir_okay=False),
              help="Write the bound ports here once serving (gRPC first, then http= with --http-port).")
@server_credentials_option
@click.option("--cluster-id", metavar="ID",
              help="The cluster a new namespace belongs to (default: a new one, or the credential's). "
                   "An existing namespace of another cluster is refused.")
@click.option("--block-token-lifetime-s", type=click.FloatRange(1), default=600.0, show_default=True,
              help="How long a block access token is good for (secure clusters; clients renew theirs).")
def namenode(port, host, data_dir, meta, etcd_tls, lease_ttl_s, etcd_max_txn_ops, safe_mode_share, safe_mode_deadline_s,
             checkpoint_every, http_port, dead_interval_s,
             repair_interval_s, lease_timeout_s, block_size, default_policy, min_replicas, port_file, credentials, cluster_id,
             block_token_lifetime_s) -> None:
    """Run a NameNode (the namespace in memory, its journal in SQLite, or on etcd: --meta).

    On etcd (--meta etcd://...) the namespace survives the loss of any NameNode: start two or
    three on one prefix, each with its own data dir; one is the active, the others standbys that
    answer stat and list and take over when the active's lease lapses. Exit codes: 3 = no etcd
    member answers at start; 4 = the prefix holds another cluster's namespace (--cluster-id,
    the credential's) or keys that are not a namespace; 1 = any other failure to start.

    \b
    Examples:
      hedgefs namenode --data-dir /srv/nn --http-port 9870
      hedgefs namenode --data-dir /srv/nn --host 0.0.0.0 --credentials /etc/hedgefs/namenode.pem
      hedgefs namenode --data-dir /srv/nn1 --meta etcd://e1:2379,e2:2379,e3:2379/hedgefs
    """
    from hedgefs.namenode.journal.etcd_meta import MetaUnavailable, parse_meta_url, preflight, with_tls
    from hedgefs.namenode.journal.journal import CorruptStore
    from hedgefs.namenode.server import serve

    # INFO: what changed in the cluster; -v adds a line per namespace operation (DEBUG)
    setup_logging(bool(click.get_current_context().find_root().params.get("verbose")), logging.INFO)
    check_policy(default_policy)
    try:
        url = parse_meta_url(meta) if meta else None
        if url is not None and url.secure:
            etcd_tls = etcd_tls or _etcd_tls_beside(credentials)
            url = with_tls(url, etcd_tls)
    except ValueError as err:
        raise UsageError(str(err)) from None
    refusal = preflight(url) if url is not None and url.secure else None   # gRPC would say only "unavailable"
    if refusal:
        raise NotAllowed(f"namenode: {refusal}")
    credential = load_credential_or_exit(credentials) if credentials else None
    try:
        serve(port=port, data_dir=data_dir, host=host, port_file=port_file, dead_interval_s=dead_interval_s,
              default_block_size=block_size, default_policy=default_policy, repair_interval_s=repair_interval_s,
              lease_timeout_s=lease_timeout_s, http_port=http_port, min_replicas=min_replicas,
              credential=credential, cluster_id=cluster_id, block_token_lifetime_s=block_token_lifetime_s,
              meta=meta, lease_ttl_s=lease_ttl_s, safe_mode_share=safe_mode_share, etcd_max_txn_ops=etcd_max_txn_ops,
              etcd_tls=etcd_tls, safe_mode_deadline_s=safe_mode_deadline_s, checkpoint_every=checkpoint_every)
    except MetaUnavailable as err:
        refusal = preflight(url) if not url.secure else None   # plaintext to members that speak TLS?
        if refusal:
            raise NotAllowed(f"namenode: {refusal}") from None
        raise Unavailable(f"namenode: etcd unreachable ({meta}): {err}") from None
    except Refused as err:
        raise NotAllowed(str(err)) from None
    except CorruptStore as err:   # nothing was changed: the operator decides (a backup, the journal)
        raise HedgefsError(f"namenode: {err}") from None
    except (ValueError, RuntimeError) as err:
        raise HedgefsError(str(err)) from None


@click.command(context_settings=CONTEXT)
@click.option("--id", "datanode_id", required=True, help="DataNode id, e.g. dn3.")
@click.option("--port", type=int, default=0, show_default=True, help="gRPC port: fault knobs (0 picks a free one).")
@click.option("--data-port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Data port: unit reads and writes (0 picks a free one). Advertised to the NameNode.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (both ports).")
@click.option("--advertise-host", help="Host other processes use to reach this DataNode (default: --host).")
@click.option("--data-dir", required=True, type=click.Path(file_okay=False), help="Where internal blocks live.")
@namenode_address_option
@click.option("--rack", default="/default-rack", show_default=True, metavar="/DC/RACK",
              help="The rack this DataNode is in, a path such as /dc1/r2: placement keeps at most m units of a "
                   "block group in one rack.")
@click.option("--host-id", metavar="ID",
              help="The host (machine) this DataNode runs on: placement puts a group's units on distinct hosts "
                   "[the host of --advertise-host].")
@click.option("--enable-faults", is_flag=True, help="Accept fault-injection RPCs (hedgefs fault ...).")
@click.option("--fault", "fault_specs", multiple=True, metavar="KEY=VALUE",
              help="Start with a fault: read-delay-ms, probability, jitter-ms, stall, error-probability, "
                   "corrupt-probability, wire-corrupt-probability, bandwidth. Repeatable. "
                   "Also HEDGEFS_FAULT_* variables.")
@click.option("--heartbeat-interval-s", type=float, default=3.0, show_default=True)
@click.option("--block-report-interval-s", type=float, default=60.0, show_default=True,
              help="How often the full list of stored units goes to the NameNode.")
@click.option("--max-repairs", type=click.IntRange(1), default=2, show_default=True,
              help="Repairs (unit rebuilds) this DataNode runs at once.")
@click.option("--scrub-interval-s", type=click.FloatRange(0), default=7 * 24 * 3600, show_default=True,
              help="Re-read and verify every stored unit once per this many seconds, reporting bad ones (0 = never).")
@click.option("--scrub-bandwidth", default="4M", show_default=True, metavar="BYTES/S",
              help="Cap on the scrubber's reads: 1048576, 512k, 10M, 1GiB...")
@click.option("--max-streams", type=click.IntRange(1), default=64, show_default=True,
              help="Unit reads and writes served at once; more get a BUSY answer (readers rebuild from other units).")
@click.option("--write-idle-s", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True,
              help="A unit write that sends nothing for this long is dropped.")
@click.option("--no-fsync", is_flag=True, help="Skip fsync on finalize (tests, benchmarks).")
@click.option("--http-port", type=int, help="Serve Prometheus metrics at http://HOST:PORT/metrics and a probe at "
                                            "/health (0 picks a free port).")
@click.option("--port-file", type=click.Path(dir_okay=False),
              help="Write the bound ports here once serving (gRPC first, then data=, http=).")
@server_credentials_option
def datanode(datanode_id, port, data_port, host, advertise_host, data_dir, namenode, rack, host_id, enable_faults,
             fault_specs,
             heartbeat_interval_s, block_report_interval_s, max_repairs, scrub_interval_s, scrub_bandwidth, max_streams,
             write_idle_s, no_fsync, http_port, port_file, credentials) -> None:
    """Run a DataNode (internal blocks on local disk, CRC32C-checked, scrubbed).

    Two ports: --port (gRPC: fault knobs) and --data-port (unit reads and writes, sendfile from
    the page cache). Both are advertised to the NameNode as --advertise-host:PORT.

    \b
    Examples:
      hedgefs datanode --id dn1 --data-dir /srv/dn1 --namenode nn:8020 --port 9866 --data-port 9867
      hedgefs datanode --id dn2 --data-dir /srv/dn2 --scrub-interval-s 86400 --scrub-bandwidth 20M
      hedgefs datanode --id dn3 --data-dir /srv/dn3 --namenode nn:8020 --credentials /etc/hedgefs/dn3.pem
      hedgefs datanode --id dn4 --data-dir /srv/dn4 --namenode nn1:8020,nn2:8020   # HA: both NameNodes
      hedgefs datanode --id dn5 --data-dir /srv/dn5 --namenode nn:8020 --rack /dc1/r2 --host-id node7
    """
    from hedgefs.cli.paths import check_address
    from hedgefs.client.config import namenode_address
    from hedgefs.datanode.faults import parse_bandwidth
    from hedgefs.datanode.server import serve
    from hedgefs.datanode.storage import DataDirInUse

    try:
        scrub_bandwidth_bps = parse_bandwidth(scrub_bandwidth)
    except ValueError as err:
        raise UsageError(f"bad --scrub-bandwidth {scrub_bandwidth!r}: {err}") from None
    setup_logging(default_level=logging.INFO)
    enable_faults = enable_faults or os.environ.get("HEDGEFS_ENABLE_FAULTS", "").lower() in ("1", "true", "yes")
    credential = load_credential_or_exit(credentials) if credentials else None
    try:
        serve(datanode_id=datanode_id, port=port, data_dir=data_dir, namenode=check_address(namenode_address(namenode)), host=host,
              advertise_host=advertise_host, port_file=port_file, enable_faults=enable_faults,
              fault_specs=list(fault_specs), credential=credential, heartbeat_interval_s=heartbeat_interval_s,
              block_report_interval_s=block_report_interval_s, max_repairs=max_repairs, fsync=not no_fsync,
              http_port=http_port, scrub_interval_s=scrub_interval_s, scrub_bandwidth_bps=scrub_bandwidth_bps,
              data_port=data_port, max_streams=max_streams, write_idle_s=write_idle_s, rack=rack, host_id=host_id)
    except ValueError as err:
        raise UsageError(str(err)) from None
    except DataDirInUse as err:
        raise HedgefsError(f"datanode {datanode_id}: {err}") from None
    except Refused as err:
        raise NotAllowed(f"datanode {datanode_id}: {err}") from None
    except RuntimeError as err:
        raise HedgefsError(str(err)) from None
