"""Health verbs: `hedgefs fsck` and `hedgefs admin report`."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

import click

from hedgefs.cli.common import CONTEXT, Group, namenode_option, open_fs, remote_path
from hedgefs.cli.humanize import visible
from hedgefs.client.metrics import natural_key

if TYPE_CHECKING:   # gRPC and protobuf come with a verb that runs, not with `hedgefs --help`
    from hedgefs.client.admin import DataNodeReport


@click.command(context_settings=CONTEXT)
@click.argument("path", default="/")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@namenode_option
def fsck(path: str, as_json: bool, namenode: str | None) -> None:
    """Check block groups (and replicated blocks) under PATH: healthy / misplaced / degraded / missing.

    A group is degraded with fewer than k + m live units, missing with fewer than k; a replicated
    block is degraded (under-replicated) with fewer than n live replicas, missing with none. A
    group with every unit live is misplaced when it breaks the placement rule (two units on one
    host, more than m in one rack; LRC: g + 1) where the DataNodes in service allow better:
    readable, but a host's or a rack's loss costs it more than it should (hedgefs admin balance
    moves its units). Exit 1 if any file is unreadable (misplaced groups alone: 0). Names are shown with control characters escaped;
    --json gives them exactly.

    \b
    Examples:
      hedgefs fsck /
      hedgefs fsck --json /data | jq '.problems[] | .path'
    """
    path = remote_path(path)
    with open_fs(namenode) as fs:
        r = fs.admin.fsck(path)
    if as_json:
        click.echo(json.dumps({
            "path": path, "files": r.files, "groups": r.groups, "healthy": r.healthy, "degraded": r.degraded,
            "missing": r.missing, "misplaced": r.misplaced, "corrupt_files": r.corrupt_files, "status": r.status,
            "problems": [{"path": p.path, "group": p.group_id, "policy": p.policy, "live_units": p.live_units,
                          "corrupt_units": p.corrupt_units, "needed_units": p.needed_units,
                          "total_units": p.total_units, "status": p.status, "detail": p.detail}
                         for p in r.problems],
        }))
    else:
        for p in r.problems:
            corrupt = f", {p.corrupt_units} corrupt" if p.corrupt_units else ""
            if p.status == "MISPLACED":
                click.echo(f"{p.status:<9} {visible(p.path)} group {p.group_id}: {p.detail}")
            elif p.policy.startswith("REPLICATE-"):
                click.echo(f"{p.status:<9} {visible(p.path)} block {p.group_id}: {p.live_units} of {p.total_units} "
                           f"replicas live{corrupt} (under-replicated; {p.needed_units} needed to read)")
            else:
                click.echo(f"{p.status:<9} {visible(p.path)} group {p.group_id}: {p.live_units} of {p.total_units} "
                           f"units live{corrupt} ({p.needed_units} needed)")
        click.echo(f"files {r.files}, groups {r.groups}: healthy {r.healthy}, misplaced {r.misplaced}, "
                   f"degraded {r.degraded}, missing {r.missing}")
        click.echo(f"status: {r.status}")
    if r.status == "CORRUPT":
        sys.exit(1)


@click.group(cls=Group, context_settings=CONTEXT)
def admin() -> None:
    """Cluster administration (an admin's credential, in a secure cluster).

    \b
    Examples:
      hedgefs admin report
      hedgefs admin credential --user alice --groups staff --out alice.pem
      hedgefs admin init-security /etc/hedgefs
    """


@admin.command("failover", context_settings=CONTEXT)
@namenode_option
def admin_failover(namenode: str | None) -> None:
    """Hand the active NameNode's role to a standby (HA, metadata on etcd): the active drains its
    commits and gives its lease up; a standby takes over at once and the old active becomes a
    standby. Give the active's address (or a list: the client follows it to the active).

    \b
    Examples:
      hedgefs admin failover --namenode nn1:8020
    """
    with open_fs(namenode) as fs:
        fs.admin.failover()
    click.echo("handed over: a standby takes over (hedgefs admin report shows which)")


@admin.command("report", context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@namenode_option
def admin_report(as_json: bool, namenode: str | None) -> None:
    """One row per DataNode: where it runs (rack/host, as it registered), state (live, stale:
    heartbeat late, dead), heartbeat age, used bytes, capacity and remaining space of its data
    dir's file system (⚠ below the low-space threshold), units, pending repairs, scrubbing. Sizes are human-readable; --json gives bytes.

    The scrub column is the DataNode's scrubber: passes done, progress of the current (or last)
    pass in units verified, and bad units it found since the DataNode started. DataNodes sharing
    one file system (a local cluster) are listed below the table: their capacity is one disk's.

    \b
    Examples:
      hedgefs admin report
      hedgefs admin report --json | jq '.datanodes[] | select(.low_space) | .id'
    """
    from hedgefs.cli.humanize import human_size, plural

    with open_fs(namenode) as fs:
        r = fs.admin.report()
    n = r.namenode
    role = {"role": n.role or "active", "epoch": n.epoch, "applied_revision": n.applied_revision,
            "meta": n.meta or "sqlite", "active": n.active, "safe_mode": n.safe_mode}
    rows = [{"id": d.id, "address": d.address, "state": d.state, "last_heartbeat_age_s": round(d.last_heartbeat_age_ms / 1000, 1),
             "used_bytes": d.used_bytes, "capacity_bytes": d.capacity_bytes, "remaining_bytes": d.remaining_bytes,
             "used_pct": round(100 * (d.capacity_bytes - d.remaining_bytes) / d.capacity_bytes, 1) if d.capacity_bytes else None,
             "low_space": d.low_space, "shares_filesystem_with": list(d.shares_filesystem_with),
             "units": d.units, "pending_repairs": d.pending_repairs,
             "pending_deletes": d.pending_deletes, "foreign_units": d.foreign_units, "scrub": _scrub(d),
             "admin_state": d.admin_state or "in service", "units_mapped": d.units_mapped,
             "host_id": d.host_id, "rack": d.rack}
            for d in sorted(r.datanodes, key=lambda d: natural_key(d.id))]
    sm = n.safe_mode_detail
    safe_mode = {"on": sm.on, "reason": sm.reason, "units_reported": sm.units_reported, "units_total": sm.units_total,
                 "share": sm.share, "deadline_left_s": sm.deadline_left_s}
    if as_json:
        click.echo(json.dumps({"namenode": role, "safe_mode": safe_mode, "datanodes": rows, "groups_waiting_repair": r.groups_waiting_repair,
                               "blocks_under_replicated": r.blocks_under_replicated,
                               "repairs_done": r.repairs_done, "corrupt_units": r.corrupt_units,
                               "low_space_pct": r.low_space_pct}))
        return
    if role["meta"] != "sqlite":   # HA: which NameNode answered, and what it is
        what = (f"epoch {role['epoch']}" if role["role"] == "active" else
                f"view at etcd revision {role['applied_revision']}, the active is {role['active'] or 'not known'}")
        click.echo(f"namenode: {role['role']} ({what}{', safe mode' if role['safe_mode'] else ''}); "
                   f"metadata on {role['meta']}")
    if sm.on:
        click.echo(f"safe mode: ON ({describe_safe_mode(sm)})")
    where = {row["id"]: f"{row['rack']}/{row['host_id']}" if row["host_id"] else "-" for row in rows}
    wide = max([len("rack/host")] + [len(w) for w in where.values()])
    click.echo(f"{'id':<6} {'address':<22} {'rack/host':<{wide}} {'state':<5} {'heartbeat':>9} {'used':>10} {'capacity':>10} "
               f"{'remaining':>10} {'fs used':>7} {'units':>6} {'repairs':>7}  scrub")
    for row in rows:
        s = row["scrub"]
        scrub = ("off" if not s["enabled"] else
                 f"{plural(s['passes'], 'pass', 'passes')}, this one {s['pass_units_done']}/{s['pass_units']} units, "
                 f"{s['bad_units']} bad")
        pct = "-" if row["used_pct"] is None else f"{row['used_pct']:.0f}%"
        low = " ⚠" if row["low_space"] else "  "
        dead = row["state"] == "dead"   # its figures are its last heartbeat's: bracketed
        used, units = human_size(row["used_bytes"]), str(row["units"])
        if dead:
            used, units = f"({used})", f"({units})"
        click.echo(f"{row['id']:<6} {row['address']:<22} {where[row['id']]:<{wide}} {row['state']:<5} "
                   f"{row['last_heartbeat_age_s']:>8.1f}s "
                   f"{used:>10} {human_size(row['capacity_bytes']):>10} "
                   f"{human_size(row['remaining_bytes']):>10}{low}{pct:>5} {units:>6} {row['pending_repairs']:>7}  {scrub}")
    if any(row["state"] == "dead" for row in rows):
        click.echo("(bracketed: a dead DataNode's last heartbeat; its units are being rebuilt elsewhere)")
    leaving = [f"{row['id']} ({row['units_mapped']} units to move)" for row in rows
               if row["admin_state"] == "decommissioning"]
    if leaving:
        click.echo(f"decommissioning (no new units, its units being copied elsewhere): {', '.join(leaving)}")
    gone = [row["id"] for row in rows if row["admin_state"] == "decommissioned"]
    if gone:
        click.echo(f"decommissioned (holds no unit the cluster needs: may be stopped): {', '.join(gone)}")
    low = [row["id"] for row in rows if row["low_space"]]
    if low:
        click.echo(f"low on space (under {r.low_space_pct:g} % free): {', '.join(low)}")
    shared = _shared_filesystems(rows)
    if shared:
        click.echo("one file system shared by " + "; ".join(", ".join(g) for g in shared)
                   + " (capacity and remaining are one disk's, not the sum)")
    click.echo(f"groups waiting for repair: {r.groups_waiting_repair} (under-replicated blocks among them: "
               f"{r.blocks_under_replicated}); repairs done: {r.repairs_done}; "
               f"corrupt units awaiting replacement: {r.corrupt_units}")
    foreign = {row["id"]: row["foreign_units"] for row in rows if row["foreign_units"]}
    if foreign:
        click.echo("foreign units (another namespace's, e.g. of a wiped NameNode's predecessor; never served, "
                   "adopted or deleted from here): " + ", ".join(f"{dn} {n}" for dn, n in foreign.items()))


def _shared_filesystems(rows: list[dict]) -> list[list[str]]:
    groups, seen = [], set()
    for row in rows:
        if row["shares_filesystem_with"] and row["id"] not in seen:
            group = sorted({row["id"], *row["shares_filesystem_with"]}, key=natural_key)
            seen.update(group)
            groups.append(group)
    return groups


def _scrub(d: DataNodeReport) -> dict:
    s = d.scrub
    return {"enabled": s.enabled, "passes": s.passes, "pass_units_done": s.pass_units_done,
            "pass_units": s.pass_units, "bytes_verified": s.bytes_verified, "bad_units": s.bad_units,
            "last_pass_s": round(s.last_pass_s, 3)}


@admin.command("credential", context_settings=CONTEXT)
@click.option("--user", "user", metavar="NAME", help="A user's credential (or an admin's, with --admin).")
@click.option("--admin", "as_admin", is_flag=True, help="The user is an admin: a superuser, and may call admin RPCs.")
@click.option("--groups", metavar="G1,G2", default="", help="Groups the user is in (file group permissions).")
@click.option("--datanode", "datanode_id", metavar="ID", help="A DataNode's credential (it holds the cluster key).")
@click.option("--days", type=click.IntRange(1, 3650), default=825, show_default=True, help="How long it is valid.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Where to write it (mode 0600).")
@namenode_option
def admin_credential(user, as_admin, groups, datanode_id, days, out, namenode) -> None:
    """Issue a credential for a user, an admin or a DataNode (an admin's call).

    The key pair is made here; the NameNode, which holds the cluster's CA key, signs a certificate
    for its public half. The private key never leaves this machine. The file is written with mode
    0600: give it to its user (HEDGEFS_CREDENTIALS) or DataNode (--credentials) over a safe channel.

    \b
    Examples:
      hedgefs admin credential --user alice --groups staff --out alice.pem
      hedgefs admin credential --user ops --admin --out ops.pem
      hedgefs admin credential --datanode dn11 --out dn11.pem
    """
    from hedgefs.client.errors import UsageError
    from hedgefs.security import material

    if bool(user) == bool(datanode_id):
        raise UsageError("give --user NAME or --datanode ID")
    if datanode_id and (as_admin or groups):
        raise UsageError("--admin and --groups are for users, not DataNodes")
    if os.path.exists(out):
        raise UsageError(f"{out} exists: a credential is never overwritten (remove it first)")
    role = material.DATANODE if datanode_id else material.ADMIN if as_admin else material.USER
    name = datanode_id or user
    group_list = [g for g in groups.split(",") if g]
    try:
        material.check_name(name, role)
        for g in group_list:
            material.check_name(g, "group")
    except ValueError as err:
        raise UsageError(str(err)) from None
    key = material.new_private_key()
    with open_fs(namenode) as fs:
        answer = fs.admin.issue_credential(name, role, material.public_key_pem(key), group_list, days)
    material.write_private(out, material.bundle(
        material.key_pem(key), answer.certificate_pem, answer.ca_pem,
        cluster_key=answer.cluster_key or None, comment=f"{role} {name} of cluster {answer.cluster_id}"))
    click.echo(f"wrote {out}: {role} {name}" + (f" (groups {', '.join(group_list)})" if group_list else "")
               + f" of cluster {answer.cluster_id}")


@admin.command("init-security", context_settings=CONTEXT)
@click.argument("directory")
@click.option("--datanodes", default="dn1,dn2,dn3,dn4,dn5,dn6,dn7,dn8,dn9,dn10", show_default=True,
              metavar="ID,ID", help="DataNode ids to make credentials for (more later: admin credential --datanode).")
@click.option("--cluster-id", metavar="ID", help="The cluster id (default: a new one). To secure an existing "
                                                 "namespace, give its id (the status page shows it).")
@click.option("--admin-user", default="hedgefs", show_default=True, help="Name of the admin credential's user.")
@click.option("--days", type=click.IntRange(1, 3650), default=825, show_default=True)
@click.option("--if-missing", is_flag=True, help="Do nothing (exit 0) if DIRECTORY already holds a cluster's material.")
@click.option("--split", is_flag=True, help="Each credential in a directory of its own (DIR/dn3/dn3.pem), so each "
                                            "can be its holder's volume and nobody else's.")
@click.option("--etcd-hosts", default="", metavar="HOST,HOST",
              help="Names or addresses of the etcd members, for etcd's server and peer certificates (127.0.0.1 "
                   "and localhost are always in them).")
def admin_init_security(directory, datanodes, cluster_id, admin_user, days, if_missing, split, etcd_hosts) -> None:
    """Make a new cluster's security material in DIRECTORY (no NameNode needed).

    Writes ca.pem (the CA's certificate: public), namenode.pem (with the CA key and the cluster
    key), one <id>.pem per DataNode (with the cluster key) and admin.pem, each mode 0600, and
    etcd/: etcd's TLS files from the same CA (server.pem, peer.pem, and client.pem for the
    NameNodes' --meta etcds://..., each with its -key.pem; see docs/ha.md).
    With --if-missing on a directory made before etcd/ existed, only etcd/ is added. Start
    the servers with --credentials pointing at theirs; `hedgefs cluster up --secure` does all of
    this for a local cluster, and docker compose's secure mode runs it into a volume.

    \b
    Examples:
      hedgefs admin init-security /etc/hedgefs --datanodes dn1,dn2,dn3,dn4,dn5,dn6,dn7,dn8,dn9
      scp /etc/hedgefs/dn3.pem dn3-host:/etc/hedgefs/    # one file per host, over a safe channel
    """
    from hedgefs.client.errors import UsageError
    from hedgefs.security import material

    ids = [d for d in datanodes.split(",") if d]
    hosts = [h for h in etcd_hosts.split(",") if h.strip()]
    if if_missing and material.material_path(directory, material.NAMENODE, split).exists():
        if material.etcd_material(directory).exists():
            click.echo(f"{directory} already holds a cluster's material: kept")
            return
        try:
            etcd = material.add_etcd_material(directory, hosts, days, split)
        except (ValueError, material.CredentialError) as err:
            raise UsageError(str(err)) from None
        click.echo(f"{directory} already holds a cluster's material: kept; added etcd's in {etcd.directory}")
        return
    try:
        made = material.init_material(directory, ids, cluster_id=cluster_id, admin=admin_user, days=days, split=split,
                                      etcd_hosts=hosts)
    except (ValueError, FileExistsError) as err:
        raise UsageError(str(err)) from None
    click.echo(f"cluster {made.cluster_id}: wrote {made.ca.name}, {made.namenode.name}, "
               f"{len(made.datanodes)} DataNode credentials, {made.admin.name} and etcd/ to {made.directory}")
    click.echo(f"export HEDGEFS_CREDENTIALS={made.admin}")


# `hedgefs admin s3-key`: the S3 gateway's keys, defined beside the gateway's verb.
from hedgefs.cli.s3 import s3_cert, s3_key  # noqa: E402

admin.add_command(s3_key)
admin.add_command(s3_cert)


from hedgefs.cli.admin_state import admin_decommission, admin_recommission, admin_safemode, describe_safe_mode  # noqa: E402,E501

admin.add_command(admin_decommission)

from hedgefs.cli.balance import admin_balance  # noqa: E402

admin.add_command(admin_balance)
admin.add_command(admin_recommission)
admin.add_command(admin_safemode)

from hedgefs.cli.browser_cert import admin_export_p12  # noqa: E402

admin.add_command(admin_export_p12)
