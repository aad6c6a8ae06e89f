"""File verbs: put, get, cat, ls, mkdir, rm, mv, stat, chmod, chown."""

import json
import os
import signal
import sys
import time

import click

from hedgefs.cli.common import (
    CONTEXT,
    check_policy,
    hedge_config,
    hedge_options,
    namenode_option,
    open_fs,
    print_stats,
)
from hedgefs.cli.progress import Progress
from hedgefs.client.errors import HedgefsError, IsADirectory, NotFound, UsageError


@click.command(context_settings=CONTEXT)
@click.argument("local")
@click.argument("remote")
@click.option("-f", "--force", is_flag=True, help="Overwrite REMOTE if it exists.")
@click.option("--policy", metavar="NAME", help="Policy for this file: RS-6-3-1024k, REPLICATE-3, ... (default: inherited).")
@namenode_option
def put(local: str, remote: str, force: bool, policy: str | None, namenode: str | None) -> None:
    """Copy LOCAL (a file, or - for stdin) to REMOTE.

    The file becomes visible only when every block group is durable on at least k DataNodes (a
    replicated block: on --min-replicas of its n, default 2; the NameNode re-replicates the rest).

    \b
    Examples:
      hedgefs put report.csv /data/report.csv
      tar c dir | hedgefs put - /backups/dir.tar
      hedgefs put --policy REPLICATE-3 hot.hfile /hbase/hot.hfile
    """
    if policy:
        check_policy(policy)
    if local == "-":
        source, total = sys.stdin.buffer, None
    else:
        try:
            source = open(local, "rb")
        except FileNotFoundError:
            raise NotFound(f"no such local file: {local}") from None
        except IsADirectoryError:
            raise IsADirectory(f"is a directory: {local}") from None
        except OSError as err:
            raise HedgefsError(f"cannot read {local}: {err.strerror}") from None
        total = os.fstat(source.fileno()).st_size
    progress = Progress(f"put {remote}", total)
    try:
        with open_fs(namenode) as fs, source:
            fs.write(remote, source, overwrite=force, policy=policy, progress=progress.advance)
    finally:
        progress.finish()


@click.command(context_settings=CONTEXT)
@click.argument("remote")
@click.argument("local")
@click.option("-f", "--force", is_flag=True, help="Overwrite LOCAL if it is an existing file.")
@hedge_options
@namenode_option
def get(remote: str, local: str, force: bool, namenode: str | None, stats: bool, **hedge) -> None:
    """Copy REMOTE to LOCAL (a file, a directory to put it in, or - for stdout).

    A regular LOCAL appears only when complete: the data goes to a temporary file beside it
    first. An existing file is replaced only with -f. A device, FIFO or anything under /dev is
    written into, never replaced; a symlink is followed to its target.

    \b
    Examples:
      hedgefs get /data/report.csv report.csv
      hedgefs get /data/report.csv ~/downloads/        # -> ~/downloads/report.csv
      hedgefs get /data/big.bin /dev/null              # read it all, keep nothing
      hedgefs get --stats --hedge-threshold-ms 100 /data/big.bin -
    """
    from hedgefs.cli.local import check_target, target_for, write

    config = hedge_config(hedge)
    target = real = None
    if local != "-":
        target = target_for(local, remote.rstrip("/").rsplit("/", 1)[-1])
        real = check_target(target, force)
    with open_fs(namenode, config) as fs:
        try:
            with fs.open(remote) as f:
                f.check_available()
                progress = Progress(f"get {remote}", f.length)
                if local == "-":
                    _copy_out(f, _stdout_pipe_like_cat(), progress)
                else:
                    write(target, real, lambda out: _copy_out(f, out, progress))
        finally:
            if stats:
                print_stats(fs)


@click.command(context_settings=CONTEXT)
@click.argument("remotes", nargs=-1, required=True, metavar="REMOTE...")
@hedge_options
@namenode_option
def cat(remotes: tuple[str, ...], namenode: str | None, stats: bool, **hedge) -> None:
    """Write the bytes of each REMOTE file to stdout, in order.

    \b
    Examples:
      hedgefs cat /data/a.txt /data/b.txt
      hedgefs cat --stats --no-hedge /data/big.bin > /dev/null
    """
    config = hedge_config(hedge)
    with open_fs(namenode, config) as fs:
        try:
            readers = [fs.open(path) for path in remotes]  # every path is checked before any output
            for f in readers:
                f.check_available()
            out = _stdout_pipe_like_cat()
            for f in readers:
                _copy_out(f, out, None)
        finally:
            if stats:
                print_stats(fs)


def _stdout_pipe_like_cat():
    """`hedgefs cat big | head`: end quietly (SIGPIPE) like cat does when the reader goes away."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    return sys.stdout.buffer


def _copy_out(f, out, progress: Progress | None) -> None:
    try:
        for chunk in f.chunks(reuse=True):
            out.write(chunk)
            if progress:
                progress.advance(len(chunk))
        out.flush()
    finally:
        if progress:
            progress.finish()


@click.command(name="ls", context_settings=CONTEXT)
@click.argument("path", default="/")
@click.option("-R", "recursive", is_flag=True, help="List subdirectories recursively.")
@namenode_option
def ls_(path: str, recursive: bool, namenode: str | None) -> None:
    """List a directory (or show one file).

    Columns: type and permissions, owner, group, length, policy, modification time, path.
    Entries are printed as they arrive (the NameNode sends a listing in pages), so `ls -R` of a
    large tree starts at once. A directory you may not list is shown but not entered.

    \b
    Examples:
      hedgefs ls /data
      hedgefs ls -R / | wc -l
    """
    from hedgefs.namenode.permissions import mode_string

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)   # `ls -R / | head` ends quietly
    with open_fs(namenode) as fs:
        for e in fs.iter_list(path, recursive=recursive):
            length = "-" if e.is_dir else str(e.length)
            mtime = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.mtime_ms / 1000)) if e.mtime_ms else "-"
            click.echo(f"{mode_string(e.is_dir, e.permission)} {e.owner:<8} {e.group:<10} {length:>12} "
                       f"{e.policy:<14} {mtime}  {e.path}")


@click.command(context_settings=CONTEXT)
@click.argument("path")
@click.option("-p", "parents", is_flag=True, help="Create missing parents; no error if PATH exists.")
@namenode_option
def mkdir(path: str, parents: bool, namenode: str | None) -> None:
    """Create a directory."""
    with open_fs(namenode) as fs:
        fs.mkdir(path, parents=parents)


@click.command(context_settings=CONTEXT)
@click.argument("path")
@click.option("-r", "recursive", is_flag=True, help="Remove a directory and everything under it.")
@namenode_option
def rm(path: str, recursive: bool, namenode: str | None) -> None:
    """Remove a file (or, with -r, a directory tree). Space is freed on the DataNodes lazily."""
    with open_fs(namenode) as fs:
        fs.delete(path, recursive=recursive)


@click.command(context_settings=CONTEXT)
@click.argument("src")
@click.argument("dst")
@namenode_option
def mv(src: str, dst: str, namenode: str | None) -> None:
    """Rename SRC to DST (DST must not exist)."""
    with open_fs(namenode) as fs:
        fs.rename(src, dst)


@click.command(context_settings=CONTEXT)
@click.argument("mode")
@click.argument("path")
@namenode_option
def chmod(mode: str, path: str, namenode: str | None) -> None:
    """Set the permission bits of PATH, in octal (as HDFS: 644, 750, 1777 for a sticky directory).

    The owner of PATH or an admin may. Reading a file needs r on it; creating, deleting or
    renaming an entry needs w on its directory; passing through a directory needs x.

    \b
    Examples:
      hedgefs chmod 700 /user/alice
      hedgefs chmod 1777 /tmp
    """
    try:
        value = int(mode, 8)
    except ValueError:
        value = -1
    if not 0 <= value <= 0o1777:
        raise UsageError(f"bad mode {mode!r}: octal digits, 0 to 1777 (e.g. 644, 750, 1777)")
    with open_fs(namenode) as fs:
        fs.set_permission(path, value)


@click.command(context_settings=CONTEXT)
@click.argument("owner", metavar="[OWNER][:GROUP]")
@click.argument("path")
@namenode_option
def chown(owner: str, path: str, namenode: str | None) -> None:
    """Give PATH to another owner and/or group (an admin; an owner may change only the group,
    to one of its own).

    \b
    Examples:
      hedgefs mkdir -p /user/alice && hedgefs chown alice:staff /user/alice
      hedgefs chown :analysts /data/shared
    """
    user, _, group = owner.partition(":")
    if not user and not group:
        raise UsageError("chown: give OWNER, :GROUP or OWNER:GROUP")
    with open_fs(namenode) as fs:
        fs.set_owner(path, user, group)


@click.command(context_settings=CONTEXT)
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@namenode_option
def stat(path: str, as_json: bool, namenode: str | None) -> None:
    """Show size, policy, and where each unit (EC) or replica (REPLICATE-n) lives.

    An erasure-coded file lists its block groups and their units ("groups", "units"); a
    replicated file lists its blocks and their replicas ("blocks", "replicas"). Only live copies
    are listed.

    \b
    Examples:
      hedgefs stat /data/big.bin
      hedgefs stat --json /hbase/hot.hfile | jq '.blocks[].replicas | length'
    """
    from hedgefs.ec import layout
    from hedgefs.ec.policy import parse_policy

    with open_fs(namenode) as fs:
        st = fs.stat(path)
    doc = {"path": st.path, "type": "directory" if st.is_dir else "file", "length": st.length, "policy": st.policy,
           "owner": st.owner, "group": st.group, "permission": f"{st.permission:04o}"}
    policy = None if st.is_dir else parse_policy(st.policy)
    if policy is not None and policy.replicated:
        doc["replication"] = policy.units
        doc["blocks"] = [
            {"id": g.id, "length": g.length,
             "replicas": [{"index": u.index, "datanode": u.datanode_id} for _, u in sorted(g.units.items())]}
            for g in st.groups
        ]
    elif policy is not None:
        doc["groups"] = [
            {"id": g.id, "length": g.length,
             "units": [{"index": u.index, "datanode": u.datanode_id, "length": layout.unit_length(policy, g.length, u.index)}
                       for _, u in sorted(g.units.items())]}
            for g in st.groups
        ]
    if as_json:
        click.echo(json.dumps(doc))
        return
    click.echo(f"path:    {doc['path']}\ntype:    {doc['type']}\nlength:  {doc['length']}\npolicy:  {doc['policy']}\n"
               f"owner:   {doc['owner']}:{doc['group']} {doc['permission']}")
    for g in doc.get("groups", []):
        units = " ".join(f"{u['index']}@{u['datanode']}" for u in g["units"])
        click.echo(f"group {g['id']}: {g['length']} bytes, units {units}")
    for b in doc.get("blocks", []):
        replicas = " ".join(r["datanode"] for r in b["replicas"])
        click.echo(f"block {b['id']}: {b['length']} bytes, {len(b['replicas'])} of {doc['replication']} "
                   f"replicas live: {replicas}")
