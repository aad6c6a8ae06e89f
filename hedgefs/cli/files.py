"""File verbs: put, get, cat, mkdir, rm, mv, chmod, chown (ls and stat: listing.py).

Paths go through ``remote_path`` (hedgefs://HOST[:PORT]/p, trailing and doubled slashes, UTF-8);
a verb copying or moving into an existing directory puts the entry inside it, as cp, mv and
`hdfs dfs` do.
"""

import os
import signal
import sys

import click

from hedgefs.cli.common import (
    CONTEXT,
    check_policy,
    hedge_config,
    hedge_options,
    namenode_option,
    open_fs,
    print_stats,
    remote_path,
    threads_option,
)
from hedgefs.cli.local import open_local
from hedgefs.cli.progress import Progress
from hedgefs.client.errors import IsADirectory, NotAllowed, NotFound, UsageError


@click.command(context_settings=CONTEXT)
@click.argument("local")
@click.argument("remote")
@click.option("-f", "--force", is_flag=True, help="Overwrite REMOTE if it exists.")
@click.option("-p", "parents", is_flag=True, help="Create missing parent directories (the default, as hdfs dfs -put; "
                                                  "accepted for scripts).")
@click.option("--policy", metavar="NAME", help="Policy for this file: RS-6-3-1024k, REPLICATE-3, ... (default: inherited).")
@click.option("-r", "-R", "recursive", is_flag=True, help="LOCAL is a directory: copy the tree under it.")
@threads_option
@namenode_option
def put(local: str, remote: str, force: bool, parents: bool, policy: str | None, recursive: bool, threads: int,
        namenode: str | None) -> None:
    """Copy LOCAL (a file, or - for stdin) to REMOTE (a file, or a directory to put it in);
    with -r, a directory tree (into REMOTE if it is a directory, else as REMOTE).

    Missing parent directories of REMOTE are created, as `hdfs dfs -put` does. The file becomes
    visible only when every block group is durable on at least k DataNodes (a replicated block:
    on --min-replicas of its n, default 2; the NameNode re-replicates the rest). A path another
    client is writing is refused at once.

    \b
    Examples:
      hedgefs put report.csv /data/report.csv
      hedgefs put report.csv /data/             # -> /data/report.csv
      tar c dir | hedgefs put - /backups/dir.tar
      hedgefs put --policy REPLICATE-3 hot.hfile hedgefs://nn1/hbase/hot.hfile
      hedgefs put -r src/ /code                 # -> /code/src/... (or /code/... if /code is new)
    """
    if policy:
        check_policy(policy)
    typed_dir = remote.endswith("/")
    remote = remote_path(remote)
    if recursive and local != "-" and os.path.isdir(local):
        from hedgefs.cli.trees import put_tree

        with open_fs(namenode) as fs:
            put_tree(fs, local, remote, typed_dir, force=force, policy=policy, threads=threads)
        return
    source, total = open_local(local, "(put -r copies a tree)")
    with open_fs(namenode) as fs, source:
        remote = _into_directory(fs, remote, None if local == "-" else os.path.basename(local), typed_dir)
        _make_parent(fs, remote)
        progress = Progress(f"put {remote}", total)
        try:
            fs.write(remote, source, overwrite=force, policy=policy, progress=progress.advance)
        finally:
            progress.finish()


def _stat_or_none(fs, path: str):
    """The status of ``path``; None if there is none, or if we may not read it (a file we may
    overwrite but not read: the write itself says what is allowed)."""
    try:
        return fs.stat(path)
    except (NotFound, NotAllowed):
        return None


def _into_directory(fs, target: str, name: str | None, typed_dir: bool = False) -> str:
    """``target``/``name`` when ``target`` is a directory (or was typed with a trailing '/'), as
    cp and `hdfs dfs -put` do; else ``target``."""
    st = _stat_or_none(fs, target)
    if (st is not None and st.is_dir) or (st is None and typed_dir):
        if not name:
            raise IsADirectory(f"is a directory: {target} (name the file: {target.rstrip('/')}/NAME)")
        return remote_path(join(target, name))
    return target


def _make_parent(fs, path: str) -> None:
    parent = parent_of(path)
    if parent == "/":
        return
    try:
        fs.stat(parent)
    except NotFound:
        fs.mkdir(parent, parents=True)
    except NotAllowed:
        pass   # the create says why, naming what it needed


def join(parent: str, name: str) -> str:
    return parent.rstrip("/") + "/" + name


def parent_of(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


@click.command(context_settings=CONTEXT)
@click.argument("remote")
@click.argument("local")
@click.option("-f", "--force", is_flag=True, help="Overwrite LOCAL if it is an existing file.")
@click.option("-r", "-R", "recursive", is_flag=True, help="REMOTE is a directory: copy the tree under it.")
@threads_option
@hedge_options
@namenode_option
def get(remote: str, local: str, force: bool, recursive: bool, threads: int, namenode: str | None, stats: bool,
        **hedge) -> None:
    """Copy REMOTE to LOCAL (a file, a directory to put it in, or - for stdout); with -r, a
    directory tree (into LOCAL if it is a directory, else as LOCAL).

    A regular LOCAL appears only when complete: the data goes to a temporary file beside it
    first. An existing file is replaced only with -f. A device, FIFO or anything under /dev is
    written into, never replaced; a symlink is followed to its target.

    \b
    Examples:
      hedgefs get /data/report.csv report.csv
      hedgefs get /data/report.csv ~/downloads/        # -> ~/downloads/report.csv
      hedgefs get /data/big.bin /dev/null              # read it all, keep nothing
      hedgefs get --stats --hedge-threshold-ms 100 /data/big.bin -
      hedgefs get -r /code/src ./restore/        # -> ./restore/src/...
    """
    from hedgefs.cli.local import check_target, target_for, write

    config = hedge_config(hedge)
    remote = remote_path(remote)
    if recursive and local != "-":
        with open_fs(namenode, config) as fs:
            if fs.stat(remote).is_dir:
                from hedgefs.cli.trees import get_tree

                try:
                    get_tree(fs, remote, local, force=force, threads=threads)
                finally:
                    if stats:
                        print_stats(fs)
                return
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
    remotes = tuple(remote_path(p) for p in remotes)
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
        with f.chunks(reuse=True) as chunks:   # leased: each written out before the next is asked for
            for chunk in chunks:
                out.write(chunk)
                if progress:
                    progress.advance(len(chunk))
        out.flush()
    finally:
        if progress:
            progress.finish()


@click.command(context_settings=CONTEXT)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("-p", "parents", is_flag=True, help="Create missing parents; no error if PATH exists.")
@namenode_option
def mkdir(paths: tuple[str, ...], parents: bool, namenode: str | None) -> None:
    """Create each directory PATH.

    \b
    Examples:
      hedgefs mkdir /data
      hedgefs mkdir -p /user/alice/reports /user/bob
    """
    targets = [remote_path(p) for p in paths]
    with open_fs(namenode) as fs:
        for path in targets:
            fs.mkdir(path, parents=parents)


@click.command(context_settings=CONTEXT)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("-r", "-R", "recursive", is_flag=True, help="Remove a directory and everything under it.")
@click.option("-f", "force", is_flag=True, help="No error (and exit 0) for a PATH that does not exist.")
@click.option("-skipTrash", "--skip-trash", "skip_trash", is_flag=True,
              help="Delete at once even when the trash is on ($HEDGEFS_TRASH_MINUTES > 0).")
@namenode_option
def rm(paths: tuple[str, ...], recursive: bool, force: bool, skip_trash: bool, namenode: str | None) -> None:
    """Remove each file PATH (or, with -r, directory tree). Space is freed on the DataNodes lazily.

    With $HEDGEFS_TRASH_MINUTES > 0 (as HDFS's fs.trash.interval; off by default), PATH moves to
    /user/USER/.Trash/Current/PATH instead, kept until `hedgefs expunge` checkpoints it and that
    many minutes pass; -skipTrash deletes at once.

    \b
    Examples:
      hedgefs rm /data/old.csv /data/older.csv
      hedgefs rm -r -f /tmp/scratch
      HEDGEFS_TRASH_MINUTES=1440 hedgefs rm -r /data/2025     # recoverable for a day
    """
    from hedgefs.cli.trash import in_trash, interval_minutes, move_to_trash

    targets = [remote_path(p) for p in paths]
    to_trash = interval_minutes() > 0 and not skip_trash
    with open_fs(namenode) as fs:
        for path in targets:
            try:
                if to_trash and not in_trash(path):
                    st = fs.stat(path)
                    if st.is_dir and not recursive and next(iter(fs.iter_list(path)), None) is not None:
                        raise UsageError(f"directory not empty: {path} (use -r)")
                    click.echo(f"moved {path} to trash: {move_to_trash(fs, path)}", err=True)
                else:
                    fs.delete(path, recursive=recursive)
            except NotFound:
                if not force:
                    raise


@click.command(context_settings=CONTEXT)
@click.argument("sources", nargs=-1, required=True, metavar="SRC...")
@click.argument("dst")
@namenode_option
def mv(sources: tuple[str, ...], dst: str, namenode: str | None) -> None:
    """Rename SRC to DST; into DST if it is an existing directory (several SRC: it must be).

    \b
    Examples:
      hedgefs mv /data/a.csv /data/b.csv
      hedgefs mv /data/a.csv /data/b.csv /archive/
    """
    srcs = [remote_path(p) for p in sources]
    target = remote_path(dst)
    with open_fs(namenode) as fs:
        st = _stat_or_none(fs, target)
        is_dir = st is not None and st.is_dir
        if len(srcs) > 1 and not is_dir:
            raise UsageError(f"mv: several sources need an existing directory as the target: {target}")
        for src in srcs:
            fs.rename(src, join(target, src.rsplit("/", 1)[-1]) if is_dir and src != target else target)


@click.command(context_settings=CONTEXT)
@click.argument("mode")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("-R", "recursive", is_flag=True, help="Also everything under each directory PATH.")
@namenode_option
def chmod(mode: str, paths: tuple[str, ...], recursive: bool, namenode: str | None) -> None:
    """Set the permission bits of each PATH: octal (644, 750, 1777 for a sticky directory) or
    symbolic as chmod(1) ([ugoa][+-=][rwxXt], comma-separated: u+x, go-w, a=rX).

    The owner of PATH or an admin may. Reading a file needs r on it; creating, deleting or
    renaming an entry needs w on its directory; passing through a directory needs x.

    \b
    Examples:
      hedgefs chmod 700 /user/alice
      hedgefs chmod 1777 /tmp
      hedgefs chmod -R go-w /data
    """
    from hedgefs.cli.modes import apply_mode, parse_mode

    change = parse_mode(mode)
    with open_fs(namenode) as fs:
        for path in [remote_path(p) for p in paths]:
            for e in _tree(fs, path, recursive):
                fs.set_permission(e.path, apply_mode(change, e.permission, e.is_dir))


@click.command(context_settings=CONTEXT)
@click.argument("owner", metavar="[OWNER][:GROUP]")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("-R", "recursive", is_flag=True, help="Also everything under each directory PATH.")
@namenode_option
def chown(owner: str, paths: tuple[str, ...], recursive: bool, namenode: str | None) -> None:
    """Give each PATH to another owner and/or group (an admin; an owner may change only the group,
    to one of its own).

    \b
    Examples:
      hedgefs mkdir -p /user/alice && hedgefs chown alice:staff /user/alice
      hedgefs chown -R :analysts /data/shared
    """
    user, _, group = owner.partition(":")
    if not user and not group:
        raise UsageError("chown: give OWNER, :GROUP or OWNER:GROUP")
    with open_fs(namenode) as fs:
        for path in [remote_path(p) for p in paths]:
            for e in _tree(fs, path, recursive):
                fs.set_owner(e.path, user, group)


def _tree(fs, path: str, recursive: bool):
    """PATH's status, then (``recursive``, a directory) every entry under it."""
    top = fs.stat(path)
    yield top
    if recursive and top.is_dir:
        yield from list(fs.iter_list(path, recursive=True))


@click.command(context_settings=CONTEXT)
@click.argument("paths", nargs=-1, required=True, metavar="DIR...")
@namenode_option
def rmdir(paths: tuple[str, ...], namenode: str | None) -> None:
    """Remove each empty directory DIR (a file or a non-empty directory is an error).

    \b
    Examples:
      hedgefs rmdir /data/empty /tmp/done
    """
    targets = [remote_path(p) for p in paths]
    with open_fs(namenode) as fs:
        for path in targets:
            if not fs.stat(path).is_dir:
                raise UsageError(f"not a directory: {path} (rm removes files)")
            fs.delete(path, recursive=False)
