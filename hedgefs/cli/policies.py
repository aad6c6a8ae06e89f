"""`hedgefs ec ...`: storage policies (erasure coding and replication) on directories and files."""

import json

import click

from hedgefs.cli.common import CONTEXT, Group, check_policy, namenode_option, open_fs, remote_path
from hedgefs.cli.progress import Progress
from hedgefs.client.errors import HedgefsError, UsageError


@click.group(cls=Group, context_settings=CONTEXT)
def ec() -> None:
    """Storage policies: erasure coding (RS-k-m-cell, LRC-k-l-g-cell) or replication (REPLICATE-n).

    A directory's policy is inherited by files created below it; a file keeps the policy it was
    written with until `hedgefs ec convert` rewrites it.

    \b
    Which to choose (`hedgefs ec list` shows each one's cost and tolerance):
      RS-6-3         least disk (1.50 bytes per byte), any 3 DataNodes lost; but a read around a
                     slow or lost DataNode, and a repair, read 6 other units: for cold and
                     streaming data.
      LRC-6-2-2      1.67 bytes per byte, any 3 DataNodes lost (and 86 % of the ways to lose 4);
                     a read around a slow or lost DataNode and a repair read the 3 other units of
                     its local group, half of RS-6-3: for hot data read in small pieces.
      REPLICATE-3    3.00 bytes per byte, any 2 lost; any one replica answers: for small,
                     very hot files and logs written in small appends.
    64k cells suit small random reads (a read touches one cell), 1024k cells large sequential ones.

    \b
    The tail with one slow DataNode (docs/benchmarks.md; `hedgefs bench suite`): a one-cell
    read of a unit on it is rebuilt from the code's cheapest sources instead, so reading around
    it costs at least duty x share x (sources - 1) more unit reads: RS-6-3 5 more per such read,
    LRC-6-2-2 2, REPLICATE-3 none (another replica). With a DataNode serving 13.5 % of the reads
    slow for 80 % of a run: RS-6-3 54 %, LRC-6-2-2 22 %, REPLICATE-3 0 % more unit reads, and on
    a CPU-bound host those extra reads are the queue every read waits in.
    """


@ec.command("set-policy", context_settings=CONTEXT)
@click.argument("path")
@click.argument("name")
@namenode_option
def ec_set_policy(path: str, name: str, namenode: str | None) -> None:
    """Set policy NAME on directory PATH (new files below it get it).

    \b
    Examples:
      hedgefs ec set-policy /data RS-6-3-1024k
      hedgefs ec set-policy /hbase REPLICATE-3
    """
    check_policy(name)
    path = remote_path(path)
    with open_fs(namenode) as fs:
        fs.set_policy(path, name)


@ec.command("get-policy", context_settings=CONTEXT)
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@namenode_option
def ec_get_policy(path: str, as_json: bool, namenode: str | None) -> None:
    """Show the policy PATH uses and where it is inherited from.

    \b
    Examples:
      hedgefs ec get-policy /data/big.bin
      hedgefs ec get-policy /hbase
    """
    with open_fs(namenode) as fs:
        response = fs.get_policy(remote_path(path))
    source = response.source_path or "cluster default"
    if as_json:
        click.echo(json.dumps({"path": remote_path(path), "policy": response.policy,
                               "from": response.source_path or None}))
        return
    click.echo(f"{response.policy}\t(from {source})")


@ec.command("unset-policy", context_settings=CONTEXT)
@click.argument("path")
@namenode_option
def ec_unset_policy(path: str, namenode: str | None) -> None:
    """Remove the policy set on directory PATH: new files below it inherit from its parent again
    (existing files keep theirs; `ec convert -r` rewrites them).

    \b
    Examples:
      hedgefs ec unset-policy /data
    """
    with open_fs(namenode) as fs:
        fs.set_policy(remote_path(path), "")


@ec.command("list-policies", context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def ec_list_policies(as_json: bool) -> None:
    """List the built-in policies with their disk cost, tolerance and repair reads (any
    RS-<k>-<m>-<cell>k, LRC-<k>-<l>-<g>-<cell>k and REPLICATE-1 to REPLICATE-5 are accepted).

    "repair reads N" is how many units a repair, or a read around a slow DataNode, reads to
    rebuild one lost unit; "needs N DataNodes": one per unit, and a policy needs at least that
    many live DataNodes to be set or written.

    \b
    Examples:
      hedgefs ec list-policies
      hedgefs ec list-policies --json | jq -r 'select(.units <= 5) | .name'
    """
    _list_policies(as_json)


@ec.command("list", context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def ec_list(as_json: bool) -> None:
    """The same as `hedgefs ec list-policies`.

    \b
    Examples:
      hedgefs ec list
    """
    _list_policies(as_json)


def _list_policies(as_json: bool) -> None:
    from hedgefs.ec.policy import BUILTIN_POLICIES, DEFAULT_POLICY, MAX_REPLICAS, parse_policy

    names = list(BUILTIN_POLICIES) + [f"REPLICATE-{n}" for n in range(1, MAX_REPLICAS + 1)
                                      if f"REPLICATE-{n}" not in BUILTIN_POLICIES]
    for name in names:
        p = parse_policy(name)
        if as_json:
            click.echo(json.dumps({"name": name, "replicated": p.replicated, "data_units": p.k,
                                   "parity_units": p.m, "local_groups": p.local_groups, "units": p.units,
                                   "cell_size": p.cell_size, "tolerates_lost_datanodes": p.tolerance,
                                   "repair_reads": p.repair_reads(0), "overhead": round(p.overhead, 3),
                                   "default": name == DEFAULT_POLICY}))
            continue
        mark = "  (default)" if name == DEFAULT_POLICY else ""
        if p.replicated:
            what = f"{p.units} {'replica' if p.units == 1 else 'replicas'} of every block"
        elif p.local_groups:
            what = (f"{p.k} data units in {p.local_groups} local groups + {p.local_groups} local and "
                    f"{p.global_parities} global parity units, {p.cell_size // 1024} KiB cells")
        else:
            what = f"{p.k} data + {p.m} parity units, {p.cell_size // 1024} KiB cells"
        click.echo(f"{name:<14} {what}, tolerates {p.tolerance} lost DataNode{'s' * (p.tolerance != 1)}, "
                   f"{p.overhead:.2f} bytes on disk per byte; repair reads {p.repair_reads(0)}, "
                   f"needs {p.units} DataNode{'s' * (p.units > 1)}{mark}")


@ec.command("convert", context_settings=CONTEXT)
@click.argument("path")
@click.option("--policy", "name", required=True, metavar="NAME", help="The policy to rewrite into.")
@click.option("-r", "recursive", is_flag=True, help="PATH is a directory: convert every file under it, "
                                                    "and set NAME on it for new files.")
@namenode_option
def ec_convert(path: str, name: str, recursive: bool, namenode: str | None) -> None:
    """Rewrite a file (or with -r a tree) into policy NAME, EC <-> replication included.

    Each file is rewritten atomically: readers see the old file or the new one, never a mix, and
    a crash or a failure leaves the old one. The file keeps its mtime; a file changed while it is
    being converted is left as it is (and reported). Files already in NAME are skipped (a single
    file already in NAME is an error).

    \b
    Examples:
      hedgefs ec convert /hbase/hot.hfile --policy REPLICATE-3
      hedgefs ec convert -r /archive --policy RS-6-3-1024k
    """
    from hedgefs.ec.policy import parse_policy

    check_policy(name)
    target = parse_policy(name).name
    path = remote_path(path)
    with open_fs(namenode) as fs:
        st = fs.stat(path)
        if not st.is_dir:
            _convert_one(fs, path, st.length, target)
            return
        if not recursive:
            raise UsageError(f"{path} is a directory: use -r to convert every file under it")
        if fs.get_policy(path).policy == target and all(
                e.policy == target for e in fs.iter_list(path, recursive=True) if not e.is_dir):
            raise UsageError(f"{path} and every file under it are already {target}: nothing to convert")
        fs.set_policy(path, target)   # first: files created from now on get it too
        files = [e for e in fs.iter_list(path, recursive=True) if not e.is_dir]
        todo = [e for e in files if e.policy != target]
        failed = []
        for e in todo:
            try:
                _convert_one(fs, e.path, e.length, target)
            except HedgefsError as err:
                if _now_in(fs, e.path, target):
                    continue   # converted by someone else meanwhile, or gone
                click.echo(f"hedgefs: {e.path}: {err}", err=True)
                failed.append(e.path)
        click.echo(f"converted {len(todo) - len(failed)} of {len(files)} files under {path} to {target} "
                   f"({len(files) - len(todo)} were already); {path} now has policy {target}", err=True)
        if failed:
            raise HedgefsError(f"{len(failed)} files not converted: {', '.join(failed[:5])}"
                               + (" ..." if len(failed) > 5 else ""))


def _now_in(fs, path: str, target: str) -> bool:
    """After a failed conversion: is the file gone, or in ``target`` after all?"""
    from hedgefs.client.errors import NotFound

    try:
        return fs.stat(path).policy == target
    except NotFound:
        return True


def _convert_one(fs, path: str, length: int, target: str) -> None:
    progress = Progress(f"convert {path}", length)
    try:
        fs.convert(path, target, progress=progress.advance)
    finally:
        progress.finish()


@click.command(context_settings=CONTEXT)
@click.argument("replication", type=click.IntRange(1, 5), metavar="N")
@click.argument("path")
@click.option("-R", "recursive", is_flag=True, help="PATH is a directory: every file under it (and new ones).")
@namenode_option
def setrep(replication: int, path: str, recursive: bool, namenode: str | None) -> None:
    """Keep N copies of PATH's blocks, as `hdfs dfs -setrep`: `ec convert --policy REPLICATE-N`
    (an erasure-coded file is rewritten as replicated).

    \b
    Examples:
      hedgefs setrep 3 /hbase/hot.hfile
      hedgefs setrep -R 2 /logs
    """
    ctx = click.get_current_context()
    ctx.invoke(ec_convert, path=path, name=f"REPLICATE-{replication}", recursive=recursive, namenode=namenode)
