"""`hedgefs admin balance` (HDFS's balancer): steps of the NameNode's balancer at a bounded bandwidth.

The NameNode plans (namenode/blocks/balancer.py: misplaced groups first, then disk use) and its
DataNodes move; this loop only paces it: a token bucket of ``--bandwidth`` bytes a second, of
which each step may spend what it holds (a step planning more than one unit's worth only when
nothing is moving, and the bucket then owes it). Killing it at any moment is safe: the moves
already planned finish (or time out) on their own, each one a copy, a switch at the NameNode, a
delete of the old copy; nothing more is planned.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from hedgefs.cli.common import CONTEXT, namenode_option, open_fs
from hedgefs.client.errors import HedgefsError, UsageError

if TYPE_CHECKING:   # gRPC and protobuf come with a verb that runs, not with `hedgefs --help`
    from hedgefs.client.admin import BalanceState

INTERVAL_S = 1.0     # a step a second
BURST_S = 2.0        # the bucket holds at most this many seconds of bandwidth


@dataclass
class Outcome:
    state: BalanceState
    moves: int           # this balance's: moves that took their place
    bytes_moved: int
    failed: int
    planned_bytes: int   # bytes it started moving (planned), for the bandwidth's account
    seconds: float


def run(step, bandwidth: int, threshold: float, *, clock=time.monotonic, sleep=time.sleep, timeout_s: float = 0,
        say=lambda line: None) -> Outcome:
    """Step until the NameNode says the balance is done (``quiet``). ``step(max_bytes,
    threshold, restart)`` is ``Admin.balance_step``. Raises HedgefsError after ``timeout_s``."""
    began = clock()
    first = step(0, threshold, True)
    tokens, last, planned_total = float(bandwidth) * INTERVAL_S, began, 0
    state, shown = first, None
    while True:
        now = clock()
        tokens = min(tokens + (now - last) * bandwidth, bandwidth * BURST_S)
        last = now
        state = step(max(0, int(tokens)), threshold, False)
        tokens -= state.planned_bytes
        planned_total += state.planned_bytes
        outcome = Outcome(state, state.moves_done - first.moves_done, state.bytes_moved - first.bytes_moved,
                          state.moves_failed - first.moves_failed, planned_total, now - began)
        line = progress(outcome)
        if line != shown:
            say(line)
            shown = line
        if state.quiet:
            return outcome
        if timeout_s and now - began >= timeout_s:
            raise HedgefsError(f"the balance is not done after {timeout_s:g} s ({line}); the moves under way "
                               f"finish, nothing more is planned")
        sleep(INTERVAL_S)


def progress(o: Outcome) -> str:
    s = o.state
    where = (f"misplaced groups {s.misplaced}" + (f" ({s.unmendable} no move can mend)" if s.unmendable else "")
             + ("" if s.round_done else " so far"))
    use = f"use spread {s.spread_pct:g}{'% of the average' if s.relative else ' points'}"
    failed = f", {o.failed} failed" if o.failed else ""
    return (f"moved {o.moves} units ({_mib(o.bytes_moved)}){failed}, {s.moves_in_flight} moving "
            f"({_mib(s.bytes_in_flight)}); {where}; {use}, {s.over} DataNodes over, {s.under} under")


def _mib(n: int) -> str:
    return f"{n / 1048576:.1f} MiB"


@click.command("balance", context_settings=CONTEXT)
@click.option("--bandwidth", default="10M", show_default=True, metavar="BYTES/S",
              help="Bytes a second the balance may start moving (512k, 10M, 1G; binary units).")
@click.option("--threshold", type=float, default=10.0, show_default=True, metavar="PCT",
              help="Disk use within this of the average is even: points of capacity (or, where DataNodes "
                   "share a disk, % of the average of their bytes).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(0), default=0, metavar="SECONDS",
              help="Give up after this long (exit 1; the moves under way finish). 0: no limit.")
@click.option("--json", "as_json", is_flag=True, help="The outcome as JSON on stdout.")
@namenode_option
def admin_balance(bandwidth: str, threshold: float, timeout_s: float, as_json: bool, namenode: str | None) -> None:
    """Move units until every block group keeps the placement rule (its units on distinct hosts, at
    most m in a rack; LRC: g + 1) and disk use is even (HDFS's balancer): after racks were given
    to DataNodes that held data, after hosts were added, after a rack came back. The NameNode
    picks the fewest moves that mend each misplaced group, then moves units from DataNodes above
    the average use to those below it without breaking the rule; each move copies a unit to its
    new DataNode, switches the NameNode to the copy and only then deletes the old one, so killing
    this command (or a DataNode) at any point loses nothing. Progress goes to stderr.

    Exit 0: balanced. 1: done, but some groups stay misplaced (the DataNodes in service cannot
    hold them by the rule: add hosts or racks) or disk use stays uneven (no unit can move without
    breaking the rule), or --timeout passed. 2: bad input. 3: NameNode unreachable. 4: not an admin.

    \b
    Examples:
      hedgefs admin balance
      hedgefs admin balance --bandwidth 100M --threshold 5
      hedgefs admin balance --timeout 3600 --json | jq .moves
    """
    from hedgefs.datanode.faults import parse_bandwidth

    try:
        rate = parse_bandwidth(bandwidth)
    except ValueError as err:
        raise UsageError(f"bad --bandwidth {bandwidth!r}: {err}") from None
    if rate <= 0:
        raise UsageError(f"bad --bandwidth {bandwidth!r}: must be more than 0 bytes a second")
    if not 0 <= threshold <= 100 or threshold != threshold:
        raise UsageError(f"bad --threshold {threshold:g}: a percentage from 0 to 100")
    with open_fs(namenode) as fs:
        o = run(fs.admin.balance_step, rate, threshold, timeout_s=timeout_s,
                say=lambda line: click.echo(line, err=True))
    s = o.state
    uneven = s.over + s.under > 0
    if as_json:
        click.echo(json.dumps({"moves": o.moves, "bytes_moved": o.bytes_moved, "moves_failed": o.failed,
                               "seconds": round(o.seconds, 1), "misplaced": s.misplaced, "unmendable": s.unmendable,
                               "over": s.over, "under": s.under, "spread_pct": s.spread_pct,
                               "relative": s.relative, "balanced": not s.misplaced and not uneven}))
    else:
        click.echo(f"moved {o.moves} units ({_mib(o.bytes_moved)}) in {o.seconds:.0f} s")
    if s.misplaced:
        raise HedgefsError(f"{s.misplaced} groups stay misplaced: the DataNodes in service cannot hold them by "
                           f"the placement rule (hedgefs fsck lists them; add hosts or racks)")
    if uneven:
        raise HedgefsError(f"disk use stays uneven ({s.over} DataNodes over, {s.under} under the average by more "
                           f"than {threshold:g}%): no unit can move without breaking the placement rule")
    if not as_json:
        click.echo("balanced: every group keeps the placement rule, disk use is within the threshold")
