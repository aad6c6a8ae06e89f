"""`hedgefs admin decommission|recommission|safemode`: take a DataNode out of service (HDFS's
decommission) or put it back, and the NameNode's safe mode (HDFS's `dfsadmin -safemode`)."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import click

from hedgefs.cli.common import CONTEXT, namenode_option, open_fs
from hedgefs.client.errors import HedgefsError

if TYPE_CHECKING:   # gRPC and protobuf come with a verb that runs, not with `hedgefs --help`
    from hedgefs.client.admin import DecommissionState, SafeModeStatus


def describe_safe_mode(sm: SafeModeStatus) -> str:
    """What a safe mode waits for, in one phrase."""
    if sm.reason == "admin":
        return "entered by an admin: `hedgefs admin safemode leave` ends it"
    deadline = f", or {sm.deadline_left_s:g} s more" if sm.deadline_left_s else ""
    meanwhile = ("no deletes or repairs meanwhile" if sm.reason == "failover" else
                 "no deletes or repairs, and namespace changes are refused, meanwhile")
    return (f"{sm.reason}: {sm.units_reported} of {sm.units_total} block groups readable from reported "
            f"DataNodes, it waits for {100 * sm.share:.0f}%{deadline}; {meanwhile}")



def _said(datanode_id: str, r: DecommissionState) -> str:
    if r.admin_state == "decommissioned":
        return f"{datanode_id}: decommissioned (no unit the cluster needs is on it: it may be stopped)"
    if r.admin_state == "decommissioning":
        return f"{datanode_id}: decommissioning, {r.units_mapped} units still to copy elsewhere"
    return f"{datanode_id}: in service"


@click.command("decommission", context_settings=CONTEXT)
@click.argument("datanode_id", metavar="DATANODE")
@click.option("--wait", is_flag=True, help="Return only once it is decommissioned (progress on stderr).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(0), default=0, metavar="SECONDS",
              help="With --wait: give up after this long (exit 1; it goes on decommissioning). 0: no limit.")
@namenode_option
def admin_decommission(datanode_id: str, wait: bool, timeout_s: float, namenode: str | None) -> None:
    """Take a DataNode out of service (HDFS's decommission): it gets no new units and keeps serving
    reads while the NameNode copies every unit it holds onto other DataNodes. Once none is left on
    it, `admin report` shows it decommissioned: it may then be stopped with no group degraded.
    `hedgefs admin recommission DATANODE` undoes it. Exit 2: no such DataNode; exit 1: too few
    DataNodes would be left for a policy in use (or --timeout passed, or another admin
    recommissioned it while --wait waited).

    \b
    Examples:
      hedgefs admin decommission dn3
      hedgefs admin decommission dn3 --wait && hedgefs fault kill dn3
    """
    with open_fs(namenode) as fs:
        r = fs.admin.decommission(datanode_id)
        deadline = time.monotonic() + timeout_s if timeout_s else None
        while wait and r.admin_state != "decommissioned":
            if deadline is not None and time.monotonic() >= deadline:
                raise HedgefsError(f"{datanode_id} is still decommissioning after {timeout_s:g} s "
                                   f"({r.units_mapped} units to copy); it goes on")
            click.echo(_said(datanode_id, r), err=True)
            time.sleep(1.0)
            r = _state_of(fs, datanode_id)
    click.echo(_said(datanode_id, r))


def _state_of(fs, datanode_id: str) -> DecommissionState:
    """Its state from the Report (asking Decommission again would decommission anew a DataNode
    another admin has recommissioned meanwhile); one that is back in service ends the wait."""
    found = fs.admin.report().datanode(datanode_id)
    if found is None or not found.admin_state:
        raise HedgefsError(f"{datanode_id} is in service again (recommissioned meanwhile): no longer waiting")
    from hedgefs.client.admin import DecommissionState

    return DecommissionState(found.admin_state, found.units_mapped)


@click.command("recommission", context_settings=CONTEXT)
@click.argument("datanode_id", metavar="DATANODE")
@namenode_option
def admin_recommission(datanode_id: str, namenode: str | None) -> None:
    """Put a decommissioning or decommissioned DataNode back in service: it takes new units again
    (units already copied elsewhere stay there). Exit 2: no such DataNode.

    \b
    Examples:
      hedgefs admin recommission dn3
    """
    with open_fs(namenode) as fs:
        r = fs.admin.recommission(datanode_id)
    click.echo(_said(datanode_id, r))


@click.command("safemode", context_settings=CONTEXT)
@click.argument("action", type=click.Choice(["get", "enter", "leave", "wait"]), default="get")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@namenode_option
def admin_safemode(action: str, as_json: bool, namenode: str | None) -> None:
    """The NameNode's safe mode (HDFS's `dfsadmin -safemode`): get, enter, leave, or wait until it
    is off. In safe mode the NameNode serves reads but refuses namespace changes (exit 1, "in safe
    mode"), and sends no deletes and plans no repairs. A NameNode restarted on existing groups is
    in it until --safe-mode-share of the block groups are readable from DataNodes that have
    block-reported (at least k units of a group; or --safe-mode-deadline-s);
    one entered here lasts until `leave`. A fresh namespace never starts in it.

    \b
    Examples:
      hedgefs admin safemode get
      hedgefs admin safemode enter
      hedgefs admin safemode leave
      hedgefs admin safemode wait && hedgefs put big.bin /data/
    """
    with open_fs(namenode) as fs:
        r = fs.admin.safe_mode("get" if action == "wait" else action)
        while action == "wait" and r.on:
            time.sleep(0.5)   # polling the NameNode, as `hdfs dfsadmin -safemode wait` does
            r = fs.admin.safe_mode()
    if as_json:
        click.echo(json.dumps({"on": r.on, "reason": r.reason, "units_reported": r.units_reported,
                               "units_total": r.units_total, "share": r.share, "deadline_left_s": r.deadline_left_s}))
    else:
        click.echo(f"safe mode is ON ({describe_safe_mode(r)})" if r.on else "safe mode is OFF")
