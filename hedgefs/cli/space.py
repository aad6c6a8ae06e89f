"""Space verbs: `hedgefs df` (the cluster's disks) and `hedgefs du` (what a tree takes)."""

import json

import click

from hedgefs.cli.common import CONTEXT_NO_SHORT_HELP, chosen_namenode, namenode_option, open_fs, remote_path
from hedgefs.cli.humanize import human_size, visible


@click.command(context_settings=CONTEXT_NO_SHORT_HELP)
@click.option("-h", "--human", "human", is_flag=True, help="Sizes in K, M, G (powers of 1024).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (bytes).")
@namenode_option
def df(human: bool, as_json: bool, namenode: str | None) -> None:
    """The cluster's capacity, used and available space, as `hdfs dfs -df`.

    Size and Available are the live DataNodes' file systems, each counted once (ten local
    DataNodes on one disk are one disk). Used is the bytes of units stored (parity and replicas
    included). A DataNode below the low-space threshold is named.

    \b
    Examples:
      hedgefs df -h
      hedgefs df --json | jq .available_bytes
    """
    with open_fs(namenode) as fs:
        r = fs.admin.report()
    live = [d for d in r.datanodes if d.state != "dead"]
    seen: set[str] = set()
    size = available = 0
    for d in live:
        if d.id in seen:
            continue
        seen.update([d.id, *d.shares_filesystem_with])
        size += d.capacity_bytes
        available += d.remaining_bytes
    used = sum(d.used_bytes for d in live)
    low = sorted(d.id for d in live if d.low_space)
    doc = {"filesystem": f"hedgefs://{chosen_namenode(namenode)}", "size_bytes": size, "used_bytes": used,
           "available_bytes": available, "use_pct": round(100 * (size - available) / size, 1) if size else 0.0,
           "live_datanodes": len(live), "low_space": low, "low_space_pct": r.low_space_pct}
    if as_json:
        click.echo(json.dumps(doc))
        return
    fmt = human_size if human else str
    click.echo(f"{'Filesystem':<30} {'Size':>14} {'Used':>14} {'Available':>14} {'Use%':>5}")
    click.echo(f"{doc['filesystem']:<30} {fmt(size):>14} {fmt(used):>14} {fmt(available):>14} {doc['use_pct']:>4.0f}%")
    if low:
        click.echo(f"low on space (under {r.low_space_pct:g} % free): {', '.join(low)}", err=True)


@click.command(context_settings=CONTEXT_NO_SHORT_HELP)
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option("-s", "summary", is_flag=True, help="One total per PATH, not one line per entry in it.")
@click.option("-h", "--human", "human", is_flag=True, help="Sizes in K, M, G (powers of 1024).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (bytes, exact names).")
@namenode_option
def du(paths: tuple[str, ...], summary: bool, human: bool, as_json: bool, namenode: str | None) -> None:
    """Bytes in each entry of PATH (default /), and the disk they take with parity or replicas,
    as `hdfs dfs -du`. An erasure-coded file's open tail (its last group kept as m + 1
    replicas while it is hsynced) counts as its copies.

    \b
    Examples:
      hedgefs du /data              # one line per entry of /data
      hedgefs du -s -h /data /logs  # one total each
    """
    rows = []
    with open_fs(namenode) as fs:
        for path in [remote_path(p) for p in paths or ("/",)]:
            top = fs.stat(path)
            if summary or not top.is_dir:
                rows.append((path, *_tree_size(fs, top)))
                continue
            for entry in fs.list(path):
                rows.append((entry.path, *_tree_size(fs, entry)))
    if as_json:
        click.echo(json.dumps([{"path": p, "length": n, "disk_bytes": d} for p, n, d in rows]))
        return
    fmt = human_size if human else str
    for path, length, disk in rows:
        click.echo(f"{fmt(length):>12} {fmt(disk):>12}  {visible(path)}")


def _tree_size(fs, status) -> tuple[int, int]:
    """(bytes, bytes on disk) of a file, or of every file under a directory: from the listing
    alone (an entry says its last group's own code, if any: no stat per file)."""
    entries = fs.iter_list(status.path, recursive=True) if status.is_dir else [status]
    length = disk = 0
    for e in entries:
        if e.is_dir:
            continue
        length += e.length
        disk += disk_bytes(e)
    return length, disk


def disk_bytes(e) -> int:
    """Bytes a file takes on the DataNodes: its data plus parity (EC) or its n copies; a status
    with its groups (``stat``) counts each in its own code (an EC file's open tail: m + 1 copies),
    a listing's entry its last group in ``last_group_code`` (every group before it is full)."""
    from hedgefs.ec import layout
    from hedgefs.ec.policy import parse_policy

    try:
        policy = parse_policy(e.policy)
        if e.groups:
            return sum(sum(layout.unit_lengths(g.code(policy), g.length)) for g in e.groups)
        block_size = e.block_size or layout.block_size_for(policy, 0)
        lengths = layout.group_lengths(e.length, policy, block_size)
        tail = 0   # a tail holds less than a group: the bytes past the last full one (none: it is empty)
        if e.last_group_code and e.length % layout.group_data_size(policy, block_size):
            tail = sum(layout.unit_lengths(parse_policy(e.last_group_code), lengths.pop()))
        return tail + sum(sum(layout.unit_lengths(policy, g)) for g in lengths)
    except (ValueError, ZeroDivisionError):
        return e.length
