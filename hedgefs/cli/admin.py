"""Health verbs: `hedgefs fsck` and `hedgefs admin report`."""

import json
import sys

import click

from hedgefs.cli.common import CONTEXT, Group, namenode_option, open_fs
from hedgefs.client.metrics import natural_key
from hedgefs.proto import hedgefs_pb2 as pb


@click.command(context_settings=CONTEXT)
@click.argument("path", default="/")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@namenode_option
def fsck(path: str, as_json: bool, namenode: str | None) -> None:
    """Check block groups (and replicated blocks) under PATH: healthy / degraded / missing.

    A group is degraded with fewer than k + m live units, missing with fewer than k; a replicated
    block is degraded (under-replicated) with fewer than n live replicas, missing with none.
    Exit 1 if any file is unreadable.
    """
    with open_fs(namenode) as fs:
        r = fs.rpc("Fsck", pb.PathRequest(path=path))
    if as_json:
        click.echo(json.dumps({
            "path": path, "files": r.files, "groups": r.groups, "healthy": r.healthy, "degraded": r.degraded,
            "missing": r.missing, "corrupt_files": r.corrupt_files, "status": r.status,
            "problems": [{"path": p.path, "group": p.group_id, "policy": p.policy, "live_units": p.live_units,
                          "corrupt_units": p.corrupt_units, "needed_units": p.needed_units,
                          "total_units": p.total_units, "status": p.status}
                         for p in r.problems],
        }))
    else:
        for p in r.problems:
            corrupt = f", {p.corrupt_units} corrupt" if p.corrupt_units else ""
            if p.policy.startswith("REPLICATE-"):
                click.echo(f"{p.status:<9} {p.path} block {p.group_id}: {p.live_units} of {p.total_units} "
                           f"replicas live{corrupt} (under-replicated; {p.needed_units} needed to read)")
            else:
                click.echo(f"{p.status:<9} {p.path} group {p.group_id}: {p.live_units} of {p.total_units} "
                           f"units live{corrupt} ({p.needed_units} needed)")
        click.echo(f"files {r.files}, groups {r.groups}: healthy {r.healthy}, degraded {r.degraded}, missing {r.missing}")
        click.echo(f"status: {r.status}")
    if r.status == "CORRUPT":
        sys.exit(1)


@click.group(cls=Group, context_settings=CONTEXT)
def admin() -> None:
    """Cluster administration."""


@admin.command("report", context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@namenode_option
def admin_report(as_json: bool, namenode: str | None) -> None:
    """One row per DataNode: state, heartbeat age, used bytes, units, pending repairs, scrubbing.

    The scrub column is the DataNode's scrubber: passes done, progress of the current (or last)
    pass in units verified, and bad units it found since the DataNode started.
    """
    with open_fs(namenode) as fs:
        r = fs.rpc("Report", pb.Empty())
    rows = [{"id": d.id, "address": d.address, "state": d.state, "last_heartbeat_age_s": round(d.last_heartbeat_age_ms / 1000, 1),
             "used_bytes": d.used_bytes, "units": d.units, "pending_repairs": d.pending_repairs,
             "pending_deletes": d.pending_deletes, "scrub": _scrub(d)}
            for d in sorted(r.datanodes, key=lambda d: natural_key(d.id))]
    if as_json:
        click.echo(json.dumps({"datanodes": rows, "groups_waiting_repair": r.groups_waiting_repair,
                               "blocks_under_replicated": r.blocks_under_replicated,
                               "repairs_done": r.repairs_done, "corrupt_units": r.corrupt_units}))
        return
    click.echo(f"{'id':<6} {'address':<22} {'state':<5} {'heartbeat':>9} {'used':>12} {'units':>6} {'repairs':>7}  scrub")
    for row in rows:
        s = row["scrub"]
        scrub = ("off" if not s["enabled"] else
                 f"{s['passes']} passes, this one {s['pass_units_done']}/{s['pass_units']} units, {s['bad_units']} bad")
        click.echo(f"{row['id']:<6} {row['address']:<22} {row['state']:<5} {row['last_heartbeat_age_s']:>8.1f}s "
                   f"{row['used_bytes']:>12} {row['units']:>6} {row['pending_repairs']:>7}  {scrub}")
    click.echo(f"groups waiting for repair: {r.groups_waiting_repair} (under-replicated blocks among them: "
               f"{r.blocks_under_replicated}); repairs done: {r.repairs_done}; "
               f"corrupt units awaiting replacement: {r.corrupt_units}")


def _scrub(d: pb.DataNodeInfo) -> dict:
    s = d.scrub
    return {"enabled": s.enabled, "passes": s.passes, "pass_units_done": s.pass_units_done,
            "pass_units": s.pass_units, "bytes_verified": s.bytes_verified, "bad_units": s.bad_units,
            "last_pass_s": round(s.last_pass_s, 3)}
